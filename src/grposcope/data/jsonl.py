"""JSONL files in the MATH-500 format: one JSON object per line with `problem` and `answer`.

    {"problem": "...", "answer": "\\frac{1}{2}", "solution": "... \\boxed{\\frac{1}{2}}", "level": 3,
     "subject": "Algebra", "unique_id": "test/algebra/1.json"}

`solution`, `level`, `subject` and `unique_id` are optional. Without `answer`, the last `\\boxed{...}` of the
`solution` is the answer. The prompt is a user message: the problem and an instruction to put the final
answer in `\\boxed{}`. Other fields are kept as columns; `level` becomes a string (a difficulty name).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..files import read_utf8
from ..rewards.extract import last_boxed

DEFAULT_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


def read_math_jsonl(
    path: str | os.PathLike[str], instruction: str = DEFAULT_INSTRUCTION
) -> list[dict[str, Any]]:
    """Reads a MATH-500-style file into examples; errors name the file, the line and the fix."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(folder_given(path))
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"no such file: {path!r}; give the path of a .jsonl file (one JSON object per line)"
        )
    examples = []
    for line_number, line in enumerate(read_utf8(path).splitlines(), start=1):
        if line.strip():
            row = _parse_line(line, path, line_number)
            examples.append(_example(row, path, line_number, instruction))
    if not examples:
        raise ValueError(
            f"{path} holds no examples; write one JSON object per line with 'problem' and 'answer'"
        )
    return examples


def folder_given(path: str) -> str:
    """The error for a dataset that is a folder (where the data files are, a saved dataset): a .jsonl file in
    it to give instead, or what to give when it holds none."""
    try:
        found = sorted(name for name in os.listdir(path)
                       if name.endswith(".jsonl") and os.path.isfile(os.path.join(path, name)))
    except OSError:  # an unreadable folder: no file of it to suggest
        found = []
    fix = f"give a .jsonl file in it, e.g. {os.path.join(path, found[0])}" if found else \
        "it holds no .jsonl file: give a .jsonl file (one JSON object per line) or a task such as arithmetic:easy"
    return f"{path} is a folder, not a task name or a .jsonl file; {fix}"


def _parse_line(line: str, path: str, line_number: int) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{path}, line {line_number}: malformed JSON ({err.msg} at column {err.colno}); "
            "each line must be one complete JSON object"
        ) from None
    if not isinstance(row, dict):
        raise ValueError(
            f"{path}, line {line_number}: a JSON {type(row).__name__}, not an object; "
            'each line must look like {"problem": "...", "answer": "..."}'
        )
    return row


def _example(row: dict[str, Any], path: str, line_number: int, instruction: str) -> dict[str, Any]:
    where = f"{path}, line {line_number}"
    problem = row.get("problem")
    if "problem" in row and not isinstance(problem, str):
        # said apart from a missing problem, whose message ("fields found: problem") would contradict itself
        raise ValueError(
            f"{where}: 'problem' is a JSON {_json_type(problem)}; it must be a string holding the question"
        )
    if not isinstance(problem, str) or not problem.strip():
        raise ValueError(
            f"{where}: no 'problem' text (fields found: {', '.join(row) or 'none'}); "
            "add a 'problem' string holding the question"
        )
    answer = row.get("answer")
    if isinstance(answer, (list, dict)):
        # str() would make "['1', '2']" the answer, which no reply ever matches: said instead of trained on
        raise ValueError(
            f"{where}: 'answer' is a JSON {_json_type(answer)}; give the final answer as one string "
            '(e.g. "(1, 2)" or "\\frac{1}{2}") or a number'
        )
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        answer = _answer_from_solution(row.get("solution"), where)
    example = {k: v for k, v in row.items() if k != "prompt"}
    example["prompt"] = [{"role": "user", "content": f"{problem.strip()}\n\n{instruction}".strip()}]
    example["answer"] = str(answer).strip()
    if row.get("level") is not None:
        example["level"] = str(row["level"])
    return example


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type: object, array, number, boolean, string."""
    names = {dict: "object", list: "array", bool: "boolean", int: "number", float: "number", str: "string",
             type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _answer_from_solution(solution: Any, where: str) -> str:
    boxed = last_boxed(solution) if isinstance(solution, str) else None
    boxed = boxed.strip() if boxed is not None else None
    if boxed is None:
        found = (
            "a 'solution' without \\boxed{...}"
            if isinstance(solution, str)
            else "neither 'answer' nor 'solution'"
        )
        raise ValueError(
            f"{where}: {found}; add an 'answer' field (the final answer as a string), "
            "or a 'solution' that ends with \\boxed{...}"
        )
    return boxed
