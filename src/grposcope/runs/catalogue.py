"""The metric catalogue: every metric a run's log may hold, under one canonical name (grposcope's, docs/metrics.md),
with its meaning, range and unit, the names TRL, verl and Hugging Face give it, and the detectors that read it.

Readers resolve every key they meet through `resolve` (exact alias, then a pattern such as TRL's
`rewards/<func>/mean`, then the logger prefixes `train/` and `eval/` that Hugging Face's TensorBoard and W&B
callbacks add); detectors, docs/metrics.md's "Names in other logs" table and the report's plots take their names
from here (`CATALOGUE[...]` or the constants below), none spells them again. A key no entry knows is kept as it
was and listed in the output as unknown (never dropped silently).

Pure Python: imported by the readers, the detectors, the trainers' live diagnosis and the docs' check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache


@dataclass(frozen=True)
class Metric:
    """One metric. `name` may hold `<func>` (one entry per reward function: `reward/<func>/mean`); an alias
    then holds it too (`rewards/<func>/mean`)."""

    name: str
    meaning: str
    range: str
    unit: str = ""
    trl: tuple[str, ...] = ()
    verl: tuple[str, ...] = ()
    hf: tuple[str, ...] = ()  # transformers' Trainer (log_history, and its TensorBoard / W&B callbacks)
    other: tuple[str, ...] = ()  # spellings seen in other logs (OpenRLHF, custom loops, exports)
    detectors: tuple[str, ...] = ()
    pattern: re.Pattern | None = field(default=None, compare=False, repr=False)

    def aliases(self) -> tuple[str, ...]:
        """Every spelling, in the order a reader prefers them when one record holds several."""
        return (self.name, *self.trl, *self.verl, *self.hf, *self.other)


def _m(name: str, meaning: str, range: str, unit: str = "", *, trl=(), verl=(), hf=(), other=(), detectors=()
       ) -> Metric:
    return Metric(name, meaning, range, unit, tuple(trl), tuple(verl), tuple(hf), tuple(other), tuple(detectors))


# Canonical names the detectors read: spelled once here.
ACR = "collapse/acr"
ACR_ALL_CORRECT = "collapse/acr_all_correct"
ACR_ALL_WRONG = "collapse/acr_all_wrong"
ACR_POST = "collapse/acr_post"
MIXED = "collapse/frac_mixed"
REWARD = "reward/mean"
REWARD_STD = "reward/std"
REWARD_MIN = "reward/min"
REWARD_MAX = "reward/max"
REWARD_FUNC_MEAN = "reward/<func>/mean"
REWARD_FUNC_STD = "reward/<func>/std"
ENTROPY = "entropy/mean"
KL = "kl/mean"
BETA = "kl/beta"
LOSS = "loss/policy"
GRAD_NORM = "grad_norm"
LEARNING_RATE = "learning_rate"
LENGTH = "completion/mean_length"
LENGTH_MAX = "completion/max_length"
TRUNCATED = "completion/truncated_frac"
CLIP_LOW = "clip/low_frac"
CLIP_HIGH = "clip/high_frac"
CLIP = "clip/frac"
EVAL = "eval/accuracy"
STEP_S = "perf/step_s"
SKIPPED_NO_SIGNAL = "optimizer/skipped_no_signal"
SAMPLES = "sampler/samples_generated"
TOKENS = "sampler/tokens_generated"
NUM_TOKENS = "num_tokens"
AVSPO_AUGMENTED = "avspo/frac_groups_augmented"
GROUPS = "groups"

ENTRIES: tuple[Metric, ...] = (
    _m(ACR, "share of the step's groups whose rewards are all equal (zero group-relative advantage)", "[0, 1]",
       "share of groups", trl=("frac_reward_zero_std",), other=("zero_var_group_frac", "frac_zero_std"),
       detectors=("advantage_collapse", "plateau")),
    _m(ACR_ALL_CORRECT, "collapsed groups whose common reward is a success", "[0, 1]", "share of groups",
       detectors=("advantage_collapse",)),
    _m(ACR_ALL_WRONG, "collapsed groups whose common reward is a failure", "[0, 1]", "share of groups",
       detectors=("advantage_collapse",)),
    _m(MIXED, "share of the step's groups holding both a success and a failure (1 - ACR for a 0/1 reward)",
       "[0, 1]", "share of groups", detectors=("advantage_collapse",)),
    _m(ACR_POST, "groups that reach the loss with all advantages zero (after the sampler and the estimator)",
       "[0, 1]", "share of groups", detectors=("advantage_collapse", "no_signal_steps")),
    _m(REWARD, "mean reward of the step's completions", "the reward's scale", "reward",
       trl=("reward",), verl=("critic/score/mean", "critic/rewards/mean"), other=("reward_mean", "rewards/mean"),
       detectors=("advantage_collapse", "entropy_collapse", "reward_hacking", "plateau", "length_growth")),
    _m(REWARD_STD, "standard deviation of the step's rewards", ">= 0", "reward", trl=("reward_std",),
       verl=("critic/score/std",), other=("reward_std", "rewards/std"), detectors=("reward_composition",)),
    _m(REWARD_MIN, "smallest reward of the step", "the reward's scale", "reward", verl=("critic/score/min",),
       other=("rewards/min",),
       detectors=("advantage_collapse",)),
    _m(REWARD_MAX, "largest reward of the step", "the reward's scale", "reward", verl=("critic/score/max",),
       other=("rewards/max",),
       detectors=("advantage_collapse",)),
    _m(REWARD_FUNC_MEAN, "mean of one reward function's values", "that function's scale", "reward",
       trl=("rewards/<func>/mean", "rewards/<func>"), detectors=("reward_composition",)),  # TRL <= 0.15: no /mean
    _m(REWARD_FUNC_STD, "standard deviation of one reward function's values", ">= 0", "reward",
       trl=("rewards/<func>/std",), detectors=("reward_composition",)),
    _m(ENTROPY, "mean per-token entropy of the policy over completion tokens", ">= 0", "nats",
       trl=("entropy",), verl=("actor/entropy",), other=("policy/entropy", "entropy_mean"),
       detectors=("entropy_collapse",)),
    _m(KL, "mean per-token KL divergence to the reference policy", ">= 0 (k3)", "nats",
       trl=("kl",), verl=("actor/kl_loss", "critic/kl"), other=("kl_mean", "policy/kl"),
       detectors=("kl_drift",)),
    _m(BETA, "the KL coefficient in force", ">= 0", "", verl=("actor/kl_coef", "critic/kl_coeff"),
       detectors=("kl_drift",)),
    _m(LOSS, "the policy loss", "any real", "", trl=("loss",), verl=("actor/pg_loss",)),
    _m(GRAD_NORM, "global gradient norm before clipping", ">= 0", "", trl=("grad_norm",),
       verl=("actor/grad_norm",), detectors=("gradient_pathology", "no_signal_steps")),
    _m(LEARNING_RATE, "learning rate in force", ">= 0", "", hf=("learning_rate",), verl=("actor/lr",),
       other=("lr",)),
    _m(LENGTH, "mean completion length", "[1, max_completion_length]", "tokens",
       trl=("completions/mean_length",), verl=("response_length/mean",), other=("completion_length",),
       detectors=("length_growth", "truncation")),
    _m(LENGTH_MAX, "longest completion of the step", "[1, max_completion_length]", "tokens",
       trl=("completions/max_length",), verl=("response_length/max",), detectors=("truncation",)),
    _m(TRUNCATED, "share of completions that hit the length cap without ending", "[0, 1]", "share",
       trl=("completions/clipped_ratio",), verl=("response_length/clip_ratio",), detectors=("truncation",)),
    _m(CLIP_LOW, "share of tokens clipped at 1 - epsilon (negative advantages)", "[0, 1]", "share of tokens",
       trl=("clip_ratio/low_mean",), verl=("actor/pg_clipfrac_lower",), detectors=("clip_saturation",)),
    _m(CLIP_HIGH, "share of tokens clipped at 1 + epsilon_high (positive advantages)", "[0, 1]",
       "share of tokens", trl=("clip_ratio/high_mean",), detectors=("clip_saturation",)),
    _m(CLIP, "share of tokens whose ratio was clipped, either side", "[0, 1]", "share of tokens",
       trl=("clip_ratio/region_mean",), verl=("actor/pg_clipfrac",), other=("clip_ratio", "clipfrac"),
       detectors=("clip_saturation",)),
    _m(EVAL, "held-out score: greedy accuracy (grposcope), the mean reward of the eval loop (TRL), verl's "
       "validation score", "[0, 1] for 0/1 rewards", "", trl=("eval_reward",), hf=("eval/reward",),
       other=("eval_score", "eval/score", "val/score"), detectors=("reward_hacking", "length_growth", "plateau")),
    _m(STEP_S, "wall time of one step", "> 0", "seconds", trl=("step_time",), verl=("timing_s/step",),
       other=("time/step",)),
    _m(SKIPPED_NO_SIGNAL, "the step took no optimizer step: its gradient was exactly 0", "0 or 1", "",
       detectors=("no_signal_steps",)),
    _m(SAMPLES, "completions generated in the step, kept or not", ">= 0", "completions", detectors=()),
    _m(TOKENS, "completion tokens generated in the step", ">= 0", "tokens", detectors=()),
    _m(NUM_TOKENS, "prompt and completion tokens seen since the run began (cumulative)", ">= 0", "tokens",
       trl=("num_tokens",), hf=("num_input_tokens_seen",)),
    _m(AVSPO_AUGMENTED, "groups AVSPO gave virtual samples", "[0, 1]", "share of groups",
       detectors=("advantage_collapse",)),
    _m("alarm/stagnation", "grposcope's stagnation alarm (1 while on)", "0 or 1", "",
       detectors=("advantage_collapse",)),
    _m("alarm/entropy_collapse", "grposcope's entropy-collapse alarm (1 while on)", "0 or 1", "",
       detectors=("entropy_collapse",)),
    _m("alarm/kl_drift", "grposcope's KL-drift alarm (1 while on)", "0 or 1", "", detectors=("kl_drift",)),
    _m("alarm/no_signal", "grposcope's no-signal alarm (1 while on)", "0 or 1", "", detectors=("no_signal_steps",)),
    _m(GROUPS, "groups of two or more completions in the step's rollouts", ">= 0", "groups"),
)


CATALOGUE: dict[str, Metric] = {m.name: m for m in ENTRIES}
_EXACT: dict[str, tuple[str, int]] = {}  # alias -> (canonical, rank): lower rank wins within one record
_PATTERNS: list[tuple[re.Pattern, str, int]] = []  # (alias pattern, canonical with \1, rank)
for _entry in ENTRIES:
    for _rank, _alias in enumerate(_entry.aliases()):
        if "<func>" in _alias:
            _PATTERNS.append((re.compile(re.escape(_alias).replace("<func>", "([^/]+)") + "$"),
                              _entry.name.replace("<func>", r"\1"), _rank))
        else:
            _EXACT.setdefault(_alias, (_entry.name, _rank))
# The logger prefixes of Hugging Face's TensorBoard and W&B callbacks (train/<key>, eval/<key>) and verl's
# validation keys (val-core/<data source>/<reward key>/mean@1, val/test_score/<data source>).
_EVAL_PATTERNS = (re.compile(r"val-core/.+/(?:reward|acc|score)/mean@[0-9]+$"), re.compile(r"val/test_score/.+$"))
# verl's val-aux holds the same mean@N when val-core is not logged (or a console line was cut before it); of its
# keys in one record, accuracy before score before reward (the reward may hold shaping terms)
_AUX_EVAL = re.compile(r"val-aux/.+/(acc|score|reward)/mean@[0-9]+$")
_AUX_RANK = {"acc": 91, "score": 92, "reward": 93}
_PREFIXES = ("train/", "eval/", "eval_")  # not train_: transformers' run totals (train_loss, train_runtime)
# grposcope's own families (docs/metrics.md documents each name): a key of one of these is known, read as it is
# logged, by the report's plots and tables when not by a detector (the TRL integration logs them too)
OWN_FAMILIES = ("collapse/", "alarm/", "avspo/", "sampler/", "perf/", "loss/", "clip/", "gspo/", "sampling/",
                "update/", "reward/", "prompt/", "optimizer/", "kl/", "entropy/", "completion/", "eval/accuracy",
                "eval/avg@", "eval/pass@")


# Plain spellings of hand-written loops and exports (seen in the real-run corpus, tests/fixtures/real_runs), as
# `normalise` leaves them: read when no engine's name matches. Not here on purpose: `approx_kl` (PPO's KL between
# the old and the new policy, not to the reference) and `return`/`advantage` (not the reward's scale).
PLAIN: dict[str, str] = {
    **dict.fromkeys(("reward", "rewards", "mean_reward", "avg_reward", "average_reward", "reward_avg",
                     "train_reward", "score", "scores", "mean_score", "avg_score"), REWARD),
    **dict.fromkeys(("reward_std", "std_reward", "rewards_std", "score_std"), REWARD_STD),
    **dict.fromkeys(("entropy", "policy_entropy", "token_entropy", "ent"), ENTROPY),
    **dict.fromkeys(("kl", "kl_div", "kl_divergence", "kl_ref", "ref_kl", "kl_loss"), KL),
    **dict.fromkeys(("completion_length", "completion_len", "response_length", "response_len", "gen_len",
                     "generation_length", "mean_length", "length", "completions_length", "output_length", "avg_len",
                     "avg_length", "mean_len"), LENGTH),
    **dict.fromkeys(("truncation_rate", "truncated_frac", "truncated_ratio", "truncation_frac", "clipped_ratio",
                     "frac_truncated", "truncated", "truncated_rate"), TRUNCATED),
    **dict.fromkeys(("clip_fraction", "clip_frac", "clipfrac", "pg_clipfrac", "clipped_frac", "ratio_clip_frac"),
                    CLIP),
    **dict.fromkeys(("zero_advantage_fraction", "zero_adv_frac", "frac_zero_std", "zero_std_frac",
                     "frac_reward_zero_std", "zero_std_ratio", "frac_zero_advantage", "collapsed_frac"), ACR),
    **dict.fromkeys(("skipped", "skip", "skipped_step", "skipped_update", "no_update", "update_skipped"),
                    SKIPPED_NO_SIGNAL),
    **dict.fromkeys(("grad_norm", "gradient_norm", "grad_l2_norm", "total_grad_norm"), GRAD_NORM),
    **dict.fromkeys(("loss", "policy_loss", "pg_loss", "loss_pg", "policy_gradient_loss", "actor_loss"), LOSS),
    **dict.fromkeys(("lr", "learning_rate", "actor_lr"), LEARNING_RATE),
    **dict.fromkeys(("step_time", "time_per_step", "step_s", "iter_time"), STEP_S),
}
# the held-out score: one of these prefixes and one of these names (eval_accuracy, val/acc, test_reward_mean)
_HELD_OUT_PREFIXES = ("eval", "val", "valid", "validation", "test", "heldout", "held_out")
_HELD_OUT_NAMES = ("accuracy", "acc", "score", "reward", "mean_reward", "correct", "pass_at_1", "pass@1",
                   "success_rate", "solve_rate")
# what loggers put around a name: a section before it, a statistic after it
_SECTIONS = ("train/", "training/", "actor/", "critic/", "rollout/", "rollouts/", "policy/", "metrics/", "charts/",
             "objective/", "env/", "ppo/", "grpo/")
_STATISTICS = ("/mean", "_mean", "/avg", "_avg", "/average")


def fold(key: str) -> str:
    """A key with case and separators folded: lower case, `-` and runs of spaces as `_`. `Global-Step` ->
    `global_step`."""
    return "_".join(key.strip().lower().replace("-", "_").split())


def normalise(key: str) -> str:
    """A key as `PLAIN` spells it: folded (`fold`, `.` as `_` too), a logger's section prefix and a `mean` suffix
    dropped. `Train/Policy-Entropy_Mean` -> `policy_entropy`."""
    out = fold(key.replace(".", "_"))
    for section in _SECTIONS:
        if out.startswith(section) and len(out) > len(section):
            out = out[len(section):]
            break
    for statistic in _STATISTICS:
        if out.endswith(statistic) and len(out) > len(statistic):
            return out[:-len(statistic)]
    return out


@lru_cache(maxsize=65536)  # a log repeats its keys on every step: each is resolved once
def resolve(key: str) -> tuple[str, int] | None:
    """The canonical name of a logged key and its rank among that name's spellings, or None when no entry knows
    it. `rewards/accuracy/mean` -> (`reward/accuracy/mean`, 1); `train/frac_reward_zero_std` -> (`collapse/acr`, 1);
    a plain spelling after the engines' (`mean_reward` -> (`reward/mean`, 70)), see `by_engine_name`."""
    plain = normalise(key)
    if plain == "loss":
        # a bare `loss` is a trainer's total (the policy loss plus a KL or an entropy term: transformers' and TRL's
        # own `loss`): a spelling that says policy (`pg_loss`, `loss_pg`, `policy_loss`) is read before it
        return LOSS, 72
    found = _engine_name(key)
    if found is not None:
        return found
    if plain in PLAIN:
        return PLAIN[plain], 70
    if (under := _under_reward(plain)) is not None:
        return under, 75
    head, _, rest = plain.replace("/", "_", 1).partition("_")
    if head in _HELD_OUT_PREFIXES and normalise(rest) in _HELD_OUT_NAMES:
        return EVAL, 80
    return None


