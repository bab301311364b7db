"""Text from a model or a data file, made safe to show on a terminal.

A completion can hold control characters that a terminal obeys: ESC sequences that set the window title
("\\x1b]0;...\\x07"), clear the screen ("\\x1b[2J"), move the cursor or rewrite what is already shown, and
their one-byte C1 forms ("\\x9b" is CSI on many terminals). rich drops a few C0 controls from a Text (BEL,
backspace, CR, VT, FF) but passes ESC and C1 through, and parses "[...]" as markup in plain strings. So text
that did not come from grposcope goes through `terminal_safe` (or `markup_safe`, where rich reads markup)
before it is printed; files (completions.jsonl, the --json reports) keep it as it was.
"""

from __future__ import annotations

from typing import Any

# C0 controls but newline and tab, DEL, and the C1 controls -> a visible escape, e.g. ESC -> "\x1b"
_VISIBLE = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))
            if chr(code) not in "\n\t"}


def terminal_safe(text: Any) -> str:
    """`text` (str() of it) with every C0 control but newline and tab, DEL and every C1 control written as
    a visible escape (ESC -> the four characters `\\x1b`), so that none of it acts on the terminal."""
    return str(text).translate(_VISIBLE)


def markup_safe(text: Any) -> str:
    """`terminal_safe`, and rich markup escaped ("[bold]" shows as written), for a string rich renders as
    markup (a table cell, a title, Console.print of a str)."""
    from rich.markup import escape

    return escape(terminal_safe(text))
