"""Held-out accuracy during training: greedy pass@1 on the eval split."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..rollout import SamplingParams
from .scoring import scoring_inputs

EVAL_BATCH = 32  # prompts generated at once; bounds memory, not results


def evaluate(trainer: Any, examples: list[dict]) -> dict[str, float]:
    """`eval/accuracy`: fraction of held-out prompts whose greedy completion scores >= success_threshold
    (the weighted reward of the run's reward functions); `eval/accuracy/<level>` per difficulty level."""
    if not examples:
        return {}
    args = trainer.args
    trainer.model.eval()
    params = SamplingParams(args.max_completion_length, greedy=True)
    correct: list[bool] = []
    for start in range(0, len(examples), EVAL_BATCH):
        chunk = examples[start : start + EVAL_BATCH]
        rollout = trainer.rollout.generate([e["prompt_text"] for e in chunk], 1, params)
        scored = trainer.scorer.score(*scoring_inputs(chunk, rollout.texts, 1, rollout.completion_ids))
        correct += (scored.rewards >= args.success_threshold).tolist()
    metrics = {"eval/accuracy": sum(correct) / len(correct)}
    by_level: dict[str, list[bool]] = defaultdict(list)
    for example, ok in zip(examples, correct):
        if "level" in example:
            by_level[str(example["level"])].append(ok)
    for level, oks in sorted(by_level.items()):
        metrics[f"eval/accuracy/{level}"] = sum(oks) / len(oks)
    return metrics
