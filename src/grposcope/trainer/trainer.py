"""GRPOTrainer: grposcope's one-machine trainer.

One step, top to bottom (`_step`: `_generate` when the last generation batch is used up, then `_optimize`):
    sample prompts -> generate G completions each -> score -> advantages -> loss and update -> diagnose -> log
The phases hand each other records of data (generation.py, step_metrics.py); the step's metrics are made of
them after the step (`StepMetrics.of`). Setup lives in `setup.py`, a run's start or resume in `run_start.py`,
evaluation in `evaluation.py`, checkpoint files in `checkpoint.py`; this file is the loop and what a
checkpoint holds of it (`state_dict`).
"""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from ..components.state import component_state, load_component_state
from ..core import losses
from ..core.advantages import AdvantageOutput
from ..core.diagnostics import CollapseMonitor, alarm_window
from ..diagnose.live import metrics_records
from ..files import check_writable
from ..logging.backends import METRICS_FILE
from ..rollout import SamplingParams
from ..rollout.base import Rollout
from ..sampling import Selection
from . import checkpoint, run_start
from .config import GRPOConfig
from .drawer import Drawer, TrainerState
from .evaluation import evaluate
from .folder_lock import FolderLock
from .generation import Drawn, Generation, UpdateFigures, length_buckets, plan, token_share
from .geometry import total_steps
from .options import unused_options
from .phases import PhaseTimer, RunClock
from .policy import TrainBatch, completion_logps, logps_in_chunks
from .setup import build_run
from .step_metrics import GenerationFigures, OptimizerFigures, StepMetrics, Update, logp_change, summary_figures
from .watchers import check_callbacks, live_diagnosis, stop_if_unstable


