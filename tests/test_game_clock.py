"""NetHack's clock, pinned (--game_clock): the date reaches live games, our reading of it is NetHack's, and the
commands run themselves again under it or refuse bad input naming the flag."""
from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from common.nethack import game_clock
from scripts import skill_report

REPO = Path(__file__).resolve().parents[1]

#: a game of seeds (1, 2) with the project's options file (read by NetHack's own read_config_file, a name the
#: preloaded library exports too): its first message and the process's own clock, read inside the pinned process
FIRST_MESSAGE = """
import datetime, warnings, gymnasium as gym, nle  # noqa: F401
from rl_baseline.envs.options import nle_options
warnings.simplefilter("error")  # NLE warns and retries forever when the game does not start
env = gym.make("NetHackScore-v0", options=nle_options("Agent-mon-hum-neu-mal"))
env.unwrapped.seed(1, 2, False)
obs, _ = env.reset()
print(datetime.datetime.now().strftime("%Y-%m-%d %H"))
print(bytes(obs["message"]).rstrip(bytes(1)).decode())
"""


def _first_message(when: str) -> tuple[str, str]:
    env = game_clock.pinned_environment(datetime.strptime(when, game_clock.CLOCK_FORMAT))
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, "-c", FIRST_MESSAGE], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    clock, message = proc.stdout.strip().splitlines()[-2:]
    return clock, message


@pytest.mark.parametrize("when, expected", [
    ("2026-11-23 12:00:00", "Hello Agent, welcome to NetHack!  You are a neutral male human Monk."),  # phase 3
    ("2026-11-24 12:00:00", "You are lucky!  Full moon tonight."),  # the full moon's first day (phase 4)
    ("2026-11-26 12:00:00", "You are lucky!  Full moon tonight."),  # and its last
    ("2026-11-27 12:00:00", "Hello Agent, welcome to NetHack!"),  # phase 5
    ("2026-11-10 12:00:00", "Be careful!  New moon tonight."),
    ("2026-11-13 12:00:00", "Watch out!  Bad things can happen on Friday the 13th."),
    (game_clock.DEFAULT_PINNED, "Hello Agent, welcome to NetHack!  You are a neutral male human Monk."),
])
def test_a_pinned_clock_reaches_the_game_and_describe_reads_it_as_nethack_does(when, expected) -> None:
    """The same seeds started "Full moon tonight." on one date and not the next (docs/reliability.md); under the
    pin the game reads the pinned date, whatever the machine's, and describe() names what NetHack does with it."""
    clock, message = _first_message(when)
    assert clock == when[:13]  # the process's clock starts at the pin
    assert message.startswith(expected), message
    described = game_clock.describe(datetime.strptime(when, game_clock.CLOCK_FORMAT))
    assert ("full moon" in described) == ("Full moon" in message)
    assert ("new moon" in described) == ("New moon" in message)
    assert ("Friday the 13th" in described) == ("Friday the 13th" in message)


def test_the_preloaded_copy_hides_only_the_clashing_symbol() -> None:
    """Preloaded as bundled, libfaketime's read_config_file stood in for NetHack's: the options file was never read
    and every game stopped at "Who are you?". The copy makes that one symbol local; the installed file is kept."""
    bundled = game_clock._bundled_library().read_bytes()
    copy = game_clock.preload_library()
    assert copy != game_clock._bundled_library() and game_clock._bundled_library().read_bytes() == bundled
    patched = copy.read_bytes()
    assert len(patched) == len(bundled) and sum(a != b for a, b in zip(patched, bundled)) == 2  # bind, visibility
    with pytest.raises(ValueError, match="no dynamic symbol nethack_only"):
        game_clock.hide_dynamic_symbols(bundled, [b"nethack_only"])
    with pytest.raises(ValueError, match="not a 64-bit"):
        game_clock.hide_dynamic_symbols(b"#!/bin/sh\n", [b"read_config_file"])


def test_moon_phase_boundaries_and_hours() -> None:
    at = lambda s: datetime.strptime(s, game_clock.CLOCK_FORMAT)  # noqa: E731
    assert [game_clock.moon_phase(at(f"2026-11-{d} 12:00:00")) for d in (23, 24, 26, 27)] == [3, 4, 4, 5]
    assert "midnight" in game_clock.describe(at("2026-11-18 00:30:00"))
    assert "night" in game_clock.describe(at("2026-11-18 23:00:00"))
    assert "night" not in game_clock.describe(at(game_clock.DEFAULT_PINNED))


def test_bad_clocks_are_refused_naming_the_flag() -> None:
    assert game_clock.parse_game_clock("real") is None
    for bad in ("tomorrow", "2026-13-01 12:00:00", "2026-11-18"):
        with pytest.raises(ValueError, match="--game_clock"):
            game_clock.parse_game_clock(bad)


def test_a_process_told_it_is_pinned_whose_clock_is_not_says_so(monkeypatch) -> None:
    """The re-executed process checks that the library loaded instead of playing the machine's date unawares."""
    monkeypatch.setenv(game_clock.ACTIVE_VAR, "2001-01-01 12:00:00")
    with pytest.raises(RuntimeError, match="libfaketime did not load"):
        game_clock.runs_under(datetime(2001, 1, 1, 12))
    assert not game_clock.runs_under(datetime(2001, 1, 2, 12))  # another pin: not running under it yet
    assert game_clock.active_game_clock().startswith("pinned at 2001-01-01 12:00:00, Monday")
    monkeypatch.delenv(game_clock.ACTIVE_VAR)
    assert game_clock.active_game_clock().startswith("real: ")


def test_skill_report_refuses_a_malformed_clock_and_main_refuses_a_pinned_training_run(tmp_path, capsys) -> None:
    assert skill_report.main(["--policy_dir", str(tmp_path), "--game_clock", "noon"]) == 2
    assert capsys.readouterr().err.startswith("error: --game_clock 'noon': expected 'real' or a local time")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for extra, needle in ((["--game_clock", "2026-11-18 12:00:00"], "pins the clock of an evaluation"),
                          (["--evaluation", "True", "--game_clock", "12:00"], "--game_clock '12:00'")):
        proc = subprocess.run([sys.executable, "-m", "scripts.main", "--train_dir", str(tmp_path), "--experiment",
                               "x", *extra], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and needle in proc.stderr, proc.stderr[-2000:]
    assert not any(tmp_path.iterdir())  # nothing written
