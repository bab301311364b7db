"""`grposcope probe`: sample k completions of each prompt with the trainer's own generation and scoring, and
store each prompt's pass rate for `grposcope forecast` (docs/report.md, "Forecast")."""


from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, Iterator, Optional

import typer

from ..eval_settings import MAX_PROMPT_LENGTH, MAX_SEED
from ..files import check_writable
from ..terminal import markup_safe
from .app import USER_ERRORS, _console_logging, app, fail, wide_console

PROBE_ERRORS = (*USER_ERRORS, ImportError)  # ImportError: an optional dependency (a task's, matplotlib)
# The settings that decide what a probe measures: a resumed probe must have the same ones. --prompts may grow;
# --batch_prompts and --torch_threads change only speed (and, for batch_prompts, which random draws are used).
BINDING = ("model", "dataset", "split", "seed", "dataset_size", "eval_size", "k", "temperature", "top_p",
           "max_completion_length", "max_prompt_length", "reward_funcs", "success_threshold")

@app.command("probe")
def probe_command(
    model: Optional[str] = typer.Option(None, "--model", help="A checkpoint folder, embedded:<name>, or a hub "
                                        "id in the local Hugging Face cache. Default: the trainer's, "
                                        "embedded:smollm2-135m-instruct."),
    dataset: str = typer.Option("arithmetic", "--dataset", help="arithmetic[:levels], rg:<reasoning-gym name>, "
                                "or a MATH-500-style .jsonl file."),
    k: int = typer.Option(16, "--k", help="Samples per prompt."),
    prompts: int = typer.Option(64, "--prompts", help="Prompts to probe: the first ones a run with --seed takes."),
    out: Path = typer.Option(Path("probe.jsonl"), "--output", "-o",
                             help="One JSON line per prompt, after a settings line."),
    split: str = typer.Option("train", "--split", help="train (what a run trains on), eval (held out) or all."),
    max_completion_length: int = typer.Option(256, "--max_completion_length", help="Tokens generated at most "
                                              "per completion (the trainer's default; the quickstart uses 24)."),
    max_prompt_length: int = typer.Option(MAX_PROMPT_LENGTH, "--max_prompt_length", help="Longer prompts keep "
                                          "their last tokens, as in training; 0 = no limit."),
    temperature: float = typer.Option(1.0, "--temperature", help="Sampling temperature (the training default)."),
    top_p: float = typer.Option(1.0, "--top_p", help="Nucleus sampling mass, in (0, 1]."),
    reward_funcs: Optional[str] = typer.Option(None, "--reward_funcs", help="Registered reward names, comma "
                                               "separated. Default: the task's (box_accuracy_reward for a file)."),
    success_threshold: float = typer.Option(0.5, "--success_threshold", help="A sample is a success when its "
                                            "reward is >= this (as collapse_metrics counts it)."),
    seed: int = typer.Option(42, "--seed", help="The run's seed: the same split and prompt order (the "
                             "trainer's default is 42, the quickstart's 0); also seeds the sampling."),
    dataset_size: Optional[int] = typer.Option(None, "--dataset_size", help="Train examples of a generated task, "
                                               "as the run's --dataset_size."),
    eval_size: Optional[int] = typer.Option(None, "--eval_size", help="Held-out examples, as the run's "
                                            "--eval_size."),
    batch_prompts: int = typer.Option(4, "--batch_prompts", help="Prompts generated at once (x k sequences)."),
    torch_threads: Optional[int] = typer.Option(None, "--torch_threads", help="torch CPU threads (default: "
                                                "torch's)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Start over instead of resuming an existing --output."),
    trust_remote_code: bool = typer.Option(False, "--trust_remote_code", help="Let transformers run Python files "
                                           "from the model folder (only folders you trust)."),
) -> None:
    """Sample k completions of each prompt, as the trainer generates and scores them, and store pass rates.

    \b
    Example (then: grposcope forecast probe.jsonl):
      grposcope probe --model embedded:smollm2-135m-instruct \\
        --dataset arithmetic --k 16 --prompts 64 --output probe.jsonl
    An existing --output is continued where it stopped (same settings).
    """
    _console_logging()
    options = dict(locals())
    try:
        plan = _plan_probe(options)
        if plan["done"] < len(plan["examples"]):
            _run_probe(plan, options)
        records = [record for _, record in read_probe(out)[1]]
    except PROBE_ERRORS as err:
        raise fail(err) from None
    _print_probe_summary(records, options)