# the statistics a logger writes under a reward's name (score/max, reward/std): never a reward function's name
_REWARD_HEADS = ("reward", "rewards", "score", "scores")
_REWARD_STATISTICS = {"mean": REWARD, "avg": REWARD, "std": REWARD_STD, "min": REWARD_MIN, "max": REWARD_MAX}
_NOT_A_FUNCTION = {*_REWARD_STATISTICS, "median", "var", "sum", "count", "p10", "p50", "p90", "total",
                   *(alias for alias, name in PLAIN.items() if name in (ACR, REWARD_STD))}


def _under_reward(plain: str) -> str | None:
    """A statistic or a function logged under a reward's name, in a logger's own words: `score/frac_zero_std` (a
    zero-std share), `score/max`, `score/correctness` (the function's mean: `normalise` dropped `/mean`) and
    `score/correctness/std`. verl writes its batch statistics under `critic/score/` and forks add their own there."""
    head, _, rest = plain.partition("/")
    if head not in _REWARD_HEADS or not rest:
        return None
    if rest in _REWARD_STATISTICS:
        return _REWARD_STATISTICS[rest]
    if PLAIN.get(rest) in (ACR, REWARD_STD):
        return PLAIN[rest]
    function, _, statistic = rest.partition("/")
    if function in _NOT_A_FUNCTION or statistic not in ("", "std"):
        return None
    return REWARD_FUNC_STD.replace("<func>", function) if statistic else REWARD_FUNC_MEAN.replace("<func>", function)


