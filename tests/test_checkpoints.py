"""Skill-policy and reward-model checkpoint files: what counts, how they are read, what resume picks."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from common.torch_files import plain_numbers
from rl_baseline.sf.checkpoints import CheckpointError, list_checkpoints, load_checkpoint_file, load_newest


def _policy_state(env_steps: int, best=-1e9) -> dict:
    return {"train_step": env_steps // 100, "env_steps": env_steps, "best_performance": best,
            "model": {"w": torch.full((2,), float(env_steps))}, "optimizer": {"state": {}, "param_groups": []},
            "curr_lr": 1e-4}


def _save(ckpt_dir: Path, env_steps: int, best=-1e9, prefix="checkpoint", suffix="") -> Path:
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    path = ckpt_dir / f"{prefix}_{env_steps // 100:09d}_{env_steps}{suffix}.pth"
    torch.save(_policy_state(env_steps, best), path)
    return path


def test_pre_fix_checkpoint_with_numpy_scalars_loads_with_plain_numbers(tmp_path):
    path = _save(tmp_path, 1200, best=np.float64(0.25))
    with pytest.raises(Exception, match="numpy"):
        torch.load(path)  # the bug: torch's default loader refuses sample-factory's numpy.float64
    state = load_checkpoint_file(path)
    assert state["best_performance"] == 0.25 and type(state["best_performance"]) is float
    assert torch.equal(state["model"]["w"], torch.full((2,), 1200.0))


def test_only_numeric_numpy_scalars_are_allowed(tmp_path):
    path = tmp_path / "checkpoint_000000001_100.pth"
    torch.save({**_policy_state(100), "extra": np.array(["text"])}, path)
    with pytest.raises(CheckpointError, match=str(path)):
        load_checkpoint_file(path)


def test_plain_numbers_leaves_tensors_and_converts_nested_scalars():
    t = torch.ones(2)
    out = plain_numbers({"a": np.float64(1.5), "b": [np.int64(2), (np.float32(3),)], "t": t, "s": "x"})
    assert out == {"a": 1.5, "b": [2, (3.0,)], "t": t, "s": "x"}
    assert type(out["a"]) is float and type(out["b"][0]) is int and out["t"] is t


def test_listing_ignores_temporary_files_and_orders_by_step(tmp_path):
    _save(tmp_path, 900)
    _save(tmp_path, 12_000)
    _save(tmp_path, 1_500)
    (tmp_path / "checkpoint_temp").write_bytes(b"half a save")
    (tmp_path / ".checkpoint_000000200_20000.pth.tmp").write_bytes(b"x")
    _save(tmp_path, 2_000, prefix="best", suffix="_reward_0.500")
    names = [p.name for p in list_checkpoints(tmp_path)]
    assert names == ["checkpoint_000000009_900.pth", "checkpoint_000000015_1500.pth", "checkpoint_000000120_12000.pth"]
    assert [p.name for p in list_checkpoints(tmp_path, "best")] == ["best_000000020_2000_reward_0.500.pth"]
    with pytest.raises(ValueError, match="kind"):
        list_checkpoints(tmp_path, "newest")


def test_resume_falls_back_to_the_newest_readable_and_leaves_the_damaged_file(tmp_path, caplog):
    _save(tmp_path, 1000)
    good = _save(tmp_path, 2000, best=np.float64(1.0))
    bad = _save(tmp_path, 3000)
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 3])
    with caplog.at_level(logging.WARNING):
        loaded = load_newest(tmp_path)
    assert loaded.path == good and loaded.env_steps == 2000 and [p for p, _ in loaded.skipped] == [bad]
    assert str(bad) in caplog.text
    assert bad.read_bytes() == data[: len(data) // 3]
    # evaluation: no silent fallback to an older policy
    with pytest.raises(CheckpointError, match=bad.name):
        load_newest(tmp_path, fallback=False)


def test_no_readable_checkpoint_is_an_error_naming_every_file(tmp_path):
    paths = [_save(tmp_path, s) for s in (100, 200)]
    for p in paths:
        p.write_bytes(b"\x00" * 10)
    with pytest.raises(CheckpointError) as err:
        load_newest(tmp_path)
    assert all(str(p) in str(err.value) for p in paths) and "--restart_behavior restart" in str(err.value)
    assert load_newest(tmp_path / "empty") is None


def test_a_reward_checkpoint_is_not_taken_for_a_policy_checkpoint(tmp_path):
    path = tmp_path / "checkpoint_000000001_100.pth"
    torch.save({"model": {}, "reward_mean": 0.0, "reward_var": 1.0, "tot_num_iter": 3}, path)
    with pytest.raises(CheckpointError, match="not a skill-policy checkpoint"):
        load_checkpoint_file(path)


def test_reward_checkpoint_errors_name_the_file(tmp_path):
    from rlaif.reward_model import RewardCheckpointError, load_checkpoint

    bad = tmp_path / "checkpoint_000000010.pth"
    bad.write_bytes(b"not a zip")
    with pytest.raises(RewardCheckpointError, match=str(bad)):
        load_checkpoint(bad)
    policy = _save(tmp_path, 100)
    with pytest.raises(RewardCheckpointError, match="not a reward-model checkpoint"):
        load_checkpoint(policy)
