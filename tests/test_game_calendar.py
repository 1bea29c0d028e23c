"""The suite's pinned NetHack calendar works on live games (see tests/game_calendar.py)."""
from __future__ import annotations

import ctypes
import datetime as dt
import subprocess
import sys
from pathlib import Path

import pytest

from tests import game_calendar

REPO = Path(__file__).resolve().parents[1]
FIRST_MESSAGES = """
from rl_baseline.envs import make_monk_env
env = make_monk_env(max_episode_steps=10)
env.unwrapped.seed(5, 6, False)
obs, info = env.reset()
print(repr(info["message"]))
env.close()
"""


def _first_message_on(when: dt.datetime) -> str:
    library = game_calendar.build_library()
    if library is None:
        pytest.skip("no C compiler to build the calendar library")
    env = game_calendar.pinned_environment(library)
    env[game_calendar.PINNED_VAR] = str(int(when.timestamp()))
    out = subprocess.run([sys.executable, "-c", FIRST_MESSAGES], env=env, cwd=REPO, capture_output=True, text=True,
                         timeout=120, check=True)
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("day, expected", [
    ("2026-11-24", "You are lucky!  Full moon tonight."),
    ("2026-11-10", "Be careful!  New moon tonight."),
    ("2026-11-17", "welcome to NetHack!"),
])
def test_the_game_reads_the_pinned_date(day, expected):
    when = dt.datetime.fromisoformat(f"{day}T12:00:00+00:00")
    message = _first_message_on(when)
    assert expected in message, message
    # the suite's own rule for special days agrees with the game
    assert game_calendar.is_special_day(when) == ("moon" in message)


def test_friday_the_13th_is_special():
    assert game_calendar.is_special_day(dt.datetime(2026, 11, 13, 12))
    assert not game_calendar.is_special_day(dt.datetime(2026, 11, 20, 12))  # a Friday, not the 13th


def test_the_suite_runs_on_the_pinned_date_and_the_clock_advances():
    if not game_calendar.is_pinned():
        pytest.skip("the calendar is not pinned in this run (no C compiler, or MAESTROMOTIF_NO_CALENDAR_PIN set)")
    libc = ctypes.CDLL(None)
    libc.time.restype = ctypes.c_long
    first = libc.time(None)
    pinned = int(game_calendar.PINNED_DATE.timestamp())
    assert pinned <= first < pinned + 6 * 3600  # the whole suite runs within the pinned day's afternoon
    assert game_calendar.moon_phase(game_calendar.PINNED_DATE) not in (0, 4)
