"""The TRL integration on two processes, for tests/test_integration_trl.py:

    accelerate launch --cpu --num_processes 2 tests/trl_two_process.py OUTPUT_DIR

Three groups of 4 a generation over two processes of 6 rows: the middle group straddles them (rows 4-7).
Two prompts in three get the same reward on every completion, so dynamic sampling refills most steps. Each
process writes OUTPUT_DIR/rank<i>.json: per generation, the whole batch's advantages (gathered), its reward
per row, and the grposcope metrics it logged; the test compares the two.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from conftest import make_tiny_llama, make_tiny_tokenizer  # noqa: E402

from grposcope.integrations.trl import GRPOConfig, GRPOTrainer  # noqa: E402

PROMPTS = [{"prompt": f"What is {i} + {i} ?", "kind": i % 3} for i in range(30)]


def reward(prompts, completions, kind, **kwargs):
    """kind 0: always 1.0, kind 1: always 0.0 (both collapse), kind 2: parity of the completion's length."""
    return [1.0 if k == 0 else 0.0 if k == 1 else float(len(c.split()) % 2) for c, k in zip(completions, kind)]


class Recording(GRPOTrainer):
    records: list = []

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self.model.training:
            train = self._metrics["train"]
            self.records.append({
                "rows": len(inputs),
                "advantages": self.accelerator.gather(output["advantages"]).tolist(),
                "completion_tokens": self.accelerator.gather(output["completion_mask"].sum(1)).tolist(),
                "num_items_in_batch": float(output["num_items_in_batch"]),
                "metrics": {k: v[-1] for k, v in train.items() if k.startswith(("collapse/", "avspo/", "sampler/"))},
            })
        return output


def main(out: Path) -> None:
    torch.set_num_threads(1)
    config = GRPOConfig(
        output_dir=str(out / "run"), per_device_train_batch_size=6, num_generations=4, max_completion_length=6,
        max_steps=3, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, bf16=False,
        learning_rate=1e-3, seed=5, disable_tqdm=True, use_avspo=True, sampler="dynamic", max_gen_batches=3,
    )
    trainer = Recording(model=make_tiny_llama(), reward_funcs=reward, args=config, train_dataset=PROMPTS,
                        processing_class=make_tiny_tokenizer())
    trainer.train()
    rank = trainer.accelerator.process_index
    (out / f"rank{rank}.json").write_text(json.dumps({"processes": trainer.accelerator.num_processes,
                                                      "records": trainer.records}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
