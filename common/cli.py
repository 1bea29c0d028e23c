"""One style for what the entry points (``python -m scripts.X``) say when they stop, and one exit status per
kind of failure:

* ``0``: done;
* ``1`` (:data:`FAILED`): the run itself failed after its input was accepted (a server that did not come
  up, a phase that failed, replies that were mostly unusable);
* ``2`` (:data:`USAGE`): bad input (a flag, a file or folder a flag names, files already there that the
  run would silently misuse) or an optional package that is not installed (:class:`MissingPackageError`;
  the message says what to install);
* ``128 + N``: stopped by signal N (:mod:`common.interrupts`).

The message is one line on stderr, ``error: ...``, naming the flag or file (:func:`error`). argparse's
own refusals (an unknown flag, a malformed value, a missing required flag) take the same form through
:class:`ScriptParser`, or :func:`one_line_errors` on a parser built elsewhere.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

#: exit status of a run that failed after its input was accepted
FAILED = 1
#: exit status of bad input or a missing optional package (argparse's own status for a bad flag)
USAGE = 2


class MissingPackageError(RuntimeError):
    """An optional package that a flag needs is not installed; the message says what to install. The
    scripts exit :data:`USAGE` for it, as for a flag that cannot work here."""


def error(message: Any, status: int = USAGE, detail: str = "") -> int:
    """Prints ``error: {message}`` on stderr and returns ``status`` (for ``return error(...)``).

    ``message`` is folded onto one line; ``detail`` (e.g. the end of a server's log) follows it as is."""
    line = " ".join(str(message).split())
    print(f"error: {line}" + (f"\n{detail.rstrip()}" if detail else ""), file=sys.stderr, flush=True)
    return status


def _refuse(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    # argparse prints the usage block and "prog: error: ..."; one line naming the flag says the same
    parser.exit(USAGE, f"error: {' '.join(message.split())} ({parser.prog} --help lists the flags)\n")


class ScriptParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose refusals are one ``error: ...`` line, exit status :data:`USAGE`."""

    def error(self, message: str) -> NoReturn:
        _refuse(self, message)


def one_line_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The same one-line refusals for a parser built by other code (``parser`` itself, returned)."""
    parser.error = lambda message: _refuse(parser, message)  # type: ignore[method-assign]
    return parser


def tcp_port(text: str) -> int:
    """An argparse type: a TCP port, 1 to 65535 (port 70000 reached the socket's bind and a traceback)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be at most 65535 (a TCP port), got {value}")
    return value


def listen_port(text: str) -> int:
    """An argparse type: a port to listen on, 0 (any free port, the system's choice) to 65535."""
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port, 0 (any free one) to 65535, got {value}")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    import math  # lazy: only for this parser type

    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0, got {text}")
    return value
