"""completions.jsonl: a sample of each logged step's completions, to read what the policy actually wrote.

Format: one line per completion, `{"step": 3, "prompt": ..., "completion": ..., "rewards":
{"accuracy_reward": 1.0, ...}, "reward": 1.0, "advantage": 0.53, "answer": "12", ...}`, where `rewards` holds
each reward function's score, `reward` the combined reward (the weighted sum), and any further keys are extra
columns (e.g. a reward function's logged extras). A prompt or completion in chat format stays a list of
`{"role": ..., "content": ...}` messages. JSON has no NaN, so a non-finite number (a reward function that
returned None) is written as `null` and read back as None.

`answer` is the trainer's (trainer/drawer.py): the sample's reference answer as accuracy_reward reads it (the
dataset's `answer` column, else the last `\\boxed{}` of its `solution` column; `null` when it holds none), so
that the rewards can be checked again later (`grposcope audit-rewards`). It is there only when the training
examples carry an `answer` or `solution` column; files written before it was added have none. A reward
function that logs a `log_extra` column named `answer` next to such a reference stops the run with an error
asking to rename it: silently keeping either would let the other pass for the reference answer.

The file is written the way metrics.jsonl is (`JsonlAppender`): flushed per call, cut back to the checkpoint
step on resume, a partial last line skipped when read and cut before appending.

The same rows, as tables, go to TensorBoard and W&B: `table_columns`, `cell_text` and `markdown_table` below
are what those backends share.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .jsonl import JsonlAppender, json_value, read_records

COMPLETIONS_FILE = "completions.jsonl"
REQUIRED_KEYS = ("prompt", "completion", "rewards", "reward", "advantage")
TEXT_COLUMNS = ("prompt", "completion")
MAX_CELL_CHARS = 300  # TensorBoard cells: enough to recognise a completion, short enough to scan a table


def _jsonable(value: Any, column: str) -> Any:
    """`value` as plain JSON values: non-finite floats become None, tensors and numpy values become numbers
    and lists. Anything else is refused, naming the column, rather than written as an unreadable repr."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return json_value(value)
    if isinstance(value, dict):
        return {str(key): _jsonable(item, column) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item, column) for item in value]
    if hasattr(value, "tolist"):  # torch tensors, numpy arrays and numpy scalars
        return _jsonable(value.tolist(), column)
    raise TypeError(
        f"completions column {column!r} holds a {type(value).__name__} ({value!r:.60}); log JSON values "
        "(str, numbers, None, lists, dicts) or convert it to one"
    )


def _check_row(row: Any) -> None:
    """Fails on a row that would make a table without its usual columns."""
    if not isinstance(row, dict):
        raise TypeError(f"a completions row is a dict, got a {type(row).__name__}")
    missing = [key for key in REQUIRED_KEYS if key not in row]
    if missing:
        raise ValueError(f"completions row lacks {missing}; every row has the keys {list(REQUIRED_KEYS)}")
    if "step" in row:
        raise ValueError("'step' is reserved in completions rows (it is the `step` argument); rename the key")
    if not isinstance(row["rewards"], dict):
        raise TypeError(f"row['rewards'] is a {type(row['rewards']).__name__}; pass {{function name: score}}")


