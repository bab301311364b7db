"""Why a file that no log format claims is no log, judged by its first bytes: it cannot be read, it is empty, it is
UTF-16 text, it is binary, or it is text that is not UTF-8. Said in one line with the fix, instead of the list of
every format grposcope reads (load.load_run and cli.report.expand_runs ask here first, then list the formats).

UTF-16 is named, not read: every reader takes its text as UTF-8 bytes, a line at a time, and a UTF-16 line ends in
two bytes; the one-line `iconv` fix is exact. A UTF-8 byte-order mark (Excel's "CSV UTF-8", Windows editors) is
read: the table reader skips it (formats/table.py).
"""

from __future__ import annotations

import codecs
import shlex
from pathlib import Path

from ..files import read_utf8
from .file_kinds import unreadable

HEAD = 4096  # bytes looked at: a log's first lines
NOT_TEXT = bytes(set(range(32)) - set(b"\t\n\r\f\v\x1b"))  # control bytes no text log holds (ESC: colours)
UTF8_CHECK_LIMIT = 64 << 20  # a text file whose first bytes are not UTF-8 is read whole to name the line, up to this


def empty_file(path: Path) -> str:
    """The line for a log file of 0 bytes (any format's)."""
    return (f"{path} is empty (0 bytes): nothing was written to it yet (a run that has not flushed its first log, "
            "or a copy cut short)")


def check_text(path: Path) -> None:
    """Raises ValueError (PermissionError for a refused read) naming why the regular file `path` holds no log:
    empty, UTF-16, binary, not UTF-8. Returns for UTF-8 text: the caller then lists the formats it reads."""
    try:
        with path.open("rb") as handle:
            head = handle.read(HEAD)
    except OSError as err:
        raise unreadable(err) from None
    if not head:
        raise ValueError(empty_file(path))
    encoding = utf16(head)
    if encoding is not None:
        converted = path.with_name(f"{path.stem}.utf8{path.suffix}")
        raise ValueError(f"{path} is {encoding} text, and grposcope reads UTF-8: convert it (iconv -f {encoding} -t "
                         f"UTF-8 {shlex.quote(str(path))} > {shlex.quote(str(converted))}) and give that")
    odd = sum(head.count(byte) for byte in NOT_TEXT)
    if b"\0" in head or odd > len(head) // 100:
        raise ValueError(f"{path} is not a run: it is binary, not a text log ({odd} of its first {len(head)} bytes "
                         "are control characters); give the run's log file (JSONL, JSON, CSV, a console log) or its "
                         "output folder")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(head) - 3 and path.stat().st_size <= UTF8_CHECK_LIMIT:  # not a character cut at HEAD
            read_utf8(path)  # raises the line that names the line, the column and the fix


def utf16(head: bytes) -> str | None:
    """"UTF-16" for text with a UTF-16 byte-order mark; "UTF-16LE" / "UTF-16BE" for ASCII text written as UTF-16
    without one (every other byte 0: PowerShell's `>` and Windows' "Unicode" save); else None."""
    if head[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        return "UTF-16"
    even, odd = head[0::2], head[1::2]
    if len(head) < 4:
        return None
    if b"\0" not in even and odd.count(0) >= 0.9 * len(odd):
        return "UTF-16LE"
    if b"\0" not in odd and even.count(0) >= 0.9 * len(even):
        return "UTF-16BE"
    return None
