"""SkillRewardModel, the Bradley-Terry loss and load_skill_reward (no training runs here)."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from common.nethack.messages import encode_message
from rlaif.reward_model import (
    LoadedSkillReward,
    RewardModelConfig,
    SkillRewardModel,
    latest_checkpoint,
    load_skill_reward,
)
from rlaif.train_reward import (
    QUANTILES,
    bradley_terry_loss,
    pair_accuracy_counts,
    reward_statistics,
    soft_targets,
    split_pairs,
)

SMALL = RewardModelConfig(embed_dim=8, conv_channels=(16, 16), kernel_sizes=(3, 3), pool_sizes=(4, 1), hidden_dim=16)
TEXTS = ["You climb down the stairs.", "", "You see here a lichen corpse.", "The newt bites!"]


def _batch(texts: list[str]) -> torch.Tensor:
    return torch.from_numpy(np.stack([encode_message(t) for t in texts]))


def test_forward_shapes_dtypes_and_depth_matters() -> None:
    torch.manual_seed(0)
    model = SkillRewardModel(SMALL).eval()
    msgs = _batch(TEXTS)
    depth = torch.tensor([1.0, 0.0, 0.0, -1.0])
    out_u8 = model(msgs, depth)
    out_long = model(msgs.long(), depth)
    assert out_u8.shape == (4,) and out_u8.dtype == torch.float32
    torch.testing.assert_close(out_u8, out_long)
    changed = model(msgs, depth + 1.0)
    assert not torch.allclose(out_u8, changed), "the depth change must reach the output"
    with pytest.raises(ValueError, match="depth_change has 3 values for 4 messages"):
        model(msgs, depth[:3])


def test_dedup_gives_the_same_rewards_as_encoding_every_row() -> None:
    torch.manual_seed(1)
    model = SkillRewardModel(SMALL).eval()
    rng = np.random.default_rng(0)
    texts = [TEXTS[i] for i in rng.integers(0, len(TEXTS), size=40)]
    msgs = _batch(texts)
    depth = torch.from_numpy(rng.integers(-1, 2, size=40).astype(np.float32))
    with torch.no_grad():
        deduped = model(msgs, depth, dedup=True)
        plain = model(msgs, depth, dedup=False)
    torch.testing.assert_close(deduped, plain, atol=1e-5, rtol=1e-5)
    # identical inputs must get identical rewards
    same = [i for i, t in enumerate(texts) if t == TEXTS[0] and depth[i] == depth[0]]
    assert len(same) >= 2 and torch.all(deduped[same] == deduped[same[0]])
    # gradients flow through the deduplicated path as well
    model.train()
    model(msgs, depth).sum().backward()
    assert model.embedding.weight.grad is not None and model.embedding.weight.grad.abs().sum() > 0


def test_config_round_trip_and_validation() -> None:
    cfg = RewardModelConfig(conv_channels=(8, 8), kernel_sizes=(3, 5), pool_sizes=(2, 1))
    again = RewardModelConfig.from_dict(cfg.to_dict())
    assert again == cfg and isinstance(again.conv_channels, tuple)
    assert all(not isinstance(v, tuple) for v in cfg.to_dict().values())
    with pytest.raises(ValueError, match="same length"):
        RewardModelConfig(conv_channels=(8, 8), kernel_sizes=(3,), pool_sizes=(1, 1))
    with pytest.raises(ValueError, match="shrinks"):
        RewardModelConfig(conv_channels=(8, 8), kernel_sizes=(3, 3), pool_sizes=(64, 64))


def test_bradley_terry_loss_matches_hand_computed_values() -> None:
    r1 = torch.tensor([1.0, 1.0, 1.0, -0.5])
    r2 = torch.tensor([0.0, 0.0, 0.0, 2.0])
    labels = torch.tensor([0, 1, 2, 1])
    sig = lambda x: 1.0 / (1.0 + math.exp(-x))  # noqa: E731
    expected = [
        -math.log(sig(1.0)),  # first better, first has the higher reward
        -math.log(sig(-1.0)),  # second better but scored lower
        -0.5 * math.log(sig(1.0)) - 0.5 * math.log(sig(-1.0)),  # tie: soft label 0.5
        -math.log(sig(2.5)),
    ]
    loss = bradley_terry_loss(r1, r2, labels)
    assert loss.item() == pytest.approx(sum(expected) / 4, rel=1e-6)
    assert bradley_terry_loss(r1[2:3], r2[2:3], labels[2:3]).item() == pytest.approx(expected[2], rel=1e-6)
    assert soft_targets(labels).tolist() == [0.0, 1.0, 0.5, 1.0]
    with pytest.raises(ValueError, match="unknown"):
        bradley_terry_loss(r1, r2, torch.tensor([0, 1, 3, 1]))


def test_accuracy_counts_only_decided_pairs() -> None:
    r1 = torch.tensor([1.0, 1.0, 0.0, 5.0])
    r2 = torch.tensor([0.0, 0.0, 1.0, 0.0])
    assert pair_accuracy_counts(r1, r2, torch.tensor([0, 1, 1, 2])) == (2, 3)
    assert pair_accuracy_counts(r1, r2, torch.tensor([2, 2, 2, 2])) == (0, 0)


def test_split_is_fixed_by_seed_and_disjoint() -> None:
    tr, va = split_pairs(1000, 0.05, 777)
    tr2, va2 = split_pairs(1000, 0.05, 777)
    _, va3 = split_pairs(1000, 0.05, 778)
    assert len(va) == 50 and len(tr) == 950 and not set(tr) & set(va)
    assert np.array_equal(va, va2) and np.array_equal(tr, tr2) and not np.array_equal(va, va3)


def test_reward_statistics_quantiles_are_normalized() -> None:
    rewards = np.random.default_rng(0).normal(3.0, 2.0, size=20000).astype(np.float32)
    mean, var, q = reward_statistics(rewards)
    assert mean == pytest.approx(3.0, abs=0.05) and var == pytest.approx(4.0, rel=0.05)
    assert len(q) == 19 and q == sorted(q)
    assert q[QUANTILES.index(0.5)] == pytest.approx(0.0, abs=0.03)
    assert q[QUANTILES.index(0.95)] == pytest.approx(1.645, abs=0.05)


# ------------------------------------------------------------------ load_skill_reward

def _write_reward_dir(root: Path, mean: float = 0.5, var: float = 4.0, rows: int = 2) -> tuple[Path, SkillRewardModel]:
    torch.manual_seed(3)
    model = SkillRewardModel(SMALL)
    ckpt_dir = root / "checkpoint_p0"
    ckpt_dir.mkdir(parents=True)
    for it, m in ((5, mean + 100.0), (12, mean)):  # the newest checkpoint (by iteration) must be used
        torch.save({"model": model.state_dict(), "optimizer": {}, "reward_mean": m, "reward_var": var,
                    "tot_num_iter": it, "model_config": SMALL.to_dict(), "skill": "descender"},
                   ckpt_dir / f"checkpoint_{it:09d}.pth")
    metrics = root / "reward_metrics"
    metrics.mkdir()
    with (metrics / "train_norm_quantiles.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([f"{q:.2f}" for q in QUANTILES])
        for r in range(rows):
            w.writerow([f"{(q - 0.5) * (r + 1):.6f}" for q in QUANTILES])
    return root, model


def test_load_skill_reward_scores_normalized_rewards(tmp_path: Path) -> None:
    reward_dir, model = _write_reward_dir(tmp_path / "llama3_descender_default", mean=0.5, var=4.0, rows=2)
    loaded = load_skill_reward(reward_dir)
    assert isinstance(loaded, LoadedSkillReward)
    assert loaded.skill == "descender" and loaded.checkpoint_path.name == "checkpoint_000000012.pth"
    assert loaded.reward_mean == 0.5 and loaded.reward_std == pytest.approx(2.0)
    assert not loaded.model.training
    msgs = np.stack([encode_message(t) for t in TEXTS])
    depth = np.array([1, 0, 0, -1])
    scores = loaded.score(msgs, depth)
    assert scores.dtype == np.float32 and scores.shape == (4,)
    with torch.no_grad():
        raw = model.eval()(torch.from_numpy(msgs), torch.from_numpy(depth.astype(np.float32))).numpy()
    np.testing.assert_allclose(scores, (raw - 0.5) / 2.0, rtol=1e-5, atol=1e-6)
    assert loaded.score(msgs[0], np.array(1.0)).shape == (1,)
    # quantiles come from the LAST row, keys rounded to 2 decimals
    assert sorted(loaded.quantiles) == list(QUANTILES)
    assert loaded.threshold(0.85) == pytest.approx((0.85 - 0.5) * 2)
    assert loaded.threshold(0.95) == pytest.approx(0.9)
    with pytest.raises(ValueError, match=r"train_norm_quantiles\.csv.*0\.05, 0\.10"):
        loaded.threshold(0.87)


def test_load_skill_reward_missing_parts_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="reward directory not found"):
        load_skill_reward(tmp_path / "nope")
    (tmp_path / "empty" / "checkpoint_p0").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_skill_reward(tmp_path / "empty")
    reward_dir, _ = _write_reward_dir(tmp_path / "run")
    (reward_dir / "reward_metrics" / "train_norm_quantiles.csv").unlink()
    with pytest.raises(FileNotFoundError, match="train_norm_quantiles.csv"):
        load_skill_reward(reward_dir)
    assert latest_checkpoint(reward_dir / "checkpoint_p0").name == "checkpoint_000000012.pth"


def test_two_reward_configurations_in_one_process_keep_their_own_scores(tmp_path: Path) -> None:
    """The process-wide score cache was keyed by (skill, message, depth change) alone: a second reward built in the
    same process (a test after another, an evaluation of a second run) was paid the first one's cached scores."""
    from rl_baseline.skills.intrinsic_reward import build_intrinsic_reward

    first, _ = _write_reward_dir(tmp_path / "a" / "llama3_descender_default", mean=0.5)
    second, _ = _write_reward_dir(tmp_path / "b" / "llama3_descender_default", mean=-5.0)  # same weights
    message = encode_message("The fire elemental of Chih Sung-tzu hits!")

    def paid(reward_dir: Path) -> float:
        reward = build_intrinsic_reward([str(reward_dir)], [0.05], beta=3.0, llm_coef=0.1, extrinsic_coef=0.0)
        return reward.thresholded_score(0, message, 0)

    score_a, score_b = paid(first), paid(second)
    assert score_b == pytest.approx(float(load_skill_reward(second).score(message[None], np.zeros(1))[0]), abs=1e-6)
    assert score_b - score_a == pytest.approx(5.5 / 2.0, abs=1e-4)  # the means differ by 5.5, std 2
    assert paid(first) == score_a
    # the first directory trained again in this process: its newest checkpoint is the one that scores
    state = torch.load(first / "checkpoint_p0" / "checkpoint_000000012.pth", weights_only=True)
    torch.save({**state, "reward_mean": -5.0, "tot_num_iter": 20}, first / "checkpoint_p0" / "checkpoint_000000020.pth")
    assert paid(first) == pytest.approx(score_b, abs=1e-6)