def _plan_probe(o: dict[str, Any]) -> dict[str, Any]:
    """Every cheap check (settings, data, reward names, the file to resume): before any model is loaded."""
    from ..evaluation import SPLITS, load_eval_examples
    from ..models import DEFAULT_MODEL
    from ..rewards import get_reward
    from ..sampling.stream import PromptStream

    o["model"] = o["model"] or DEFAULT_MODEL
    for name, low in (("k", 1), ("prompts", 1), ("max_completion_length", 1), ("batch_prompts", 1),
                      ("max_prompt_length", 0)):
        if o[name] < low:
            raise ValueError(f"--{name} must be >= {low}, got {o[name]}")
    for name, low, what in (("dataset_size", 1, "train examples"), ("eval_size", 0, "held-out examples")):
        if o[name] is not None and o[name] < low:
            raise ValueError(f"--{name} must be >= {low} ({what}), got {o[name]}; leave it out for the default")
    if not 0 <= o["seed"] <= MAX_SEED:
        raise ValueError(f"--seed must be in [0, {MAX_SEED}] (the run's seed), got {o['seed']}")
    if not o["temperature"] > 0 or not 0 < o["top_p"] <= 1 or not math.isfinite(o["temperature"]):
        raise ValueError(f"--temperature must be > 0 and finite (a probe samples) and --top_p in (0, 1]; got "
                         f"{o['temperature']} and {o['top_p']}")
    if not math.isfinite(o["success_threshold"]):
        raise ValueError(f"--success_threshold must be a finite number (a reward), got {o['success_threshold']}")
    if o["torch_threads"] is not None and o["torch_threads"] < 1:
        raise ValueError(f"--torch_threads must be >= 1, got {o['torch_threads']}")
    if o["split"] not in SPLITS:
        raise ValueError(f"unknown --split {o['split']!r}; choose one of {', '.join(SPLITS)}")
    names = [n.strip() for n in (o["reward_funcs"] or "").split(",") if n.strip()]
    for name in names:
        get_reward(name)  # an unknown name fails now, with the known ones
    examples, task_rewards = load_eval_examples(o["dataset"], o["split"], seed=o["seed"],
                                                dataset_size=o["dataset_size"], eval_size=o["eval_size"])
    funcs = names or list(task_rewards or [])
    if not funcs:
        raise ValueError(f"{o['dataset']!r} recommends no reward function; pass one, e.g. --reward_funcs "
                         "accuracy_reward")
    # the first prompts a run with this seed takes (its PromptStream), each once
    examples = PromptStream(examples, o["seed"]).take(min(o["prompts"], len(examples)))
    model = os.path.abspath(o["model"]) if os.path.isdir(o["model"]) else o["model"]
    settings = {"model": model, "dataset": o["dataset"], "split": o["split"], "seed": o["seed"],
                "dataset_size": o["dataset_size"], "eval_size": o["eval_size"], "k": o["k"],
                "temperature": o["temperature"], "top_p": o["top_p"],
                "max_completion_length": o["max_completion_length"], "max_prompt_length": o["max_prompt_length"],
                "reward_funcs": [getattr(f, "__name__", str(f)) for f in funcs],
                "success_threshold": o["success_threshold"]}
    check_writable(o["out"], "--output", name="probe.jsonl")  # first: a folder is no probe file to continue
    done = _resumable(o["out"], settings, examples, o["overwrite"])
    return {"examples": examples, "funcs": funcs, "settings": settings, "done": len(done), "prior": done}


