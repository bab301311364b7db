"""grposcope's adaptive samplers inside verl 0.9.1's legacy trainer: `+algorithm.grposcope.sampler=reinforce_ada`.

Reinforce-Ada ("Reinforce-Ada: An Adaptive Sampling Framework for Reinforce-Style LLM Training", arXiv
2510.04996; exit rules `pos` and `balance`) and grposcope's `budgeted` sampler decide how many completions
each prompt gets and which of them train. verl's legacy trainer (verl/trainer/ppo/ray_trainer.py,
RayPPOTrainer.fit, `trainer.use_v1=False`) draws `rollout.n` completions of every prompt with one call of its
rollout manager's `generate_sequences`, on the prompts repeated n times (interleaved, uid per row), and
unions the answer row by row with its own batch. `SampledRollouts` takes that manager's place:

    +algorithm.grposcope.sampler=reinforce_ada  +algorithm.grposcope.exit_rule=balance
    +algorithm.grposcope.round_size=8  +algorithm.grposcope.max_rounds=4  algorithm.adv_estimator=grposcope_pool

1. The B prompts are recovered from the repeated batch, one per uid (each must hold exactly n rows).
2. `sampler.sample(prompts, draw, more, g=n)` runs. Each `draw(prompts, k)` asks the real manager, once (one
   collective call over its agent-loop workers), for k completions of each prompt given, interleaved. The
   manager splits a call evenly over its workers (`DataProto.chunk` asserts divisibility), so a round that
   does not divide is padded with copies of its first rows (verl's `pad_dataproto_to_divisor`); those are
   generated (and scored by verl's reward loop), then cut off before their rewards reach the sampler or the
   batch (`sampler/padding_samples`). A row's reward is verl's own: the sum of its `rm_scores`, which verl's
   agent reward loop writes during generation; without them (a colocated reward model) the trainer's
   `_compute_reward_colocate` scores each round, and the scores stay in the batch, so fit does not score
   again. `more(count)` returns []: verl's dataloader fixes the batch, so the budgeted sampler's candidates
   are the batch itself (`budget_candidates` changes nothing).
3. Each uid gets back n rows in the input's order: its prompt's n kept samples (`Selection.samples` numbers
   samples across draws; the draws' outputs are concatenated in order, so a number is a row). A prompt the
   sampler did not keep (budgeted drops all-equal groups and leaves low-value prompts undrawn; reinforce_ada
   with `drop_unresolved`) gets n filler rows: one padding token and no response (response and attention
   masks 0 except that token, `rm_scores` 0, `grposcope_filler` True). Why not its drawn group, whose group
   advantage would be 0: under verl's token-mean loss its tokens would still enter the denominator and dilute
   the kept groups, a KL loss would still pull on them, AVSPO gives all-equal groups an advantage, and a
   dropped Reinforce-Ada group may be mixed. verl's `agg_loss` leaves a fully masked row out (exactly under
   token-mean; the seq-mean modes divide by the fixed mini-batch size), and grposcope's estimators treat a
   filler uid as padding (no advantage, no statistic); one token keeps the forward passes cheap and valid.
4. The pools: per row `grposcope_pool_mean`, `grposcope_pool_std` (unbiased), `grposcope_pool_count` (NaN on
   filler rows), and, for verl's compute_advantage, which passes an estimator no batch fields, a `SamplerStep`
   keyed by uid in this process, read by `grposcope_pool` (the pool's mean, as Reinforce-Ada's baseline) and
   AVSPO (`as_drawn`, its collapse signal). A sampler that draws no pool (budgeted) records each kept group as
   its own pool, and `grposcope_pool` beside it is refused (`pool_pairing`).
5. Metrics: a CollapseMonitor fed with `Selection.as_drawn` (the ACR before the sampler: `collapse/acr`,
   `acr_ema`, `acr_cumulative`, `acr_100`, `volatility`, `alarm/stagnation`), `Selection.metrics`
   (`sampler/*`, with `sampler/rounds`), and the estimator's (`avspo/*`, `collapse/acr_post`) join the dict
   fit logs for the step, through `Tracking.log` (install_log_hook).

Limits: REMAX (its greedy baseline rows share the generation call) and verl's rollout-skip debugging
(`SkipManager`, which replays one dumped call per step) are refused or unsupported; validation passes through
untouched. The entropy, KL and no-signal alarms are not computed (no entropy, KL or advantages reach the
wrapper; verl logs `actor/entropy` itself). verl's own `critic/score/*` and `response_length/*` count the
filler rows (zeros). With a colocated reward model the rollout replicas stay awake while a round is scored.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch

from ..core.advantages import PoolStats, pool_stats
from ..core.diagnostics import CollapseMonitor, alarm_window
from ..sampling import SAMPLERS, Sampler, ScoredDraw, Selection, pool_pairing
from . import verl_run as plugin  # first: it checks verl's version
from .verl_groups import PAD_PREFIX, Groups, monitored

# isort: split
from verl import DataProto
from verl.protocol import pad_dataproto_to_divisor

FILLER = "grposcope_filler"  # non_tensor_batch: True on rows that stand for a prompt the sampler did not keep
POOL_KEYS = ("grposcope_pool_mean", "grposcope_pool_std", "grposcope_pool_count")
TOKEN_KEYS = ("prompts", "responses", "input_ids")  # blanked with the padding token, every other tensor with 0

logger = logging.getLogger("grposcope")
_pending: dict[str, float] = {}  # the step's metrics, until fit's next logger call


# ---------------------------------------------------------------------------------------------------------
# What the sampler knows of the step and verl does not hand an estimator


@dataclass
class SamplerStep:
    """The step's batch as the wrapper left it, keyed by prompt uid. verl's compute_advantage passes an
    estimator the rewards, the response mask, the uids and the config only (ray_trainer.compute_advantage),
    in the TaskRunner, where the wrapper runs: a table in this process is the shortest way across."""

    pools_by_uid: dict[str, tuple[float, float, float]]  # uid -> its pool's mean, sum of squared deviations, count
    fillers: set[str]  # uids whose rows are filler
    as_drawn: torch.Tensor  # (B0, G) the groups as first drawn, before the sampler kept or dropped any

    def covers(self, index: Sequence[Any]) -> bool:
        known = self.pools_by_uid.keys() | self.fillers
        return all(str(u) in known or str(u).startswith(PAD_PREFIX) for u in index)

    def relabel(self, index: Sequence[Any]) -> np.ndarray:
        """The uids, each filler's marked as padding (verl_groups: advantage 0 and in no group, so in neither
        the ACR nor AVSPO's signal).  index (N,) -> (N,)"""
        return np.array([f"{PAD_PREFIX}-filler-{u}" if str(u) in self.fillers else u for u in index], dtype=object)

    def pools(self, groups: Groups, index: Sequence[Any]) -> Callable[[list[int]], PoolStats]:
        """The pools of the groups `gids` (run_estimator asks once per group size), read by uid."""

        def pool_of(gids: list[int]) -> PoolStats:
            stats = torch.tensor([self.pools_by_uid[str(index[groups.rows[g][0]])] for g in gids],
                                 dtype=torch.float64)  # (B_s, 3)
            return PoolStats(stats[:, 0], stats[:, 1], stats[:, 2])

        return pool_of


