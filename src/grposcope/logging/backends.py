"""Metrics backends: where a step's metrics go (metrics.jsonl, TensorBoard, Weights & Biases).

Every backend has the same two methods (`MetricsBackend`) and is built by a factory registered in `LOGGERS`
that takes one `RunInfo`. `report_to` picks the backends the way transformers and TRL do: a name, a list of
names, "all" (every backend whose library is installed) or "none". The jsonl backend is always on.

A backend that can show text may also have `log_completions` (`CompletionsBackend`): TensorBoard shows each
sample of completions as a markdown table, W&B as a `wandb.Table`.

TensorBoard and W&B see every metric under `train/` (`train/collapse/acr`), except names that already start
with `eval/`, which keep their name, so that the dashboards group training and evaluation curves apart.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from grposcope.core.registry import Registry

from .completions import cell_text, markdown_table, table_rows
from .jsonl import JsonlBackend

METRICS_FILE = "metrics.jsonl"
WANDB_RUN_ID_FILE = "wandb_run_id"


@runtime_checkable
class MetricsBackend(Protocol):
    """Receives the float metrics of each optimizer step."""

    def log(self, step: int, metrics: dict[str, float]) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class CompletionsBackend(Protocol):
    """The optional method of a `MetricsBackend`: RunLogger hands it each sample of completions, and skips
    the backends without it (a scalar-only backend need not know completions exist).

    `rows` are checked and JSON-able (see `completions.completion_rows`): prompt, completion, rewards (one
    score per reward function, None where it returned None), reward, advantage, then extra columns.
    """

    def log_completions(self, step: int, rows: list[dict[str, Any]]) -> None: ...


@dataclass
class RunInfo:
    """What a backend factory may need to know about the run."""

    output_dir: Path
    run_name: str | None = None
    config: dict[str, Any] | None = None
    resume_step: int | None = None  # the checkpoint step a resumed run starts from; None for a new run
    logging_dir: Path | None = None  # TensorBoard's directory; None means <output_dir>/runs
    project: str | None = None  # W&B project; None means $WANDB_PROJECT, else "grposcope"
    note: Callable[[str], None] = field(default=print)  # one-time messages for the user


LOGGERS: Registry[MetricsBackend] = Registry("logger")
Factory = Callable[[RunInfo], MetricsBackend]


def register(name: str, requires: tuple[str, ...] = ()) -> Callable[[Factory], Factory]:
    """Registers a backend factory: a class or function called with one `RunInfo`, returning a backend.

    `requires` names the modules it imports; `report_to="all"` picks the backend only when they are installed.
    """

    def decorator(factory: Factory) -> Factory:
        factory.requires = requires  # type: ignore[attr-defined]  # read by report_to='all'
        return LOGGERS.register(name)(factory)

    return decorator


def is_installed(name: str) -> bool:
    """Whether the libraries the backend `name` needs can be imported (without importing them)."""
    requires = getattr(LOGGERS.get(name), "requires", ())
    return all(importlib.util.find_spec(module) is not None for module in requires)


def resolve_report_to(report_to: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """The backend names `report_to` asks for, with "jsonl" first (it is always on).

    Accepts what transformers' `TrainingArguments.report_to` accepts: None or "none" (no extra backend),
    "all" (every registered backend whose library is installed), a name, a comma-separated string of names,
    or a list of names.
    """
    if report_to is None:
        report_to = "none"
    if isinstance(report_to, str):
        report_to = report_to.split(",")
    names = [name.strip() for name in report_to if name.strip()]
    if "none" in names and len(names) > 1:
        raise ValueError(f"report_to={names}: 'none' cannot be combined with other loggers; drop 'none'")
    if "all" in names and len(names) > 1:
        raise ValueError(f"report_to={names}: 'all' already means every installed logger; use it alone")
    if names == ["all"]:
        names = [name for name in LOGGERS.names() if is_installed(name)]
    unknown = [name for name in names if name not in LOGGERS and name != "none"]
    if unknown:
        known = ", ".join(["all", "none", *LOGGERS.names()])
        raise ValueError(f"unknown logger(s) {unknown} in report_to; known: {known}")
    resolved = ["jsonl"]
    for name in names:
        if name not in resolved and name != "none":
            resolved.append(name)
    return resolved


def prefixed(metrics: dict[str, float]) -> dict[str, float]:
    """Dashboard names: `train/<name>`, except names under `eval/`, which are kept."""
    return {(name if name.startswith("eval/") else f"train/{name}"): value for name, value in metrics.items()}


@register("jsonl")
def _make_jsonl(run: RunInfo) -> JsonlBackend:
    return JsonlBackend(run.output_dir / METRICS_FILE, resume_step=run.resume_step)


class TensorBoardBackend:
    """Scalars through torch's SummaryWriter (event files readable by TensorBoard)."""

    def __init__(self, log_dir: str | os.PathLike[str], resume_step: int | None = None,
                 config: dict[str, Any] | None = None) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as err:
            raise ImportError(
                f"report_to='tensorboard' needs the tensorboard package ({err}): pip install "
                "'grposcope[tensorboard]', or drop 'tensorboard' from report_to", name="tensorboard"
            ) from None
        self.log_dir = Path(log_dir)
        # purge_step makes TensorBoard hide the events a killed run wrote after its checkpoint, so a
        # resumed run's curves have no doubled segment.
        purge_step = None if resume_step is None else resume_step + 1
        self._writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=purge_step)
        if config:
            self._writer.add_text("config", "```\n" + json.dumps(config, indent=2, default=str) + "\n```")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        for tag, value in prefixed(metrics).items():
            self._writer.add_scalar(tag, value, global_step=step)
        # SummaryWriter otherwise flushes every 2 minutes; a run killed in between would lose those steps.
        self._writer.flush()

    def log_completions(self, step: int, rows: list[dict[str, Any]]) -> None:
        """One text entry per call: the rows as a markdown table, under the tag `completions`."""
        self._writer.add_text("completions", markdown_table(rows), global_step=step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


@register("tensorboard", requires=("tensorboard",))
def _make_tensorboard(run: RunInfo) -> TensorBoardBackend:
    log_dir = run.logging_dir if run.logging_dir is not None else run.output_dir / "runs"
    return TensorBoardBackend(log_dir, resume_step=run.resume_step, config=run.config)


def _import_wandb():
    try:
        import wandb
    except ImportError as err:
        raise ImportError(
            f"report_to='wandb' needs the wandb package ({err}): pip install 'grposcope[wandb]', or drop 'wandb' "
            "from report_to", name="wandb"
        ) from None
    return wandb


def wandb_mode(wandb, note: Callable[[str], None]) -> str | None:
    """$WANDB_MODE if set; otherwise "offline" when no W&B credentials are configured, else None (online)."""
    mode = os.environ.get("WANDB_MODE")
    if mode:
        return mode
    # login(prompt=False, verify=False) only looks for a key (environment, settings, .netrc): no network.
    if wandb.login(prompt=False, verify=False):
        return None
    note(
        "W&B: no API key found, logging offline. Run `wandb login` (or set WANDB_API_KEY) to log online, "
        "or upload this run later with `wandb sync <output_dir>/wandb/offline-run-*`."
    )
    return "offline"


def _wandb_run_id(output_dir: Path, resume_step: int | None) -> str:
    """The W&B run id, kept in the output dir so that a resumed run continues the same W&B run."""
    path = output_dir / WANDB_RUN_ID_FILE
    if resume_step is not None and path.is_file():
        return path.read_text(encoding="utf-8").strip()
    run_id = secrets.token_hex(4)  # W&B ids may hold letters, digits, '-' and '_'
    path.write_text(run_id + "\n", encoding="utf-8")
    return run_id


class WandbBackend:
    """Weights & Biases: one W&B run per training run, stored under <output_dir>/wandb."""

    def __init__(self, output_dir: str | os.PathLike[str], run_name: str | None = None,
                 config: dict[str, Any] | None = None, project: str | None = None,
                 resume_step: int | None = None, note: Callable[[str], None] = print) -> None:
        wandb = _import_wandb()
        self._wandb = wandb  # for wandb.Table
        output_dir = Path(output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        self._run = wandb.init(
            project=project or os.environ.get("WANDB_PROJECT", "grposcope"),
            name=run_name,
            dir=str(output_dir),
            config=config,
            mode=wandb_mode(wandb, note),
            id=_wandb_run_id(output_dir, resume_step),
            resume="allow",
        )

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self._run.log(prefixed(metrics), step=step)

    def log_completions(self, step: int, rows: list[dict[str, Any]]) -> None:
        """A `wandb.Table` logged as `completions`: step, prompt, completion, one column per reward
        function, reward, advantage, extras. Chat messages become "role: content" text, which W&B shows
        whole, and other lists and dicts compact JSON; numbers stay numbers, so that the columns sort. Mixed
        types are allowed because an extra column may hold None in one row and text in another."""
        columns, data = table_rows(step, rows)
        data = [[cell_text(cell) if isinstance(cell, (list, dict)) else cell for cell in cells]
                for cells in data]
        table = self._wandb.Table(columns=columns, data=data, allow_mixed_types=True)
        self._run.log({"completions": table}, step=step)

    def close(self) -> None:
        self._run.finish()


@register("wandb", requires=("wandb",))
def _make_wandb(run: RunInfo) -> WandbBackend:
    return WandbBackend(run.output_dir, run_name=run.run_name, config=run.config, project=run.project,
                        resume_step=run.resume_step, note=run.note)
