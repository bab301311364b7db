"""The TRL integration on two processes, for tests/test_integration_trl.py:

    accelerate launch --cpu --num_processes 2 tests/trl_two_process.py OUTPUT_DIR [skip]

    accelerate launch ... tests/trl_two_process.py OUTPUT_DIR reinforce_ada|budgeted

Three groups of 4 a generation over two processes of 6 rows: the middle group straddles them (rows 4-7).
Two prompts in three get the same reward on every completion, so dynamic sampling refills most steps. With
`reinforce_ada` or `budgeted`: four groups of 3, the second and third straddling; the collapsed prompts make
Reinforce-Ada draw more rounds, and rounds of one prompt are padded to whole rows per process. Each
process writes OUTPUT_DIR/rank<i>.json: per generation, the whole batch's advantages (gathered), its reward
per row, and the grposcope metrics it logged; the test compares the two.

With `skip`: one group per process and step, GRPO, three steps: signal everywhere, then none anywhere (the
optimizer step is skipped on both processes), then signal on process 0 only (the step is taken on both). Each
process records, per step, whether it skipped, whether its weights and optimizer state equal the previous step's,
and a checksum of its weights.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
import transformers

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


def staged(prompts, completions, trainer_state, **kwargs):
    """Step 1: the parity of each completion's word count everywhere; step 2: 0 everywhere; step 3: parity on
    process 0, 0 on process 1 (each process scores its own rows)."""
    step, rank = trainer_state.global_step, torch.distributed.get_rank()
    if step == 1 or (step == 2 and rank == 1):
        return [0.0] * len(completions)
    return [float(len(c.split()) % 2) for c in completions]


class StepRecorder(transformers.TrainerCallback):
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.weights = self.optimizer = None

    def on_step_end(self, args, state, control, model=None, optimizer=None, **kwargs):
        weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
        moments = {(k, n): torch.as_tensor(v).clone() for k, s in optimizer.state_dict()["state"].items()
                   for n, v in s.items()}
        record = {"step": state.global_step, "checksum": sum(float(w.double().sum()) for w in weights.values())}
        if self.weights is not None:
            record["weights_unchanged"] = all(torch.equal(weights[k], self.weights[k]) for k in weights)
            record["optimizer_unchanged"] = moments.keys() == self.optimizer.keys() and all(
                torch.equal(moments[k], self.optimizer[k]) for k in moments)
        self.weights, self.optimizer = weights, moments
        self.records.append(record)


def skip_run(out: Path) -> None:
    config = GRPOConfig(
        output_dir=str(out / "run"), per_device_train_batch_size=4, num_generations=4, max_completion_length=6,
        max_steps=3, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, bf16=False,
        learning_rate=1e-3, seed=5, disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=make_tiny_llama(), reward_funcs=staged, args=config, train_dataset=PROMPTS,
                          processing_class=make_tiny_tokenizer())
    recorder = StepRecorder()
    trainer.add_callback(recorder)
    trainer.train()
    skipped = [h["optimizer/skipped_no_signal"] for h in trainer.state.log_history if "loss" in h]
    rank = trainer.accelerator.process_index
    (out / f"skip{rank}.json").write_text(json.dumps({"records": recorder.records, "skipped": skipped}))


# groups of 3 for the adaptive samplers: a round of one prompt is 3 rows, padded to 6 so that each process
# gets 3 (the padding rows are generated and scored, and given to no sampler)
SAMPLERS = {
    "dynamic": dict(num_generations=4, use_avspo=True, sampler="dynamic", max_gen_batches=3),
    "reinforce_ada": dict(num_generations=3, sampler="reinforce_ada", advantage_estimator="pool", round_size=3,
                          max_rounds=3),
    "budgeted": dict(num_generations=3, sampler="budgeted", sample_budget=12, budget_candidates=2.0),
}


def main(out: Path, sampler: str = "dynamic") -> None:
    torch.set_num_threads(1)
    config = GRPOConfig(
        output_dir=str(out / "run"), per_device_train_batch_size=6, max_completion_length=6,
        max_steps=3, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, bf16=False,
        learning_rate=1e-3, seed=5, disable_tqdm=True, **SAMPLERS[sampler],
    )
    trainer = Recording(model=make_tiny_llama(), reward_funcs=reward, args=config, train_dataset=PROMPTS,
                        processing_class=make_tiny_tokenizer())
    trainer.train()
    rank = trainer.accelerator.process_index
    (out / f"rank{rank}.json").write_text(json.dumps({"processes": trainer.accelerator.num_processes,
                                                      "records": trainer.records}))


if __name__ == "__main__":
    if sys.argv[2:] == ["skip"]:
        skip_run(Path(sys.argv[1]))
    else:
        main(Path(sys.argv[1]), *sys.argv[2:])
