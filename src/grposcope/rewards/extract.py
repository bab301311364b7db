"""Answer extraction: pure string functions shared by the reward functions.

Every function here is linear in the length of its input (no regex backtracking over nested structures, no
recursion), so a pathological completion such as ten thousand nested braces cannot stall a reward.

Rules, in the order `extract_answer` applies them:
1. the content of the last `\\boxed{...}` / `\\fbox{...}` (braces balanced, nesting allowed,
   `\\boxed {x}` ok);
2. the phrase after the last "answer is" / "answer:" ("The answer is X", "Final answer is X", any case),
   up to the end of the sentence, without a trailing period, `$` or markdown `*`;
3. the last number in the text (integers, decimals, negatives, thousands separators such as "1,234").
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = [
    "answers_match",
    "completion_text",
    "extract_answer",
    "last_boxed",
    "normalize_answer",
    "parse_number",
]

# The opening brace of a box: `\boxed{`, `\boxed {`, `\fbox{`. The group marks where the brace is.
_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*(\{)")
# "The answer is X." / "Final answer: X" -> X (up to a sentence end: ". ", a newline or the end).
_ANSWER_PHRASE = re.compile(r"answer\s*(?:is\s*:?|:)\s*(.+?)\s*(?:\.(?=\s|$)|\n|$)", re.IGNORECASE)
# A number: thousands-separated first, so "1,234" is one number; a minus counts only after a non-word
# character, so "3-5" reads as 3 and 5 rather than 3 and -5.
_NUMBER = re.compile(r"(?:(?<![\w)\]}])-)?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)")
_WHOLE_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?")
_FRACTION = re.compile(r"\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}|([^/]+)/([^/]+)")
# Wrappers whose content is the answer: `\text{5}` -> `5`.
_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mbox|boxed|fbox)\s*\{([^{}]*)\}")
# LaTeX sizing and spacing commands that never change an answer's meaning.
_NOISE = re.compile(r"\\left|\\right|\\[,;:! ]|\\quad|\\qquad|\\displaystyle")


def completion_text(completion: Any) -> str:
    """The text of a completion: a string as is; chat messages -> their contents joined by newlines.

    Chat completions look like `[{"role": "assistant", "content": "..."}]`; a content may also be a list of
    parts (`[{"type": "text", "text": "..."}]`), whose texts are joined.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    parts = []
    for message in completion:
        content = message.get("content", "") if isinstance(message, dict) else message
        if isinstance(content, list):
            content = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
        parts.append("" if content is None else str(content))
    return "\n".join(parts)


