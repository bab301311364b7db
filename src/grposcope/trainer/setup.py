"""Everything a run needs before its first step: model, data, rewards, estimator, rollout backend,
optimizer, logger.

Each piece is looked up once in its registry, from the config; the loop in trainer.py never names one.
"""

from __future__ import annotations

import contextlib
import copy
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from ..components.build import build
from ..core import advantages
from ..rollout import ROLLOUTS
from ..sampling.stream import PromptStream
from .checkpoint import remove_checkpoints
from .config import GRPOConfig
from .disk_space import keep_metrics_aside, start_over, way_on_after_a_failed_write
from .evaluation import EVAL_BATCH
from .geometry import Geometry, geometry_for, total_steps
from .memory import check_eval_memory, check_memory
from .rollout_copy import RolloutCopy, rollout_dtype
from .run_folder import checkpoint_folders, holds_metrics


@dataclass
class Run:
    model: Any
    tokenizer: Any
    ref_model: Callable[[], Any] | None  # () -> context manager yielding the reference policy
    geometry: Geometry
    stream: PromptStream
    train_examples: list[dict]
    eval_examples: list[dict]
    scorer: Any
    estimator: advantages.AdvantageEstimator
    sampler: Any
    policy_loss: Any  # (logp, old_logp, advantages, mask, **aggregation) -> (loss, metrics)
    backend: Any  # the rollout backend on the trained weights: evaluation (grposcope.rollout)
    rollout_copy: Any  # RolloutCopy the training rollouts run on (rollout_dtype), or None: the weights themselves
    rollout_backend: Any  # the rollout backend of training: on the copy, or `backend`
    optimizer: torch.optim.Optimizer
    scheduler: Any
    logger_factory: Callable[[int, int], Any]  # (total_steps, resume_step) -> RunLogger


def build_run(args: GRPOConfig, model, reward_funcs, train_dataset, eval_dataset, processing_class) -> Run:
    from ..logging import RunLogger
    from ..models import load_model

    seed_everything(args.seed)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    geometry = geometry_for(args)  # before anything slow: a bad batch geometry fails at once
    train, evals, task_rewards = load_examples(args, train_dataset, eval_dataset)  # bad data too
    spec = args.model_name_or_path if model is None else model
    sampler = make_sampler(args)
    check_sizes(args, geometry, spec, train, evals, sampler)  # and a step or an evaluation too big
    if isinstance(spec, (str, os.PathLike)):
        check_model_folder(os.fspath(spec))  # a damaged final model or checkpoint, as eval checks it
    model, tokenizer = load_model(
        model if model is not None else args.model_name_or_path,
        tokenizer=processing_class,
        use_peft=args.use_peft,
        lora_r=args.lora_r,
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        lora_target_modules=args.lora_target_modules,
        trust_remote_code=args.trust_remote_code,
    )
    for example in train + evals:
        example["prompt_text"] = render(example["prompt"], tokenizer)
    scorer = make_scorer(args, reward_funcs, task_rewards)
    trainable = [p for p in model.parameters() if p.requires_grad]
    # fused: one kernel per step instead of a chain of foreach ops (0.08 s instead of 0.62 s for 135M weights
    # on 2 cores; results agree to 1e-8). CPU and CUDA support it for float weights.
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in trainable)
    optimizer = torch.optim.AdamW(trainable, lr=args.learning_rate, weight_decay=args.weight_decay, fused=fused)
    steps = total_steps(args, geometry, len(train))
    scheduler = make_scheduler(args, optimizer, steps)
    own_loop = args.decode_loop == "grposcope"
    backend = ROLLOUTS.make("transformers", model=model, tokenizer=tokenizer, max_prompt_length=args.max_prompt_length,
                            own_loop=own_loop)
    dtype = rollout_dtype(args.rollout_dtype, model.device)
    rollout_copy = RolloutCopy(model, dtype) if dtype != next(model.parameters()).dtype else None
    rollout_backend = backend if rollout_copy is None else ROLLOUTS.make(
        "transformers", model=rollout_copy.model, tokenizer=tokenizer, max_prompt_length=args.max_prompt_length,
        own_loop=own_loop)

    def logger_factory(total: int, resume_step: int) -> RunLogger:
        # resume_step 0: a new run starts metrics.jsonl afresh; N: lines after checkpoint N are dropped
        return RunLogger(args.output_dir, args.report_to, run_name=args.run_name, config=args.to_dict(),
                         total_steps=total, logging_steps=args.logging_steps, resume_step=resume_step,
                         way_on=lambda: way_on_after_a_failed_write(args.output_dir))

    return Run(model, tokenizer, reference_policy(args, model), geometry, PromptStream(train, args.seed),
               train, evals, scorer, make_estimator(args), sampler, build(args, "policy_loss"), backend,
               rollout_copy, rollout_backend, optimizer, scheduler, logger_factory)


