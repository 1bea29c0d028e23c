"""scripts.reward_trace: the same seeded games and actions under both reward timings."""
from __future__ import annotations

import json

import pytest

from bench.fixtures import build_tiny_reward_dirs
from scripts.reward_trace import main


@pytest.mark.game_calendar
def test_both_timings_play_the_same_games_and_differ_in_the_rewards_alone(tmp_path):
    dirs = build_tiny_reward_dirs(tmp_path / "rewards")
    out = tmp_path / "trace"
    assert main(["--reward_dir", str(dirs), "--episodes", "2", "--max_episode_steps", "150", "--out", str(out),
                 "--no_progress"]) == 0
    data = json.loads((out / "reward_trace.json").read_text())
    release, after = data["results"]
    assert (release["timing"], after["timing"]) == ("release", "after_action")
    # same games, same actions, same skill choices: the same steps and messages
    assert release["steps"] == after["steps"] > 0 and release["descents"] == after["descents"]
    assert release["empty_message_share"] == after["empty_message_share"] > 0
    assert release["wall_message_share"] == after["wall_message_share"] == 0.0  # mention_walls is off
    assert release["return_per_episode"] != after["return_per_episode"]  # other observations are scored
    assert "| release |" in (out / "reward_trace.md").read_text()


def test_bad_reward_dirs_exit_2(tmp_path, caplog):
    assert main(["--reward_dir", str([str(tmp_path / "nope")] * 5), "--no_progress"]) == 2
    assert "not found" in caplog.text and "nope" in caplog.text
    assert main(["--reward_dir", "['a', 'b']", "--no_progress"]) == 2
    assert "5 reward directories needed" in caplog.text
