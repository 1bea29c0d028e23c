"""Suite set-up: NetHack's calendar pinned (see ``tests/game_calendar.py``), the ``slow`` and ``serial`` markers.

``pytest -m "not slow"`` is the quick loop; the end-to-end tests are marked ``slow``. Under pytest-xdist
(``-n 2``) the tests marked ``serial`` are deselected, and ``pytest -m serial`` runs them after, one at a time
(the whole suite as CI runs it: README, "The tests", and ``.ci/run``).
"""
from __future__ import annotations

import datetime as dt
import os

import pytest

from tests import game_calendar

# fixtures that run real training in a subprocess; every test using one is slow
SLOW_FIXTURES = {"trained", "ci_run"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "game_calendar: compares a seeded game with a recording made on an "
                                       "ordinary day (skipped on a full/new moon or Friday 13th if the "
                                       "calendar cannot be pinned)")
    if game_calendar.is_pinned() or os.environ.get("MAESTROMOTIF_NO_CALENDAR_PIN"):
        return
    # Re-run this very command with the library preloaded (the dynamic linker reads LD_PRELOAD at start);
    # without a C compiler the suite goes on with the real date, as the header says.
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.stop_global_capturing()
    game_calendar.rerun_pinned()
    if capture is not None:
        capture.start_global_capturing()


def pytest_report_header(config: pytest.Config) -> str:
    if game_calendar.is_pinned():
        return f"NetHack calendar: pinned to {game_calendar.PINNED_DATE:%Y-%m-%d %H:%M} UTC"
    return "NetHack calendar: the real date (no C compiler to pin it, or MAESTROMOTIF_NO_CALENDAR_PIN set)"


def _under_xdist(config: pytest.Config) -> bool:
    """True in a pytest-xdist worker, and in the controller of a run with ``-n``."""
    return hasattr(config, "workerinput") or bool(getattr(config.option, "numprocesses", None))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _under_xdist(config):
        # a serial test reads a wall-clock window (a signal sent after some labels, a server's log that goes
        # quiet); a test beside it on the other core could stretch that window
        serial = [item for item in items if item.get_closest_marker("serial")]
        if serial:
            config.hook.pytest_deselected(items=serial)
            items[:] = [item for item in items if not item.get_closest_marker("serial")]
    special_today = not game_calendar.is_pinned() and game_calendar.is_special_day(dt.datetime.now())
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if special_today and item.get_closest_marker("game_calendar"):
            item.add_marker(pytest.mark.skip(reason="NetHack's calendar is a full/new moon or Friday 13th today "
                                                    "and could not be pinned (no C compiler, or MAESTROMOTIF_NO_CALENDAR_PIN set)"))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if _under_xdist(config) and not hasattr(config, "workerinput"):
        terminalreporter.write_line("the tests marked serial were not run beside others (-n): run them after, one "
                                    "at a time, with: python -m pytest -m serial")
