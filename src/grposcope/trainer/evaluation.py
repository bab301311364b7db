"""Held-out accuracy during training: greedy pass@1 on the eval split, by `grposcope.evaluation`."""

from __future__ import annotations

from typing import Any

from ..evaluation import EvalSettings
from ..evaluation import evaluate as run_evaluation

EVAL_BATCH = 32  # prompts generated at once; bounds memory, not results


def evaluate(trainer: Any, examples: list[dict]) -> dict[str, float]:
    """`eval/accuracy`: fraction of held-out prompts whose greedy completion scores >= success_threshold
    (the weighted reward of the run's reward functions); `eval/accuracy/<level>` per difficulty level."""
    if not examples:
        return {}
    args = trainer.args
    trainer.model.eval()  # generate() keeps the mode it finds: no dropout while evaluating
    # Greedy only (num_samples 0): no sampling, so the training run's random state is not touched.
    settings = EvalSettings(
        max_completion_length=args.max_completion_length,
        success_threshold=args.success_threshold,
        batch_size=EVAL_BATCH,
    )
    return run_evaluation(examples, trainer.backend, trainer.scorer, settings).metrics