def check_sizes(args: GRPOConfig, geometry: Geometry, model: Any, train: list[dict], evals: list[dict],
                sampler: Any) -> None:
    """What the run will ask for, checked before the model loads: the sampler's steps (a budget it cannot
    spend, its own tables), a training step's memory, and an evaluation batch's (eval_num_samples)."""
    if hasattr(sampler, "check_step"):  # a plug-in sampler may not derive from Sampler
        sampler.check_step(geometry.prompts_per_generation, args.num_generations)
    check_memory(args, geometry, model, train)
    evals = evals[: args.eval_limit] if args.eval_limit else evals
    check_eval_memory(model, evals, batch=EVAL_BATCH, samples=args.eval_num_samples,
                      max_prompt_length=args.max_prompt_length, completion_tokens=args.max_completion_length,
                      fix="eval_num_samples (sampled completions per held-out prompt, e.g. 8)")


def check_model_folder(spec: str) -> None:
    """A model folder grposcope wrote (a run's final model, a checkpoint) is checked against its manifest
    before it is trained from: a flipped bit in its weights would otherwise train to the end without a word."""
    import warnings

    from .run_folder import MANIFEST, latest_checkpoint, verify

    folder = Path(spec).expanduser()
    if not (folder / MANIFEST).is_file():
        return  # the embedded model, a hub id, a Hugging Face folder: nothing to check against
    problem = verify(folder, resumable=False)
    if problem is None:
        return
    with warnings.catch_warnings():  # the folders it passes over are not this run's concern
        warnings.simplefilter("ignore")
        newest = latest_checkpoint(folder.parent)
    fix = f"train from the newest good checkpoint beside it, {newest}" if newest not in (None, folder) else \
        "save it again from where it came from"
    raise ValueError(f"--model_name_or_path {spec} is damaged: {problem}; copy it again, or {fix}")


def check_output_dir(args: GRPOConfig) -> list[str]:
    """A new run never overwrites an earlier one unless asked to; returns what it removed, as notes.

    With overwrite_output_dir the earlier run's checkpoints go too: left in place, a later --resume would
    continue the old run's weights with the new run's metrics.
    """
    root = Path(args.output_dir)
    checkpoints = checkpoint_folders(root)
    used = holds_metrics(root) or bool(checkpoints)
    if used and not args.overwrite_output_dir and not checkpoints:  # --resume cannot continue it either
        raise ValueError(
            f"{args.output_dir} already holds a run with no checkpoint to resume from (metrics.jsonl, no "
            "checkpoint-N folder), so --resume cannot continue it: choose another output_dir, or start it over "
            f"in this one with {start_over(root)}"
        )
    if used and not args.overwrite_output_dir:
        raise ValueError(
            f"{args.output_dir} already holds a run (metrics.jsonl or checkpoints): continue it with --resume "
            "(resume_from_checkpoint=True), choose another output_dir, or set overwrite_output_dir=True to "
            "replace it"
        )
    left = remove_checkpoints(checkpoints)  # what grposcope wrote; a folder of anything else stays, named
    kept = keep_metrics_aside(root)  # the earlier run's record is never lost, only moved aside
    root.mkdir(parents=True, exist_ok=True)
    removed = sum(not folder.exists() for folder in checkpoints)
    notes = [f"removed {removed} checkpoint(s) of the earlier run"] if removed else []
    notes += left
    notes += [f"kept the earlier run's metrics.jsonl as {kept.name}"] if kept else []
    return [f"overwrite_output_dir: {note}" for note in notes]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def make_estimator(args: GRPOConfig) -> advantages.AdvantageEstimator:
    """The configured estimator, built with the options it declares."""
    return build(args, "advantage_estimator")


