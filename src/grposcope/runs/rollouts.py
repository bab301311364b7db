"""The rollouts a stock TRL or verl run wrote, read back as groups of rewards per step.

Neither engine needs grposcope for this: both already write every group's rewards (docs/report.md, "Already
running stock TRL or verl?").
- TRL (1.16, `log_completions=True`): `output_dir/completions/completions_{step:05d}.parquet` at every logging
  step, holding the last generation batch (`GRPOTrainer.log`): columns `step`, `prompt`, `completion`, one per
  reward function, the `log_extra` columns and `advantage`. TRL's sampler repeats each prompt `num_generations`
  times in a row, so a group is a block of G consecutive rows with one prompt; G is read off the file (the
  greatest common divisor of the lengths of the runs of equal prompts). The reward is TRL's: the reward
  functions' columns summed (reward_weights 1, TRL's default), a row that every function left None is
  unscorable and leaves its group. With `steps_per_generation` or `num_iterations` above 1, several logging
  steps log the same generation batch: a file identical to the one before it is counted once.
- verl (0.9.1, `trainer.rollout_data_dir=DIR`): `DIR/{step}.jsonl`, one line per rollout with `input`,
  `output`, `gts`, `score` (the summed token-level score, before any KL penalty) and `step`
  (`RayPPOTrainer._write_generations`). Rows may be reordered and carry no uid, so a group is the rows of one
  step with the same `input`. Files are read a line at a time: a group's prompt is kept as a 16-byte digest,
  so memory grows with the number of rollouts (a float each), not with their text.

Every file that cannot be read whole gives one note naming it and what was wrong; the rest is still read.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any, Iterator

from .record import to_float

TRL_FOLDER = "completions"
TRL_FILE = re.compile(r"completions_(\d+)\.parquet")
VERL_FILE = re.compile(r"(\d+)\.jsonl")
TRL_FIXED = ("step", "prompt", "completion", "advantage", "image", "images")  # not reward columns


@dataclass
class StepGroups:
    """One step's groups: the rewards of each (2 or more completions)."""

    step: int
    rewards: list[list[float]]
    advantages: list[list[float]] | None = None  # TRL's advantage column, where every group has it

    def sizes(self) -> Counter:
        return Counter(len(r) for r in self.rewards)


@dataclass
class Rollouts:
    """What a stock run's rollout files hold, step by step."""

    kind: str  # "trl" or "verl"
    found: str  # what was read, said to the user
    steps: list[StepGroups]
    notes: list[str] = field(default_factory=list)

    def group_sizes(self) -> Counter:
        return reduce(lambda a, b: a + b, (s.sizes() for s in self.steps), Counter())

    def reward_range(self) -> tuple[float, float]:
        values = [v for s in self.steps for group in s.rewards for v in group]
        return min(values), max(values)


@dataclass
class Row:
    """One rollout as written, for re-scoring (`grposcope audit-rewards`)."""

    step: int
    prompt: str  # the prompt's text (chat messages as JSON)
    completion: str
    answer: Any  # the reference answer, None where the file has none
    line: int  # the row's position in its file, from 1


def digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def prompt_text(value: Any) -> str:
    """A prompt as one string: text as is, chat messages (TRL's conversational prompts) as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and not math.isinf(value):
        number = to_float(value)
        return number if math.isfinite(number) else None
    return None


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# --------------------------------------------------------------------------- detection


def trl_files(folder: Path) -> list[tuple[int, Path]]:
    """(step, path) of TRL's completion files in `folder/completions`, by step."""
    inner = folder / TRL_FOLDER
    if not inner.is_dir():
        return []
    return _checked(sorted((int(m.group(1)), p) for p in inner.iterdir() if (m := TRL_FILE.fullmatch(p.name))))


def verl_files(folder: Path) -> list[tuple[int, Path]]:
    """(step, path) of verl's rollout dump files `{step}.jsonl` in `folder`, by step."""
    if not folder.is_dir():
        return []
    return _checked(sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := VERL_FILE.fullmatch(p.name))))


def _checked(files: list[tuple[int, Path]]) -> list[tuple[int, Path]]:
    """`files`, each a regular file: a FIFO, a socket or a folder under a rollout file's name raises ValueError
    naming it (reading a FIFO waits for ever)."""
    from .file_kinds import check_file

    for _, path in files:
        check_file(path)
    return files


# --------------------------------------------------------------------------- verl


