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
                 "--top_messages", "1000", "--no_progress"]) == 0
    data = json.loads((out / "reward_trace.json").read_text())
    release, after = data["results"]
    assert (release["timing"], after["timing"]) == ("release", "after_action")
    # same games, same actions, same skill choices: the same steps and messages
    assert release["steps"] == after["steps"] > 0 and release["descents"] == after["descents"]
    assert release["empty_message_share"] == after["empty_message_share"] > 0
    assert release["wall_message_share"] == after["wall_message_share"] == 0.0  # mention_walls is off
    assert release["return_per_episode"] != after["return_per_episode"]  # other observations are scored
    assert "| release |" in (out / "reward_trace.md").read_text()
    # what pays each skill: every paid step is in the tally, under the skill whose return it is
    for r in (release, after):
        for skill, per_episode in r["return_per_episode"].items():
            rows = r["top_paid"][skill]
            assert sum(row["reward"] for row in rows) == pytest.approx(per_episode * r["episodes"], abs=1e-9)
            assert all(row["steps"] > 0 and row["reward"] != 0.0 for row in rows)
    assert any(r["top_paid"][s] for r in (release, after) for s in r["top_paid"])  # something was paid
    assert "What pays each skill" in (out / "reward_trace.md").read_text()


def test_the_tally_of_paid_messages_ranks_by_reward_in_all():
    from orchestration.reward_trace import TraceResult, paid_messages_table

    r = TraceResult("release")
    for message, reward in [(b"You find a hidden door.", 1.0), (b"", 0.1), (b"You find a hidden door.", 0.5),
                            (b"A | B", 2.0)]:
        r.note_paid("descender", message, reward)
    top = r.top_paid("descender", 2)
    assert [(row["message"], row["steps"], row["reward"]) for row in top] == [
        ("A | B", 1, 2.0), ("You find a hidden door.", 2, 1.5)]
    assert top[0]["share"] == pytest.approx(2.0 / 3.6)
    assert r.top_paid("merchant", 5) == [] and r.top_paid("descender", 0) == []
    table = paid_messages_table([r], 5, ["descender"])
    assert "| release | descender | A \\| B | 1 | 2 | 55.6% |" in table  # a | in a message does not split the row
    assert "| <empty message> | 1 | 0.1 |" in table


def test_a_negative_top_messages_exits_2(capsys):
    assert main(["--reward_dir", "['a']", "--top_messages", "-1", "--no_progress"]) == 2
    assert "error: --top_messages must be 0 or more, got -1" in capsys.readouterr().err


def test_bad_reward_dirs_exit_2(tmp_path, capsys):
    assert main(["--reward_dir", str([str(tmp_path / "nope")] * 5), "--no_progress"]) == 2
    err = capsys.readouterr().err
    # five folders were given: the message says that none of them is there, not "5 needed, got 5"
    assert err.startswith("error: --reward_dir: 5 of the 5 reward directories not found:") and "nope" in err
    assert "needed" not in err
    assert main(["--reward_dir", "['a', 'b']", "--no_progress"]) == 2
    assert "error: --reward_dir: 5 reward directories needed" in capsys.readouterr().err


@pytest.mark.parametrize("quantiles, named", [
    ("[0.85,0.85,0.85]", "--eps_threshold_quantile lists 3 values for 5 reward directories"),
    ("[0.123]", "--eps_threshold_quantile 0.123 for"),
])
def test_a_quantile_list_that_does_not_fit_exits_2_naming_the_flag(tmp_path, capsys, quantiles, named):
    """Both ended in a ValueError traceback (exit 1) from deep inside the environment, although --help
    promises exit 2 for a quantile list of the wrong length."""
    dirs = build_tiny_reward_dirs(tmp_path / "rewards")
    capsys.readouterr()
    assert main(["--reward_dir", str(dirs), "--eps_threshold_quantile", quantiles, "--episodes", "1",
                 "--max_episode_steps", "10", "--no_progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and named in err and "Traceback" not in err
