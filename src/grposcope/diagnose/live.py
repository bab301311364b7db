"""The detectors during a run: `LiveDiagnosis` keeps the logged steps, diagnoses them every `every` steps, says
each warning or critical finding once (when it first fires or gets worse), and writes `findings.json` at the end.

grposcope's trainer and its TRL subclass feed it their metrics; `integrations/trl_callback.py` feeds it a stock
TRL run's logs. The findings are those of `grposcope diagnose` on the same log: one set of detectors.
A resumed run gets back what it had (`state_dict()` in grposcope's checkpoints; `replay` of the steps logged before
where a checkpoint does not hold it, as TRL's log_history), so nothing already said is said again.
"""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from ..files import write_text_atomic
from ..logging.jsonl import json_safe
from ..runs.catalogue import resolve
from ..runs.collect import NOT_METRICS, UNKNOWN_RANK
from ..runs.record import Run
from .engine import Diagnosis, Options, diagnose, document
from .findings import Finding, rank, without_applied

logger = logging.getLogger("grposcope")
FINDINGS_FILE = "findings.json"
FIX_HOSTS = ("grposcope", "trl", "verl")  # Fix's fields: the option names a said finding's fix line uses


def finding_key(f: Finding) -> str:
    """What stays the same while a finding's figures change: its detector and its title without numbers."""
    return f"{f.detector}: {re.sub(r'[0-9][0-9.,%]*', '#', f.title)}"


