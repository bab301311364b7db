"""`grposcope eval`: greedy pass@1, and avg@k / pass@k with --num_samples k, on a model folder or the embedded
model (docs/evaluation.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import typer

from ..eval_settings import MAX_PROMPT_LENGTH, EvalSettings
from ..files import check_output_file, write_text_atomic, write_text_new
from .app import USER_ERRORS, _console_logging, app, fail

_DEFAULT = EvalSettings()  # the defaults of the options below

EVAL_ERRORS = (*USER_ERRORS, ImportError)  # ImportError: an optional dependency the task needs is missing


@app.command("eval")
def eval_command(
    model: str = typer.Option(..., "--model", help="A checkpoint folder (e.g. output/run/checkpoint-20), "
                              "embedded:<name>, or a hub id in the local Hugging Face cache."),
    dataset: str = typer.Option(..., "--dataset", help="arithmetic[:levels], rg:<reasoning-gym name>, or a "
                                "MATH-500-style .jsonl file (problem, answer)."),
    split: Optional[str] = typer.Option(None, "--split", help="eval (held-out), train or all. Default: all "
                                        "for a .jsonl file, eval for a generated task."),
    num_samples: int = typer.Option(_DEFAULT.num_samples, "--num_samples", help="k sampled completions per "
                                    "prompt for avg@k and pass@k; 0 = greedy pass@1 only."),
    temperature: float = typer.Option(_DEFAULT.temperature, "--temperature", help="Sampling temperature; must be "
                                      "> 0 when --num_samples > 0."),
    top_p: float = typer.Option(_DEFAULT.top_p, "--top_p", help="Nucleus sampling mass, in (0, 1]."),
    max_completion_length: int = typer.Option(_DEFAULT.max_completion_length, "--max_completion_length",
                                              help="Tokens generated at most per completion."),
    max_prompt_length: int = typer.Option(MAX_PROMPT_LENGTH, "--max_prompt_length", help="Longer prompts keep "
                                          "their last tokens (as in training); 0 = no limit."),
    reward_funcs: Optional[str] = typer.Option(None, "--reward_funcs", help="Registered reward names, comma "
                                               "separated. Default: the task's (box_accuracy_reward for a "
                                               ".jsonl file)."),
    success_threshold: float = typer.Option(_DEFAULT.success_threshold, "--success_threshold",
                                            help="A completion is correct when its reward is >= this."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Evaluate the first N examples of the split."),
    seed: int = typer.Option(_DEFAULT.seed, "--seed", help="Seeds the split (as in training) and the sampling."),
    dataset_size: Optional[int] = typer.Option(None, "--dataset_size", help="Train examples of a generated "
                                               "task, as the training run's --dataset_size (default: 1000)."),
    eval_size: Optional[int] = typer.Option(None, "--eval_size", help="Held-out examples, as the training "
                                            "run's --eval_size (default: 50 generated, 10% of a file)."),
    batch_size: int = typer.Option(_DEFAULT.batch_size, "--batch_size", help="Prompts generated at once (x k when "
                                   "sampling)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Results JSON. Default: "
                                          "eval-<model>-<dataset>.json in the current folder."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --output file."),
    trust_remote_code: bool = typer.Option(False, "--trust_remote_code", help="Let transformers run Python "
                                           "files from the model folder (only for folders you trust)."),
) -> None:
    """Evaluate a model: greedy pass@1, and avg@k / pass@k with --num_samples k (see docs/evaluation.md)."""
    _console_logging()
    options = dict(locals())
    try:
        result, path = _run_eval(options)
    except EVAL_ERRORS as err:
        raise fail(err) from None
    _print_eval_table(result, options)
    typer.echo(f"{len(result.records)} prompts in {result.seconds:.1f} s; results written to {path}")


def _run_eval(o: dict[str, Any]) -> tuple[Any, Path]:
    """Checks everything cheap first (settings, output file, data, reward names), then loads and evaluates."""
    from ..evaluation import EvalSettings, evaluate_model, load_eval_examples
    from ..models import load_model
    from ..rewards import get_reward
    from ..trainer.memory import check_eval_memory

    settings = EvalSettings(
        max_completion_length=o["max_completion_length"], num_samples=o["num_samples"],
        temperature=o["temperature"], top_p=o["top_p"], success_threshold=o["success_threshold"],
        batch_size=o["batch_size"], seed=o["seed"],
    )
    if o["max_prompt_length"] < 0:
        raise ValueError(f"--max_prompt_length must be >= 0 (0: no limit), got {o['max_prompt_length']}")
    for name, low, what in (("limit", 1, "the first N examples"), ("dataset_size", 1, "train examples"),
                            ("eval_size", 0, "held-out examples")):
        if o[name] is not None and o[name] < low:
            raise ValueError(f"--{name} must be >= {low} ({what}), got {o[name]}; leave it out for the default")
    default_name = _default_output_name(o["model"], o["dataset"])
    path = o["output"] or Path(default_name)
    dataset_file = o["dataset"] if o["dataset"] and os.path.exists(o["dataset"]) else None  # not a task name
    check_output_file(path, "--output", o["overwrite"], default_name, inputs=(o["model"], dataset_file))
    o["split"] = o["split"] or _split_for(o)
    examples, task_rewards = load_eval_examples(
        o["dataset"], o["split"], seed=o["seed"], dataset_size=o["dataset_size"], eval_size=o["eval_size"],
        limit=o["limit"],
    )
    names = [n.strip() for n in (o["reward_funcs"] or "").split(",") if n.strip()]
    for name in names:
        get_reward(name)  # an unknown name fails now, with the known ones, not after loading the model
    funcs = names or task_rewards
    if not funcs:
        raise ValueError(
            f"{o['dataset']!r} recommends no reward function; pass one, e.g. --reward_funcs accuracy_reward"
        )
    _check_checkpoint(Path(o["model"]))
    check_eval_memory(o["model"], examples, batch=settings.batch_size, samples=settings.num_samples,
                      max_prompt_length=o["max_prompt_length"] or None,
                      completion_tokens=settings.max_completion_length, fix="--num_samples or --batch_size")
    model, tokenizer = load_model(o["model"], trust_remote_code=o["trust_remote_code"])
    with _eval_progress() as bar:
        task = bar.add_task("eval", total=len(examples))
        result = evaluate_model(model, tokenizer, examples, funcs, settings,
                                max_prompt_length=o["max_prompt_length"] or None,
                                progress=lambda done, _total: bar.update(task, completed=done))
    config = {key: o[key] for key in ("model", "dataset", "split", "limit", "dataset_size", "eval_size",
                                      "max_prompt_length")}
    return result, _save(result, config, path, o["overwrite"])


def _save(result: Any, config: dict[str, Any], path: Path, overwrite: bool) -> Path:
    """The results, through a temporary file. Without --overwrite a file that appeared at `path` while this
    eval ran (another eval given the same --output) is kept, and these results go beside it, with a note."""
    import warnings

    from ..evaluation import json_text

    text = json_text(result.to_dict(config))
    if overwrite:
        write_text_atomic(path, text, "--output")
        return path
    written = write_text_new(path, text, "--output")
    if written != path:
        warnings.warn(f"{path} was written by another process while this eval ran; it is kept as it is, and "
                      f"these results are in {written}", RuntimeWarning, stacklevel=2)
    return written


def _split_for(o: dict[str, Any]) -> str:
    """The split when --split is left out: all of a .jsonl file, the held-out part of a generated task; but
    --eval_size on a file asks for the held-out part a training run with that eval_size kept apart."""
    import warnings

    from ..evaluation import default_split, is_file_spec

    if is_file_spec(o["dataset"]) and o["eval_size"] is not None:
        warnings.warn(f"--eval_size {o['eval_size']} without --split: evaluating the eval split, the "
                      f"{o['eval_size']} examples a training run with --eval_size {o['eval_size']} --seed "
                      f"{o['seed']} holds out of {o['dataset']}; --split all evaluates the whole file",
                      RuntimeWarning, stacklevel=2)
        return "eval"
    return default_split(o["dataset"])


def _check_checkpoint(folder: Path) -> None:
    """A training checkpoint or a run's final model is checked against its manifest (sizes and sha256 of
    every file) before it is evaluated, as --resume checks it: a damaged one would otherwise give figures
    without a word."""
    import warnings

    from ..trainer.run_folder import MANIFEST, latest_checkpoint, repair, verify

    if not (folder / MANIFEST).is_file():
        return  # not written by grposcope (a Hugging Face folder): nothing to check against
    problem = verify(folder, resumable=False)
    if problem is not None:
        with warnings.catch_warnings():  # the folders it passes over are not this command's concern
            warnings.simplefilter("ignore")
            newest = latest_checkpoint(folder.parent)
        final = folder.parent / "model"  # the run's final model, when a checkpoint beside it is the damaged one
        final_ok = final != folder and (final / MANIFEST).is_file() and verify(final, resumable=False) is None
        other = f"the newest good checkpoint beside it is {newest}" if newest not in (None, folder) else \
            f"{repair(folder)} if you have it, or evaluate another model" + (
                f", e.g. the run's final model {final}" if final_ok else "")
        raise ValueError(f"{folder} is damaged: {problem}; {other}")


def _default_output_name(model: str, dataset: str) -> str:
    """eval-<model>-<dataset>.json: the last part of the model path and the task spec, safe as a file name."""
    import re

    name = Path(model.removeprefix("embedded:").rstrip("/\\")).name or "model"
    task = Path(dataset).stem if dataset.endswith(".jsonl") else dataset
    return "eval-" + "-".join(re.sub(r"[^A-Za-z0-9._-]+", "_", part) for part in (name, task)) + ".json"


def _eval_progress() -> Any:
    """A rich progress bar over prompts on stderr (rich prints it plainly when stderr is not a terminal)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    columns = ("evaluating", BarColumn(), MofNCompleteColumn(), "prompts", TimeElapsedColumn(),
               TimeRemainingColumn())
    return Progress(*columns, console=Console(stderr=True))


def _print_eval_table(result: Any, o: dict[str, Any]) -> None:
    """Rows: each level, then all; columns: prompts, greedy pass@1, and avg@k / pass@k when sampling."""
    from rich.console import Console
    from rich.table import Table

    from ..terminal import markup_safe

    k = result.settings.num_samples
    sampled = [f"avg@{k}", f"pass@{k}"] if k > 0 else []
    table = Table(title=markup_safe(f"{o['model']} on {o['dataset']} ({o['split']} split)"))
    for header in ["level", "prompts", "pass@1 (greedy)", *sampled]:
        table.add_column(header, justify="left" if header == "level" else "right")
    rows = [*result.levels.items(), ("all", result.overall)]
    for i, (level, figures) in enumerate(rows):
        cells = [str(figures["prompts"])] + [f"{figures[name]:.3f}" for name in ["accuracy", *sampled]]
        table.add_row(markup_safe(level), *cells, style="bold" if i == len(rows) - 1 else None)
    Console().print(table)
