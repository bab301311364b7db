"""Stock TRL GRPO, no grposcope inside: the run `grposcope report` then diagnoses from TRL's own files.

The one setting that matters is `log_completions=True`: TRL then writes every logging step's generation batch,
rewards and advantages included, to `output_dir/completions/completions_{step:05d}.parquet`. Arithmetic
prompts and a last-number reward keep it self-contained (nothing downloaded but the model, if it is a Hub name).

    python examples/trl/stock_grpo.py --model_name_or_path MODEL --output_dir stock_out --max_steps 8 \
        --use_cpu true --bf16 false
    grposcope report stock_out -o stock_report
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from datasets import Dataset
from transformers import HfArgumentParser
from trl import GRPOConfig, GRPOTrainer


@dataclass
class ScriptArguments:
    model_name_or_path: str = field(metadata={"help": "A Hub name or a local model folder."})
    train_size: int = field(default=512, metadata={"help": "Arithmetic problems to draw."})


def problems(n: int, seed: int) -> Dataset:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        op = rng.choice("+-*")
        answer = {"+": a + b, "-": a - b, "*": a * b}[op]
        rows.append({"prompt": [{"role": "user", "content": f"What is {a} {op} {b}? End with the number."}],
                     "answer": str(answer)})
    return Dataset.from_list(rows)


def last_number(completions, answer, **kwargs):
    """1.0 when the completion's last number is the answer, else 0.0."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    found = [re.findall(r"-?\d+", t.replace(",", "")) for t in texts]
    return [float(bool(f) and f[-1] == a) for f, a in zip(found, answer)]


def main() -> None:
    script, config = HfArgumentParser((ScriptArguments, GRPOConfig)).parse_args_into_dataclasses()
    config.log_completions = True  # the files grposcope reads
    trainer = GRPOTrainer(model=script.model_name_or_path, reward_funcs=last_number, args=config,
                          train_dataset=problems(script.train_size, config.seed))
    trainer.train()
    trainer.save_state()  # trainer_state.json in output_dir: TRL's own metrics, beside the completions


if __name__ == "__main__":
    main()