_step: SamplerStep | None = None


def recorded_step(index: Sequence[Any]) -> SamplerStep:
    """The recorded step of the batch whose uids are `index`. A missing one fails: with a sampler configured,
    the pools would otherwise silently become the groups."""
    if _step is None or not _step.covers(index):
        raise ValueError(f"algorithm.{plugin.CONFIG_KEY}.{plugin.SAMPLER_KEY} is set, but this batch was not drawn "
                         "by grposcope's sampler in this process: is grposcope.integrations.verl imported in verl's "
                         "TaskRunner (its verl.plugins entry point, or VERL_USE_EXTERNAL_MODULES)?")
    return _step


def record(step: SamplerStep | None) -> None:
    """Replaces the recorded step: one at a time, as fit computes a step's advantages before the next draw."""
    global _step
    _step = step


def reset() -> None:
    """Forgets the recorded step and the metrics not yet logged (plugin.reset calls it)."""
    record(None)
    _pending.clear()


# ---------------------------------------------------------------------------------------------------------
# Options: algorithm.grposcope.sampler and the sampler's fields


def sampler_options(algorithm: Any) -> tuple[str, dict[str, Any]] | None:
    """The sampler named in algorithm.grposcope and its keyword arguments from the same section, or None. A
    key no component declares fails with those the sampler and the chosen estimator read; another entry's
    option is warned about (verl_run.unread_elsewhere, the policy of every host)."""
    section = plugin.grposcope_section(algorithm)
    name = section.get(plugin.SAMPLER_KEY)
    if name is None:
        return None
    fields = plugin.sampler_fields(section)
    estimator = algorithm.get("adv_estimator") if hasattr(algorithm, "get") else None
    known = fields | set(plugin.SHARED_FIELDS) | set(plugin.RUN_FIELDS) | set(
        plugin.config_fields(estimator) if estimator in plugin.NAMES else ())
    plugin.unread_elsewhere(section, known, f"sampler={name} with algorithm.adv_estimator={estimator}",
                            f"is not an option of sampler {name!r} or of advantage estimator {estimator!r}; they read")
    plugin.check_ranges(section)
    if SAMPLERS.is_plugin(name):
        return name, plugin.plugin_keywords(SAMPLERS, "sampler", name, section)
    return name, {k: plugin.plain_value(v) for k, v in section.items() if k in fields - {plugin.SAMPLER_KEY}}