def read_verl(folder: Path, steps: set[int] | None = None) -> Rollouts:
    """The groups of every `{step}.jsonl` in `folder` (only `steps`, when given), one line at a time."""
    files = verl_files(folder)
    if not files:
        raise FileNotFoundError(f"{folder} holds no verl rollout file ({{step}}.jsonl); verl writes them with "
                                "trainer.rollout_data_dir=DIR")
    rollouts = Rollouts("verl", "", [])
    for step, path in files:
        if steps is not None and step not in steps:
            continue
        members: dict[bytes, list[float]] = {}
        not_numbers = []
        for number, record in _verl_records(path, rollouts.notes, need=("input", "score")):
            score = _number(record["score"])
            if score is None or math.isnan(score):
                not_numbers.append(number)
                continue
            members.setdefault(digest(prompt_text(record["input"])), []).append(score)
        if not_numbers:
            rollouts.notes.append(f"{path}: {plural(len(not_numbers), 'line')} whose score is not a number (line "
                                  f"{not_numbers[0]}{' and others' if len(not_numbers) > 1 else ''}): left out")
        groups = _whole_groups(members, path, rollouts.notes)
        if groups:
            rollouts.steps.append(StepGroups(step, groups))
    rollouts.notes[:] = _merge_notes(rollouts.notes)
    seen = [s.step for s in rollouts.steps]
    rows = sum(len(g) for s in rollouts.steps for g in s.rewards)
    rollouts.found = (f"a verl rollout dump ({plural(len(files), 'file')} {{step}}.jsonl, "
                      f"{rows:,} rollouts in {plural(sum(len(s.rewards) for s in rollouts.steps), 'group')}"
                      f"{', steps ' + step_span(seen) if seen else ''})")
    return rollouts


