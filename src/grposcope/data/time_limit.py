"""A time limit on a piece of Python code running in this thread, such as a chat template rendering: a model
folder's template is a program (`{% for i in range(100000) %}` twice nested renders for hours), and jinja's
sandbox bounds what it may touch, not how long it runs.

One watchdog thread serves every limited call. When a call runs past its deadline, the watchdog raises
`Overtime` in the calling thread (CPython's PyThreadState_SetAsyncExc), which the call's Python code gets
at its next bytecode: a template loop stops within milliseconds. A call into C that never returns to Python
is not stopped; jinja renders in Python. Elsewhere than CPython nothing is limited.
"""

from __future__ import annotations

import ctypes
import threading
import time
from contextlib import contextmanager
from typing import Iterator


class Overtime(BaseException):
    """Raised in a thread whose limited call ran past its deadline. A BaseException, so that no
    `except Exception` between here and the limit (jinja's, transformers') takes it for the template's own."""


class TimeLimitExceeded(Exception):
    """What `time_limit` raises once the call was stopped."""


_lock = threading.Condition()
_deadlines: dict[int, float] = {}  # thread id -> time.monotonic() deadline of its limited call
_fired: set[int] = set()
_watchdog: threading.Thread | None = None


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Runs the `with` body; raises TimeLimitExceeded when it runs longer than `seconds`."""
    global _watchdog
    me = threading.get_ident()
    with _lock:
        if me in _deadlines or not hasattr(ctypes, "pythonapi"):  # nested, or no CPython: the outer limit holds
            nested = True
        else:
            nested = False
            _deadlines[me] = time.monotonic() + seconds
            if _watchdog is None or not _watchdog.is_alive():
                _watchdog = threading.Thread(target=_watch, name="grposcope-time-limit", daemon=True)
                _watchdog.start()
            _lock.notify()
    if nested:
        yield
        return
    try:
        try:
            yield
        finally:
            fired = _release(me)
        if fired:  # raised by the watchdog, but not yet received here: taken back, so it lands nowhere else
            raise TimeLimitExceeded
    except Overtime:
        _release(me)
        raise TimeLimitExceeded from None


def _release(me: int) -> bool:
    """Ends this thread's limit; True when the watchdog fired on it (its exception then cancelled)."""
    with _lock:
        _deadlines.pop(me, None)
        fired = me in _fired
        _fired.discard(me)
    if fired:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(me), None)  # cancels it if still pending
    return fired


def _watch() -> None:
    with _lock:
        while True:
            now = time.monotonic()
            for ident, deadline in list(_deadlines.items()):
                if deadline <= now:
                    del _deadlines[ident]
                    _fired.add(ident)
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(Overtime))
            soonest = min(_deadlines.values(), default=None)
            _lock.wait(None if soonest is None else max(soonest - now, 0.001))
