"""math-verify with a hard time bound per sample that works from any thread.

Why a process: math-verify bounds its own work with SIGALRM, which only works in the main thread, and two
nested alarms clobber each other. `RewardScorer` calls reward functions from a worker thread (so that it can
bound a whole call with `join(timeout)`), and a thread cannot be stopped once it hangs. So math-verify runs
with its alarms disabled (`timeout_seconds=None`) inside a small worker process (`_verify_worker.py`): the
parent waits at most `timeout_s` for each answer and kills the process when it does not come. The process is
started once (about 0.7 s: math-verify and sympy, no torch) and reused; a killed one is replaced on the next
sample. A round trip for a simple answer costs a few milliseconds.

Workers live in a pool: a call takes an idle worker or starts one, so concurrent callers (including a call
the scorer has given up on and that is still finishing in the background) never wait on each other. All
workers are killed at interpreter exit; a worker also exits by itself when its parent process disappears.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

from grposcope.errors import RunError

logger = logging.getLogger("grposcope")

_WORKER_SCRIPT = str(Path(__file__).with_name("_verify_worker.py"))
# Importing math-verify and sympy takes about 0.7 s here; a loaded machine may need far longer.
STARTUP_TIMEOUT_S = 120.0
_MAX_IDLE_WORKERS = 4


class _Worker:
    """One worker process and a reader thread that turns its stdout into a queue of lines."""

    def __init__(self, startup_timeout_s: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, _WORKER_SCRIPT, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True, name="grposcope-verify-reader").start()
        ready = self._next(startup_timeout_s)
        if ready is None or not ready.get("ready"):
            self.kill()
            _raise_startup_error(ready, startup_timeout_s)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)  # end of stream: the process died or was killed

    def _next(self, timeout_s: float) -> dict | None:
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            return None
        return None if line is None else json.loads(line)

    def request(self, gold: str, pred: str, timeout_s: float) -> dict | None:
        """The worker's reply, or None when it did not answer within `timeout_s` or died."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({"gold": gold, "pred": pred}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        return self._next(timeout_s)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


def _raise_startup_error(ready: dict | None, startup_timeout_s: float) -> None:
    if ready is None:
        raise RunError(
            f"the math-verify worker process did not start within {startup_timeout_s:.0f} s; "
            "check that `python -c 'import math_verify'` works in this environment and that the machine "
            "is not out of memory"
        )
    raise ImportError(
        f"box_accuracy_reward needs math-verify, which failed to import ({ready.get('error')}): pip install "
        "'grposcope[train]', or use accuracy_reward, which needs nothing", name="math_verify"
    )


class MathVerifier:
    """A pool of math-verify worker processes. Thread-safe."""

    def __init__(self, startup_timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        self.startup_timeout_s = startup_timeout_s
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()

    def _acquire(self) -> _Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.alive():
                    return worker
                self._all.discard(worker)
        worker = _Worker(self.startup_timeout_s)
        with self._lock:
            self._all.add(worker)
        return worker

    def _release(self, worker: _Worker) -> None:
        with self._lock:
            if worker.alive() and len(self._idle) < _MAX_IDLE_WORKERS:
                self._idle.append(worker)
                return
            self._all.discard(worker)
        worker.kill()

    def _discard(self, worker: _Worker) -> None:
        with self._lock:
            self._all.discard(worker)
        worker.kill()

    def warm_up(self) -> None:
        """Starts one worker now (about 1 s), so that the first scored batch does not pay for it."""
        self._release(self._acquire())

    def verify_many(self, pairs: list[tuple[str, str]], timeout_s: float) -> list[bool]:
        """For each `(gold, pred)` (LaTeX math-verify can parse), whether they are equivalent.

        Each pair gets at most `timeout_s` seconds; a pair that takes longer, or crashes the worker, is False.
        """
        results: list[bool] = []
        worker: _Worker | None = None
        try:
            for gold, pred in pairs:
                if worker is None:
                    worker = self._acquire()
                reply = worker.request(gold, pred, timeout_s)
                if reply is None:
                    # Timed out or died: the only way to stop the computation is to end the process.
                    self._discard(worker)
                    worker = None
                    logger.warning(
                        "math-verify gave no answer within %.1f s; scored 0.0: %r", timeout_s, pred[:200]
                    )
                results.append(bool(reply and reply.get("match")))
        finally:
            if worker is not None:
                self._release(worker)
        return results

    def close(self) -> None:
        """Kills every worker, idle or busy."""
        with self._lock:
            workers, self._all, self._idle = list(self._all), set(), []
        for worker in workers:
            worker.kill()


_DEFAULT: MathVerifier | None = None
_DEFAULT_LOCK = threading.Lock()


def default_verifier() -> MathVerifier:
    """The process-wide pool, created on first use and closed at interpreter exit."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = MathVerifier()
            atexit.register(_DEFAULT.close)
        return _DEFAULT