class LiveDiagnosis:
    """`add(step, metrics)` once per logged step (any spelling the catalogue knows); `finish()` at the end."""

    def __init__(self, name: str, options: Options = Options(), every: int = 10,
                 output_dir: str | Path | None = None, fix: str = "grposcope",
                 settings: Mapping[str, Any] | None = None) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1 (steps between diagnoses), got {every}")
        if fix not in FIX_HOSTS:
            raise ValueError(f"fix must be one of {', '.join(FIX_HOSTS)} (whose option names a said fix uses), "
                             f"got {fix!r}")
        self.name, self.options, self.every, self.fix = name, options, every, fix
        self.settings = dict(settings or {})  # the run's own options: a said fix never names one already on
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.steps: list[int] = []
        self.series: dict[str, list[float]] = {}
        self.ranks: dict[str, int] = {}  # name -> the catalogue rank of the spelling that set the last step's value
        self.unknown: dict[str, int] = {}  # keys the catalogue does not know -> values seen (kept under their key)
        self.nonfinite: dict[str, list[int]] = {}  # name -> steps that logged NaN or +-inf (said once per name)
        self.reported: dict[str, str] = {}  # finding_key -> the severity last said
        self.added = 0
        # the held-out score before training (a trainer's step-0 evaluation), as a log's summary gives it: the
        # entropy alarm's replay reads a gain from it
        self.eval_before: float | None = None
        self.last: Diagnosis | None = None  # the last diagnosis `check` made
        self.unwritable = False  # a mid-run findings.json could not be written (said once)

    def add(self, step: int, metrics: Mapping[str, Any], check: bool = True) -> list[Finding]:
        """Records one step's metrics; every `every` added steps, diagnoses and returns what is newly said.
        A step logged again (TRL's eval record after its train record) merges into the same step; as the log
        readers do, of two spellings of one metric the catalogue's preferred one wins."""
        if not self.steps or step > self.steps[-1]:
            self.steps.append(int(step))
            for values in self.series.values():
                values.append(math.nan)
            self.ranks = {}
            self.added += 1
        elif step != self.steps[-1]:
            return []  # an older step (a log replayed out of order): already in
        for key, value in metrics.items():
            number = _number(value)
            if number is None or key in NOT_METRICS:
                continue
            found = resolve(key)
            name, rank = found if found is not None else (key, UNKNOWN_RANK)
            if found is None:
                self.unknown[key] = self.unknown.get(key, 0) + 1
            if rank > self.ranks.get(name, rank):
                continue  # a less preferred spelling of a metric this step already has
            self.ranks[name] = rank
            column = self.series.setdefault(name, [math.nan] * len(self.steps))
            column[-1] = number
            if not math.isfinite(number):
                self._nonfinite(name, key, check)
        if check and self.added % self.every == 0:
            return self.check()
        return []

    def _nonfinite(self, name: str, key: str, say: bool) -> None:
        """A NaN or infinite value: kept as logged (the gradient detector judges a non-finite norm or loss), and
        said once per metric, as `grposcope diagnose` says it of a log (a problem line)."""
        where = self.nonfinite.setdefault(name, [])
        if where and where[-1] == self.steps[-1]:
            return
        where.append(self.steps[-1])
        if say and len(where) == 1:
            logger.warning("grposcope diagnose at step %d: %s (logged as %s) is NaN or infinite; later steps that "
                           "log it so are counted in findings.json and findings.md", self.steps[-1], name, key)

    def run(self) -> Run:
        problems = [f"{name} is NaN or infinite at {len(where)} step(s) (the first: {where[0]})"
                    for name, where in self.nonfinite.items()]
        return Run(self.name, self.output_dir or Path("."), "live", list(self.steps),
                   {k: list(v) for k, v in self.series.items()}, config=_config(self.options),
                   unknown=dict(self.unknown), problems=problems, eval_before=self.eval_before,
                   nonfinite={k: list(v) for k, v in self.nonfinite.items()})

    def check(self, say: bool = True) -> list[Finding]:
        """Diagnoses the steps so far; says (and returns) the warning and critical findings not said before at
        this severity or worse."""
        if len(self.steps) < 2:
            return []
        result = diagnose(self.run(), self.options)
        new = self._say(result.findings, say)
        if new and self.output_dir is not None:  # a finding fired or worsened: findings.json now, not at the end
            try:
                write_findings(self.output_dir / FINDINGS_FILE, result)
            except OSError as err:  # training goes on; said once (finish() tries again, and raises)
                if not self.unwritable:
                    logger.warning("grposcope diagnose: %s not written (%s)", self.output_dir / FINDINGS_FILE, err)
                self.unwritable = True
        self.last = result
        return new

    def finish(self) -> Diagnosis:
        """The last diagnosis, said as `check` says, and written to output_dir/findings.json (when given)."""
        result = diagnose(self.run(), self.options)
        if len(self.steps) >= 2:
            self._say(result.findings, say=True)
        if self.output_dir is not None:
            write_findings(self.output_dir / FINDINGS_FILE, result)
        return result

    def _say(self, findings: list[Finding], say: bool) -> list[Finding]:
        new = []
        for f in findings:
            if rank(f.severity) < rank("warning"):
                continue
            key = finding_key(f)
            if key in self.reported and rank(self.reported[key]) >= rank(f.severity):
                continue
            self.reported[key] = f.severity
            new.append(f)
            if say:
                logger.warning("grposcope diagnose at step %d: [%s] %s: %s\n  fix: %s", self.steps[-1],
                               f.severity, f.detector, f.title,
                               without_applied(getattr(f.fix, self.fix), self.settings))
        return new

    def replay(self, records: Iterable[Any], last_step: int | None = None) -> None:
        """The steps a resumed run logged before (metrics.jsonl's records, TRL's log_history), up to `last_step`,
        added without a word. What counts as said is what the run had said by its last diagnosis among them, so
        a finding that fired after that diagnosis is still said at the next one."""
        kept = [r for r in records if isinstance(r, Mapping) and _is_step(r.get("step"))
                and (last_step is None or r["step"] <= last_step)]
        last, new = (self.steps[-1] if self.steps else None), 0
        for record in kept:  # the steps `add` will count: each one above the one before
            if last is None or record["step"] > last:
                last, new = record["step"], new + 1
        due = (self.added + new) // self.every * self.every  # the count at the run's last diagnosis
        for record in kept:
            self.add(record["step"], record, check=False)
            if due > 0 and self.added == due:
                self.check(say=False)
                due = 0

    def state_dict(self) -> dict[str, Any]:
        """What it has accumulated and what it has said: plain lists and dicts (a checkpoint's torch.save, or JSON)."""
        return {"steps": list(self.steps), "series": {k: list(v) for k, v in self.series.items()},
                "ranks": dict(self.ranks), "unknown": dict(self.unknown), "reported": dict(self.reported),
                "added": self.added, "nonfinite": {k: list(v) for k, v in self.nonfinite.items()},
                "eval_before": self.eval_before}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        steps = [int(s) for s in state["steps"]]
        series = {k: [float(x) for x in v] for k, v in state["series"].items()}
        if any(len(v) != len(steps) for v in series.values()):
            raise ValueError("a live diagnosis state whose series are not aligned with its steps")
        self.steps, self.series = steps, series
        before = state.get("eval_before")  # older checkpoints: none
        self.eval_before = None if before is None else float(before)
        self.ranks = {k: int(v) for k, v in state.get("ranks", {}).items()}
        self.unknown = {k: int(v) for k, v in state.get("unknown", {}).items()}
        self.nonfinite = {k: [int(s) for s in v] for k, v in state.get("nonfinite", {}).items()}
        self.reported = dict(state["reported"])
        self.added = int(state.get("added", len(self.steps)))


def write_findings(path: Path, result: Diagnosis) -> None:
    """findings.json: the findings document of this one run (engine.document, the shape `grposcope diagnose
    --format json` writes), written whole or not at all (files.write_text_atomic: a temporary file, then a
    rename; a full disk says so)."""
    payload = document([result])
    write_text_atomic(path, json.dumps(json_safe(payload), indent=2, allow_nan=False) + "\n")


def metrics_records(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a metrics.jsonl (none when it is missing); a half-written line (a killed run) is skipped."""
    if not path.is_file():
        return
    with path.open("rb") as handle:
        for raw in handle:
            try:
                record = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                continue
            if isinstance(record, dict):
                yield record


def _is_step(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if hasattr(value, "item") and callable(value.item):  # a 0-d tensor or numpy number
        try:
            return float(value.item())
        except (TypeError, ValueError):
            return None
    return None


def _config(options: Options) -> dict[str, Any]:
    return {k: getattr(options, k) for k in ("num_generations", "max_completion_length", "max_steps")
            if getattr(options, k) is not None}
