"""The TRL integration's no-signal skip under DeepSpeed on two CPU processes, for tests/test_deepspeed_skip.py:

    DS_ACCELERATOR=cpu accelerate launch --multi_gpu --num_processes 2 tests/deepspeed_two_process.py OUTPUT_DIR 2|3

The argument is the ZeRO stage. Stage 2 trains with TRL's AdamW and transformers' linear schedule, which the
trainer steps; stage 3 with a torch AdamW from the DeepSpeed config and the same linear schedule built for it,
which the engine owns and steps inside the backward pass (the two ways the learning rate moves under DeepSpeed).

One group of 4 per process and micro-batch, two micro-batches per optimizer step, GRPO. The reward of a step is
scripted: "all" the parity of each completion's word count, "none" 0 everywhere, "rank0" parity on process 0
and 0 on process 1 (each process scores its own rows). Four runs, one after the other:
- "skip": all, none, rank0 with skip_no_signal_steps on and a checkpoint after every step;
- "stock": all, none with skip_no_signal_steps off;
- "resume": the skip run's checkpoint-2 (written right after the skipped step) resumed for its step 3;
- "first": none, all: the run's first step is the one skipped.
Each process writes OUTPUT_DIR/rank<i>.json: per run and step, a hash of the whole weights (gathered under
ZeRO-3), a hash of this process's optimizer state (its partition's moments and step counts), AdamW's step
counts, the engine's counters, the learning rate TRL logged and whether the step was skipped; for "first",
whether deepspeed.utils.safe_get_full_optimizer_state shows AdamW's moments (moment_views).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import deepspeed
import torch
import transformers

sys.path.insert(0, str(Path(__file__).parent))
from conftest import make_tiny_llama, make_tiny_tokenizer  # noqa: E402

from grposcope.integrations.trl import GRPOConfig, GRPOTrainer  # noqa: E402

PROMPTS = [{"prompt": f"What is {i} + {i} ?"} for i in range(40)]
AUTO = "auto"  # filled in by transformers from GRPOConfig
ZERO = {
    2: {"zero_optimization": {"stage": 2}},
    3: {"zero_optimization": {"stage": 3},
        "optimizer": {"type": "AdamW", "params": {"lr": AUTO, "betas": AUTO, "eps": AUTO, "weight_decay": AUTO,
                                                  "torch_adam": True}}},
}


def scripted(pattern: tuple[str, ...]):
    def staged(prompts, completions, trainer_state, **kwargs):
        signal = pattern[trainer_state.global_step]
        if signal == "none" or (signal == "rank0" and torch.distributed.get_rank() == 1):
            return [0.0] * len(completions)
        return [float(len(c.split()) % 2) for c in completions]

    return staged


def digest(tensors: list[torch.Tensor]) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def weights_digest(model: torch.nn.Module) -> str:
    params = list(model.parameters())
    with deepspeed.zero.GatheredParameters(params):  # whole tensors under ZeRO-3, a no-op under ZeRO-2
        return digest(params)


class StepRecorder(transformers.TrainerCallback):
    def __init__(self, trainer: GRPOTrainer) -> None:
        self.trainer = trainer
        self.records: list[dict[str, Any]] = []
        self.initial = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.initial = weights_digest(model)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        engine = self.trainer.accelerator.deepspeed_engine_wrapped.engine
        # this process's partition (ZeRO-3 empties the param groups between steps, so not state_dict())
        moments = list(engine.basic_optimizer.state.values())
        tensors = [torch.as_tensor(v) for state in moments for _, v in sorted(state.items())]
        self.records.append({
            "step": state.global_step, "weights": weights_digest(model), "optimizer": digest(tensors),
            "adam_steps": sorted({float(s["step"]) for s in moments if s}),
            "global_steps": engine.global_steps, "micro_steps": engine.micro_steps,
            "global_samples": engine.global_samples, "ds_skipped_steps": engine.skipped_steps,
            "engine_owns_scheduler": engine.lr_scheduler is not None,
        })


def moment_views(trainer: GRPOTrainer) -> dict[str, int]:
    """For how many weight-decayed weights (TRL's first parameter group) deepspeed.utils'
    safe_get_full_optimizer_state returns a finite, non-zero exp_avg of the weight's shape. DeepSpeed 0.19.8's
    ZeRO-1/2 link these views for the first group only, also without grposcope: the second group's (norms,
    biases) stay empty."""
    decayed = set(trainer.get_decay_parameter_names(trainer.model))
    shown = 0
    for name, param in trainer.model.named_parameters():
        if name in decayed:
            moment = deepspeed.utils.safe_get_full_optimizer_state(param, "exp_avg")  # a collective call
            shape = getattr(param, "ds_shape", param.shape)  # under ZeRO-3 the module holds an empty tensor
            shown += moment.shape == shape and bool(moment.isfinite().all()) and bool(moment.ne(0).any())
    return {"decayed": len(decayed), "shown": shown}


def run(out: Path, stage: int, name: str, pattern: tuple[str, ...], skip: bool = True,
        resume: str | None = None) -> dict:
    config = GRPOConfig(
        output_dir=str(out / name), per_device_train_batch_size=4, gradient_accumulation_steps=2,
        num_generations=4, max_completion_length=6, max_steps=len(pattern), logging_steps=1,
        save_strategy="steps" if name == "skip" else "no", save_steps=1, report_to="none", use_cpu=True,
        bf16=False, learning_rate=1e-3, seed=5, disable_tqdm=True, skip_no_signal_steps=skip,
        deepspeed={**ZERO[stage], "train_micro_batch_size_per_gpu": AUTO, "gradient_accumulation_steps": AUTO,
                   "train_batch_size": AUTO, "gradient_clipping": AUTO},
    )
    trainer = GRPOTrainer(model=make_tiny_llama(), reward_funcs=scripted(pattern), args=config,
                          train_dataset=PROMPTS, processing_class=make_tiny_tokenizer())
    recorder = StepRecorder(trainer)
    trainer.add_callback(recorder)
    trainer.train(resume_from_checkpoint=resume)
    logged = {h["step"]: h for h in trainer.state.log_history if "loss" in h}  # a resumed run's starts earlier
    for record in recorder.records:
        record["lr"] = logged[record["step"]]["learning_rate"]
        record["skipped"] = logged[record["step"]].get("optimizer/skipped_no_signal")
    result = {"initial": recorder.initial, "records": recorder.records,
              "skipped_no_signal_steps": trainer.skipped_no_signal_steps}
    if name == "first":
        result["moment_views"] = moment_views(trainer)
    return result


def main(out: Path, stage: int) -> None:
    torch.set_num_threads(1)
    steps = ("all", "none", "rank0")
    runs = {"skip": run(out, stage, "skip", steps),
            "stock": run(out, stage, "stock", steps[:2], skip=False),
            "resume": run(out, stage, "resume", steps, resume=str(out / "skip" / "checkpoint-2")),
            "first": run(out, stage, "first", ("none", "all"))}
    (out / f"rank{torch.distributed.get_rank()}.json").write_text(json.dumps(runs))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
