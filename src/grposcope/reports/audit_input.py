"""The input of `grposcope audit-rewards`: (completion, reference answer) pairs from a completions.jsonl, a JSONL
of pairs, a stock TRL output folder (`--answer_column`) or a verl rollout dump (`gts`)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from ..files import read_utf8
from ..rewards.builtin import gold_latex, reference_answer
from ..rewards.extract import completion_text
from .audit import AuditPair


def _records(path: Path) -> list[tuple[int, dict]]:
    """(line number, object) of each non-blank line; a bad line names the file and line. A bad last line is
    skipped with a warning, as for every JSONL file grposcope reads (a killed writer leaves one)."""
    if not path.is_file():
        raise FileNotFoundError(f"no file at {path}; pass a completions.jsonl or a JSONL of "
                                '{"completion": ..., "answer": ...} pairs')
    lines = read_utf8(path).split("\n")
    last = max((n for n, line in enumerate(lines, 1) if line.strip()), default=0)
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            if number == last and number > 1:
                warnings.warn(f"{path}: skipping the partial last line {number}", RuntimeWarning, stacklevel=3)
                continue
            raise ValueError(f"{path}: line {number} is not JSON ({err.msg}); remove or fix that line") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}: line {number} is a JSON {type(record).__name__}, not an object with a "
                             "completion and an answer")
        records.append((number, record))
    if not records:
        raise ValueError(f"{path} is empty; it needs one JSON object per line")
    return records


def _predates_answers(path: Path) -> ValueError:
    return ValueError(
        f"{path} has no 'answer' column: it was written before grposcope logged each completion's reference "
        "answer, or from training data without an answer or solution column. Add an \"answer\" key to each "
        "line (a short script can compute it from the prompt) and audit that file, or audit a JSONL of "
        '{"completion": ..., "answer": ...} pairs')


def read_audit_pairs(path: str | Path, answer_column: str | None = None, steps: int | None = None
                     ) -> list[AuditPair]:
    """The pairs of a completions.jsonl (it must have the `answer` column), of a pairs JSONL, or of a stock TRL
    or verl run's folder (`answer_column`: the TRL column holding the reference answers). `steps`: only the
    last N steps (of the rows with a step), all by default.

    Fails naming the file (and the line) when a row has no completion, a pairs row has neither `answer` nor
    `solution`, or no row has a reference answer at all."""
    path = Path(path)
    if steps is not None and steps < 1:
        raise ValueError(f"--steps must be >= 1 (the last N steps to audit), got {steps}; leave it out for all")
    if path.is_dir():
        return _stock_pairs(path, answer_column, steps)
    if answer_column is not None:
        raise ValueError(f"--answer_column names the answer column of a stock TRL output folder; {path} is a "
                         "file, whose reference answers are its 'answer' (or 'solution') key: leave it out")
    records = _records(path)
    if steps is not None:
        records = _last_steps_of(records, steps, path)
    is_log = "rewards" in records[0][1] and "step" in records[0][1]
    if is_log and not any("answer" in record for _, record in records):
        raise _predates_answers(path)
    pairs, structured = [], _Structured(path)
    for number, record in records:
        if "completion" not in record:
            raise ValueError(f"{path}: line {number} has no 'completion' key; each line needs a completion and "
                             "an answer")
        if not isinstance(record["completion"], (str, list, dict)):
            raise ValueError(f"{path}: line {number}: the completion is a {type(record['completion']).__name__}; "
                             "give its text, or chat messages")
        if not is_log and "answer" not in record and "solution" not in record:
            raise ValueError(f"{path}: line {number} has neither 'answer' nor 'solution'; give the reference "
                             "answer of each completion")
        answer, solution = structured.answer(record.get("answer"), number), record.get("solution")
        if answer is _LEFT_OUT:
            continue
        group = (record.get("step"), json.dumps(record["prompt"], sort_keys=True)) if "prompt" in record else None
        pairs.append(AuditPair(completion_text(record["completion"]), reference_answer(answer, solution),
                               gold_latex(answer, solution), group, number))
    if not pairs:  # each was left out
        raise ValueError(f"{path}: every 'answer' is a JSON array or object that holds no single answer; give each "
                         'answer as one string or number (e.g. "3" or "(1, 2)")')
    structured.say()
    if all(pair.answer is None and pair.gold is None for pair in pairs):
        raise ValueError(f"{path}: no line has a reference answer (every 'answer' is empty or null); there is "
                         "nothing to check the completions against")
    return pairs


_LEFT_OUT = object()  # an answer that is a JSON array or object holding no single answer


class _Structured:
    """Answers that are JSON arrays or objects, which str() would make text no completion matches ("[3]"): a
    one-element array of a string or number is read as that element; any other is left out of the audit.
    Both are said in one warning line, naming the lines of a JSONL file (`lines`)."""

    def __init__(self, where: Path | str, lines: bool = True) -> None:
        self.where, self.lines = where, lines
        self.unwrapped: list[int] = []
        self.left_out: list[int] = []

    def answer(self, value: object, line: int) -> object:
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], (str, int, float)) \
                and not isinstance(value[0], bool):
            self.unwrapped.append(line)
            return value[0]
        if isinstance(value, (list, dict)):
            self.left_out.append(line)
            return _LEFT_OUT
        return value

    def say(self) -> None:
        parts = []
        if self.unwrapped:
            parts.append(f"{self._count(self.unwrapped)} a one-element JSON array, read as its element"
                         + self._where(self.unwrapped))
        if self.left_out:
            parts.append(f"{self._count(self.left_out)} a JSON array or object that holds no single answer, left "
                         f"out of the audit{self._where(self.left_out)}: give each answer as one string or number")
        if parts:
            warnings.warn(f"{self.where}: " + "; ".join(parts), RuntimeWarning, stacklevel=3)

    @staticmethod
    def _count(numbers: list[int]) -> str:
        return "1 answer is" if len(numbers) == 1 else f"{len(numbers)} answers are"

    def _where(self, numbers: list[int], shown: int = 5) -> str:
        if not self.lines:
            return ""
        more = f" and {len(numbers) - shown} more" if len(numbers) > shown else ""
        return f" ({'line' if len(numbers) == 1 else 'lines'} {', '.join(map(str, numbers[:shown]))}{more})"


def _last_steps_of(records: list[tuple[int, dict]], steps: int, path: Path) -> list[tuple[int, dict]]:
    """The records of the last `steps` steps the file holds (a completions.jsonl's `step`)."""
    seen = sorted({record["step"] for _, record in records if isinstance(record.get("step"), int)})
    if not seen:
        raise ValueError(f"{path} has no line with a 'step': --steps needs a completions.jsonl or a run's "
                         "folder; leave it out to audit every pair")
    last = set(seen[-steps:])
    return [(number, record) for number, record in records if record.get("step") in last]


def _stock_pairs(folder: Path, answer_column: str | None, steps: int | None) -> list[AuditPair]:
    """The pairs of a stock TRL output folder (answers in `answer_column`) or a verl rollout dump (answers in
    `gts`), grouped by (step, prompt); the rollouts without a reference answer left out with a warning."""
    from ..runs.load import run_kind
    from ..runs.rollouts import iter_trl_rows, iter_verl_rows, plural, trl_files, verl_files

    kind = run_kind(folder)
    if kind == "trl":
        files = trl_files(folder)
        if not files:
            raise FileNotFoundError(f"{folder} is a TRL folder without completions/completions_*.parquet; give "
                                    "the output_dir of a TRL run with log_completions=True")
        if answer_column is None:
            raise ValueError(_no_answer_column(folder, files[-1][1]))
        rows = iter_trl_rows(folder, answer_column, _last_files(files, steps))
        where = f"the column '{answer_column}' of {folder}/completions/*.parquet"
    elif kind == "verl":
        if answer_column is not None:
            raise ValueError(f"--answer_column is for a stock TRL output folder; {folder} is a verl rollout dump, "
                             "whose reference answers are its 'gts' (reward_model.ground_truth): leave it out")
        rows = iter_verl_rows(folder, _last_files(verl_files(folder), steps))
        where = f"'gts' of {folder}/{{step}}.jsonl"
    elif kind == "grposcope":
        raise FileNotFoundError(f"{folder} is a grposcope run: pass its completions.jsonl "
                                f"({folder / 'completions.jsonl'})")
    else:
        raise FileNotFoundError(f"{folder} is a folder without TRL's completions/completions_*.parquet or verl's "
                                "{step}.jsonl rollout files; pass a completions.jsonl, a JSONL of pairs, or such "
                                "a folder")
    pairs, without, structured = [], 0, _Structured(where, lines=False)  # a line of which file: not said
    for row in rows:
        given = structured.answer(row.answer, row.line)
        if given is _LEFT_OUT:
            continue
        answer = reference_answer(given, None)
        if answer is None:
            without += 1
            continue
        pairs.append(AuditPair(completion_text(row.completion), answer, gold_latex(given, None),
                               (row.step, row.prompt), row.line))
    if not pairs and structured.left_out:
        raise ValueError(f"{folder}: no rollout has one reference answer in {where} ("
                         f"{plural(len(structured.left_out), 'rollout')} with a JSON array or object that holds no "
                         "single answer); give each answer as one string or number")
    if not pairs:
        raise ValueError(f"{folder}: no rollout has a reference answer in {where} ({plural(without, 'rollout')} "
                         "read, none with one); there is nothing to check the completions against")
    structured.say()
    if without:
        warnings.warn(f"{plural(without, 'rollout')} without a reference answer in {where}: left out (a group "
                      "missing some of them counts as cut short)", RuntimeWarning, stacklevel=3)
    return pairs


def _last_files(files: list[tuple[int, Path]], steps: int | None) -> set[int] | None:
    """The steps of the last `steps` rollout files; None (every step) without `steps`."""
    return None if steps is None else {step for step, _ in files[-steps:]}


def _no_answer_column(folder: Path, path: Path) -> str:
    """The error for a TRL folder given without --answer_column, naming the columns there are to choose from."""
    from ..runs.rollouts import _parquet

    columns = _parquet().read_schema(path).names
    return (f"{folder} is a stock TRL output folder: pass --answer_column NAME, the column of its "
            f"completions/*.parquet that holds each completion's reference answer (columns of {path.name}: "
            f"{', '.join(columns)}); TRL writes one when a reward function calls log_extra('answer', answer) "
            "(its log_extra argument)")


