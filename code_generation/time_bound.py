"""The time bound on every in-process call into generated code: the skill runtime's calls
(:mod:`rl_baseline.skills.meta_policy`) and the checks that load a combined module (:mod:`code_generation.combine`).

A call writes its deadline (one ``time.monotonic()``) into :data:`WATCHDOG`; one daemon thread per process,
polling a few times per budget, sends SIGALRM to the main thread (``signal.pthread_kill``) when a call overruns,
and the handler, installed once, raises :class:`CallTimeout` inside a call only. No system call is made per call
(arming an interval timer twice per call cost about 10% of a skill-env step). Calls can be bounded only in the
main thread and where nothing else uses SIGALRM (:func:`ready` says); elsewhere they run unbounded.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any, Callable

#: the runtime's budget per call (``MetaPolicyConfig.call_timeout_s``)
DEFAULT_CALL_TIMEOUT_S = 0.1


class CallTimeout(BaseException):
    """Raised by the SIGALRM handler; a BaseException so ``except Exception`` in generated code cannot swallow it
    (bare ``except:`` and ``except BaseException`` are refused by the code check)."""


class Watchdog:
    """Interrupts the main thread when a call into generated code overruns its deadline.

    One daemon thread per process (restarted lazily after a fork). The main thread writes
    ``deadline`` (``time.monotonic()`` seconds, 0 = no call running) and ``in_call``; the
    thread polls every quarter budget (at most 25 ms), so a hanging call is stopped within
    1.25x its budget (plus the interpreter's 5 ms thread switch interval).
    """

    def __init__(self) -> None:
        self.deadline = 0.0
        self.in_call = False
        self._thread: threading.Thread | None = None
        self._poll_s = 0.025

    def start(self, budget_s: float) -> None:
        self._poll_s = min(self._poll_s, max(budget_s / 4.0, 0.001))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, args=(threading.main_thread().ident,),
                                            name="generated-code-watchdog", daemon=True)
            self._thread.start()

    def _run(self, main_ident: int) -> None:
        while True:
            time.sleep(self._poll_s)
            deadline = self.deadline
            if deadline and self.in_call and time.monotonic() > deadline:
                self.deadline = 0.0  # once per call
                signal.pthread_kill(main_ident, signal.SIGALRM)

    def forget_thread(self) -> None:
        """In a forked child: the parent's thread does not exist here."""
        self._thread = None
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


def call_bounded(fn: Callable[..., Any], *args: Any, budget_s: float = DEFAULT_CALL_TIMEOUT_S) -> Any:
    """``fn(*args)``, stopped with :class:`CallTimeout` after ``budget_s`` (unbounded where :func:`ready` is False)."""
    if not ready(budget_s):
        return fn(*args)
    WATCHDOG.deadline = time.monotonic() + budget_s
    WATCHDOG.in_call = True
    try:
        return fn(*args)
    finally:
        WATCHDOG.in_call = False
        WATCHDOG.deadline = 0.0
