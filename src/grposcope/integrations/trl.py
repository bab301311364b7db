"""grposcope inside TRL: swap one import line and keep TRL's vLLM rollouts and DeepSpeed / FSDP.

    from grposcope.integrations.trl import GRPOTrainer, GRPOConfig   # instead of: from trl import ...
    config = GRPOConfig(output_dir="out", num_generations=8, use_avspo=True, sampler="dynamic")
    GRPOTrainer(model=model, args=config, reward_funcs=my_reward, train_dataset=dataset).train()

What the subclass changes in TRL's `GRPOTrainer` (docs/integrations.md):
- each training generation goes through a grposcope sampler ("fixed": TRL's own batch; "dynamic": DAPO's
  dynamic sampling, arXiv 2503.14476, with refill: collapsed groups are replaced by new prompts' groups);
- the advantages come from the chosen grposcope estimator on the gathered (B, G) rewards, computed the same on
  every process (AVSPO's state stays in sync) and saved in TRL's checkpoints;
- the ACR family, the alarms, and the estimator's and sampler's metrics join TRL's own (`self._metrics`), so
  they reach W&B, TensorBoard and `trainer.state.log_history` with TRL's `reward` and `kl`;
- an optimizer step whose micro-batches carry no signal on any process (every advantage 0, beta 0, no entropy
  bonus or router loss) is not taken (`skip_no_signal_steps`, on by default): AdamW would replay its momentum.
  Under DeepSpeed (ZeRO-2, ZeRO-3) the engine steps inside the last micro-batch's backward pass, so the
  decision is taken before that pass and only the wrapped base optimizer's update is left out.
Before TRL starts: `reward_funcs` strings that TRL would fetch from the hub are refused and each function's
calls are checked (trl_rewards); the model folder's generation_config.json fields TRL leaves unset are set
aside (grposcope.rollout.model_defaults). Everything else (generation, reward calls, the loss,
`frac_reward_zero_std`) is TRL's.

TRL has no advantage hook in the tested versions, so this overrides private methods; the import refuses a TRL
outside the tested range (GRPOSCOPE_ALLOW_UNTESTED_TRL=1 lets it try) and checks that they exist.
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import statistics
import types
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

TRL_TESTED = SpecifierSet(">=1.16,<1.17")
OVERRIDDEN = ("_generate_and_score_completions", "_calculate_rewards", "_save_checkpoint",
              "_load_optimizer_and_scheduler", "log")
ALLOW_UNTESTED = "GRPOSCOPE_ALLOW_UNTESTED_TRL"


def check_trl(version: str | None = None) -> None:
    """Refuses a TRL release outside the tested range, whose private methods this module may not match."""
    try:
        version = version or importlib.metadata.version("trl")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError("grposcope.integrations.trl needs TRL: pip install 'trl>=1.16,<1.17'") from None
    if Version(version) not in TRL_TESTED and os.environ.get(ALLOW_UNTESTED) != "1":
        raise ImportError(
            f"grposcope.integrations.trl is tested with TRL {TRL_TESTED} and this is TRL {version}: install "
            f"'trl{TRL_TESTED}', or set {ALLOW_UNTESTED}=1 to try this one (it overrides TRL's private methods "
            f"{', '.join(OVERRIDDEN)})"
        )


check_trl()

import torch  # noqa: E402
import trl  # noqa: E402
from accelerate.utils import gather_object  # noqa: E402
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR  # noqa: E402

from ..components.build import build  # noqa: E402
from ..components.state import component_state, load_component_state, read_state_file  # noqa: E402
from ..core.diagnostics import CollapseMonitor, alarm_window, collapse_metrics  # noqa: E402
from ..core.losses import carries_signal  # noqa: E402
from ..rewards.scorer import combine, none_frac  # noqa: E402
from ..rollout.model_defaults import neutralise  # noqa: E402
from ..sampling.base import ScoredDraw  # noqa: E402
from ..sampling.stream import PromptStream  # noqa: E402
from . import trl_batch  # noqa: E402
from .trl_config import GRPOConfig  # noqa: E402
from .trl_rewards import prepare_reward_funcs  # noqa: E402

_missing = [name for name in OVERRIDDEN if not callable(getattr(trl.GRPOTrainer, name, None))]
if _missing:
    raise ImportError(f"this TRL's GRPOTrainer lacks {', '.join(_missing)}, which grposcope.integrations.trl "
                      f"overrides: install 'trl{TRL_TESTED}'")

STATE_FILE = "grposcope_state.pt"  # in each TRL checkpoint folder: estimator, sampler, monitor, refill stream
# What sets the generation fields TRL passes itself (for the note when a model folder's value is overridden)
TRL_OPTIONS = {"do_sample": "TRL: it samples", "max_new_tokens": "max_completion_length",
               **{name: f"the {name} option" for name in ("temperature", "top_p", "top_k", "min_p",
                                                          "repetition_penalty", "cache_implementation")}}


class GRPOTrainer(trl.GRPOTrainer):
    """TRL's GRPOTrainer with grposcope's estimators, samplers and collapse diagnostics (module docstring).

    Takes TRL's arguments; `args` must be grposcope's `GRPOConfig` (TRL's plus the collapse fields). `model`
    may also be an embedded model's spec ("embedded:smollm2-135m-instruct"), and `train_dataset` a list of
    dicts with a "prompt".
    """

    def __init__(self, model: Any, reward_funcs: Any, args: GRPOConfig | None = None, train_dataset: Any = None,
                 processing_class: Any = None, **kwargs: Any) -> None:
        if args is None:
            args = GRPOConfig(output_dir="grposcope-trl-output")
        if not isinstance(args, GRPOConfig):
            raise TypeError(f"args is {type(args).__module__}.{type(args).__name__}; pass grposcope's config: "
                            "from grposcope.integrations.trl import GRPOConfig")
        # before any model loads: a string TRL would fetch from the hub is refused, and a failing function
        # names itself and the sample (trl_rewards)
        reward_funcs = prepare_reward_funcs(reward_funcs)
        if isinstance(model, str) and model.startswith("embedded:"):
            from ..models import load_model

            model, tokenizer = load_model(model)
            processing_class = tokenizer if processing_class is None else processing_class
        if isinstance(train_dataset, list):
            from datasets import Dataset

            train_dataset = Dataset.from_list(train_dataset)
        super().__init__(model=model, reward_funcs=reward_funcs, args=args, train_dataset=train_dataset,
                         processing_class=processing_class, **kwargs)
        for name in ("_metrics", "_logs", "_tokenizer", "reward_weights", "num_generations", "pad_to_multiple_of"):
            if not hasattr(self, name):
                raise ImportError(f"this TRL's GRPOTrainer has no {name}, which grposcope reads: install "
                                  f"'trl{TRL_TESTED}'")
        if getattr(self, "generation_config", None) is not None:  # TRL's transformers generation (not vLLM)
            # what TRL leaves unset, generate() takes from the model folder's generation_config.json
            # (num_beams: 3 would run beam search): set aside and noted as in grposcope's own rollout
            neutralise(self.model, self.generation_config, TRL_OPTIONS)
        self.estimator = build(args, "advantage_estimator")
        self.sampler = build(args, "sampler")
        if args.diagnose_every:  # grposcope diagnose's detectors on what this run logs (findings.json at the end)
            from .trl_callback import DiagnoseCallback

            self.add_callback(DiagnoseCallback(every=args.diagnose_every, fix="grposcope"))
        window = alarm_window(args.max_steps)  # TRL's max_steps; -1 (epochs): the paper's 50 steps
        self.monitor = CollapseMonitor(args.success_threshold, ema_lambda=args.acr_ema_lambda, kl_bound=args.kl_bound,
                                       stagnation_steps=window, entropy_steps=window)
        self.refill = None
        if args.sampler != "fixed":
            if not hasattr(train_dataset, "__getitem__") or not hasattr(train_dataset, "__len__"):
                raise TypeError(f"sampler={args.sampler!r} draws new prompts to refill a step, which needs a "
                                "train_dataset with a length (a datasets.Dataset or a list), not a stream")
            # its own seeded order, the same on every process, so that all refill with the same prompts
            self.refill = PromptStream(range(len(train_dataset)), seed=args.seed + 1)
        self._recent: dict[str, float] = {}  # TRL's entropy and kl of the last logged steps, for the alarms
        self._rewards_per_func: torch.Tensor | None = None
        self._signal = False  # whether a micro-batch since the last optimizer step carried signal (this process)
        self._skip_engine_step = False  # DeepSpeed: the decision for the engine step of this backward pass
        self.skipped_no_signal_steps = 0

    # --- one training generation ---------------------------------------------------------------------------

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.model.training:  # type: ignore[union-attr]  # transformers: Trainer.model is Optional
            return self._evaluate_batch(inputs)
        g, rounds = self.num_generations, []  # type: int | None, list[Any]
        groups = len(inputs) * self.accelerator.num_processes // g
        batch = self._batch_prompts(inputs)
        generate = super()._generate_and_score_completions

        def draw(prompts: list[Any], n: int) -> ScoredDraw:
            # the batch as TRL handed it over, when the sampler asks for exactly that: stock TRL's first round
            as_given = not rounds and n == g and len(prompts) == groups and all(a is b for a, b in zip(prompts, batch))
            rows, real = (inputs, groups * g) if as_given else self._round_rows(prompts, n)
            output = generate(rows)  # a collective call: every process runs the same rounds
            rewards, metrics = self._gathered_rewards()  # (N,) N >= real: the round's padding rows at the end
            lengths = self._gathered_lengths(output)
            rounds.append(trl_batch.Round(output, metrics, real, len(rewards)))
            return ScoredDraw(rewards[:real].view(-1, n), lengths[:real].view(-1, n), rows=len(rounds) - 1)

        selection = self.sampler.sample(batch, draw, self._more_prompts, g)
        estimate = self.estimator(selection.rewards, pool=selection.pool, as_drawn=selection.as_drawn)
        advantages = estimate.advantages  # (B', G)
        kept_rows = trl_batch.row_numbers(rounds)[selection.samples]  # (B', G) rows of the concatenated rounds
        output = self._training_batch(rounds, kept_rows, advantages, groups, len(inputs))
        metrics = {"reward/none_frac": statistics.fmean(r.metrics["reward/none_frac"] for r in rounds)}
        metrics["sampler/padding_samples"] = float(sum(r.rows - r.real for r in rounds))
        metrics.update({**selection.metrics, **estimate.metrics})
        metrics.update(self.monitor.update(selection.as_drawn, advantages, self._recent.get("entropy"),
                                           self._recent.get("kl")))
        for name, value in metrics.items():
            self._metrics["train"][name].append(float(value))
        self._log_advantages(kept_rows, advantages, sum(r.rows for r in rounds))
        return output

    def _batch_prompts(self, inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The generation batch's prompts, one per group, the same on every process: every process's examples
        (a group may straddle two processes), so that any sampler can re-draw or rank them."""
        everyone = gather_object(list(inputs)) if self.accelerator.num_processes > 1 else list(inputs)
        return everyone[:: self.num_generations]

    def _evaluate_batch(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """Evaluation stays TRL's; the ACR of the eval groups is added (`eval_collapse/acr`). No state moves."""
        output = super()._generate_and_score_completions(inputs)
        rewards = self._gathered_rewards()[0].view(-1, self.num_generations_eval)  # type: ignore[arg-type]
        for name, value in collapse_metrics(rewards, self.args.success_threshold).items():  # type: ignore[attr-defined]
            self._metrics["eval"][name].append(value)
        return output

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)  # (N, F), gathered
        self._rewards_per_func = per_func
        return per_func

    def _gathered_rewards(self) -> tuple[torch.Tensor, dict[str, float]]:
        """The last round's rewards of every process, (N,), before any mitigation: TRL's weighted sum of the
        reward functions, None skipped. A completion no function scored gets 0.0 and is counted in
        `reward/none_frac`, as in grposcope's own trainer (TRL leaves it out of its group's mean instead)."""
        assert self._rewards_per_func is not None  # _calculate_rewards ran in this step's generate
        per_func = self._rewards_per_func.float().cpu()  # (N, F), NaN where a function returned None
        rewards = combine(per_func, self.reward_weights.cpu()).float()  # (N,), 0.0 where unscored
        return rewards, {"reward/none_frac": none_frac(per_func)}

    def _gathered_lengths(self, output: dict[str, Any]) -> torch.Tensor:
        """Completion tokens of every process's rows, for the sampler's accounting.  -> (N,)"""
        return self.accelerator.gather(output["completion_mask"].sum(dim=1)).float().cpu()

    def _round_rows(self, prompts: list[Any], n: int) -> tuple[list[dict[str, Any]], int]:
        """This process's rows of a round that draws n completions of each prompt, and the round's real rows.

        Every prompt's n rows in order, then padding rows (copies of the last prompt, generated and scored but
        given to no sampler) up to a multiple of num_processes x num_generations: each process gets as many
        rows as the others, as TRL's slicing expects, and TRL's own per-group statistics and vLLM's server mode
        (one request of num_generations completions per prompt) see whole blocks of num_generations rows.
        """
        everyone = [dict(example) for example in prompts for _ in range(n)]
        real, processes = len(everyone), self.accelerator.num_processes
        block = math.lcm(processes, self.num_generations)  # type: ignore[arg-type]  # TRL: Optional, set by then
        everyone += [dict(prompts[-1]) for _ in range(-real % block)]
        rows = len(everyone) // processes
        start = self.accelerator.process_index * rows
        return everyone[start:start + rows], real

    def _more_prompts(self, count: int) -> list[dict[str, Any]]:
        """The next `count` prompts of the refill stream (the same on every process)."""
        assert self.refill is not None  # only a refilling sampler (not "fixed") asks
        return [self.train_dataset[i] for i in self.refill.take(count)]  # type: ignore[index]  # transformers: Optional

    def _training_batch(self, rounds: list[trl_batch.Round], kept: torch.Tensor, advantages: torch.Tensor,
                        groups: int, rows: int) -> dict[str, Any]:
        """This process's training rows: the first round as TRL made it when the sampler kept it whole,
        else the kept groups gathered from every round (trl_batch). kept (B', G) rows of the concatenated
        rounds."""
        first = rounds[0].output
        device = first["completion_ids"].device
        process = self.accelerator.process_index
        whole_first = torch.arange(groups * self.num_generations)  # type: ignore[operator]  # TRL: Optional, set
        if len(rounds) == 1 and rounds[0].rows == len(whole_first) and torch.equal(kept.reshape(-1), whole_first):
            flat = advantages.reshape(-1).float()  # (B * G,)
            return {**first, "advantages": flat[process * rows:(process + 1) * rows].to(device)}
        pads = trl_batch.pad_values(self._tokenizer.pad_token_id)
        whole = trl_batch.concat_rounds([trl_batch.gather_round(self.accelerator, r.output, pads) for r in rounds],
                                        pads)
        batch = trl_batch.pick_rows(whole, kept, advantages, groups, self.num_generations)  # type: ignore[arg-type]
        local = trl_batch.local_slice(batch, process, rows)
        if self.pad_to_multiple_of is None:
            local = trl_batch.trim(local)
        local["num_items_in_batch"] = trl_batch.items_in_batch(batch)
        return local

    def _log_advantages(self, kept: torch.Tensor, advantages: torch.Tensor, drawn: int) -> None:
        """TRL's completions table shows its own advantages; show the ones that trained (0 where dropped).
        kept (B', G) rows of the concatenated rounds, `drawn` rows in all."""
        values = torch.zeros(drawn)
        values[kept.reshape(-1)] = advantages.reshape(-1).float()
        log = self._logs["advantages"]
        k = min(len(log), drawn)
        for _ in range(k):
            log.pop()  # type: ignore[attr-defined]  # TRL types _logs' values as Collection: a deque
        log.extend(values[drawn - k:].tolist())  # type: ignore[attr-defined]

    # --- no optimizer step without signal (docs/algorithms.md, "A step with no signal") -------------------

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if model.training:
            self._signal = self._signal or self._carries_signal(inputs)
            if self.args.skip_no_signal_steps and self.is_deepspeed_enabled and self.accelerator.sync_gradients:
                # the last micro-batch of the optimizer step: accelerate runs the engine's step inside its backward
                # pass, so the decision is taken now, from the advantages of all the step's micro-batches
                self._prepare_engine_step()
                self._skip_engine_step = self._no_signal_anywhere()
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    def _carries_signal(self, inputs: dict[str, Any]) -> bool:
        """Whether TRL's loss on this micro-batch can have a gradient: a KL term, an entropy bonus or a router
        loss always has one, the policy loss only through a non-zero advantage on a completion token."""
        if self.beta != 0.0 or getattr(self, "_entropy_bonus_enabled", False) or getattr(self, "aux_loss_enabled",
                                                                                         False):
            return True
        advantages, mask = inputs["advantages"], inputs["completion_mask"]  # (n,) or (n, T); (n, T)
        if advantages.dim() == 2:  # per-token advantages (TRL accepts them from subclasses)
            return bool(((advantages != 0) & mask.bool()).any())
        return carries_signal(advantages, mask)

    def create_optimizer(self, model=None):
        optimizer = super().create_optimizer(model)
        if self.args.skip_no_signal_steps and not self.is_deepspeed_enabled:
            _wrap_step(optimizer, self._step_with_signal)
        return optimizer

    def _step_with_signal(self, step, *args: Any, **kwargs: Any) -> Any:
        """The optimizer's step, taken only when some process's micro-batches carried signal since the last
        one. The learning-rate schedule goes on either way: transformers steps it after this call."""
        return None if self._no_signal_anywhere() else step(*args, **kwargs)

    def _no_signal_anywhere(self) -> bool:
        """Whether no process's micro-batches carried signal since the last optimizer step: one gather, decided
        alike on every process, so that sharded and replicated optimizers stay in step. Logged and counted."""
        signal = torch.tensor([float(self._signal)], device=self.accelerator.device)
        self._signal = False
        if self.accelerator.num_processes > 1:
            signal = self.accelerator.gather(signal)  # (processes,)
        skipped = not bool(signal.any())
        self._metrics["train"]["optimizer/skipped_no_signal"].append(float(skipped))
        self.skipped_no_signal_steps += skipped
        return skipped

    def _prepare_engine_step(self) -> None:
        """Under DeepSpeed, the base optimizer inside the engine (the AdamW that TRL or the DeepSpeed config
        made, which ZeRO steps on this process's fp32 partition) leaves out its update when `_skip_engine_step`
        says so. The rest of `engine.step()` runs as always: the gradient partitions are freed, the unchanged
        fp32 partition is copied back into the weights, the engine's global_steps, global_samples and
        micro_steps advance with transformers' global_step, a scheduler the engine owns (DeepSpeed config
        `scheduler`, or the trainer's built for a DeepSpeed-config optimizer) steps there, and transformers
        steps its own otherwise: the schedule goes on as without DeepSpeed, and a checkpoint holds the
        unchanged moments and step count beside the advanced counters."""
        engine = self.accelerator.deepspeed_engine_wrapped.engine
        _wrap_step(engine.basic_optimizer, self._step_unless_skipped)
        if getattr(engine.optimizer, "_hp_optimizer_states_linked", False) and not any(
                engine.basic_optimizer.state.values()):
            # ZeRO-1/2 and DeepSpeed's bf16 optimizer link each weight's view of the moments (read by
            # deepspeed.utils.safe_get_full_optimizer_state) after the first base step, once: after a skipped
            # first step there were no moments to link, so they link again after the first real one
            engine.optimizer._hp_optimizer_states_linked = False

    def _step_unless_skipped(self, step, *args: Any, **kwargs: Any) -> Any:
        """DeepSpeed's base optimizer step (once per parameter group or ZeRO-3 sub-group), left out when the
        decision taken before this backward pass says so."""
        return None if self._skip_engine_step else step(*args, **kwargs)

    # --- logging and checkpoints ---------------------------------------------------------------------------

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        # TRL's entropy and kl since the last log feed the monitor's alarms (transformers: Trainer.model is Optional)
        if self.model.training:  # type: ignore[union-attr]
            for key in ("entropy", "kl"):
                values = self._metrics["train"].get(key)
                if values:
                    self._recent[key] = statistics.fmean(values)
        super().log(logs, start_time)

    def grposcope_state(self) -> dict[str, Any]:
        return {
            **component_state(estimator=self.estimator, sampler=self.sampler, monitor=self.monitor),
            "refill": self.refill.state_dict() if self.refill is not None else None,
            "recent": dict(self._recent),
            "skipped_no_signal_steps": self.skipped_no_signal_steps,
        }

    def load_grposcope_state(self, state: dict[str, Any]) -> None:
        load_component_state(state, estimator=self.estimator, sampler=self.sampler, monitor=self.monitor)
        if self.refill is not None and state["refill"] is not None:
            self.refill.load_state_dict(state["refill"])
        self._recent = dict(state["recent"])
        self.skipped_no_signal_steps = int(state.get("skipped_no_signal_steps", 0))

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            folder = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            path = os.path.join(self._get_output_dir(trial=trial), folder, STATE_FILE)
            torch.save(self.grposcope_state(), path + ".tmp")
            os.replace(path + ".tmp", path)  # a kill mid-write leaves the previous file or none, never half

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None:
            return
        path = os.path.join(checkpoint, STATE_FILE)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} is missing: this checkpoint was not written by grposcope's TRL "
                                    "integration, so AVSPO's threshold, the sampler and the collapse history "
                                    "cannot resume; resume from a checkpoint of this trainer, or start afresh")
        self.load_grposcope_state(read_state_file(
            path, "Resume from another checkpoint of this run (resume_from_checkpoint=...), or start a new run."))


def _wrap_step(optimizer: Any, guard: Any) -> None:
    """optimizer.step(...) becomes guard(step, ...), which takes the original step or leaves it out; once, also
    if the optimizer is handed over again."""
    if getattr(optimizer, "_grposcope", False):
        return
    step = optimizer.step

    def guarded(_optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        return guard(step, *args, **kwargs)

    # a bound method, as torch's LR schedulers expect when they wrap `step` in turn
    optimizer.step = types.MethodType(guarded, optimizer)
    optimizer._grposcope = True


__all__ = ["GRPOConfig", "GRPOTrainer", "TRL_TESTED", "check_trl"]
