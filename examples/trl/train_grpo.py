"""GRPO with grposcope inside TRL: the training script that train_grpo.sh launches on GPUs.

Every GRPOConfig field is a flag (TRL's and grposcope's: --use_avspo, --sampler dynamic, ...). The data is a
grposcope task (arithmetic, rg:<name>), a MATH-500-style .jsonl file, or a Hugging Face dataset with `problem`
and `solution` columns (MATH-style; read with `datasets`, so on a machine that reaches the Hub).

On the CPU with the embedded model (no GPU, no vLLM, nothing downloaded):
    python examples/trl/train_grpo.py --model_name_or_path embedded:smollm2-135m-instruct \
        --dataset_name arithmetic --use_vllm false --use_cpu true --bf16 false --max_steps 2 --output_dir out
"""

from __future__ import annotations

from dataclasses import dataclass, field

from transformers import HfArgumentParser

from grposcope.data.jsonl import DEFAULT_INSTRUCTION
from grposcope.data.tasks import is_file_spec, load_task
from grposcope.integrations.trl import GRPOConfig, GRPOTrainer
from grposcope.rewards import REWARDS, box_accuracy_reward


@dataclass
class ScriptArguments:
    model_name_or_path: str = field(default="Qwen/Qwen2.5-Math-1.5B",
                                    metadata={"help": "A Hub name, a local folder or an embedded model's spec."})
    dataset_name: str = field(default="DigitalLearningGmbH/MATH-lighteval",
                              metadata={"help": "A grposcope task, a .jsonl file or a Hub dataset."})
    dataset_split: str = field(default="train", metadata={"help": "The Hub dataset's split."})
    train_size: int | None = field(default=None, metadata={"help": "Train on this many examples (default: all)."})


def load_data(args: ScriptArguments, seed: int):
    """(examples, reward functions): a task's own reward, else the boxed answer against the solution."""
    task = args.dataset_name.partition(":")[0]
    if is_file_spec(args.dataset_name) or task in ("arithmetic", "rg"):
        data = load_task(args.dataset_name, size=args.train_size, seed=seed, eval_size=0)
        rewards = [REWARDS.get(name) if isinstance(name, str) else name for name in data.reward_funcs or []]
        return data.train, rewards or [box_accuracy_reward]
    from datasets import load_dataset

    rows = load_dataset(args.dataset_name, split=args.dataset_split)
    if args.train_size:
        rows = rows.shuffle(seed=seed).select(range(args.train_size))
    rows = rows.map(lambda row: {"prompt": [{"role": "user", "content": f"{row['problem']}\n\n{DEFAULT_INSTRUCTION}"}]})
    return rows, [box_accuracy_reward]


def main() -> None:
    script, config = HfArgumentParser((ScriptArguments, GRPOConfig)).parse_args_into_dataclasses()
    dataset, reward_funcs = load_data(script, config.seed)
    trainer = GRPOTrainer(model=script.model_name_or_path, args=config, reward_funcs=reward_funcs,
                          train_dataset=dataset)
    trainer.train()
    trainer.save_model(config.output_dir)


if __name__ == "__main__":
    main()