def _resumable(path: Path, settings: dict[str, Any], examples: list[dict], overwrite: bool) -> list[dict]:
    """The records already probed in `path` with the same settings (none for a new or replaced file)."""
    if overwrite or not path.exists() or path.stat().st_size == 0:
        return []
    try:
        header, numbered = read_probe(path)
    except NotAProbeLine as err:  # --output names a file that is no probe: the user's own, never to be edited
        raise ValueError(f"{path} exists and is not a probe file ({err.problem}); choose another --output, or pass "
                         "--overwrite to replace it") from None
    records = [record for _, record in numbered]
    if header is None:
        raise ValueError(f"{path} exists and is not a probe file (its first line holds no settings); choose "
                         "another --output, or pass --overwrite to replace it")
    changed = [f"{key}: {header.get(key)!r} in the file, {settings[key]!r} now" for key in BINDING
               if header.get(key) != settings[key]]
    if changed:
        raise ValueError(f"{path} was probed with other settings ({'; '.join(changed)}); use the same ones to "
                         "continue it, another --output, or --overwrite to start over")
    for i, record in enumerate(records[: len(examples)]):
        if record.get("index") != i or record.get("prompt") != examples[i]["prompt"]:
            raise ValueError(f"{path}: record {i + 1} is not prompt {i} of this dataset and seed; the file was "
                             "edited or the task changed: pass --overwrite to start over")
    return records[: len(examples)]


def _run_probe(plan: dict[str, Any], o: dict[str, Any]) -> None:
    import torch

    from ..data.chat import render_prompt
    from ..logging.jsonl import JsonlAppender
    from ..models import load_model
    from ..rewards import RewardScorer
    from ..rollout import ROLLOUTS, SamplingParams

    if o["torch_threads"]:
        torch.set_num_threads(o["torch_threads"])
    if o["overwrite"] and o["out"].exists():
        o["out"].unlink()
    model, tokenizer = load_model(o["model"], trust_remote_code=o["trust_remote_code"])
    model.eval()  # no dropout while sampling
    examples = [{**e, "prompt_text": render_prompt(e["prompt"], tokenizer)} for e in plan["examples"]]
    backend = ROLLOUTS.make("transformers", model=model, tokenizer=tokenizer,
                            max_prompt_length=o["max_prompt_length"] or None)
    params = SamplingParams(o["max_completion_length"], o["temperature"], o["top_p"])
    writer = JsonlAppender(o["out"])  # cuts a partial last line left by a killed probe
    if plan["done"] == 0:
        from .. import __version__

        writer.append(json.dumps({"probe": plan["settings"], "grposcope_version": __version__}) + "\n")
    batches = probe_batches(examples, backend, RewardScorer(plan["funcs"]), params, o["k"], o["seed"],
                            o["success_threshold"], o["batch_prompts"], start=plan["done"],
                            pad_id=tokenizer.pad_token_id)
    for records in _with_progress(batches, len(examples), plan["prior"]):
        writer.append("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    writer.close()


def probe_batches(examples: list[dict], backend: Any, scorer: Any, params: Any, k: int, seed: int,
                  success_threshold: float, batch_prompts: int, start: int = 0, pad_id: int = 0
                  ) -> Iterator[list[dict[str, Any]]]:
    """The probe's core: k samples of each example from `start` on, `batch_prompts` at a time, generated and
    scored by the trainer's own Drawer (the same backend call, reward inputs and scorer as a training step);
    yields each batch's records. Each example needs its rendered `prompt_text`.

    Sampling is seeded with seed + the index of the batch's first prompt, under a forked torch RNG: a
    resumed probe draws what an uninterrupted one would (with the same batch_prompts)."""
    import torch

    from ..trainer.drawer import Drawer
    from ..trainer.phases import PhaseTimer

    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    for first in range(start, len(examples), batch_prompts):
        chunk = examples[first : first + batch_prompts]
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed + first)
            drawn = Drawer(backend, scorer, params, pad_id, PhaseTimer()).draw(chunk, k)  # (B, k)
        wins = (drawn.rewards >= success_threshold).sum(dim=1)  # (B,)
        yield [_probe_record(first + i, e, k, int(wins[i]), float(drawn.lengths[i].mean()))
               for i, e in enumerate(chunk)]