CUT = object()  # json_lines: the last line, cut short
NOT_JSON = object()  # json_lines: a whole line that is not JSON


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, the parsed line) of each non-blank line of a JSON-lines file, a line at a time; a line
    that is not JSON gives NOT_JSON, or CUT when it is the last one and has no newline (its writer still at
    work, or killed). A FIFO, a socket or a folder at `path` raises ValueError naming it, unopened."""
    from .file_kinds import check_file

    check_file(path)
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                yield number, json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):  # a line nested past Python's limit
                yield number, NOT_JSON if raw.endswith(b"\n") else CUT


def _verl_records(path: Path, notes: list[str], need: tuple[str, ...]) -> Iterator[tuple[int, dict]]:
    """(line number, record) of each line of a verl dump that has the `need`ed keys; the others noted."""
    lacking: Counter = Counter()
    bad: list[int] = []
    cut = False
    count = 0
    for number, record in json_lines(path):
        if record is CUT:
            cut = True
            continue
        if not isinstance(record, dict):  # not JSON, or JSON but not an object
            bad.append(number)
            continue
        missing = [key for key in need if key not in record]
        if missing:
            lacking.update(missing)
            continue
        count += 1
        yield number, record
    if cut:
        notes.append(f"{path}: the last line is cut short (a run still writing it?); read the {count} lines "
                     "before it")
    if bad:
        notes.append(f"{path}: {plural(len(bad), 'line')} not a JSON object (line {bad[0]}"
                     f"{' and others' if len(bad) > 1 else ''}): skipped")
    for key, n in lacking.items():
        notes.append(f"{path}: {plural(n, 'line')} without '{key}': skipped (is it verl's rollout dump?)")
    if count == 0 and not cut and not bad and not lacking:
        notes.append(f"{path}: empty")


def iter_verl_rows(folder: Path, steps: set[int] | None = None) -> Iterator[Row]:
    """Every rollout of the dump (of `steps`, when given) with its text and `gts`, a line at a time."""
    notes: list[str] = []
    for step, path in verl_files(folder):
        if steps is None or step in steps:
            for number, record in _verl_records(path, notes, need=("input", "output")):
                yield Row(step, prompt_text(record["input"]), str(record["output"]), record.get("gts"), number)
    for note in _merge_notes(notes):  # what could not be read, said as the report says it
        warnings.warn(note, RuntimeWarning, stacklevel=2)


# --------------------------------------------------------------------------- TRL


def _parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("reading TRL's completions_*.parquet needs pyarrow", name="pyarrow") from None
    return pq


def read_trl(folder: Path, reward_names: list[str] | None, steps: set[int] | None = None) -> Rollouts:
    """The groups of TRL's completion files in `folder/completions`. `reward_names`: TRL's reward function
    names (from its log_history's `rewards/<name>/mean`); None reads every numeric column but `step` and
    `advantage` as one."""
    files = trl_files(folder)
    if not files:
        raise FileNotFoundError(f"{folder / TRL_FOLDER} holds no completions_*.parquet; TRL writes them with "
                                "log_completions=True")
    pq = _parquet()
    rollouts = Rollouts("trl", "", [])
    if reward_names is None:
        rollouts.notes.append("no trainer_state.json yet (TRL saves it with each checkpoint): every numeric column "
                              "of the parquet files but step and advantage is read as a reward function's")
    tables = []
    for step, path in files:
        if steps is not None and step not in steps:
            continue
        table = _trl_table(pq, path, reward_names, rollouts.notes)
        if table is not None:
            tables.append((step, path, table))
    size = _trl_group_size([t for _, _, t in tables])
    previous = None
    repeats = 0
    for step, path, (prompts, rewards, advantages) in tables:
        key = digest(json.dumps([prompts, rewards, advantages], default=str))
        if key == previous:  # the same generation batch, logged again at a later logging step
            repeats += 1
            continue
        previous = key
        groups = _trl_groups(step, prompts, rewards, advantages, size, path, rollouts.notes)
        if groups is not None:
            rollouts.steps.append(groups)
    if repeats:
        rollouts.notes.append(f"{plural(repeats, 'file')} repeat the generation batch of the file before "
                              "(TRL generates once every steps_per_generation x num_iterations steps and logs "
                              "the last batch at each logging step): counted once")
    rollouts.notes[:] = _merge_notes(rollouts.notes)
    seen = [s.step for s in rollouts.steps]
    rollouts.found = (f"a stock TRL output folder ({plural(len(files), 'completions parquet file')}"
                      f"{', steps ' + step_span(seen) if seen else ''}, groups of {size or '?'} read off the "
                      "prompts)")
    return rollouts


def _trl_table(pq: Any, path: Path, reward_names: list[str] | None, notes: list[str]
               ) -> tuple[list[str], list[float], list[float] | None] | None:
    """(prompt texts, summed rewards, advantages or None) of one file; None (noted) when it cannot serve."""
    try:
        schema = pq.read_schema(path)
    except Exception as err:  # pyarrow's ArrowInvalid and OSError: a file cut short, or not parquet
        notes.append(f"{path}: not a readable parquet file ({str(err).splitlines()[0][:120]}); a file TRL is "
                     "still writing is read by the next report: skipped")
        return None
    names = list(schema.names)
    if "prompt" not in names:
        notes.append(f"{path}: no 'prompt' column (columns: {', '.join(names)}), so its rows cannot be grouped: "
                     "skipped (written by another TRL version?)")
        return None
    if reward_names is None:
        numeric = {"int", "double", "float", "bool", "int64", "int32", "float64", "float32", "halffloat"}
        columns = [n for n in names if n not in TRL_FIXED and str(schema.field(n).type) in numeric]
    else:
        columns = [n for n in reward_names if n in names]
        missing = [n for n in reward_names if n not in names]
        if missing:
            notes.append(f"{path}: no column for the reward function(s) {', '.join(missing)} that TRL logged: "
                         "the reward is the sum of the others")
    if not columns:
        notes.append(f"{path}: no reward column (columns: {', '.join(names)}): skipped")
        return None
    wanted = ["prompt", *columns] + (["advantage"] if "advantage" in names else [])
    try:
        data = pq.read_table(path, columns=wanted).to_pydict()
    except Exception as err:
        notes.append(f"{path}: could not be read ({str(err).splitlines()[0][:120]}): skipped")
        return None
    if "advantage" not in names:
        notes.append(f"{path}: no 'advantage' column (another TRL version?): collapse/acr_post and the "
                     "no-signal alarm are not computed from it")
    prompts = [prompt_text(p) for p in data["prompt"]]
    rewards = []
    for i in range(len(prompts)):
        values = [_number(data[c][i]) for c in columns]
        finite = [v for v in values if v is not None and not math.isnan(v)]
        rewards.append(math.fsum(finite) if finite else math.nan)  # TRL: nansum; all None -> unscorable
    # a cell that is no finite number (None, a string, inf) is NaN, as a missing one: never None in the sums
    advantages = [math.nan if (a := _number(cell)) is None else a for cell in data["advantage"]] \
        if "advantage" in data else None
    return prompts, rewards, advantages


def _trl_group_size(tables: list[tuple[list[str], list[float], Any]]) -> int | None:
    """num_generations: the greatest common divisor of the lengths of the runs of equal consecutive prompts."""
    lengths = []
    for prompts, _, _ in tables:
        run = 1
        for a, b in zip(prompts, prompts[1:]):
            if a == b:
                run += 1
            else:
                lengths.append(run)
                run = 1
        if prompts:
            lengths.append(run)
    return reduce(math.gcd, lengths) if lengths else None


def _trl_groups(step: int, prompts: list[str], rewards: list[float], advantages: list[float] | None, size: int | None,
                path: Path, notes: list[str]) -> StepGroups | None:
    if not size or size < 2:
        notes.append(f"{path}: no group of two or more completions (each prompt appears once in a row): skipped")
        return None
    if len(prompts) % size:
        notes.append(f"{path}: {len(prompts)} rows is not a whole number of groups of {size}: the last "
                     f"{len(prompts) % size} left out")
    out = StepGroups(step, [], [] if advantages is not None else None)
    unscorable = 0
    for start in range(0, len(prompts) - size + 1, size):
        block = range(start, start + size)
        kept = [i for i in block if not math.isnan(rewards[i])]
        unscorable += size - len(kept)
        if len(kept) < 2:
            continue
        out.rewards.append([rewards[i] for i in kept])
        if out.advantages is not None and advantages is not None:
            out.advantages.append([advantages[i] for i in kept])
    if unscorable:
        notes.append(f"{path}: {plural(unscorable, 'completion')} every reward function left None "
                     "(unscorable, NaN in TRL): left out of their groups, as TRL's nanstd does")
    return out if out.rewards else None


def iter_trl_rows(folder: Path, answer_column: str, steps: set[int] | None = None) -> Iterator[Row]:
    """Every completion of TRL's files (of `steps`, when given) with the reference in `answer_column`."""
    pq = _parquet()
    previous = None
    for step, path in trl_files(folder):
        if steps is not None and step not in steps:
            continue
        try:
            schema = pq.read_schema(path)
        except Exception as err:  # a file cut short (TRL still writing it), or not parquet: noted, not fatal
            warnings.warn(f"{path}: not a readable parquet file ({str(err).splitlines()[0][:120]}): skipped",
                          RuntimeWarning, stacklevel=2)
            continue
        missing = [c for c in ("prompt", "completion", answer_column) if c not in schema.names]
        if missing:
            raise ValueError(f"{path} has no column {', '.join(repr(m) for m in missing)} (columns: "
                             f"{', '.join(schema.names)}); --answer_column names the column that holds each "
                             "completion's reference answer (a log_extra column: a reward function that calls "
                             "the log_extra it is passed, log_extra('answer', answers))")
        data = pq.read_table(path, columns=["prompt", "completion", answer_column]).to_pydict()
        key = digest(json.dumps(data, default=str))
        if key == previous:
            continue
        previous = key
        for i, (prompt, completion, answer) in enumerate(zip(data["prompt"], data["completion"],
                                                             data[answer_column]), start=1):
            yield Row(step, prompt_text(prompt), _completion_text(completion), answer, i)


def _completion_text(value: Any) -> str:
    """A TRL completion as text: conversational completions are a list of messages; their contents joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in value)
    return str(value)


# --------------------------------------------------------------------------- shared


def _whole_groups(members: dict[bytes, list[float]], path: Path, notes: list[str]) -> list[list[float]]:
    """The groups of two or more rollouts; the single ones noted and left out."""
    single = sum(len(g) < 2 for g in members.values())
    if single:
        notes.append(f"{path}: {plural(single, 'prompt')} with a single rollout (a group of size 1 has no "
                     "advantage; was rollout.n 1, or the file cut short?): left out")
    return [g for g in members.values() if len(g) >= 2]


def _merge_notes(notes: list[str]) -> list[str]:
    """The same note for many files said once, naming the first file and how many others."""
    by_text: dict[str, list[str]] = {}
    for note in notes:
        path, _, rest = note.partition(": ")
        by_text.setdefault(rest if rest else note, []).append(path if rest else "")
    merged = []
    for rest, paths in by_text.items():
        if not paths[0]:
            merged.append(rest)
        elif len(paths) == 1:
            merged.append(f"{paths[0]}: {rest}")
        else:
            merged.append(f"{paths[0]} (and {plural(len(paths) - 1, 'other file')}): {rest}")
    return merged


def step_span(steps: list[int]) -> str:
    """Steps as ranges: 1-20, 25, 30-31."""
    parts, start = [], None
    for i, s in enumerate(steps):
        if start is None:
            start = s
        if i + 1 == len(steps) or steps[i + 1] != s + 1:
            parts.append(str(start) if start == s else f"{start}-{s}")
            start = None
    return ", ".join(parts)