class GRPOTrainer:
    """Trains `model` with GRPO and grposcope's collapse diagnostics and mitigations.

    Same arguments as TRL's GRPOTrainer: `model` is a model object or a name/path (default: the config's
    `model_name_or_path`); `reward_funcs` a function, a registered name, or a list of them (TRL's signature
    `f(prompts=..., completions=..., **columns, trainer_state=..., log_extra=..., log_metric=...)`, called by
    keyword as TRL 1.16 calls it); datasets are HF Datasets or lists of dicts
    with a `prompt`. Without a dataset, the config's `dataset_name` task is loaded. `callbacks` are objects
    with a method `on_step_end(trainer, metrics)`, called after every optimizer step (TRL's TrainerCallback,
    whose methods take `(args, state, control)`, is not accepted).
    """

    def __init__(
        self,
        model: Any = None,
        args: GRPOConfig | None = None,
        reward_funcs: Any = None,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        processing_class: Any = None,
        callbacks: list[Any] | None = None,
    ) -> None:
        self.args = args or GRPOConfig()
        self.callbacks = check_callbacks(callbacks or [])
        check_writable(self.args.output_dir, "output_dir", folder=True)  # before the model loads
        self.clock = RunClock()
        with self.clock("load"):
            run = build_run(self.args, model, reward_funcs, train_dataset, eval_dataset, processing_class)
        self.model, self.tokenizer, self.ref_model = run.model, run.tokenizer, run.ref_model
        self.geometry, self.stream, self.eval_examples = run.geometry, run.stream, run.eval_examples
        self.scorer, self.estimator, self.backend = run.scorer, run.estimator, run.backend
        self.rollout_copy, self.rollout_backend = run.rollout_copy, run.rollout_backend
        self.sampler, self.policy_loss = run.sampler, run.policy_loss
        self.optimizer, self.scheduler, self.logger_factory = run.optimizer, run.scheduler, run.logger_factory
        self.max_steps = total_steps(self.args, self.geometry, len(run.train_examples))
        window = alarm_window(self.max_steps)  # the 50-step alarms fitted to the run's length
        self.monitor = CollapseMonitor(success_threshold=self.args.success_threshold,
                                       ema_lambda=self.args.acr_ema_lambda, kl_bound=self.args.kl_bound,
                                       stagnation_steps=window, entropy_steps=window)
        self.monitor.alarms.settings = {"use_avspo": self.args.use_avspo}  # its advice names no option already on
        self.live = live_diagnosis(self.args, self.max_steps)  # grposcope diagnose's detectors, as it trains
        self.global_step = 0
        self.timer = PhaseTimer()
        self.bad_steps = 0  # updates skipped for a non-finite loss or gradient
        self.no_signal_steps = 0  # optimizer steps skipped because the gradient was exactly zero
        self.samples_generated = 0  # completions drawn so far, kept or not (max_samples)
        self._generation: Generation | None = None  # the batch being trained on
        self._completions: list[dict] = []  # the last generation's sample of completions, until a logging step
        self._eval_before: dict[str, float] | None = None  # held-out figures before training
        self._last_eval: dict[str, float] = {}  # the latest evaluation, reused as "after" when it is current
        self._last_eval_step = -1
        self._warned_prompt_cut = False

    # --- the loop ---------------------------------------------------------------------------------------

    def train(self, resume_from_checkpoint: str | bool | None = None) -> dict[str, Any]:
        """Runs max_steps optimizer steps; returns the run summary (also in output_dir/summary.json).

        `resume_from_checkpoint` (default: the config's): True continues from the newest complete checkpoint
        in output_dir, a path from that checkpoint; the run then goes on exactly as if never stopped.
        """
        resume = self.args.resume_from_checkpoint if resume_from_checkpoint is None else resume_from_checkpoint
        with FolderLock(self.args.output_dir):  # one run per folder, refused before anything in it is touched
            return self._train(resume)

    def _train(self, resume: str | bool | None) -> dict[str, Any]:
        start, notes = run_start.resume(self, resume) if resume else run_start.start(self.args)
        logger = self.logger_factory(self.max_steps, start)
        if start and self.live is not None and not self.live.steps:  # resumed from a checkpoint without its state
            self.live.replay(metrics_records(Path(self.args.output_dir) / METRICS_FILE), start)
        try:
            for note in [self.geometry.note, *unused_options(self.args), *notes]:
                if note:
                    logger.note(note)
            if self._eval_before is None:
                with self.clock("eval_before"):
                    self._eval_before = self.evaluate()  # {} without a held-out split
            with self.clock("steps"):
                while self.global_step < self.max_steps and not self._stopped(logger):
                    self._after_step(logger, self._step())
            with self.clock("eval_after"):
                after = self._last_eval if self._last_eval_step == self.global_step else self.evaluate()
            with self.clock("save"):
                self.save_model()
            skipped = self.no_signal_steps if self.args.skip_no_signal_steps else None
            summary = logger.summary(summary_figures(self._eval_before, after, skipped, self.updates_taken),
                                     unshown=self.clock.figures())
            if self.live is not None:
                self.live.finish()  # output_dir/findings.json
            return summary
        finally:
            logger.close()  # also when a step fails: every logged line is on disk, backends flushed

    def _step(self) -> dict[str, float]:
        """One GRPO step: sample, score and estimate a generation batch when the last one is used up; the loss
        and one optimizer step on its next rows; the collapse monitor on its first step. -> the metrics line"""
        if self._generation is None or self._generation.done:
            self._generation = self._generate()  # sample, score, estimate
        generation, t0 = self._generation, time.perf_counter()
        drawn = generation.drawn if generation.fresh else None  # its first step pays for it and diagnoses it
        update = self._optimize(generation.next_batch())  # loss, backward, optimizer step
        diagnosis = self._diagnose(drawn, update) if drawn is not None and self.args.diagnostics else {}
        seconds = (drawn.seconds if drawn is not None else 0.0) + time.perf_counter() - t0
        return self._end_step(StepMetrics.of(generation, update, diagnosis), seconds)  # metrics from the records

    def _generate(self) -> Generation:
        """Sample B prompts; the sampler has G completions of each drawn and scored (Drawer.draw), as often as it
        needs, and keeps B' groups; the estimator gives each completion its advantage."""
        t0 = time.perf_counter()
        drawer = self._drawer()  # generates with the rollout backend, scores with the reward functions
        examples = self.stream.take(self.geometry.prompts_per_generation)  # B prompts
        selection = self.sampler.sample(examples, drawer.draw, self.stream.take, self.args.num_generations)
        rollout = drawer.gather(selection)  # N = B' * G rows, group after group
        batch = self._train_batch(rollout, selection.rewards)  # advantages to come; the reference's log-probs
        with self.timer("scoring"):  # advantages
            rewards, kl_penalty = self._kl_in_reward(selection.rewards, batch)  # (B', G), less a KL penalty
            estimate = self.estimator(rewards, pool=selection.pool, as_drawn=selection.as_drawn)
        batch.advantages = estimate.advantages.reshape(-1)  # (N,)
        batch.old_logp = self._old_logps(batch)  # the ratio's denominator, when the batch feeds several steps
        figures, drawn = self._measure(drawer, selection, rollout, estimate, kl_penalty, t0)  # data, no metrics
        self.samples_generated += drawn.samples_generated
        self._completions = drawn.completions  # logged on the next logging step
        rows = plan(len(batch), self.args.num_iterations, self.geometry.optimizer_batch)  # per optimizer step
        return Generation(batch, rows, figures, drawer.logged_metrics(), drawn=drawn)

    def _optimize(self, batch: TrainBatch) -> Update:
        """One optimizer step over `batch`: forward, loss and backward per micro-batch, then the update."""
        args, t0 = self.args, time.perf_counter()
        before = self._logps_in_chunks(self.model, batch) if args.measure_update else None  # (n, T)
        self.model.train()
        counts = {"num_tokens": batch.loss_mask.sum(), "num_sequences": len(batch)}  # the loss's normalisers
        figures, finite = UpdateFigures(), True
        for rows in length_buckets(batch, self.geometry.micro_batch, args.num_generations):
            micro = batch.rows(rows)  # its padding columns cut away
            micro_figures, micro_finite = self._micro_step(micro, counts)  # forward, loss, backward
            finite = finite and micro_finite
            figures.add(micro_figures, share=token_share(micro, counts))
        with self.timer("optimizer"):
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), args.max_grad_norm or float("inf"))
            no_signal = self._optimizer_step(grad_norm, finite)  # optimizer.step(), unless no signal or NaN
        effect = self._update_effect(batch, before) if before is not None else {}
        train_tokens = (batch.prompt_mask.sum() + batch.loss_mask.sum()).item()
        return Update(figures, OptimizerFigures(grad_norm.item(), self.bad_steps, no_signal, train_tokens,
                                                time.perf_counter() - t0, logp_change=effect))

    def _diagnose(self, drawn: Drawn, update: Update) -> dict[str, float]:
        """The collapse monitor on a generation, with the entropy (and KL) of the first update it fed: the ACR
        family on the groups as first drawn, acr_post on the advantages that reached the loss."""
        with self.timer("diagnostics"):
            return self.monitor.update(drawn.as_drawn, drawn.advantages, entropy=update.loss.entropy,
                                       kl=update.loss.kl)

    def _end_step(self, step: StepMetrics, seconds: float) -> dict[str, float]:
        """Counts the step and completes its metrics (step_metrics.py): the step's time and phases, and the
        held-out accuracy when it is due."""
        self.global_step += 1
        step.seconds = seconds
        step.phases = self.timer.take()  # the phases of this step (and of its generation, on its first)
        if self.args.eval_steps and self.global_step % self.args.eval_steps == 0:
            step.evaluation = self.evaluate()
        return step.metrics()

    def _stopped(self, logger: Any) -> bool:
        """Whether max_updates, or max_samples before a new generation, stops the run here (said in the log)."""
        args, note = self.args, None
        needs_generation = self._generation is None or self._generation.done
        if args.max_updates is not None and self.updates_taken >= args.max_updates:
            note = (f"max_updates={args.max_updates} reached: stopping at step {self.global_step}, "
                    f"{self.samples_generated} completions generated")
        elif needs_generation and args.max_samples is not None and self.samples_generated >= args.max_samples:
            note = (f"max_samples={args.max_samples} reached ({self.samples_generated} completions generated): "
                    f"stopping at step {self.global_step}")
        if note is not None:
            logger.note(note)
        return note is not None

    def _after_step(self, logger: Any, metrics: dict[str, float]) -> None:
        """Logs the step (and a new generation's completions, on a logging step), tells the live diagnosis and
        the callbacks, stops a run gone unstable, saves a checkpoint when one is due."""
        if self.args.max_samples is not None:
            logger.set_total(self._expected_steps())
        logger.log(self.global_step, metrics)
        if self.live is not None:
            self.live.add(self.global_step, metrics)  # every diagnose_every steps: new findings logged
        if self.global_step % self.args.logging_steps == 0 and self._completions:
            logger.log_completions(self.global_step, self._completions)
            self._completions = []  # once per generation
        for callback in self.callbacks:
            callback.on_step_end(self, metrics)
        stop_if_unstable(self.args, self.bad_steps, self.global_step)  # too many NaN/inf updates
        if self.global_step % self.args.save_steps == 0:
            self.save_checkpoint()

    @property
    def updates_taken(self) -> int:
        """Optimizer updates taken so far: the steps but those skipped without signal or for a NaN/inf."""
        return self.global_step - self.no_signal_steps - self.bad_steps

    def _expected_steps(self) -> int:
        """The step at which max_samples will stop the run, at the pace of samples per step so far (for the
        progress display; at most max_steps)."""
        per_step = self.samples_generated / max(self.global_step, 1)
        assert self.args.max_samples is not None  # asked only with max_samples set
        left = max(self.args.max_samples - self.samples_generated, 0)
        generation = self._generation  # steps it still feeds are paid for already
        pending = 0 if generation is None else len(generation.plan) - generation.taken
        if not per_step:
            return self.max_steps
        return min(self.max_steps, self.global_step + pending + math.ceil(left / per_step))

    def _warn_prompt_cut(self, drawer: Drawer) -> None:
        if drawer.prompts_cut and not self._warned_prompt_cut:
            self._warned_prompt_cut = True  # once a run: prompt/truncated_frac counts every step
            warnings.warn(f"{drawer.prompts_cut} of the {drawer.prompts_drawn} prompts of step "
                          f"{self.global_step + 1} are longer than max_prompt_length={self.args.max_prompt_length} "
                          "tokens and keep only their last tokens (counted in prompt/truncated_frac); raise "
                          "max_prompt_length, or None for no limit", RuntimeWarning, stacklevel=2)

    def _drawer(self) -> Drawer:
        """A generation's draws, at the config's sampling settings; the reward functions see as trainer_state
        the run's progress before it, as TRL's."""
        args = self.args
        state = TrainerState(self.global_step, self.max_steps, self.stream.epoch + self.stream.fraction_done)
        self.model.eval()  # generate() keeps the mode it finds: no dropout (e.g. LoRA's) while sampling
        extra = tuple(sorted((args.generation_kwargs or {}).items()))
        params = SamplingParams(args.max_completion_length, args.temperature, args.top_p, args.top_k, extra=extra)
        if self.rollout_copy is not None:
            with self.timer("generation"):  # the weights the last optimizer step (or a resume) left
                self.rollout_copy.refresh()
        return Drawer(self.rollout_backend, self.scorer, params, self.tokenizer.pad_token_id, self.timer, state)

    def _train_batch(self, rollout: Rollout, rewards: torch.Tensor) -> TrainBatch:
        """The kept rows as the update consumes them (advantages still zero), with the reference policy's
        log-probs, and with kl_in_reward the sampling policy's, which the penalty reads before the advantages.
        rewards (B', G)"""
        loss_mask = rollout.completion_mask.clone()  # (N, T)
        if self.args.mask_truncated_completions:
            loss_mask[rollout.truncated] = 0
        batch = TrainBatch(
            rollout.prompt_ids, rollout.prompt_mask, rollout.completion_ids, loss_mask, torch.zeros(len(loss_mask)),
            rewards=rewards.reshape(-1),
            sampling_logp=rollout.sampling_logp if self.rollout_copy is not None else None,
        )
        with self.timer("logprobs"):
            batch.ref_logp = self._ref_logps(batch)
            if self.args.kl_in_reward:
                batch.old_logp = self._logps_in_chunks(self.model, batch)
        return batch

    def _old_logps(self, batch: TrainBatch) -> torch.Tensor | None:
        """The sampling policy's log-probs, the ratio's denominator for the steps after the first on `batch`
        when it feeds more than one (None: each step's own log-probs, detached, serve)."""
        reused = self.args.num_iterations > 1 or self.geometry.optimizer_steps_per_generation > 1
        if batch.old_logp is None and reused and self._has_gradient(batch):
            with self.timer("logprobs"):
                return self._logps_in_chunks(self.model, batch)
        return batch.old_logp

    def _measure(self, drawer: Drawer, selection: Selection, rollout: Rollout, estimate: AdvantageOutput,
                 kl_penalty: float | None, t0: float) -> tuple[GenerationFigures, Drawn]:
        """What a generation measured of itself, logged on every step it feeds, and what the step that drew it
        reads: the monitor's groups, the completions to log, the samples drawn, the time since `t0`."""
        self._warn_prompt_cut(drawer)
        figures = GenerationFigures.measure(drawer, selection, rollout, estimate, kl_penalty,
                                            self.timer.seconds["generation"])
        completions = drawer.sample_rows(selection, estimate.advantages, self.args.num_completions_to_print) \
            if self.args.log_completions else []
        assert selection.as_drawn is not None  # Selection.__post_init__ fills it
        return figures, Drawn(selection.as_drawn, estimate.advantages, time.perf_counter() - t0,
                              selection.samples_generated, completions)

    def _optimizer_step(self, grad_norm: torch.Tensor, finite: bool) -> bool:
        """optimizer.step() on the clipped gradient, unless it is exactly zero (no micro-batch had signal, or its
        terms cancelled to 0: AdamW would still move every weight along its momentum, docs/algorithms.md) or
        NaN or inf (one NaN would spread into every weight). The schedule goes on with the step count either
        way. Returns whether the step was skipped for no signal."""
        no_signal = self.args.skip_no_signal_steps and finite and grad_norm.item() == 0.0
        if no_signal:
            self.no_signal_steps += 1
        elif finite and torch.isfinite(grad_norm):
            self.optimizer.step()
        else:
            self.bad_steps += 1
        with warnings.catch_warnings():  # torch's warning when no optimizer step has been taken yet
            warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)`")
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return no_signal

    def _update_effect(self, batch: TrainBatch, before: torch.Tensor) -> dict[str, float]:
        """measure_update: how far the update just made moved the log-probs of `batch`, which were `before`
        (n, T) under the weights before it (step_metrics.logp_change)."""
        change = self._logps_in_chunks(self.model, batch) - before  # (n, T)
        return logp_change(change, batch, self.args.num_generations, self.args.success_threshold)

    def _has_gradient(self, batch: TrainBatch) -> bool:
        """Whether the loss on `batch` can have a non-zero gradient (always True with skip_no_signal_steps off,
        so that every pass runs as in stock TRL): a decoupled KL or an entropy term always has one, the policy
        loss only through a non-zero advantage on a row with a real token."""
        args = self.args
        return (not args.skip_no_signal_steps or (args.beta > 0 and not args.kl_in_reward)
                or args.entropy_coef > 0 or losses.carries_signal(batch.advantages, batch.loss_mask))

    def _micro_step(self, micro: TrainBatch, counts: dict[str, Any]) -> tuple[UpdateFigures, bool]:
        """Forward, loss, backward on one micro-batch; returns its figures and whether its loss was finite
        (a NaN or inf loss is not back-propagated). A micro-batch whose loss has no gradient skips the
        backward pass, and runs its forward pass without a graph, only for the entropy and KL it measures."""
        micro = micro.to(next(self.model.parameters()).device)  # the rows come back from the rollout on the CPU
        if not self._has_gradient(micro):
            measured = self.args.diagnostics or micro.ref_logp is not None
            if not measured:
                return UpdateFigures(), True
            with torch.no_grad():
                _, figures = self._forward_and_loss(micro, counts)
            return figures, True
        loss, figures = self._forward_and_loss(micro, counts)
        finite = bool(torch.isfinite(loss))
        if finite:
            with self.timer("backward"):
                loss.backward()
        return figures, finite

    def _forward_and_loss(self, micro: TrainBatch, counts: dict[str, Any]) -> tuple[torch.Tensor, UpdateFigures]:
        """Log-probs (and entropy) of one micro-batch under the current weights, and its loss."""
        args, timer = self.args, self.timer
        with timer("logprobs"):  # the entropy comes with the log-probs (a loss term when entropy_coef > 0)
            logp, entropy = completion_logps(
                self.model, micro, args.temperature, with_entropy=args.diagnostics or args.entropy_coef > 0,
                entropy_grad=args.entropy_coef > 0,
            )  # (n, T), (n, T) or None
            loss, figures = self._loss(micro, logp, entropy, counts)
        if entropy is not None:
            mask = micro.loss_mask.bool()
            figures.entropy = entropy[mask].mean().item() if mask.any() else 0.0
        return loss, figures

    def _loss(self, micro: TrainBatch, logp: torch.Tensor, entropy: torch.Tensor | None, counts: dict[str, Any]
              ) -> tuple[torch.Tensor, UpdateFigures]:
        """The policy loss, plus the KL and entropy terms when they are on."""
        args = self.args
        old = micro.old_logp if micro.old_logp is not None else logp.detach()
        kwargs = {"aggregation": args.aggregation, "max_completion_length": args.max_completion_length, **counts}
        correction: dict[str, float] = {}
        if micro.sampling_logp is not None:  # drawn by the rollout copy: weighted by pi_old / pi_copy
            weights, correction = losses.rollout_importance_weights(
                old, micro.sampling_logp, micro.loss_mask, args.rollout_importance_sampling_mode,
                args.rollout_importance_sampling_clip_max)
            if args.rollout_importance_sampling_correction:
                kwargs["weights"] = weights
        loss, loss_metrics = self.policy_loss(logp, old, micro.advantages, micro.loss_mask, **kwargs)
        kwargs.pop("weights", None)  # the KL and entropy terms are not weighted
        own = {name: value for name, value in loss_metrics.items() if name != "loss/policy"}  # clip/*, gspo/*
        own.update(correction)
        figures = UpdateFigures(policy_loss=loss.item(), loss_figures=own)
        if micro.ref_logp is not None:
            kl, kl_metrics = losses.kl_penalty(logp, micro.ref_logp, micro.loss_mask, args.kl_estimator)
            figures.kl = kl_metrics["kl/mean"]
            if args.beta > 0 and not args.kl_in_reward:  # decoupled KL (DAPO): a loss term
                kl_loss = args.beta * losses.aggregate(kl, micro.loss_mask, **kwargs)
                loss = loss + kl_loss
                figures.kl_loss = kl_loss.item()
        if args.entropy_coef > 0:
            assert entropy is not None  # computed whenever entropy_coef > 0
            loss = loss - args.entropy_coef * losses.aggregate(entropy, micro.loss_mask, **kwargs)
        return loss, figures

    def _kl_in_reward(self, rewards: torch.Tensor, batch: TrainBatch) -> tuple[torch.Tensor, float | None]:
        """With kl_in_reward (kept for comparison with decoupled KL): r - beta * each completion's summed KL to
        the reference, under the sampling policy.  rewards (B', G) -> (B', G), and the mean penalty (None: off)"""
        if not self.args.kl_in_reward:
            return rewards, None
        assert batch.old_logp is not None and batch.ref_logp is not None  # _train_batch: kl_in_reward, beta > 0
        kl, _ = losses.kl_penalty(batch.old_logp, batch.ref_logp, batch.loss_mask, self.args.kl_estimator)  # (N, T)
        penalty = self.args.beta * kl.sum(dim=1).view_as(rewards)  # (B', G)
        return rewards - penalty, penalty.mean().item()

    @torch.no_grad()
    def _ref_logps(self, batch: TrainBatch) -> torch.Tensor | None:
        """Log-probs under the reference policy (for the KL term, the KL in the reward, and `kl/mean`)."""
        if self.ref_model is None:
            return None
        with self.ref_model() as reference:
            return self._logps_in_chunks(reference, batch)

    def _logps_in_chunks(self, model, batch: TrainBatch) -> torch.Tensor:
        self.model.eval()
        return logps_in_chunks(model, batch, self.geometry.micro_batch, self.args.temperature)  # (n, T)

    # --- evaluation, saving and resuming ------------------------------------------------------------------

    def evaluate(self) -> dict[str, float]:
        """Greedy pass@1 on the held-out split: `eval/accuracy` (and per level when examples carry one)."""
        self._last_eval, self._last_eval_step = evaluate(self, self.eval_examples), self.global_step
        self.monitor.evaluated(self._last_eval.get("eval/accuracy"))
        if self.live is not None and self.global_step == 0:  # the rest reach it with their step's metrics
            self.live.eval_before = self._last_eval.get("eval/accuracy")
        return self._last_eval

    def save_model(self, subdir: str = "model") -> str:
        """The model and tokenizer as a Hugging Face folder (safetensors), written atomically."""
        path = Path(self.args.output_dir) / subdir
        checkpoint.save_final_model(path, self.model, self.tokenizer)  # DiskFullError when it does not fit
        return str(path)

    def save_checkpoint(self) -> Path:
        """Everything needed to continue the run, in output_dir/checkpoint-<global_step> (see checkpoint.py)."""
        info = {
            "global_step": self.global_step,
            "max_steps": self.max_steps,
            "metrics_offset": run_start.metrics_bytes(self.args.output_dir),
            "data_fingerprint": checkpoint.fingerprint(self.stream.examples),
            "config": self.args.to_dict(),
        }
        return checkpoint.save_checkpoint(
            self.args.output_dir, self.global_step, model=self.model, tokenizer=self.tokenizer,
            optimizer=self.optimizer, scheduler=self.scheduler, state=self.state_dict(), info=info,
            save_total_limit=self.args.save_total_limit,
        )

    def state_dict(self) -> dict[str, Any]:
        """The run's progress besides weights, optimizer and scheduler (and RNGs, which checkpoint.py adds)."""
        generation = self._generation
        return {
            "global_step": self.global_step,
            "bad_steps": self.bad_steps,
            "no_signal_steps": self.no_signal_steps,
            "samples_generated": self.samples_generated,
            "stream": self.stream.state_dict(),
            **component_state(estimator=self.estimator, sampler=self.sampler, monitor=self.monitor),
            "generation": None if generation is None or generation.done else generation.state_dict(),
            "eval_before": self._eval_before,
            "live": None if self.live is None else self.live.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.global_step, self.bad_steps = int(state["global_step"]), int(state["bad_steps"])
        self.samples_generated = int(state.get("samples_generated", 0))  # checkpoints before max_samples: 0
        self.no_signal_steps = int(state.get("no_signal_steps", 0))  # checkpoints before the skip: 0
        self.stream.load_state_dict(state["stream"])
        load_component_state(state, estimator=self.estimator, sampler=self.sampler, monitor=self.monitor)
        generation = state["generation"]
        self._generation = None if generation is None else Generation.from_state(generation)
        self._completions = []
        self._eval_before = state["eval_before"]
        if self.live is not None and state.get("live") is not None:  # checkpoints before diagnose_every: None
            self.live.load_state_dict(state["live"])