def _probe_record(index: int, example: dict, k: int, successes: int, mean_length: float) -> dict[str, Any]:
    record: dict[str, Any] = {"index": index, "prompt": example["prompt"]}
    record.update({key: example[key] for key in ("answer", "level") if key in example})
    record.update(k=k, successes=successes, pass_rate=successes / k, mean_length=round(mean_length, 2))
    return record


def _with_progress(batches: Iterator[list[dict]], total: int, prior: list[dict]) -> Iterator[list[dict]]:
    """The batches, passed through while a rich bar over prompts shows in a terminal, or one plain line per
    batch elsewhere (a log file, CI: a live bar there would be thousands of redraws). The pass rate shown
    counts the `prior` records of a resumed probe too."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..logging.console import eta_seconds, format_eta

    done = start = len(prior)
    t0, wins, samples = time.monotonic(), sum(r["successes"] for r in prior), sum(r["k"] for r in prior)
    bar = Progress(TextColumn("[bold]probe"), BarColumn(), MofNCompleteColumn(), "prompts",
                   TextColumn("{task.fields[rate]}"), TimeElapsedColumn()) if Console().is_terminal else None
    task = bar.add_task("probe", total=total, completed=done, rate="") if bar else None
    try:
        if bar:
            bar.start()
        for records in batches:
            done += len(records)
            wins, samples = wins + sum(r["successes"] for r in records), samples + sum(r["k"] for r in records)
            rate = f"pass rate {wins / samples:.3f}"
            if bar:
                assert task is not None  # added with the bar
                bar.update(task, completed=done, rate=rate)
            else:
                eta = eta_seconds(time.monotonic() - t0, done - start, total - done)
                print(f"probe {done}/{total} prompts | {rate} | eta {format_eta(eta)}", flush=True)
            yield records
    finally:
        if bar:
            bar.stop()


class NotAProbeLine(ValueError):
    """A line of a probe file that is not a JSON object; `problem` says which and how, without the fix, which
    depends on whose file it is."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}; fix or remove that line")
        self.problem = problem


def read_probe(path: Path) -> tuple[dict[str, Any] | None, list[tuple[int, dict[str, Any]]]]:
    """(settings or None, [(line number, record)]) of a probe JSONL file. A line that is not a JSON object
    names the file and the line; a partial last line (a killed probe: no newline after it) is skipped."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; make it with grposcope probe (or use --from_run RUN)")
    lines = path.read_text(encoding="utf-8").split("\n")
    header, records = None, []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            if number == len(lines):
                break
            raise NotAProbeLine(path, f"line {number} is not JSON: {err.msg}") from None
        if not isinstance(record, dict):
            raise NotAProbeLine(path, f"line {number} is not a JSON object")
        if number == 1 and isinstance(record.get("probe"), dict) and "successes" not in record:
            header = record["probe"]
        else:
            records.append((number, record))
    return header, records


def _print_probe_summary(records: list[dict[str, Any]], o: dict[str, Any]) -> None:
    """Per level and overall: prompts, mean pass rate, prompts never / always solved (they never mix)."""
    from rich.table import Table

    table = Table(title=f"pass rates, k = {o['k']} samples per prompt")
    for header in ("level", "prompts", "mean pass rate", "never solved", "always solved"):
        table.add_column(header, justify="left" if header == "level" else "right")
    levels = sorted({str(r["level"]) for r in records if "level" in r})
    for level, group in [*((lv, [r for r in records if str(r.get("level")) == lv]) for lv in levels),
                         ("all", records)]:
        if group:
            table.add_row(markup_safe(level), str(len(group)), f"{sum(r['pass_rate'] for r in group) / len(group):.3f}",
                          str(sum(r["successes"] == 0 for r in group)),
                          str(sum(r["successes"] == r["k"] for r in group)))
    wide_console().print(table)
    typer.echo(f"{len(records)} prompts of {o['dataset']} ({o['split']} split) probed with {o['model']}, written "
               f"to {o['out']}; next: grposcope forecast {o['out']}")


