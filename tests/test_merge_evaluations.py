"""scripts.merge_evaluations on summaries made by the evaluation's own summarize (the live merge of two real
evaluations is tests/test_training.py::test_evaluations_on_other_games_merge_into_one)."""
from __future__ import annotations

import json

import pytest

from rl_baseline.evaluation import EpisodeResult, MergeError, RunResult, merge_summaries, summarize
from scripts import merge_evaluations

SKILLS = ("discoverer", "descender")


def _summary(reached: list[bool], seed: int, **changes) -> dict:
    episodes = [EpisodeResult(success=r, count=0.0, value=float(r), length=10 + i, skill_share={s: 0.5 for s in SKILLS},
                              release={"reached": r, "max_depth": 2 if r else 1, "entered_mines": r,
                                       "descents": int(r), "steps": 10 + i, "prompt_open_steps": 0},
                              ended_by="release" if r else "game")
                for i, r in enumerate(reached)]
    run = RunResult(episodes=episodes, protocol="release", num_envs=2, env_steps_run=100, unfinished=1,
                    env_step_budget=100)
    s = summarize("gnomish", "success", episodes, SKILLS, protocol="release", stats_avg=4, run=run)
    s.update(code_seed=42, experiment="e", checkpoint="c.pth", env_steps=1000, deterministic=False,
             policy="trained", game_clock="pinned at 2026-11-18 12:00:00, Wednesday", seed=seed)
    s.update(changes)
    return json.loads(json.dumps(s))


def test_merged_episodes_interleave_and_the_window_is_over_all_of_them() -> None:
    a = _summary([True, False, False, False], seed=1)   # lengths 10..13
    b = _summary([False, True], seed=2)                 # lengths 10, 11
    merged = merge_summaries([a, b], ["a.json", "b.json"], stats_avg=4)
    # a's episode i of 4 at (i+1)/4, b's of 2 at (i+1)/2: a0, a1, b0, a2, a3, b1
    assert [e["length"] for e in merged["per_episode"]] == [10, 11, 10, 12, 13, 11]
    assert merged["run"]["finished_episodes"] == 6 and merged["run"]["env_steps_run"] == 200
    assert merged["run"]["num_envs"] == 4 and merged["run"]["unfinished_episodes"] == 2
    # the release's window: the last 4 finished (b0, a2, a3, b1): one reached
    assert merged["release"]["finished_episodes"] == 6 and merged["episodes"] == 4
    assert merged["mean"] == pytest.approx(0.25)
    assert merged["seed"] == [1, 2] and [m["file"] for m in merged["merged_from"]] == ["a.json", "b.json"]


@pytest.mark.parametrize("change, said", [
    ({"checkpoint": "other.pth"}, "checkpoint"),
    ({"task": "delphi"}, "task"),
    ({"game_clock": "real: 2026-11-28 18:26:30, Saturday"}, "game_clock"),
    ({"seed": 1}, "played the same games"),
    ({"seed": None}, "which games"),
])
def test_evaluations_that_cannot_be_one_are_refused_by_name(change, said) -> None:
    a = _summary([True, False], seed=1)
    b = _summary([False], **{"seed": 2, **change})
    with pytest.raises(MergeError, match=said) as info:
        merge_summaries([a, b], ["a.json", "b.json"], stats_avg=4)
    assert "b.json" in str(info.value)
    if change.get("seed") is None and "seed" in change:
        del b["seed"]  # a JSON written before evaluations stored their games' seed
        with pytest.raises(MergeError, match="which games"):
            merge_summaries([a, b], ["a.json", "b.json"], stats_avg=4)


def test_games_on_the_machines_clock_merge_whatever_hour_each_started() -> None:
    a = _summary([True], seed=1, game_clock="real: 2026-11-28 18:26:24, Saturday")
    b = _summary([False], seed=2, game_clock="real: 2026-11-28 18:26:30, Saturday")
    merged = merge_summaries([a, b], ["a.json", "b.json"], stats_avg=4)
    assert merged["game_clock"].startswith("real") and "each evaluation's own" in merged["game_clock"]
    assert [m["game_clock"] for m in merged["merged_from"]] == [a["game_clock"], b["game_clock"]]


def test_the_script_refuses_bad_files_with_exit_2_and_writes_nothing(tmp_path, capsys) -> None:
    good = tmp_path / "a.json"
    good.write_text(json.dumps(_summary([True], seed=1)))
    other = tmp_path / "b.json"
    other.write_text(json.dumps(_summary([False], seed=2)))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    out = tmp_path / "out" / "m.json"
    for inputs, said in (([good, broken], "not a readable evaluation JSON"), ([good, tmp_path / "none.json"], "not found"),
                         ([good], "two evaluations or more")):
        with pytest.raises(SystemExit) as info:
            merge_evaluations.main(["--inputs", *map(str, inputs), "--out", str(out)])
        assert info.value.code == 2
        assert said in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        merge_evaluations.main(["--inputs", str(good), str(other), "--out", str(tmp_path / "m.txt")])
    assert info.value.code == 2 and ".json" in capsys.readouterr().err
    assert not out.exists()
    merged = merge_evaluations.main(["--inputs", str(good), str(other), "--out", str(out)])
    assert merged["run"]["finished_episodes"] == 2 and out.is_file()