def prompt_key(fields: dict[str, Any]) -> str:
    """What identifies a prompt across steps (the budgeted sampler's beliefs): its chat messages (`raw_prompt`,
    from verl's RLHFDataset), else its data source and dataset index; as a digest, to keep the state small."""
    if "raw_prompt" in fields:
        text = repr(fields["raw_prompt"])
    else:
        info = fields.get("extra_info") or {}
        text = repr((fields.get("data_source"), fields.get("index", info.get("index")), fields.get("uid")))
    return hashlib.sha1(text.encode()).hexdigest()


def split_prompts(uids: np.ndarray, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's prompt (uids in order of first appearance) and which of its prompt's g rows it is, and each
    prompt's first row.  uids (N,) -> slot (N,), occurrence (N,), first (B,)"""
    slot, occurrence = np.empty(len(uids), dtype=np.int64), np.empty(len(uids), dtype=np.int64)
    seen: dict[Any, int] = {}
    counts, first = [], []  # type: list[int], list[int]
    for row, uid in enumerate(uids):
        b = seen.setdefault(uid, len(counts))
        if b == len(counts):
            counts.append(0)
            first.append(row)
        slot[row], occurrence[row] = b, counts[b]
        counts[b] += 1
    wrong = [(uid, counts[b]) for uid, b in seen.items() if counts[b] != g]
    if wrong:
        raise ValueError(f"every prompt must hold rollout.n={g} rows of the generation batch; uid {wrong[0][0]} "
                         f"holds {wrong[0][1]}")
    return slot, occurrence, np.asarray(first, dtype=np.int64)


# ---------------------------------------------------------------------------------------------------------
# One step: the rounds, then the batch fit continues with


class Rounds:
    """The step's calls of the real manager, each scored, kept in draw order."""

    def __init__(self, rollouts: SampledRollouts, base: DataProto) -> None:
        self.rollouts, self.base = rollouts, base  # base: one row per prompt
        self.outputs: list[DataProto] = []
        self.timings: list[dict[str, float]] = []
        self.padding = 0

    def draw(self, prompts: list[dict[str, Any]], k: int) -> ScoredDraw:
        """k completions of each prompt in one call.  -> rewards, lengths (A, k): sample j of prompt a is row
        a * k + j of the call, as verl's interleaved repeat lays them out."""
        request = self.base.select_idxs(np.array([p["row"] for p in prompts], dtype=np.int64))
        request = request.repeat(repeat_times=k, interleave=True)  # (A * k,)
        padded, pad = pad_dataproto_to_divisor(request, self.rollouts.divisor)
        output = self.rollouts.manager.generate_sequences(padded)
        self.timings.append(output.meta_info.pop("timing", {}))
        output = self.rollouts.score(output.slice(0, len(request)))  # the padding rows cut before scoring
        self.padding += pad
        self.outputs.append(output)
        rewards = output.batch["rm_scores"].sum(dim=-1, dtype=torch.float64).float()  # (A * k,)
        mask = output.batch["response_mask"] if "response_mask" in output.batch.keys() else \
            output.batch["attention_mask"][:, -output.batch["responses"].shape[1]:]
        lengths = mask.sum(dim=-1).float()  # (A * k,) response tokens
        return ScoredDraw(rewards.view(len(prompts), k), lengths.view(len(prompts), k))

    def concat(self) -> DataProto:
        """Every scored row of the step, in draw order: draw d's row r is row offset(d) + r, the sample's number
        in the Selection. A non-tensor key missing from a round (an extra field) is None there."""
        keys = set().union(*(o.non_tensor_batch for o in self.outputs))
        parts = []
        for o in self.outputs:
            fields = {k: o.non_tensor_batch.get(k, np.full(len(o), None, dtype=object)) for k in sorted(keys)}
            parts.append(DataProto(batch=o.batch, non_tensor_batch=fields, meta_info={}))
        return DataProto.concat(parts)

    def meta_info(self) -> dict[str, Any]:
        """The first round's meta_info (reward_extra_keys, ...) with the step's timing: the rounds ran one after
        another, so each figure adds up over them, except the slowest sample's lengths (the longest)."""
        timing: dict[str, float] = {}
        for t in self.timings:
            for key, value in t.items():
                timing[key] = max(timing.get(key, value), value) if key.endswith("_length") else \
                    timing.get(key, 0.0) + value
        return {**{k: v for k, v in self.outputs[0].meta_info.items() if k != "metrics"}, "timing": timing}


def assemble(drawn: DataProto, gen_batch: DataProto, picks: np.ndarray, pad_token_id: int) -> DataProto:
    """The batch fit unions with its own: input row i becomes drawn row picks[i], or a filler row where
    picks[i] < 0; every row carries its own prompt's fields (fit's union compares those it shares)."""
    filler = picks < 0  # (N,)
    out = drawn.select_idxs(np.where(filler, 0, picks))  # a filler starts as any drawn row, then is blanked
    blank(out, filler, pad_token_id)
    for key in set(out.non_tensor_batch) & set(gen_batch.non_tensor_batch):
        out.non_tensor_batch[key] = gen_batch.non_tensor_batch[key].copy()
    out.non_tensor_batch[FILLER] = filler
    return out


def blank(out: DataProto, rows: np.ndarray, pad_token_id: int) -> None:
    """Turns `rows` into one padding token with no response, in place: the token keeps the forward passes
    valid (verl's no_padding_2_padding needs a prompt token), the masks keep the row out of every loss."""
    if not rows.any():
        return
    idx = torch.as_tensor(rows)
    for key, tensor in out.batch.items():
        tensor[idx] = pad_token_id if key in TOKEN_KEYS else 0  # select_idxs made copies
    out.batch["attention_mask"][idx, out.batch["prompts"].shape[1] - 1] = 1  # the last prompt position
    for key, values in out.non_tensor_batch.items():
        values[rows] = None if values.dtype == object else ("" if values.dtype.kind in "US" else 0)


def prompt_pools(selection: Selection) -> torch.Tensor:
    """(B', 3) each kept prompt's pool as the estimators read it: mean, sum of squared deviations, count.
    A sampler that draws no pool: the kept group."""
    pool = selection.pool
    if pool is None:
        pool = pool_stats(selection.rewards, torch.ones_like(selection.rewards, dtype=torch.bool))
    return torch.stack([pool.mean, pool.square, pool.count], dim=1)


class SamplerState:
    """The sampler's and the collapse monitor's state under SAMPLER_STATE, for both trainers' sampling sides
    (`name`, `sampler`, `monitor`)."""

    name: str
    sampler: Sampler
    monitor: CollapseMonitor

    def state_dict(self) -> dict[str, Any]:
        return {"sampler": self.name, "state": self.sampler.state_dict(), "monitor": self.monitor.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("sampler") != self.name:
            logger.warning("grposcope: the checkpoint holds the state of sampler %r, this run uses %r; it starts "
                           "from its initial state", state.get("sampler"), self.name)
            return
        self.sampler.load_state_dict(state["state"])
        self.monitor.load_state_dict(state["monitor"])


class SampledRollouts(SamplerState):
    """verl's rollout manager with a grposcope sampler deciding each training step's completions (module
    docstring); validation calls and every other attribute go to the wrapped manager."""

    def __init__(self, manager: Any, sampler: Sampler, g: int, reward: Callable[[DataProto], DataProto] | None
                 = None, divisor: int | None = None, pad_token_id: int = 0, success_threshold: float = 0.5,
                 run_steps: int | None = None, name: str = "") -> None:
        self.manager, self.sampler, self.g, self.reward = manager, sampler, g, reward
        # verl's AgentLoopManager splits each call evenly over its workers
        self.divisor = divisor or len(getattr(manager, "agent_loop_workers", None) or [None])
        self.pad_token_id, self.name = pad_token_id, name or type(sampler).__name__
        window = alarm_window(run_steps)
        self.monitor = CollapseMonitor(success_threshold, stagnation_steps=window, entropy_steps=window)
        self._warned_colocated = False

    def __getattr__(self, name: str) -> Any:
        manager = self.__dict__.get("manager")
        if manager is None:
            raise AttributeError(name)
        return getattr(manager, name)

    def generate_sequences(self, gen_batch: DataProto) -> DataProto:
        """fit's generation call: gen_batch holds rollout.n interleaved rows per uid; so does the answer."""
        if gen_batch.meta_info.get("validate", False) or "uid" not in gen_batch.non_tensor_batch:
            return self.manager.generate_sequences(gen_batch)  # validation: verl's own
        if "__do_sample__" in gen_batch.non_tensor_batch:
            raise ValueError("grposcope's samplers do not run with REMAX's baseline rows: choose another "
                             "algorithm.adv_estimator, or drop algorithm.grposcope.sampler")
        uids = gen_batch.non_tensor_batch["uid"]
        slot, occurrence, first = split_prompts(uids, self.g)
        base = gen_batch.select_idxs(first)  # (B,) one row per prompt
        fields = [{k: v[b] for k, v in base.non_tensor_batch.items()} for b in range(len(first))]
        prompts = [{"prompt_text": prompt_key(f), "row": b} for b, f in enumerate(fields)]
        rounds = Rounds(self, base)
        selection = self.sampler.sample(prompts, rounds.draw, lambda count: [], self.g)
        kept = torch.full((len(first), self.g), -1, dtype=torch.long)  # (B, G) sample numbers, -1: not kept
        rows = torch.tensor([p["row"] for p in selection.prompts], dtype=torch.long)  # (B',)
        kept[rows] = selection.samples
        row_slot = torch.from_numpy(slot)  # (N,)
        picks = kept[row_slot, torch.from_numpy(occurrence)].numpy()  # (N,) each row's sample, -1: filler
        out = assemble(rounds.concat(), gen_batch, picks, self.pad_token_id)
        pools = torch.full((len(first), 3), float("nan"), dtype=torch.float64)  # (B, 3)
        pools[rows] = prompt_pools(selection)
        stats = PoolStats(pools[:, 0], pools[:, 1], pools[:, 2])
        for key, values in zip(POOL_KEYS, (stats.mean, stats.std(unbiased=True), stats.count)):
            out.non_tensor_batch[key] = values[row_slot].numpy()
        out.meta_info = rounds.meta_info()
        fillers = {str(uids[i]) for i in first[(kept < 0).all(dim=1).numpy()]}
        assert selection.as_drawn is not None  # Selection.__post_init__ fills it
        record(SamplerStep({str(uids[first[b]]): tuple(pools[b].tolist()) for b in rows.tolist()}, fillers,
                           selection.as_drawn))
        self._note_metrics(selection, rounds, len(fillers))
        return out

    def score(self, output: DataProto) -> DataProto:
        """A round's rows with `rm_scores`: verl's agent reward loop wrote them, or the trainer's colocated
        reward model scores them now."""
        if "rm_scores" in output.batch.keys():
            return output
        if self.reward is None:
            raise ValueError("the rollout manager returned no rm_scores and no reward function was given")
        if not self._warned_colocated:
            self._warned_colocated = True
            logger.warning("grposcope: each sampling round is scored by the colocated reward model while the "
                           "rollout replicas stay awake; give the reward model its own resource pool "
                           "(reward.reward_model.enable_resource_pool=True) if memory runs short")
        return output.union(self.reward(output))

    def _note_metrics(self, selection: Selection, rounds: Rounds, fillers: int) -> None:
        assert selection.as_drawn is not None  # Selection.__post_init__ fills it
        metrics = monitored(self.monitor, selection.as_drawn)
        metrics.update(selection.metrics)
        metrics.setdefault("sampler/rounds", float(len(selection.draws)))
        metrics["sampler/padding_samples"] = float(rounds.padding)
        metrics["sampler/filler_rows"] = float(fillers * self.g)
        _pending.clear()
        _pending.update(metrics)



# ---------------------------------------------------------------------------------------------------------
# Installing: the patched RayPPOTrainer.init_workers calls install(trainer)


def checked_sampler(config: Any) -> tuple[str, dict[str, Any]]:
    """The sampler named in algorithm.grposcope and its options, after refusing (before the first step) what
    cannot work in verl: a sampler that does not run there, REMAX, `grposcope_pool` beside a sampler without
    pools; a pool-drawing sampler beside another estimator is warned about. Both trainers call it."""
    options = sampler_options(config.algorithm)
    if options is None:
        raise ValueError(f"algorithm.{plugin.CONFIG_KEY}.{plugin.SAMPLER_KEY} is not set")
    name, params = options
    if "verl" not in SAMPLERS.hosts(name):
        raise ValueError(f"algorithm.{plugin.CONFIG_KEY}.{plugin.SAMPLER_KEY}={name} does not run in verl; there use "
                         f"one of {', '.join(SAMPLERS.names_in('verl'))}"
                         + (" (DAPO's dynamic sampling is verl's own: algorithm.filter_groups)" if name == "dynamic"
                            else ""))
    estimator = str(getattr(config.algorithm.adv_estimator, "value", config.algorithm.adv_estimator))
    if estimator == "remax":
        raise ValueError("grposcope's samplers do not run with algorithm.adv_estimator=remax")
    try:
        note = pool_pairing(name, plugin.NAMES.get(estimator, estimator))  # grposcope_pool needs a pool
    except ValueError as err:
        raise ValueError(f"algorithm.adv_estimator={estimator} beside algorithm.{plugin.CONFIG_KEY}."
                         f"{plugin.SAMPLER_KEY}={name} (grposcope's names: {err})") from None
    if note:
        warnings.warn(note, stacklevel=3)
    return name, params


def make_sampler(name: str, params: dict[str, Any]) -> Sampler:
    """The sampler, built as every host builds its components (components.build)."""
    from ..components.build import make_with

    return make_with("sampler", name, params)


def install(trainer: Any) -> SampledRollouts:
    """Wraps trainer.async_rollout_manager with the sampler configured in algorithm.grposcope, saves its state
    with grposcope's, and hooks verl's logger. Fails before the first step on a pairing that cannot work."""
    config = trainer.config
    name, params = checked_sampler(config)
    section = plugin.grposcope_section(config.algorithm)
    manager = trainer.async_rollout_manager
    pad = getattr(getattr(trainer, "tokenizer", None), "pad_token_id", None)
    wrapper = SampledRollouts(
        manager, make_sampler(name, params), int(config.actor_rollout_ref.rollout.n),
        reward=getattr(trainer, "_compute_reward_colocate", None),
        divisor=len(getattr(manager, "agent_loop_workers", None) or [])
        or int(config.actor_rollout_ref.rollout.agent.num_workers),
        pad_token_id=pad if pad is not None else 0,
        success_threshold=float(section.get("success_threshold", plugin.SHARED_FIELDS["success_threshold"])),
        run_steps=getattr(trainer, "total_training_steps", None), name=name)
    trainer.async_rollout_manager = wrapper
    plugin.attach_state(plugin.SAMPLER_STATE, wrapper)
    install_log_hook()
    return wrapper


def pending_metrics() -> dict[str, float]:
    """The step's grposcope metrics, emptied: the sampler's and the monitor's, over the estimator's last call
    (`avspo/*`, `collapse/acr_post`; its ACR family, of the groups that trained, gives way to the monitor's,
    of the groups as first drawn). {} when no step ran since the last call."""
    if not _pending:
        return {}
    merged = {**plugin.latest_metrics(), **_pending}
    _pending.clear()
    return merged


def install_log_hook() -> None:
    """fit builds its logger (verl/utils/tracking.py, Tracking) inside the method and logs one dict per step, so
    the class's `log` is the one place where grposcope's metrics can join that dict: same step, every backend,
    no second console line. Patched in the TaskRunner by `install` only (a run with a sampler); verl's own keys
    win a clash. Idempotent."""
    from verl.utils.tracking import Tracking

    if getattr(Tracking.log, "_grposcope", False):
        return
    original = Tracking.log

    @functools.wraps(original)
    def log(self: Any, data: dict[str, Any], step: int, backend: Any = None) -> Any:
        extra = pending_metrics()
        return original(self, data={**extra, **data} if extra else data, step=step, backend=backend)

    log._grposcope = True  # type: ignore[attr-defined]
    Tracking.log = log


__all__ = ["FILLER", "POOL_KEYS", "SampledRollouts", "SamplerStep", "checked_sampler", "install",
           "install_log_hook", "make_sampler", "pending_metrics", "prompt_key", "prompt_pools", "recorded_step",
           "sampler_options", "split_prompts"]
