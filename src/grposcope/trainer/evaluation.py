"""Held-out accuracy during training: greedy pass@1 on the eval split, by `grposcope.evaluation`."""

from __future__ import annotations

from typing import Any

from ..evaluation import EvalSettings
from ..evaluation import evaluate as run_evaluation

EVAL_BATCH = 32  # prompts generated at once; bounds memory, not results


def evaluate(trainer: Any, examples: list[dict]) -> dict[str, float]:
    """`eval/accuracy`: fraction of held-out prompts whose greedy completion scores >= success_threshold
    (the weighted reward of the run's reward functions); `eval/accuracy/<level>` per difficulty level. With
    eval_num_samples = k > 0 also `eval/avg@k` and `eval/pass@j`. On the first eval_limit prompts, if set."""
    examples = examples[: trainer.args.eval_limit] if trainer.args.eval_limit else examples
    if not examples:
        return {}
    args = trainer.args
    trainer.model.eval()  # generate() keeps the mode it finds: no dropout while evaluating
    # Sampling (eval_num_samples > 0) runs under a forked RNG (evaluation.evaluate): the training run's random
    # state is left as it was, so a run draws the same completions with or without sampled evaluations.
    settings = EvalSettings(
        max_completion_length=args.max_completion_length,
        num_samples=args.eval_num_samples,
        temperature=args.temperature,
        top_p=args.top_p,
        success_threshold=args.success_threshold,
        batch_size=EVAL_BATCH,
        seed=args.seed,
    )
    return run_evaluation(examples, trainer.backend, trainer.scorer, settings).metrics