# ------------------------------------------------------------------ architectures


def test_arch_names_defaults_and_validation() -> None:
    from rlaif.reward_arch import ReleaseRewardModel
    from rlaif.reward_model import build_reward_model
    from rlaif.train_reward import RewardTrainingConfig

    assert RewardModelConfig().arch == "small"  # what a saved config without "arch" means
    assert RewardTrainingConfig().model.arch == "release"  # what new reward training builds
    release = RewardModelConfig(arch="release")
    assert RewardModelConfig.from_dict(release.to_dict()) == release
    assert isinstance(build_reward_model(release), ReleaseRewardModel)
    assert isinstance(build_reward_model(SMALL), SkillRewardModel)
    with pytest.raises(ValueError, match="unknown reward model architecture 'big'; choose one of: release, small"):
        RewardModelConfig(arch="big")
    with pytest.raises(ValueError, match="embed_dim only apply to arch 'small'"):
        RewardModelConfig(arch="release", embed_dim=8)
    with pytest.raises(ValueError, match="build_reward_model"):
        SkillRewardModel(release)
    model = build_reward_model(release).eval()
    assert sum(p.numel() for p in model.parameters()) == 356_993
    msgs = _batch(TEXTS)
    with torch.no_grad():
        deduped = model(msgs, torch.tensor([1.0, 0.0, 0.0, -1.0]))
        plain = model(msgs, torch.tensor([1.0, 0.0, 0.0, -1.0]), dedup=False)
        full = model(msgs, torch.tensor([[1.0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [-1, 0, 0, 0, 0]]))
    torch.testing.assert_close(deduped, plain, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(deduped, full)


def test_release_init_is_orthogonal_on_linear_layers_only() -> None:
    from rlaif.reward_model import build_reward_model

    torch.manual_seed(0)
    model = build_reward_model(RewardModelConfig(arch="release"))
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            w = module.weight.detach()
            small = min(w.shape)
            gram = w @ w.T if w.shape[0] == small else w.T @ w
            torch.testing.assert_close(gram, torch.eye(small), atol=1e-4, rtol=0, msg=name)
            assert torch.all(module.bias == 0), name
    assert torch.all(model.embedding.weight[0] == 0)  # padding row


def test_checkpoint_without_arch_loads_as_the_small_model(tmp_path: Path) -> None:
    reward_dir, model = _write_reward_dir(tmp_path / "old_run")
    for path in (reward_dir / "checkpoint_p0").iterdir():
        state = torch.load(path, weights_only=True)
        del state["model_config"]["arch"]  # as written before architectures had names
        torch.save(state, path)
    loaded = load_skill_reward(reward_dir)
    assert type(loaded.model) is SkillRewardModel and loaded.model.config == SMALL
    msgs = np.stack([encode_message(t) for t in TEXTS])
    with torch.no_grad():
        raw = model.eval()(torch.from_numpy(msgs), torch.zeros(4)).numpy()
    np.testing.assert_allclose(loaded.score(msgs, np.zeros(4)), (raw - 0.5) / 2.0, rtol=1e-5, atol=1e-6)
