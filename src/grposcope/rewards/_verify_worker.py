"""The math-verify worker process: reads JSON requests on stdin, answers on stdout, one line each.

Run as a script (`python path/to/_verify_worker.py`), not as a module, so that it imports neither grposcope
nor torch: it starts in well under a second. It must stay free of grposcope imports for that reason.

Protocol (one JSON object per line):
- on start: `{"ready": true}`, or `{"ready": false, "error": "..."}` when math-verify cannot be imported;
- request `{"gold": str, "pred": str}` -> `{"match": bool}` or `{"match": false, "error": "..."}`.

math-verify's own timeouts use SIGALRM; they are disabled here (`None`) because the parent bounds every
request by killing this process, which also works when the parent calls from a worker thread.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import threading
import time
from typing import Any

# A runaway expression (9^9^9^9^9) must hit a MemoryError here rather than exhaust the machine before the
# parent's deadline; 4 GiB is far above what any real verification uses (about 100 MB measured).
_ADDRESS_SPACE_LIMIT = 4 * 1024**3


def _limit_memory() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (_ADDRESS_SPACE_LIMIT, _ADDRESS_SPACE_LIMIT))
    except (ImportError, ValueError, OSError):  # not on this platform: the parent's deadline still holds
        pass


def _exit_with_parent(parent_pid: int) -> None:
    """Ends this process when the parent is gone, so a crashed run leaves no worker computing forever."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            os._exit(0)


def main() -> None:
    if len(sys.argv) > 1:
        threading.Thread(target=_exit_with_parent, args=(int(sys.argv[1]),), daemon=True).start()
    # The protocol owns the real stdout; anything a library prints goes to stderr instead.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr
    _limit_memory()
    # math-verify warns once that its timeout is disabled; that is deliberate here.
    logging.basicConfig(level=logging.ERROR)
    try:
        from math_verify import parse, verify
    except Exception as err:  # noqa: BLE001 - report any import failure to the parent
        out.write(json.dumps({"ready": False, "error": f"{type(err).__name__}: {err}"}) + "\n")
        return

    @functools.lru_cache(maxsize=256)
    def parse_gold(text: str):
        # A group of G completions shares one gold answer: parse it once.
        return parse(text, parsing_timeout=None)

    out.write(json.dumps({"ready": True}) + "\n")
    while True:
        line = sys.stdin.readline()
        if not line:  # the parent closed the pipe or exited
            return
        request = json.loads(line)
        try:
            gold = parse_gold(request["gold"])
            pred = parse(request["pred"], parsing_timeout=None)
            match = bool(gold) and bool(pred) and bool(verify(gold, pred, timeout_seconds=None))
            reply: dict[str, Any] = {"match": match}
        except (Exception, RecursionError, MemoryError) as err:  # noqa: BLE001 - a failed check scores 0
            reply = {"match": False, "error": f"{type(err).__name__}: {err}"[:500]}
        out.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
