"""A training run on the tiny model in its own process, for the kill-and-resume test (tests/test_resume.py).

    python tests/resume_driver.py MODEL_DIR OUTPUT_DIR [--resume] [--hang-at-call K --marker FILE]

With --hang-at-call, the reward function's K-th call writes FILE and then sleeps: the test kills the process
there, in the middle of a step (after generation, before the update).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from grposcope import GRPOConfig, GRPOTrainer

PROMPTS = [{"prompt": [{"role": "user", "content": f"What is {a} + {b} ?"}], "answer": str(a + b)}
           for a, b in [(1, 2), (3, 4), (2, 2), (5, 1), (4, 3), (6, 2), (7, 1), (2, 5)]]
MAX_STEPS, SAVE_STEPS = 8, 3


def config(output_dir: str, resume: bool) -> GRPOConfig:
    # steps_per_generation=2: a generation feeds two optimizer steps, so checkpoint 3 is taken in the middle
    # of one (step 4 trains on the batch that the checkpoint carries). One thread: same arithmetic each time.
    return GRPOConfig(
        output_dir=output_dir, num_generations=4, per_device_train_batch_size=4, gradient_accumulation_steps=1,
        steps_per_generation=2, max_completion_length=6, learning_rate=1e-3, max_steps=MAX_STEPS,
        save_steps=SAVE_STEPS, logging_steps=1, seed=3, use_avspo=True, beta=0.04, torch_threads=1,
        resume_from_checkpoint=True if resume else None,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir")
    parser.add_argument("output_dir")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--hang-at-call", type=int, default=0)
    parser.add_argument("--marker", default="")
    opts = parser.parse_args()
    calls = 0

    def text_length(prompts, completions, **columns):
        nonlocal calls
        calls += 1
        if calls == opts.hang_at_call:
            Path(opts.marker).write_text("in a step\n")
            time.sleep(600)  # killed here
        return [len(c[0]["content"]) / 20 for c in completions]

    trainer = GRPOTrainer(model=opts.model_dir, args=config(opts.output_dir, opts.resume),
                          reward_funcs=text_length, train_dataset=PROMPTS)
    trainer.train()


if __name__ == "__main__":
    main()
