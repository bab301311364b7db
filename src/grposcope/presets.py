"""Named configurations for `grposcope train --preset NAME` (and `grposcope train` with no arguments)."""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    # The embedded SmolLM2-135M-Instruct on the arithmetic task, AVSPO on (with its guard, the default), on the
    # CPU: a whole run, with held-out accuracy before and after, in a few minutes on 2 cores.
    "quickstart": {
        "output_dir": "output/quickstart",
        "overwrite_output_dir": True,  # a demo: running it again replaces the last one
        "dataset_name": "arithmetic",
        "use_avspo": True,
        "num_generations": 8,
        "per_device_train_batch_size": 8,
        "gradient_accumulation_steps": 2,
        "max_completion_length": 24,
        "max_prompt_length": 256,
        "learning_rate": 2e-5,
        "lr_scheduler_type": "constant",
        "max_steps": 20,
        "eval_size": 48,
        "eval_steps": 10,
        "logging_steps": 1,
        "save_steps": 1000,
        "seed": 0,
    },
}


def preset(name: str) -> dict[str, Any]:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(sorted(PRESETS))}")
    return dict(PRESETS[name])
