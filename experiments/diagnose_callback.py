"""The DiagnoseCallback in a stock TRL GRPOTrainer (no trainer swap), on the tiny in-process Llama of the tests:
a strict reward the random model never earns (every group all-wrong) for 12 steps, TRL's defaults otherwise.
Prints what the callback logged while training, then its findings.md; keeps the run's folder in --out.

    .venv/bin/python experiments/diagnose_callback.py --out experiments/results/diagnose/callback_run
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def strict_boxed(completions, **kwargs):
    """1 for a completion holding \\boxed{...}, else 0: the tiny random model never writes one."""
    return [1.0 if "\\boxed{" in c else 0.0 for c in completions]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    import trl
    from conftest import make_tiny_llama, make_tiny_tokenizer
    from datasets import Dataset

    from grposcope.integrations.trl_callback import DiagnoseCallback

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    config = trl.GRPOConfig(output_dir=str(args.out), per_device_train_batch_size=8, num_generations=4,
                            max_completion_length=8, max_steps=args.steps, logging_steps=1, save_strategy="no",
                            report_to="none", use_cpu=True, bf16=False, learning_rate=1e-3, seed=0,
                            disable_tqdm=True)
    data = Dataset.from_list([{"prompt": f"What is {i} + {i} ?"} for i in range(32)])
    trainer = trl.GRPOTrainer(model=make_tiny_llama(), reward_funcs=strict_boxed, args=config, train_dataset=data,
                              processing_class=make_tiny_tokenizer(), callbacks=[DiagnoseCallback(every=4)])
    trainer.train()
    print((args.out / "findings.md").read_text())


if __name__ == "__main__":
    main()