def completion_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Checked copies of `rows`, the standard keys first and every value JSON-able (NaN -> None).

    Fails before anything is written if a reward function has the name of another column: in the W&B and
    TensorBoard tables each reward function is a column next to step, reward, advantage and the extras.
    """
    if isinstance(rows, dict):
        raise TypeError("log_completions takes a list of rows; wrap a single row in a list")
    out = []
    for row in rows:
        _check_row(row)
        ordered = {key: row[key] for key in REQUIRED_KEYS}
        ordered.update((key, value) for key, value in row.items() if key not in REQUIRED_KEYS)
        out.append({key: _jsonable(value, key) for key, value in ordered.items()})
    reward_names, extra_names = table_columns(out)
    clash = sorted(set(reward_names) & {"step", *REQUIRED_KEYS, *extra_names})
    if clash:
        raise ValueError(f"reward function name(s) {clash} are also column names of the completions table; "
                         "rename the reward function or the extra column")
    return out


class CompletionsWriter:
    """Appends rows to completions.jsonl (`{"step": step, **row}` per line); the file appears at the first
    write, so runs that log no completions leave none. `resume_step` works as for metrics.jsonl."""

    def __init__(self, path: str | os.PathLike[str], resume_step: int | None = None) -> None:
        self._out = JsonlAppender(path, resume_step=resume_step)
        self.path = self._out.path

    def write(self, step: int, rows: list[dict[str, Any]]) -> None:
        """Writes rows already checked by `completion_rows`, in one write and one flush (so that a kill
        leaves whole lines, bar perhaps the last one)."""
        lines = [json.dumps({"step": int(step), **row}, allow_nan=False) + "\n" for row in rows]
        self._out.append("".join(lines))

    def close(self) -> None:
        self._out.close()


def read_completions(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a completions.jsonl file, in file order; `null` stays None.

    A partial last line (a killed process) is skipped with a RuntimeWarning.
    """
    return read_records(path, f"a run writes it to <output_dir>/{COMPLETIONS_FILE} once the trainer logs "
                              "completions")


# ---------------------------------------------------------------- tables for the dashboards


def table_columns(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(reward function names, extra column names) over all rows, in first-seen order, so that a row which
    lacks a column still lines up with the others."""
    rewards: dict[str, None] = {}
    extras: dict[str, None] = {}
    for row in rows:
        rewards.update(dict.fromkeys(row["rewards"]))
        extras.update(dict.fromkeys(key for key in row if key not in REQUIRED_KEYS))
    return list(rewards), list(extras)


def table_rows(step: int, rows: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """(columns, data) of the completions table: step, prompt, completion, one column per reward
    function, reward, advantage, then the extra columns; a cell a row lacks is None."""
    reward_names, extra_names = table_columns(rows)
    columns = ["step", "prompt", "completion", *reward_names, "reward", "advantage", *extra_names]
    data = [[step, row["prompt"], row["completion"], *(row["rewards"].get(name) for name in reward_names),
             row["reward"], row["advantage"], *(row.get(name) for name in extra_names)] for row in rows]
    return columns, data


def _part_text(part: Any) -> str:
    """One part of multimodal content: its text, or a placeholder such as "[image]"."""
    if isinstance(part, dict):
        return str(part["text"]) if part.get("type") == "text" else f"[{part.get('type', 'part')}]"
    return str(part)


def _content_text(content: Any) -> str:
    """A message's content as text; multimodal content (a list of parts) shows its text parts."""
    if isinstance(content, list):
        return " ".join(_part_text(part) for part in content)
    return str(content)


def cell_text(value: Any) -> str:
    """A cell as plain text: chat messages as "role: content" lines, numbers to 4 significant digits,
    None as "None" (a reward function that returned None), other values as compact JSON."""
    if value is None:
        return "None"
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m for m in value):
        return "\n".join(f"{m['role']}: {_content_text(m.get('content', ''))}" for m in value)
    return json.dumps(value)


def _markdown_cell(value: Any, max_chars: int) -> str:
    """One table cell: cut to `max_chars`, with the characters that would end the cell or start markup
    escaped (so that a completion's own "<think>" or "*" shows as written), and newlines as <br>, which
    TensorBoard's markdown sanitizer keeps."""
    text = cell_text(value)
    if len(text) > max_chars:
        text = text[:max_chars].rstrip() + "…"
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for char in "\\`*_[]|":
        text = text.replace(char, "\\" + char)
    return text.replace("\r\n", "\n").replace("\n", "<br>")


def markdown_table(rows: list[dict[str, Any]], max_chars: int = MAX_CELL_CHARS) -> str:
    """The rows as one markdown table for TensorBoard's text tab (the step is TensorBoard's own axis, so it
    is not a column); each cell, prompt and completion above all, is cut to `max_chars` characters."""
    columns, data = table_rows(0, rows)
    columns, data = columns[1:], [cells[1:] for cells in data]
    lines = ["| " + " | ".join(_markdown_cell(name, max_chars) for name in columns) + " |",
             "|" + "---|" * len(columns)]
    for cells in data:
        lines.append("| " + " | ".join(_markdown_cell(cell, max_chars) for cell in cells) + " |")
    return "\n".join(lines)

