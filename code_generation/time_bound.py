"""The time bound on every in-process call into generated code: the skill runtime's calls
(:mod:`rl_baseline.skills.meta_policy`) and the checks that load a combined module (:mod:`code_generation.combine`).

A call writes its deadline into :data:`WATCHDOG`, in the main thread's CPU time (``WATCHDOG.now``); one daemon
thread per process, polling a few times per budget, reads that thread's CPU clock and sends SIGALRM to it
(``signal.pthread_kill``) when a call overruns, and the handler, installed once, raises :class:`CallTimeout` inside a
call only. CPU time, not the wall clock: on a loaded machine (a niced evaluation beside a training run, 15
evaluations on 16 cores) a process waiting for a core overran a wall-clock budget of 0.1 s in a few calls per
million, and each overrun replaced the generated code's decision by the fallback, so results depended on the load;
a runaway call (a loop) burns CPU time and is still stopped. Reading the thread's CPU clock is one system call
per call (arming an interval timer, two per call, cost about 10% of a skill-env step). Calls can be bounded only
in the main thread and where nothing else uses SIGALRM (:func:`ready` says); elsewhere they run unbounded.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

#: the runtime's budget per call (``MetaPolicyConfig.call_timeout_s``)
DEFAULT_CALL_TIMEOUT_S = 0.1


class CallTimeout(BaseException):
    """Raised by the SIGALRM handler; a BaseException so ``except Exception`` in generated code cannot swallow it
    (bare ``except:`` and ``except BaseException`` are refused by the code check)."""


def _clocks() -> tuple[Callable[[], float], Callable[[], float]]:
    """The main thread's CPU time twice: as the main thread reads it (to write a deadline) and as another thread
    reads it (the watchdog). Where the platform has no per-thread CPU clock, the wall clock for both: then a
    loaded machine can stop a call that did not overrun."""
    try:
        clock_id = time.pthread_getcpuclockid(threading.main_thread().ident)  # type: ignore[arg-type]
        time.clock_gettime(clock_id)
        time.thread_time()
    except (AttributeError, OSError):
        return time.monotonic, time.monotonic
    return time.thread_time, lambda: time.clock_gettime(clock_id)


class Watchdog:
    """Interrupts the main thread when a call into generated code overruns its deadline.

    One daemon thread per process (restarted lazily after a fork). The main thread writes
    ``deadline`` (:attr:`now` seconds: its own CPU time; 0 = no call running) and ``in_call``; the
    thread polls every quarter budget (at most 25 ms), so a runaway call is stopped within
    1.25x its budget of CPU time (plus the interpreter's 5 ms thread switch interval).
    """

    def __init__(self) -> None:
        self.deadline = 0.0
        self.in_call = False
        self._thread: threading.Thread | None = None
        self._poll_s = 0.025
        #: the main thread's clock as it reads it (deadlines are written in it) and as the watchdog reads it
        self.now: Callable[[], float] = time.monotonic
        self._main_clock: Optional[Callable[[], float]] = None

    def start(self, budget_s: float) -> None:
        self._poll_s = min(self._poll_s, max(budget_s / 4.0, 0.001))
        if self._thread is None:
            self.now, self._main_clock = _clocks()
            self._thread = threading.Thread(target=self._run, args=(threading.main_thread().ident,),
                                            name="generated-code-watchdog", daemon=True)
            self._thread.start()

    def _run(self, main_ident: int) -> None:
        clock = self._main_clock or time.monotonic
        while True:
            time.sleep(self._poll_s)
            deadline = self.deadline
            if deadline and self.in_call and clock() > deadline:
                self.deadline = 0.0  # once per call
                signal.pthread_kill(main_ident, signal.SIGALRM)

    def forget_thread(self) -> None:
        """In a forked child: the parent's thread does not exist here."""
        self._thread = None
        self.now, self._main_clock = time.monotonic, None  # the child's main thread has its own CPU clock
        self.deadline = 0.0
        self.in_call = False


WATCHDOG = Watchdog()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=WATCHDOG.forget_thread)


def _raise_timeout(signum: int, frame: Any) -> None:
    if WATCHDOG.in_call:  # an alarm that arrives after the call returned is ignored
        raise CallTimeout()


def ready(budget_s: float) -> bool:
    """Whether calls can be bounded here (main thread, SIGALRM free or ours); starts the watchdog."""
    if budget_s <= 0 or not hasattr(signal, "pthread_kill"):
        return False
    if threading.current_thread() is not threading.main_thread():
        return False
    current = signal.getsignal(signal.SIGALRM)
    if current in (signal.SIG_DFL, signal.SIG_IGN, None):
        signal.signal(signal.SIGALRM, _raise_timeout)  # installed once, kept for the process
    elif current is not _raise_timeout:
        return False  # someone else uses SIGALRM: leave it alone, run unbounded
    WATCHDOG.start(budget_s)
    return True


@contextmanager
def deadline(budget_s: float) -> Iterator[None]:
    """The block is one call under the watchdog (:func:`ready` must have said True): :class:`CallTimeout` is
    raised in it after ``budget_s`` of the main thread's CPU time."""
    WATCHDOG.deadline = WATCHDOG.now() + budget_s
    WATCHDOG.in_call = True
    try:
        yield
    finally:
        WATCHDOG.in_call = False
        WATCHDOG.deadline = 0.0


def call_bounded(fn: Callable[..., Any], *args: Any, budget_s: float = DEFAULT_CALL_TIMEOUT_S) -> Any:
    """``fn(*args)``, stopped with :class:`CallTimeout` after ``budget_s`` (unbounded where :func:`ready` is False)."""
    if not ready(budget_s):
        return fn(*args)
    with deadline(budget_s):
        return fn(*args)