def _closed_boxes(text: str) -> list[tuple[int, str]]:
    """(end position, content) of every box whose braces close, in order of the closing brace.

    One pass with a stack of open braces: O(len(text)) whatever the nesting. A backslash escapes the next
    character, so `\\{` and `\\}` inside a box (set notation) do not count as braces.
    """
    box_braces = {m.start(1) for m in _BOX_OPEN.finditer(text)}
    stack: list[int] = []  # positions of the open braces
    boxes: list[tuple[int, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            start = stack.pop()
            if start in box_braces:
                boxes.append((i, text[start + 1 : i]))
        i += 1
    return boxes


def last_boxed(text: str) -> str | None:
    """Content of the box that closes last, or None when no box closes.

    `"a \\boxed{1} b \\boxed{\\frac{1}{2}}"` -> `"\\frac{1}{2}"`. A box cut off by the length limit
    (no closing brace) is ignored, so an earlier complete box still counts. The content is returned as
    written (it may be empty); nested boxes return the outer one's content.
    """
    boxes = _closed_boxes(text)
    return boxes[-1][1] if boxes else None


def has_nonempty_box(text: str) -> bool:
    """True when some box closes and holds more than whitespace."""
    return any(content.strip() for _, content in _closed_boxes(text))


def _strip_decoration(phrase: str) -> str:
    """Removes what surrounds an answer phrase: spaces, `$`, markdown `*`, a trailing period."""
    phrase = phrase.strip().strip("*$ ").strip()
    return phrase[:-1].rstrip() if phrase.endswith(".") else phrase


def _answer_phrase(text: str) -> str | None:
    """The X of the last "answer is X"; when X is no number but starts with one ("12 apples"), that number."""
    matches = list(_ANSWER_PHRASE.finditer(text))
    if not matches:
        return None
    phrase = _strip_decoration(matches[-1].group(1))
    if not phrase:
        return None
    if parse_number(phrase) is None:
        lead = _NUMBER.match(phrase)
        if lead is not None:
            return lead.group(0)
    return phrase


def last_number(text: str) -> str | None:
    """The last number in `text` as written ("-1,234.5"), or None."""
    found = None
    for found in _NUMBER.finditer(text):
        pass
    return found.group(0) if found is not None else None


def extract_answer(text: str) -> str | None:
    """The answer a completion gives: last box, else "the answer is X", else the last number; None if none.

    An empty box (`\\boxed{}`) counts as no box.
    """
    boxed = last_boxed(text)
    if boxed is not None and boxed.strip():
        return boxed.strip()
    phrase = _answer_phrase(text)
    if phrase is not None:
        return phrase
    return last_number(text)


def normalize_answer(text: str) -> str:
    """A canonical string for comparison: `"$\\text{ 1, 2 }$."` -> `"1,2"`.

    Removes `$`, whitespace and LaTeX spacing, `\\left`/`\\right`, a trailing period, `\\%`/`%` (MATH writes
    "50\\%" for the answer 50), unwraps `\\text{}`, `\\textbf{}`, `\\mathrm{}`, `\\mbox{}`, `\\boxed{}`,
    and maps `\\dfrac`/`\\tfrac` to `\\frac`. Case is kept: "x" and "X" may be different answers.
    """
    s = text.replace("$", "").replace("\u2212", "-")
    s = _NOISE.sub("", s)
    previous = None
    while previous != s:  # unwrap `\text{\textbf{5}}` layer by layer
        previous, s = s, _WRAPPER.sub(r"\1", s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = s.replace("\\%", "").replace("%", "")
    s = "".join(s.split())
    while s.endswith("."):
        s = s[:-1]
    return s


def parse_number(text: str) -> float | None:
    """The value of `text` when the whole of it is one number, else None.

    Accepts what `normalize_answer` leaves of: integers, decimals, signs, thousands separators ("1,234"),
    scientific notation ("1e-6"), and simple fractions (`\\frac{1}{2}`, `1/2`). "1,2" is not a number (a comma
    must be followed by three digits), so tuples stay strings.
    """
    s = normalize_answer(text).lower()
    if not s:
        return None
    whole = _plain_number(s)
    if whole is not None:
        return whole
    sign = -1.0 if s.startswith("-") else 1.0
    frac = _FRACTION.fullmatch(s.lstrip("+-"))
    if frac is None:
        return None
    num = _plain_number(frac.group(1) if frac.group(1) is not None else frac.group(3))
    den = _plain_number(frac.group(2) if frac.group(2) is not None else frac.group(4))
    if num is None or den is None or den == 0.0:
        return None
    return sign * num / den


def _plain_number(s: str) -> float | None:
    """`s` as a float when it is one plain number ("-1,234.5", "1e-6"), else None."""
    if not _WHOLE_NUMBER.fullmatch(s):
        return None
    value = float(s.replace(",", ""))
    return value if math.isfinite(value) else None


def answers_match(predicted: str, reference: str, rel_tol: float = 1e-6) -> bool:
    """True when the two answers agree: numerically (relative tolerance `rel_tol`) when both parse as numbers,
    else as normalised strings (`normalize_answer`). An empty answer never matches."""
    p, r = parse_number(predicted), parse_number(reference)
    if p is not None and r is not None:
        return math.isclose(p, r, rel_tol=rel_tol, abs_tol=0.0)
    p_norm, r_norm = normalize_answer(predicted), normalize_answer(reference)
    return bool(p_norm) and p_norm == r_norm
