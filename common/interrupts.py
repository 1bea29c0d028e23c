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
from typing import Iterator, Optional


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
    started = _HELD["handlers"][signal.SIGINT] if _HELD is not None else signal.getsignal(signal.SIGINT)
    signums = [signal.SIGTERM] + ([signal.SIGINT] if sigint and started != signal.SIG_IGN else [])
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
    """SIGINT and SIGTERM held back for the block in this process, and ignored by every process started in it:
    workers being spawned then never see a Ctrl-C (which reaches the whole process group) half-way through their
    start (a traceback, a semaphore gone, exit 1); this process gets the signal when the block ends, and stops the
    workers in order. The signals are blocked in the calling thread and their action set to ignore: a child
    keeps an ignored action across exec (Python's process start-up resets the mask, not that), and Linux keeps a
    blocked signal pending whatever its action. Outside the main thread, or without ``pthread_sigmask``, nothing."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    _start_the_resource_tracker()
    signums = {signal.SIGINT, signal.SIGTERM}
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, signums)
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in signums}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)  # a signal that came meanwhile arrives now


_HELD: Optional[dict] = None  # what hold_signals changed: the main thread's mask and the handlers before


def hold_signals() -> None:
    """From a command's first line: SIGINT and SIGTERM blocked in the main thread, so in every thread it starts
    from here on, and their action set to ignore, so in every process it starts (a child keeps an ignored action
    across exec). A signal that comes meanwhile waits (Linux keeps a blocked signal pending whatever its action):
    :func:`exit_if_signalled` ends the command where nothing is written yet, :func:`release_signals` delivers it.
    A Ctrl-C while torch loaded gave a KeyboardInterrupt traceback; one while workers were spawned, a worker's
    traceback (a semaphore gone) and exit 1; one that reached a thread of the main process that did not block it
    was dropped there (an ignored action) and the run went on."""
    global _HELD
    if _HELD is not None or threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "pthread_sigmask"):
        return
    _start_the_resource_tracker()
    signums = (signal.SIGINT, signal.SIGTERM)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set(signums))
    _HELD = {"mask": mask, "handlers": {s: signal.signal(s, signal.SIG_IGN) for s in signums}}


def _start_the_resource_tracker() -> None:
    """multiprocessing starts its resource tracker with SIGINT and SIGTERM blocked and then unblocks them in the
    calling thread, whatever that thread had: started inside a hold, it left the main thread unblocked with the
    signals ignored, and a Ctrl-C was lost. Started first, it is not started again."""
    from multiprocessing import resource_tracker  # lazy: a command that holds signals starts workers later

    resource_tracker.ensure_running()


def exit_if_signalled(saved: str) -> None:
    """Where nothing is written yet: a signal that came while held ends the process now, in one line
    (:func:`interrupted_exit`'s), with 128 + the signal."""
    if _HELD is None:
        return
    pending = signal.sigpending() & {signal.SIGINT, signal.SIGTERM}
    if pending:
        signum = signal.SIGINT if signal.SIGINT in pending else signal.SIGTERM
        if _HELD["handlers"][signum] == signal.SIG_IGN:  # started ignored (a background job): it stays ignored
            return
        print(f"interrupted by {signal.Signals(signum).name}: {saved}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        import os  # lazy: only for this exit without clean-up

        os._exit(128 + signum)


def release_signals() -> None:
    """Ends :func:`hold_signals`: the actions that were there come back where nothing else was installed since,
    then the mask: a signal that came meanwhile arrives now (a ``KeyboardInterrupt``, or :class:`Interrupted`
    under :func:`sigterm_raises`). Without a hold, nothing."""
    global _HELD
    if _HELD is None:
        return
    held, _HELD = _HELD, None
    for signum, handler in held["handlers"].items():
        if signal.getsignal(signum) == signal.SIG_IGN:
            signal.signal(signum, handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, held["mask"])
