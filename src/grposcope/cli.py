"""The `grposcope` command. Its subcommands (train, eval, report, forecast, simulate) arrive with the trainer."""

from __future__ import annotations

import sys

from . import __version__


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args in (["--version"], ["-V"]):
        print(f"grposcope {__version__}")
        return 0
    print(
        f"grposcope {__version__}: the command-line tool is not built yet; the library's core "
        "(grposcope.core) is. See README.md.",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
