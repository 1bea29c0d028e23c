"""Progress of a long loop for a reader without a terminal.

tqdm's bars (``disable=None``) stay silent when stderr is not a terminal: a batch job, a pipeline phase whose
output goes to a log file. :class:`ProgressLog` then writes a logging line every :data:`PROGRESS_INTERVAL_S`
seconds instead (done of total, episodes finished, the measured rate and the time left), and nothing where a
terminal shows the bar.
"""
from __future__ import annotations

import logging
import sys
import time
from typing import Callable, Optional

#: seconds between two progress lines when no terminal is attached
PROGRESS_INTERVAL_S = 15.0


def format_duration(seconds: float) -> str:
    """``42 s``, ``7 min``, ``2.5 h``."""
    if seconds != seconds or seconds < 0:
        return "unknown"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class ProgressLog:
    """Logs ``{what}: {done:,} of {total:,} {unit} (..%), {episodes} episodes finished, {rate} env steps/s, about
    {left} left`` at most every ``interval_s`` seconds, only while no terminal shows a bar (``enabled=False``:
    never). The rate is in env steps even where ``unit`` is episodes (:meth:`update`'s ``env_steps``)."""

    def __init__(self, logger: logging.Logger, what: str, total: Optional[int], unit: str, enabled: bool = True,
                 interval_s: float = PROGRESS_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.what = what
        self.total = total
        self.unit = unit
        isatty = getattr(sys.stderr, "isatty", None)
        self.enabled = enabled and not (isatty is not None and isatty())
        self.interval_s = float(interval_s)
        self.clock = clock
        self.start = self.last = clock()

    def update(self, done: int, episodes: int, env_steps: Optional[int] = None) -> None:
        """Says where the loop is (``done`` of ``total`` in ``unit``; ``env_steps`` run, when ``unit`` is not
        env steps) if ``interval_s`` has passed since the last line."""
        if not self.enabled:
            return
        now = self.clock()
        if now - self.last < self.interval_s:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        parts = [f"{done:,} of {self.total:,} {self.unit}" + (f" ({100.0 * done / self.total:.0f}%)"
                                                              if self.total else "")
                 if self.total is not None else f"{done:,} {self.unit}"]
        if self.unit != "episodes":
            parts.append(f"{episodes:,} episodes finished")
        steps = done if env_steps is None else env_steps
        parts.append(f"{steps / elapsed:,.0f} env steps/s")
        if self.total is not None and done > 0:
            parts.append(f"about {format_duration((self.total - done) * elapsed / done)} left")
        self.logger.info("%s: %s", self.what, ", ".join(parts))