def by_engine_name(key: str) -> bool:
    """Whether `key` is a name TRL, verl, transformers or grposcope log (else it was read by its plain spelling,
    which the output says: "read mean_reward as reward/mean")."""
    return _engine_name(key) is not None


@lru_cache(maxsize=65536)
def _engine_name(key: str) -> tuple[str, int] | None:
    for candidate in _candidates(key):
        if candidate in _EXACT:
            return _EXACT[candidate]
        for pattern, name, rank in _PATTERNS:
            if (match := pattern.match(candidate)) is not None and match.group(1) not in _NOT_A_FUNCTION:
                return match.expand(name), rank
    if any(p.match(key) for p in _EVAL_PATTERNS):
        return EVAL, 90
    if (aux := _AUX_EVAL.match(key)) is not None:
        return EVAL, _AUX_RANK[aux.group(1)]
    for candidate in _candidates(key):
        if candidate.startswith(OWN_FAMILIES):
            return candidate, 50
    return None


def _candidates(key: str) -> list[str]:
    out = [key]
    for prefix in _PREFIXES:
        if key.startswith(prefix) and len(key) > len(prefix):
            rest = key[len(prefix):]
            # eval/reward (HF's TensorBoard spelling of eval_reward) is the held-out score, not the training reward
            out.append(f"eval_{rest}" if prefix.startswith("eval") and not rest.startswith("eval") else rest)
    return out


def reward_functions(names: list[str]) -> list[str]:
    """The reward functions whose per-function mean a run logged: ['accuracy', 'format'] from
    reward/accuracy/mean, reward/format/mean."""
    return sorted({m.group(1) for n in names if (m := re.fullmatch(r"reward/(.+)/mean", n))})


def names_table() -> str:
    """docs/metrics.md's "Names in other logs" table, rendered from the catalogue (tests/test_docs.py checks it)."""
    rows = ["| Metric | Meaning | Unit | Range | TRL | verl | Hugging Face / other | Read by |",
            "|---|---|---|---|---|---|---|---|"]
    for m in ENTRIES:
        cell = lambda names: ", ".join(f"`{n}`" for n in names) or "-"  # noqa: E731
        rows.append(f"| `{m.name}` | {m.meaning} | {m.unit or '-'} | {m.range} | {cell(m.trl)} | {cell(m.verl)} | "
                    f"{cell((*m.hf, *m.other))} | {', '.join(f'`{d}`' for d in m.detectors) or '-'} |")
    return "\n".join(rows)
