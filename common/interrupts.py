"""Ctrl-C and slurm's SIGTERM (scancel, preemption) end a long phase the same way: no traceback, one line
saying what was saved and how to resume, exit status 128 + the signal (130 for SIGINT, 143 for SIGTERM).

    with sigterm_raises():
        try:
            run()
        except KeyboardInterrupt as exc:
            return interrupted_exit(exc, "labels of finished batches are in X; the same command resumes")

SIGTERM is turned into :class:`Interrupted`, a ``KeyboardInterrupt``, so the ``finally`` blocks that already
save work on Ctrl-C run for it too.
"""
from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator


class Interrupted(KeyboardInterrupt):
    """A signal asked the process to stop (``signum``: which)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: the signals :func:`sigterm_raises` turned into :class:`Interrupted`, newest last (for code whose
#: ``KeyboardInterrupt`` is caught by a library, as sample-factory's event loop does)
RECEIVED: list[int] = []


@contextmanager
def sigterm_raises(sigint: bool = False) -> Iterator[None]:
    """Inside the block, SIGTERM raises :class:`Interrupted` in the main thread as SIGINT raises
    ``KeyboardInterrupt`` (``sigint``: SIGINT too, so that it is recorded in :data:`RECEIVED`); the previous
    handlers come back after it. Outside the main thread (a library call from a worker thread) it does nothing."""
    def handler(signum: int, _frame: object) -> None:
        RECEIVED.append(signum)
        raise Interrupted(signum)

    if threading.current_thread() is not threading.main_thread():  # only the main thread can set handlers
        yield
        return
    # a SIGINT the process was started with ignored (a background job of a script) stays ignored
    signums = [signal.SIGTERM] + ([signal.SIGINT] if sigint and signal.getsignal(signal.SIGINT) != signal.SIG_IGN
                                  else [])
    previous = {s: signal.signal(s, handler) for s in signums}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def received_status() -> int:
    """The exit status of a run a library stopped on a signal it caught: 128 + the newest signal in
    :data:`RECEIVED` (SIGINT when none was recorded: a Ctrl-C outside :func:`sigterm_raises`)."""
    return 128 + (RECEIVED[-1] if RECEIVED else int(signal.SIGINT))


def interrupted_exit(exc: BaseException, saved: str) -> int:
    """Prints ``interrupted by SIGNAME: {saved}`` on stderr and returns the exit status (128 + signal)."""
    signum = exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)
    print(f"interrupted by {signal.Signals(signum).name}: {saved}", file=sys.stderr, flush=True)
    return 128 + signum


@contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM held back in the calling thread for the block, and in every process started in it (a
    signal mask survives fork and exec): workers being spawned then never see a Ctrl-C half-way through their
    start (a traceback, a semaphore gone, exit 1); the main process gets the signal when the block ends, and
    stops the workers in order. Outside the main thread, or without ``pthread_sigmask``, it does nothing."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
