"""GRPOTrainer: grposcope's one-machine trainer.

One step, top to bottom (`_generate` then `_optimize`):
    sample prompts -> generate G completions each -> score -> advantages -> loss and update -> diagnose -> log
Setup lives in `setup.py`, evaluation in `evaluation.py`; this file is the loop.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from typing import Any

import torch

from ..core import losses
from ..core.diagnostics import CollapseMonitor
from ..rollout import SamplingParams
from .config import GRPOConfig
from .evaluation import evaluate
from .geometry import total_steps
from .phases import PhaseTimer
from .policy import TrainBatch, completion_logps
from .scoring import scoring_inputs
from .setup import build_run


@dataclass
class Generation:
    """One generation batch, scored, with its advantages: what the optimizer steps of this batch consume."""

    batch: TrainBatch
    metrics: dict[str, float]
    seconds: float  # generating and scoring it: charged to the first optimizer step it feeds

    def optimizer_batches(self, iterations: int, size: int):
        """The optimizer steps this generation feeds: `iterations` passes over it, `size` completions each."""
        for _ in range(iterations):
            for rows in _optimizer_batches(len(self.batch), size):
                yield self.batch.rows(rows)


class GRPOTrainer:
    """Trains `model` with GRPO and grposcope's collapse diagnostics and mitigations.

    Same arguments as TRL's GRPOTrainer: `model` is a model object or a name/path (default: the config's
    `model_name_or_path`); `reward_funcs` a function, a registered name, or a list of them (TRL's signature
    `f(prompts, completions, **columns) -> list[float | None]`); datasets are HF Datasets or lists of dicts
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
        run = build_run(self.args, model, reward_funcs, train_dataset, eval_dataset, processing_class)
        self.model, self.tokenizer, self.ref_model = run.model, run.tokenizer, run.ref_model
        self.geometry, self.stream, self.eval_examples = run.geometry, run.stream, run.eval_examples
        self.scorer, self.estimator, self.rollout = run.scorer, run.estimator, run.rollout
        self.optimizer, self.scheduler, self.logger_factory = run.optimizer, run.scheduler, run.logger_factory
        self.monitor = CollapseMonitor(success_threshold=self.args.success_threshold, kl_bound=self.args.kl_bound)
        self.max_steps = total_steps(self.args, self.geometry, len(run.train_examples))
        self.global_step = 0
        self.timer = PhaseTimer()
        self._pending: tuple[torch.Tensor, torch.Tensor] | None = None  # a generation not yet diagnosed
        self._last_eval: dict[str, float] = {}  # the latest evaluation, reused as "after" when it is current
        self._last_eval_step = -1

    # --- the loop ---------------------------------------------------------------------------------------

    def train(self) -> dict[str, Any]:
        """Runs max_steps optimizer steps; returns the run summary (also in output_dir/summary.json)."""
        logger = self.logger_factory(self.max_steps)
        if self.geometry.note:
            logger.note(self.geometry.note)
        before = self.evaluate()  # {} without a held-out split
        while self.global_step < self.max_steps:
            generation = self._generate()
            for batch in generation.optimizer_batches(self.args.num_iterations, self.geometry.optimizer_batch):
                if self.global_step >= self.max_steps:
                    break
                metrics = self._step(generation, batch)  # advances global_step
                logger.log(self.global_step, metrics)
                for callback in self.callbacks:
                    callback.on_step_end(self, metrics)
                if self.global_step % self.args.save_steps == 0:
                    self.save_model(f"checkpoint-{self.global_step}")
        after = self._last_eval if self._last_eval_step == self.global_step else self.evaluate()
        self.save_model()
        extra = {f"{k} before": v for k, v in before.items()} | {f"{k} after": v for k, v in after.items()}
        summary = logger.summary(extra)
        logger.close()
        return summary

    def _step(self, generation: Generation, batch: TrainBatch) -> dict[str, float]:
        """One optimizer step on a part of `generation`; returns the step's metrics."""
        t0 = time.perf_counter()
        metrics = {**generation.metrics, **self._optimize(batch)}
        self.global_step += 1
        metrics["perf/step_s"] = generation.seconds + time.perf_counter() - t0
        metrics.update(self.timer.take())  # the phases of this step (and of its generation, on its first)
        generation.seconds = 0.0
        if self.args.eval_steps and self.global_step % self.args.eval_steps == 0:
            metrics.update(self.evaluate())
        return metrics

    def _generate(self) -> Generation:
        """Sample prompts, generate, score, compute advantages and the collapse diagnostics."""
        t0, timer = time.perf_counter(), self.timer
        args, g = self.args, self.args.num_generations
        examples = self.stream.take(self.geometry.prompts_per_generation)  # B prompts
        self.model.eval()  # generate() keeps the mode it finds: no dropout (e.g. LoRA's) while sampling
        extra = tuple(sorted((args.generation_kwargs or {}).items()))
        params = SamplingParams(args.max_completion_length, args.temperature, args.top_p, args.top_k, extra=extra)
        with timer("generation"):
            rollout = self.rollout.generate([e["prompt_text"] for e in examples], g, params)  # N = B * G rows
        t_gen = time.perf_counter() - t0
        with timer("scoring"):  # rewards and advantages
            scored = self.scorer.score(*scoring_inputs(examples, rollout.texts, g, rollout.completion_ids))
            rewards = scored.rewards.view(-1, g)  # (B, G)
            est = self.estimator(rewards)
        loss_mask = rollout.completion_mask.clone()  # (N, T)
        if args.mask_truncated_completions:
            loss_mask[rollout.truncated] = 0
        batch = TrainBatch(
            rollout.prompt_ids, rollout.prompt_mask, rollout.completion_ids, loss_mask, est.advantages.reshape(-1)
        )
        with timer("logprobs"):
            batch.old_logp, batch.ref_logp = self._old_and_ref_logps(batch)
        lengths = rollout.lengths.float()
        metrics = {
            **scored.metrics,
            **est.metrics,
            "reward/mean": rewards.mean().item(),
            "reward/std": rewards.std().item() if rewards.numel() > 1 else 0.0,
            "completion/mean_length": lengths.mean().item(),
            "completion/truncated_frac": rollout.truncated.float().mean().item(),
            "sampler/samples_generated": float(rollout.completion_ids.shape[0]),
            "sampler/tokens_generated": lengths.sum().item(),
            "sampler/samples_kept": float(rollout.completion_ids.shape[0]),
            "sampler/rounds_mean": 1.0,
            "sampler/prompts_dropped": 0.0,
            "perf/gen_tokens_per_s": lengths.sum().item() / max(t_gen, 1e-9),
        }
        self._pending = (rewards, est.advantages)  # diagnosed after the first update, with its entropy
        return Generation(batch, metrics, time.perf_counter() - t0)

    def _optimize(self, batch: TrainBatch) -> dict[str, float]:
        """One optimizer step over `batch` in micro-batches; then the collapse monitor's update."""
        args, t0, timer = self.args, time.perf_counter(), self.timer
        self.model.train()
        counts = {"num_tokens": batch.loss_mask.sum(), "num_sequences": len(batch)}
        metrics: dict[str, float] = {}
        for rows in _length_buckets(batch, self.geometry.micro_batch, self.args.num_generations):
            micro = batch.rows(rows)  # its padding columns cut away
            for name, value in self._micro_step(micro, counts).items():
                # loss shares are already normalised by the whole batch: they add up; the rest is averaged
                weight = 1.0 if name in _ADDITIVE else len(micro) / len(batch)
                metrics[name] = metrics.get(name, 0.0) + value * weight
        with timer("optimizer"):
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), args.max_grad_norm or float("inf"))
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
        train_tokens = (batch.prompt_mask.sum() + batch.loss_mask.sum()).item()
        metrics["grad_norm"] = grad_norm.item()
        metrics["perf/train_tokens"] = train_tokens
        metrics["perf/train_tokens_per_s"] = train_tokens / (time.perf_counter() - t0)
        if self._pending is not None and args.diagnostics:  # a generation's first step diagnoses it
            rewards, adv = self._pending
            with timer("diagnostics"):
                metrics.update(
                    self.monitor.update(rewards, adv, entropy=metrics["entropy/mean"], kl=metrics.get("kl/mean"))
                )
            metrics["sampler/informative_frac"] = 1.0 - metrics["collapse/acr_post"]
        self._pending = None
        return metrics

    def _micro_step(self, micro: TrainBatch, counts: dict[str, Any]) -> dict[str, float]:
        """Forward, loss, backward on one micro-batch; returns its metrics."""
        args, timer = self.args, self.timer
        with timer("logprobs"):  # the entropy comes with the log-probs (a loss term when entropy_coef > 0)
            logp, entropy = completion_logps(
                self.model, micro, args.temperature, with_entropy=args.diagnostics or args.entropy_coef > 0,
                entropy_grad=args.entropy_coef > 0,
            )  # (n, T), (n, T) or None
            loss, metrics = self._loss(micro, logp, entropy, counts)
        with timer("backward"):
            loss.backward()
        if entropy is not None:
            mask = micro.loss_mask.bool()
            metrics["entropy/mean"] = entropy[mask].mean().item() if mask.any() else 0.0
        return metrics

    def _loss(self, micro: TrainBatch, logp: torch.Tensor, entropy: torch.Tensor | None, counts: dict[str, Any]):
        """The policy loss, plus the KL and entropy terms when they are on; (loss, metrics)."""
        args = self.args
        old = micro.old_logp if micro.old_logp is not None else logp.detach()
        kwargs = {"aggregation": args.aggregation, "max_completion_length": args.max_completion_length, **counts}
        loss, metrics = losses.policy_loss(
            logp, old, micro.advantages, micro.loss_mask, args.epsilon, args.epsilon_high,
            dual_clip=args.dual_clip, **kwargs,
        )
        if micro.ref_logp is not None:
            kl, kl_metrics = losses.kl_penalty(logp, micro.ref_logp, micro.loss_mask, args.kl_estimator)
            metrics.update(kl_metrics)
            if args.beta > 0:
                kl_loss = args.beta * losses.aggregate(kl, micro.loss_mask, **kwargs)
                loss = loss + kl_loss
                metrics["loss/kl"] = kl_loss.item()
        if args.entropy_coef > 0:
            loss = loss - args.entropy_coef * losses.aggregate(entropy, micro.loss_mask, **kwargs)
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"non-finite loss at step {self.global_step + 1}: lower learning_rate or check the rewards"
            )
        return loss, metrics

    @torch.no_grad()
    def _old_and_ref_logps(self, batch: TrainBatch) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Log-probs under the sampling policy (only needed when a batch is reused) and the reference."""
        reuse = self.args.num_iterations > 1 or self.geometry.optimizer_steps_per_generation > 1
        old = self._logps_in_chunks(self.model, batch) if reuse else None
        ref = None
        if self.ref_model is not None:
            with self.ref_model() as reference:
                ref = self._logps_in_chunks(reference, batch)
        return old, ref

    def _logps_in_chunks(self, model, batch: TrainBatch) -> torch.Tensor:
        self.model.eval()
        t = batch.completion_ids.shape[1]
        out = torch.zeros(len(batch), t)
        for rows in _optimizer_batches(len(batch), self.geometry.micro_batch):
            micro = batch.rows(rows)
            logp, _ = completion_logps(model, micro, self.args.temperature, with_entropy=False)
            out[rows, : logp.shape[1]] = logp.float().cpu()
        return out

    # --- evaluation and saving ------------------------------------------------------------------------------

    def evaluate(self) -> dict[str, float]:
        """Greedy pass@1 on the held-out split: `eval/accuracy` (and per level when examples carry one)."""
        self._last_eval, self._last_eval_step = evaluate(self, self.eval_examples), self.global_step
        return self._last_eval

    def save_model(self, subdir: str = "model") -> str:
        path = f"{self.args.output_dir}/{subdir}"
        self.model.save_pretrained(path, safe_serialization=True)
        self.tokenizer.save_pretrained(path)
        return path


_ADDITIVE = ("loss/policy", "loss/kl")


def _check_callbacks(callbacks: list[Any]) -> list[Any]:
    for callback in callbacks:
        hook = getattr(callback, "on_step_end", None)
        if hook is None or "control" in inspect.signature(hook).parameters:
            raise TypeError(
                f"{type(callback).__name__} is not a grposcope callback: give it a method "
                "on_step_end(trainer, metrics) (TRL's TrainerCallback takes other arguments)"
            )
    return list(callbacks)


def _length_buckets(batch: TrainBatch, size: int, group: int) -> list[torch.Tensor]:
    """Micro-batches of `size` rows that hold completions of similar length, so that little padding is
    computed: groups ordered by their longest completion, rows within a group by length. Groups stay
    together (when size >= group), so that a micro-batch can share each prompt's forward pass.
    The loss is a sum over rows normalised by whole-batch counts: the order changes only rounding."""
    lengths = batch.loss_mask.sum(dim=1)  # (n,)
    n = len(batch)
    if n % group:
        return _optimizer_batches(n, size)
    by_group = lengths.view(-1, group)  # (n / group, group)
    within = by_group.argsort(dim=1, stable=True)  # (n / group, group)
    groups = by_group.amax(dim=1).argsort(stable=True)  # (n / group,)
    order = (groups.unsqueeze(1) * group + within[groups]).reshape(-1)  # (n,)
    return list(order.split(size))


def _optimizer_batches(n: int, size: int) -> list[torch.Tensor]:
    return list(torch.arange(n).split(size))