def make_sampler(args: GRPOConfig):
    """The configured sampler, built with the options it declares."""
    return build(args, "sampler")


def make_scorer(args: GRPOConfig, reward_funcs, task_rewards):
    from ..rewards import RewardScorer, make_soft_overlong_penalty

    given = reward_funcs if reward_funcs is not None else (args.reward_funcs or task_rewards)
    if not given:
        raise ValueError(
            "no reward function: pass reward_funcs= (e.g. grposcope.rewards.accuracy_reward) or set "
            "reward_funcs in the config"
        )
    funcs: list[Any] = list(given) if isinstance(given, (list, tuple)) else [given]  # callables or their names
    weights = args.reward_weights
    if args.overlong_buffer_len:  # DAPO's soft overlong punishment: one more reward term, its scale its own
        funcs.append(make_soft_overlong_penalty(args.max_completion_length, args.overlong_buffer_len,
                                                args.overlong_penalty_factor))
        weights = None if weights is None else [*weights, 1.0]
    return RewardScorer(funcs, reward_weights=weights, reward_timeout=args.reward_timeout,
                        reward_errors=args.reward_errors)


def make_scheduler(args: GRPOConfig, optimizer: torch.optim.Optimizer, steps: int):
    from transformers import get_scheduler

    warmup = int(args.warmup_ratio * steps)
    return get_scheduler(args.lr_scheduler_type, optimizer, num_warmup_steps=warmup, num_training_steps=steps)


def reference_policy(args: GRPOConfig, model) -> Callable[[], Any] | None:
    """A factory of context managers that yield the reference (initial) policy, or None when not needed.

    With LoRA the reference is the model with its adapters off: free, so KL is measured even at beta 0.
    A full model needs a frozen copy, which costs its memory: only made when beta > 0.
    """
    from ..models import needs_reference_copy, reference_context

    if not needs_reference_copy(model):
        return lambda: reference_context(model)
    if args.beta == 0:
        return None
    frozen = copy.deepcopy(model).eval().requires_grad_(False)
    return lambda: contextlib.nullcontext(frozen)


def render(prompt, tokenizer) -> str:
    from ..data.chat import render_prompt

    return render_prompt(prompt, tokenizer)


def load_examples(args: GRPOConfig, train_dataset, eval_dataset) -> tuple[list[dict], list[dict], list | None]:
    """Training and held-out examples as lists of dicts, and the rewards the task recommends. A train_dataset
    is trained on whole (TRL's rule), unless eval_size holds prompts out of it (GRPOConfig.eval_size)."""
    import warnings

    from ..data.split import split_examples
    from ..data.tasks import load_task

    if train_dataset is None:
        task = load_task(args.dataset_name, size=args.dataset_size, seed=args.seed, eval_size=args.eval_size)
        return [dict(e) for e in task.train], [dict(e) for e in task.eval], task.reward_funcs
    train = as_examples(train_dataset, "train_dataset")
    if eval_dataset is not None:
        if args.eval_size is not None:  # e.g. a preset's: the run goes on, on the held-out set it was given
            warnings.warn(f"eval_size={args.eval_size} is not used: the held-out prompts are eval_dataset's "
                          "(eval_limit evaluates on the first N of them); drop eval_size, or drop eval_dataset to "
                          "hold eval_size prompts out of train_dataset", RuntimeWarning, stacklevel=4)
        return train, as_examples(eval_dataset, "eval_dataset"), None
    if args.eval_size:  # as a task's split: distinct prompts, each level its share, none left in train
        return (*split_examples(train, args.eval_size, args.seed), None)
    return train, [], None


def as_examples(dataset, source: str) -> list[dict]:
    """A user's HF Dataset or list of dicts, validated (every prompt checked) and copied."""
    from ..data.validation import validate_examples

    rows = dataset.to_list() if hasattr(dataset, "to_list") else list(dataset)
    return [dict(e) for e in validate_examples(rows, source=source)]
