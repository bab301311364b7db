"""GRPOTrainer: grposcope's one-machine trainer.

One step, top to bottom (`_generate` then `_optimize`):
    sample prompts -> generate G completions each -> score -> advantages -> loss and update -> diagnose -> log
Setup lives in `setup.py`, evaluation in `evaluation.py`, checkpoint files in `checkpoint.py`; this file is
the loop and what a checkpoint holds of it (`state_dict`).
"""

from __future__ import annotations

import inspect
import math
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from ..components.state import component_state, load_component_state
from ..core import losses
from ..core.diagnostics import CollapseMonitor, alarm_window
from ..diagnose.engine import Options
from ..diagnose.live import LiveDiagnosis, metrics_records
from ..errors import InputTypeError, NonFiniteError
from ..files import check_writable
from ..logging.backends import METRICS_FILE
from ..rollout import SamplingParams
from . import checkpoint, resume_checks
from .config import GRPOConfig
from .drawer import Drawer, TrainerState
from .evaluation import evaluate
from .folder_lock import FolderLock
from .generation import Generation, UpdateFigures, length_buckets, optimizer_batches
from .geometry import total_steps
from .options import unused_options
from .phases import PhaseTimer, RunClock
from .policy import TrainBatch, completion_logps
from .setup import build_run, check_output_dir
from .step_metrics import GenerationFigures, OptimizerFigures, StepMetrics, summary_figures


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
        self.callbacks = _check_callbacks(callbacks or [])
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
        start, notes = self._resume(resume) if resume else self._start()
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
                while self.global_step < self.max_steps:
                    if self.args.max_updates is not None and self.updates_taken >= self.args.max_updates:
                        logger.note(f"max_updates={self.args.max_updates} reached: stopping at step "
                                    f"{self.global_step}, {self.samples_generated} completions generated")
                        break
                    if self._generation is None or self._generation.done:
                        if self._budget_spent():
                            logger.note(f"max_samples={self.args.max_samples} reached ({self.samples_generated} "
                                        f"completions generated): stopping at step {self.global_step}")
                            break
                        self._generation = self._generate()  # sample, draw and score, advantages
                        self.samples_generated += self._generation.samples_generated
                    generation, t0 = self._generation, time.perf_counter()
                    fresh = generation.fresh  # its first optimizer step pays for it and diagnoses it
                    update, optimizer = self._optimize(generation.next_batch())
                    diagnosis = self._diagnose(generation, update) if fresh and self.args.diagnostics else {}
                    step = StepMetrics(generation.metrics, update, optimizer, diagnosis, generation.logged)
                    seconds = (generation.seconds if fresh else 0.0) + time.perf_counter() - t0
                    metrics = self._end_step(step, seconds)  # advances global_step
                    if self.args.max_samples is not None:
                        logger.set_total(self._expected_steps())
                    logger.log(self.global_step, metrics)
                    if self.live is not None:
                        self.live.add(self.global_step, metrics)  # every diagnose_every steps: new findings logged
                    if self.global_step % self.args.logging_steps == 0 and self._generation.sample:
                        logger.log_completions(self.global_step, self._generation.sample)
                        self._generation.sample = []  # once per generation
                    for callback in self.callbacks:
                        callback.on_step_end(self, metrics)
                    self._stop_if_unstable()
                    if self.global_step % self.args.save_steps == 0:
                        self.save_checkpoint()
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

    @property
    def updates_taken(self) -> int:
        """Optimizer updates taken so far: the steps but those skipped without signal or for a NaN/inf."""
        return self.global_step - self.no_signal_steps - self.bad_steps

    def _expected_steps(self) -> int:
        """The step at which max_samples will stop the run, at the pace of samples per step so far (for the
        progress display; at most max_steps)."""
        per_step = self.samples_generated / max(self.global_step, 1)
        left = max(self.args.max_samples - self.samples_generated, 0)
        generation = self._generation  # steps it still feeds are paid for already
        pending = 0 if generation is None else len(generation.plan) - generation.taken
        if not per_step:
            return self.max_steps
        return min(self.max_steps, self.global_step + pending + math.ceil(left / per_step))

    def _budget_spent(self) -> bool:
        return self.args.max_samples is not None and self.samples_generated >= self.args.max_samples

    def _end_step(self, step: StepMetrics, seconds: float) -> dict[str, float]:
        """Counts the step and completes its metrics (step_metrics.py): the step's time and phases, and the
        held-out accuracy when it is due."""
        self.global_step += 1
        step.seconds = seconds
        step.phases = self.timer.take()  # the phases of this step (and of its generation, on its first)
        if self.args.eval_steps and self.global_step % self.args.eval_steps == 0:
            step.evaluation = self.evaluate()
        return step.metrics()

    def _generate(self) -> Generation:
        """Sample prompts; the sampler draws (generates and scores) and keeps groups; advantages."""
        t0, timer = time.perf_counter(), self.timer
        args, g = self.args, self.args.num_generations
        # what reward functions see as trainer_state: the progress before this batch, as TRL's
        state = TrainerState(self.global_step, self.max_steps, self.stream.epoch + self.stream.fraction_done)
        examples = self.stream.take(self.geometry.prompts_per_generation)  # B prompts
        self.model.eval()  # generate() keeps the mode it finds: no dropout (e.g. LoRA's) while sampling
        extra = tuple(sorted((args.generation_kwargs or {}).items()))
        params = SamplingParams(args.max_completion_length, args.temperature, args.top_p, args.top_k, extra=extra)
        if self.rollout_copy is not None:
            with timer("generation"):  # the weights the last optimizer step (or a resume) left
                self.rollout_copy.refresh()
        drawer = Drawer(self.rollout_backend, self.scorer, params, self.tokenizer.pad_token_id, timer, state)
        selection = self.sampler.sample(examples, drawer.draw, self.stream.take, g)  # B' groups of G
        rollout = drawer.gather(selection)  # N = B' * G rows, group after group
        loss_mask = rollout.completion_mask.clone()  # (N, T)
        if args.mask_truncated_completions:
            loss_mask[rollout.truncated] = 0
        batch = TrainBatch(  # its advantages come below
            rollout.prompt_ids, rollout.prompt_mask, rollout.completion_ids, loss_mask, torch.zeros(len(loss_mask)),
            rewards=selection.rewards.reshape(-1),
            sampling_logp=rollout.sampling_logp if self.rollout_copy is not None else None,
        )
        with timer("logprobs"):
            batch.ref_logp = self._ref_logps(batch)
            if args.kl_in_reward:  # the penalty reads the sampling policy's log-probs before the advantages
                batch.old_logp = self._logps_in_chunks(self.model, batch)
        with timer("scoring"):  # advantages
            rewards = selection.rewards  # (B', G)
            trained, kl_penalty = self._kl_in_reward(rewards, batch)  # rewards, unless kl_in_reward
            estimate = self.estimator(trained, pool=selection.pool, as_drawn=selection.as_drawn)
        batch.advantages = estimate.advantages.reshape(-1)  # (N,)
        if batch.old_logp is None and self._reuses_batch() and self._has_gradient(batch):
            with timer("logprobs"):  # the ratio's denominator, for the steps after the first on this batch
                batch.old_logp = self._logps_in_chunks(self.model, batch)
        self._warn_prompt_cut(drawer)
        figures = GenerationFigures.measure(drawer, selection, rollout, estimate, kl_penalty,
                                            self.timer.seconds["generation"])
        sample = drawer.sample_rows(selection, estimate.advantages, args.num_completions_to_print) \
            if args.log_completions else []
        return Generation.planned(batch, figures.metrics(), time.perf_counter() - t0, args.num_iterations,
                                  self.geometry.optimizer_batch, logged=drawer.logged_metrics(), sample=sample,
                                  as_drawn=selection.as_drawn, advantages=estimate.advantages,
                                  samples_generated=selection.samples_generated)

    def _warn_prompt_cut(self, drawer: Drawer) -> None:
        if drawer.prompts_cut and not self._warned_prompt_cut:
            self._warned_prompt_cut = True  # once a run: prompt/truncated_frac counts every step
            warnings.warn(f"{drawer.prompts_cut} of the {drawer.prompts_drawn} prompts of step "
                          f"{self.global_step + 1} are longer than max_prompt_length={self.args.max_prompt_length} "
                          "tokens and keep only their last tokens (counted in prompt/truncated_frac); raise "
                          "max_prompt_length, or None for no limit", RuntimeWarning, stacklevel=2)

    def _optimize(self, batch: TrainBatch) -> tuple[UpdateFigures, OptimizerFigures]:
        """One optimizer step over `batch` in micro-batches: what its micro-batches measured (the monitor reads
        their entropy and KL), and what the optimizer step did."""
        args, t0, timer = self.args, time.perf_counter(), self.timer
        before = self._logps_in_chunks(self.model, batch) if args.measure_update else None  # (n, T)
        self.model.train()
        counts = {"num_tokens": batch.loss_mask.sum(), "num_sequences": len(batch)}
        total_tokens = float(counts["num_tokens"])
        figures, finite = UpdateFigures(), True
        for rows in length_buckets(batch, self.geometry.micro_batch, self.args.num_generations):
            micro = batch.rows(rows)  # its padding columns cut away
            micro_figures, micro_finite = self._micro_step(micro, counts)
            finite = finite and micro_finite
            # (micro-batches are grouped by length, so weighting them by rows would over-count short ones;
            # one whose tokens are all masked adds nothing)
            figures.add(micro_figures, share=float(micro.loss_mask.sum()) / total_tokens if total_tokens else 0.0)
        with timer("optimizer"):
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), args.max_grad_norm or float("inf"))
            # an exactly-zero gradient (no micro-batch had signal, or its terms cancelled to 0): AdamW would
            # still move every weight along its momentum, so no step at all (docs/algorithms.md)
            no_signal = args.skip_no_signal_steps and finite and grad_norm.item() == 0.0
            if no_signal:
                self.no_signal_steps += 1
            elif finite and torch.isfinite(grad_norm):
                self.optimizer.step()
            else:  # skipped: one NaN would spread into every weight; the schedule goes on with the step count
                self.bad_steps += 1
            with warnings.catch_warnings():  # torch's warning when no optimizer step has been taken yet
                warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)`")
                self.scheduler.step()  # either way: the learning rate follows the run's step count
            self.optimizer.zero_grad(set_to_none=True)
        effect = self._update_effect(batch, before) if before is not None else {}
        train_tokens = (batch.prompt_mask.sum() + batch.loss_mask.sum()).item()
        return figures, OptimizerFigures(grad_norm.item(), self.bad_steps, no_signal, train_tokens,
                                         time.perf_counter() - t0, logp_change=effect)

    def _diagnose(self, generation: Generation, figures: UpdateFigures) -> dict[str, float]:
        """The collapse monitor on a generation, with the entropy (and KL) of the first update it fed: the ACR
        family on the groups as first drawn, acr_post on the advantages that reached the loss."""
        with self.timer("diagnostics"):
            return self.monitor.update(generation.as_drawn, generation.advantages, entropy=figures.entropy,
                                       kl=figures.kl)

    @torch.no_grad()
    def _update_effect(self, batch: TrainBatch, before: torch.Tensor) -> dict[str, float]:
        """How far the update just made moved the log-probs of the completions it trained on: the mean change
        per completion token, over the rows of all-wrong groups and over the others (measure_update).
        before (n, T), under the weights before the update."""
        change = self._logps_in_chunks(self.model, batch) - before  # (n, T)
        g = self.args.num_generations
        all_wrong = (batch.rewards.view(-1, g) < self.args.success_threshold).all(dim=1).repeat_interleave(g)  # (n,)
        real = batch.loss_mask.bool()  # (n, T)
        out = {}
        for name, rows in (("all_wrong", all_wrong), ("other", ~all_wrong)):
            tokens = real & rows.unsqueeze(1)  # (n, T)
            if tokens.any():
                out[f"update/logp_change_{name}"] = change[tokens].mean().item()
        return out

    def _has_gradient(self, batch: TrainBatch) -> bool:
        """Whether the loss on `batch` can have a non-zero gradient (always True with skip_no_signal_steps off,
        so that every pass runs as in stock TRL): a decoupled KL or an entropy term always has one, the policy
        loss only through a non-zero advantage on a row with a real token."""
        args = self.args
        return (not args.skip_no_signal_steps or (args.beta > 0 and not args.kl_in_reward)
                or args.entropy_coef > 0 or losses.carries_signal(batch.advantages, batch.loss_mask))

    def _reuses_batch(self) -> bool:
        """A generation feeds more than one optimizer step: the later ones need the sampling log-probs."""
        return self.args.num_iterations > 1 or self.geometry.optimizer_steps_per_generation > 1

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
        correction = {}
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
            loss = loss - args.entropy_coef * losses.aggregate(entropy, micro.loss_mask, **kwargs)
        return loss, figures

    def _kl_in_reward(self, rewards: torch.Tensor, batch: TrainBatch) -> tuple[torch.Tensor, float | None]:
        """With kl_in_reward (kept for comparison with decoupled KL): r - beta * each completion's summed KL to
        the reference, under the sampling policy.  rewards (B', G) -> (B', G), and the mean penalty (None: off)"""
        if not self.args.kl_in_reward:
            return rewards, None
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

    @torch.no_grad()
    def _logps_in_chunks(self, model, batch: TrainBatch) -> torch.Tensor:
        self.model.eval()
        t = batch.completion_ids.shape[1]
        out = torch.zeros(len(batch), t)
        for rows in optimizer_batches(len(batch), self.geometry.micro_batch):
            micro = batch.rows(rows)
            logp, _ = completion_logps(model, micro, self.args.temperature, with_entropy=False)
            out[rows, : logp.shape[1]] = logp.float().cpu()
        return out

    def _stop_if_unstable(self) -> None:
        """Stops the run once more than max_bad_steps updates were skipped for a NaN or inf."""
        if self.bad_steps <= self.args.max_bad_steps:
            return
        last = checkpoint.latest_checkpoint(self.args.output_dir)
        then = f"then resume from {last} (--resume)" if last is not None else "then start the run again"
        raise NonFiniteError(
            f"{self.bad_steps} updates were skipped because the loss or the gradient was NaN or inf "
            f"(max_bad_steps={self.args.max_bad_steps}, now at step {self.global_step}); the skipped updates "
            "left the weights unchanged. Lower learning_rate, set max_grad_norm, or check the reward "
            f"functions for huge values; {then}"
        )

    # --- evaluation, saving and resuming ------------------------------------------------------------------

    def evaluate(self) -> dict[str, float]:
        """Greedy pass@1 on the held-out split: `eval/accuracy` (and per level when examples carry one)."""
        self._last_eval, self._last_eval_step = evaluate(self, self.eval_examples), self.global_step
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
            "metrics_offset": self._metrics_bytes(),
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
        self._eval_before = state["eval_before"]
        if self.live is not None and state.get("live") is not None:  # checkpoints before diagnose_every: None
            self.live.load_state_dict(state["live"])

    def _metrics_bytes(self) -> int:
        """The size of metrics.jsonl: a checkpoint records it, a resume checks that nothing went missing."""
        path = Path(self.args.output_dir) / METRICS_FILE
        return path.stat().st_size if path.is_file() else 0

    def _start(self) -> tuple[int, list[str]]:
        """A new run: output_dir must not hold another run's metrics (unless overwrite_output_dir)."""
        notes = check_output_dir(self.args)
        return 0, notes + _leftovers(checkpoint.remove_unfinished(self.args.output_dir))

    def _resume(self, spec: str | bool) -> tuple[int, list[str]]:
        """Loads the checkpoint `spec` names into this trainer; returns its step and what to tell the user."""
        notes = _leftovers(checkpoint.remove_unfinished(self.args.output_dir))  # a run killed while saving
        folder = checkpoint.resolve(spec, self.args.output_dir)
        info = resume_checks.checked_info(folder, self.model, self.max_steps, self.args)  # fits, or raises
        notes += checkpoint.check_resumable(info, self.args.to_dict(), checkpoint.fingerprint(self.stream.examples))
        if self._metrics_bytes() < info["metrics_offset"]:
            notes.append(f"{METRICS_FILE} is shorter than when {folder.name} was written: lines of the steps "
                         "before it are missing from it")
        state = checkpoint.load_checkpoint(folder, model=self.model, optimizer=self.optimizer,
                                           scheduler=self.scheduler)
        self.load_state_dict(state)
        return self.global_step, notes + [f"resumed from {folder} at step {self.global_step} of {self.max_steps}"]


def _leftovers(names: list[str]) -> list[str]:
    return [f"removed {name}: an unfinished checkpoint of a run killed while saving" for name in names]


def live_diagnosis(args: GRPOConfig, max_steps: int) -> LiveDiagnosis | None:
    """The live diagnosis of a run (None with diagnose_every=0), told what the config knows and a log does not."""
    if not args.diagnose_every:
        return None
    options = Options(kl_bound=args.kl_bound, success_threshold=args.success_threshold,
                      num_generations=args.num_generations, max_completion_length=args.max_completion_length,
                      max_steps=max_steps)
    name = args.run_name or Path(args.output_dir).name
    settings = {k: getattr(args, k) for k in ("use_avspo", "skip_no_signal_steps", "sampler", "epsilon_high",
                                               "mask_truncated_completions", "advantage_estimator")}
    return LiveDiagnosis(name, options, every=args.diagnose_every, output_dir=args.output_dir, settings=settings)


def _check_callbacks(callbacks: list[Any]) -> list[Any]:
    for callback in callbacks:
        hook = getattr(callback, "on_step_end", None)
        if hook is None or "control" in inspect.signature(hook).parameters:
            raise InputTypeError(
                f"{type(callback).__name__} is not a grposcope callback: give it a method "
                "on_step_end(trainer, metrics) (TRL's TrainerCallback takes other arguments)"
            )
    return list(callbacks)

