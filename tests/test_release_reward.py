"""The release reward architecture and the converter of the authors' reward checkpoints.

The release's parameter names and shapes are written out below from its code
(rl_baseline/torchbeast_encoder.py TorchBeastEncoder with its default flags, rlaif/reward_model.py
RewardSharedWeights), and its forward pass is recomputed with functional torch ops straight from
those raw tensors: a converted checkpoint must score exactly like that reference.
"""
from __future__ import annotations

import csv
import math
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from common.nethack.messages import encode_message
from rlaif.dataset import STAT_FIELDS
from rlaif.release_reward import ReleaseCheckpointError, convert_release_rewards
from rlaif.reward_arch import ReleaseRewardModel, release_diffstats
from rlaif.reward_model import RewardModelConfig, load_skill_reward

TEXTS = ["You climb down the stairs.", "", "You see here a lichen corpse.", "The newt bites!",
         "There is a staircase down here.", "You fall through a trap door!"]
RELEASE_QUANTILES = [i / 100 for i in range(5, 96, 5)]  # the release writes these floats as its header

# name -> shape, in the order of the release's state dict
RELEASE_SHAPES: "OrderedDict[str, tuple[int, ...]]" = OrderedDict([
    ("encoder.embed_diffstats.0.weight", (128, 5)), ("encoder.embed_diffstats.0.bias", (128,)),
    ("encoder.embed_diffstats.2.weight", (128, 128)), ("encoder.embed_diffstats.2.bias", (128,)),
    ("encoder.char_lt.weight", (256, 32)),
    ("encoder.conv1.weight", (64, 32, 7)), ("encoder.conv1.bias", (64,)),
    ("encoder.conv2_6_fc.2.weight", (64, 64, 7)), ("encoder.conv2_6_fc.2.bias", (64,)),
    ("encoder.conv2_6_fc.5.weight", (64, 64, 3)), ("encoder.conv2_6_fc.5.bias", (64,)),
    ("encoder.conv2_6_fc.7.weight", (64, 64, 3)), ("encoder.conv2_6_fc.7.bias", (64,)),
    ("encoder.conv2_6_fc.9.weight", (64, 64, 3)), ("encoder.conv2_6_fc.9.bias", (64,)),
    ("encoder.conv2_6_fc.11.weight", (64, 64, 3)), ("encoder.conv2_6_fc.11.bias", (64,)),
    ("encoder.conv2_6_fc.15.weight", (128, 320)), ("encoder.conv2_6_fc.15.bias", (128,)),
    ("encoder.fc.0.weight", (256, 256)), ("encoder.fc.0.bias", (256,)),
    ("encoder.fc.2.weight", (512, 256)), ("encoder.fc.2.bias", (512,)),
    ("reward_fn.1.weight", (1, 512)), ("reward_fn.1.bias", (1,)),
])


def release_state_dict(seed: int = 0) -> "OrderedDict[str, torch.Tensor]":
    """Random weights under the release's names, scaled so activations neither vanish nor explode."""
    gen = torch.Generator().manual_seed(seed)
    sd = OrderedDict()
    for name, shape in RELEASE_SHAPES.items():
        if name.endswith("bias"):
            sd[name] = 0.1 * torch.randn(shape, generator=gen)
        elif name == "encoder.char_lt.weight":
            sd[name] = torch.randn(shape, generator=gen)
            sd[name][0] = 0.0  # padding row
        else:
            fan_in = math.prod(shape[1:])
            sd[name] = torch.randn(shape, generator=gen) * (2.0 / fan_in) ** 0.5
    return sd


def release_reference(sd: dict[str, torch.Tensor], messages: torch.Tensor, diffstats: torch.Tensor) -> torch.Tensor:
    """The release's reward, computed from its raw tensors with functional ops."""
    def conv(x, name):
        return F.conv1d(x, sd[f"encoder.{name}.weight"], sd[f"encoder.{name}.bias"])

    def lin(x, name):
        return F.linear(x, sd[f"{name}.weight"], sd[f"{name}.bias"])

    x = F.embedding(messages.long(), sd["encoder.char_lt.weight"], padding_idx=0).transpose(1, 2)
    x = F.max_pool1d(F.relu(conv(x, "conv1")), 3, 3)
    x = F.max_pool1d(F.relu(conv(x, "conv2_6_fc.2")), 3, 3)
    for i in (5, 7, 9, 11):
        x = F.relu(conv(x, f"conv2_6_fc.{i}"))
    x = F.max_pool1d(x, 3, 3).flatten(1)
    msg = F.relu(lin(x, "encoder.conv2_6_fc.15"))
    stats = F.relu(lin(F.relu(lin(diffstats.float(), "encoder.embed_diffstats.0")), "encoder.embed_diffstats.2"))
    hidden = lin(F.relu(lin(torch.cat([stats, msg], dim=1), "encoder.fc.0")), "encoder.fc.2")
    return lin(F.relu(hidden), "reward_fn.1").squeeze(1)


def release_optimizer(sd: dict[str, torch.Tensor]) -> dict:
    """An Adam state over parameters in the release's order, after one step."""
    params = [torch.nn.Parameter(t.clone()) for t in sd.values()]
    opt = torch.optim.Adam(params, lr=1e-5)
    for p in params:
        p.grad = torch.ones_like(p) * 0.01
    opt.step()
    return opt.state_dict()


def write_release_run(root: Path, skill: str, seed: int, iters=(1800, 3600), mean: float = 0.7, var=2.25,
                      quantiles: bool = True, sd=None) -> Path:
    """A run folder as the release's train_reward leaves it; returns its latest checkpoint."""
    run = root / f"llama3_{skill}_default"
    (run / "checkpoint_p0").mkdir(parents=True)
    sd = sd if sd is not None else release_state_dict(seed)
    path = None
    for it in iters:
        path = run / "checkpoint_p0" / f"checkpoint_{it}.pth"
        torch.save({"tot_num_iter": it, "model": sd, "optimizer": release_optimizer(sd),
                    "reward_mean": torch.tensor(mean + (0 if it == iters[-1] else 100.0)),
                    "reward_var": torch.tensor(var) if type(var) is float else var}, path)
    if quantiles:
        (run / "reward_metrics").mkdir()
        with (run / "reward_metrics" / "train_norm_quantiles.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(RELEASE_QUANTILES)
            for scale in (2.0, 1.0):  # one row per save; the last one counts
                w.writerow([f"{(q - 0.5) * scale:.2f}" for q in RELEASE_QUANTILES])
    return path


def messages_and_depths() -> tuple[np.ndarray, np.ndarray]:
    msgs = np.stack([encode_message(t) for t in TEXTS])
    depth = np.array([1, 0, 0, -1, 2, -3], dtype=np.float32)  # 2 and -3 are read as 1 and -1
    return msgs, depth


def all_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


# ------------------------------------------------------------------ the mapping


def test_converted_release_checkpoint_scores_like_the_release_network(tmp_path: Path) -> None:
    release, out = tmp_path / "release", tmp_path / "ours"
    write_release_run(release, "descender", seed=1)
    write_release_run(release, "ascender", seed=2, mean=-0.3, var=0.5)
    written = convert_release_rewards(out, release_dir=release, progress=False)
    assert sorted(p.relative_to(out).as_posix() for p in written) == [
        "llama3_ascender_default/checkpoint_p0/checkpoint_000003600.pth",
        "llama3_ascender_default/reward_metrics/train_norm_quantiles.csv",
        "llama3_descender_default/checkpoint_p0/checkpoint_000003600.pth",
        "llama3_descender_default/reward_metrics/train_norm_quantiles.csv",
    ]
    msgs, depth = messages_and_depths()
    diffstats = torch.zeros(len(depth), 5)
    diffstats[:, 0] = torch.from_numpy(np.clip(depth, -1, 1))
    for skill, seed, mean, var in (("descender", 1, 0.7, 2.25), ("ascender", 2, -0.3, 0.5)):
        loaded = load_skill_reward(out / f"llama3_{skill}_default")
        assert isinstance(loaded.model, ReleaseRewardModel) and loaded.model.config.arch == "release"
        assert loaded.skill == skill and loaded.reward_mean == pytest.approx(mean)
        assert loaded.reward_std == pytest.approx(math.sqrt(var))
        with torch.no_grad():
            raw = release_reference(release_state_dict(seed), torch.from_numpy(msgs), diffstats).numpy()
        assert raw.std() > 0.05, "the reference must not be constant, or the comparison proves nothing"
        np.testing.assert_allclose(loaded.score(msgs, depth), (raw - mean) / math.sqrt(var), rtol=1e-5, atol=1e-5)
        # the quantile thresholds are the release's last row
        assert loaded.threshold(0.85) == pytest.approx(0.35) and loaded.threshold(0.05) == pytest.approx(-0.45)
        with (out / f"llama3_{skill}_default" / "reward_metrics" / "train_norm_quantiles.csv").open() as fh:
            rows = list(csv.reader(fh))
        assert rows[0][:3] == ["0.05", "0.10", "0.15"] and len(rows) == 3

    state = torch.load(out / "llama3_descender_default" / "checkpoint_p0" / "checkpoint_000003600.pth",
                       weights_only=True)
    assert state["model_config"]["arch"] == "release" and state["tot_num_iter"] == 3600
    assert state["converted_from"].endswith("llama3_descender_default/checkpoint_p0/checkpoint_3600.pth")
    # the release's Adam state lines up with our parameters (same order and shapes)
    model = ReleaseRewardModel(RewardModelConfig(arch="release"))
    opt = torch.optim.Adam(model.parameters(), lr=1e-5)
    opt.load_state_dict(state["optimizer"])
    ref = release_optimizer(release_state_dict(1))["state"]
    for i, p in enumerate(model.parameters()):
        torch.testing.assert_close(opt.state[p]["exp_avg"], ref[i]["exp_avg"])


def test_single_checkpoint_file_with_numpy_scalars_through_the_script(tmp_path: Path, capsys) -> None:
    from scripts.convert_release_rewards import main

    ckpt = write_release_run(tmp_path / "release", "worshipper", seed=3, iters=(500,), var=np.float64(4.0))
    copy = tmp_path / "loose" / "reward.pth"  # outside a run folder: the skill must be given
    copy.parent.mkdir()
    copy.write_bytes(ckpt.read_bytes())
    with pytest.raises(SystemExit) as exc:
        main(["--checkpoint", str(copy), "--out_dir", str(tmp_path / "out"), "--no_progress"])
    assert exc.value.code == 2 and "pass --skill" in capsys.readouterr().err
    written = main(["--checkpoint", str(copy), "--skill", "worshipper", "--out_dir", str(tmp_path / "out"),
                    "--no_progress", "--name_template", "llama3_{skill}_default"])
    assert [p.name for p in written] == ["checkpoint_000000500.pth"]  # no CSV next to the loose copy
    assert "wrote 1 file(s)" in capsys.readouterr().out
    state = torch.load(written[0], weights_only=True)
    assert state["reward_var"] == 4.0 and state["skill"] == "worshipper"
    # in its run folder the skill and the quantile CSV are found
    written = main(["--checkpoint", str(ckpt), "--out_dir", str(tmp_path / "out2"), "--no_progress",
                    "--name_template", "{skill}"])
    assert [p.relative_to(tmp_path / "out2").as_posix() for p in written] == [
        "worshipper/checkpoint_p0/checkpoint_000000500.pth", "worshipper/reward_metrics/train_norm_quantiles.csv"]
    assert load_skill_reward(tmp_path / "out2" / "worshipper").reward_std == pytest.approx(2.0)


# ------------------------------------------------------------------ wrong files


def test_wrong_shape_names_the_first_mismatching_tensor_and_writes_nothing(tmp_path: Path, capsys) -> None:
    from scripts.convert_release_rewards import main

    release, out = tmp_path / "release", tmp_path / "ours"
    write_release_run(release, "discoverer", seed=4)  # a good file, listed before the bad one
    bad_sd = release_state_dict(5)
    bad_sd["encoder.conv2_6_fc.5.weight"] = torch.zeros(64, 64, 5)
    bad_sd["encoder.fc.0.weight"] = torch.zeros(256, 300)  # later in the order: not the one reported
    bad = write_release_run(release, "merchant", seed=5, sd=bad_sd)
    with pytest.raises(SystemExit) as exc:
        main(["--release_dir", str(release), "--out_dir", str(out), "--no_progress"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert str(bad) in err and "'encoder.conv2_6_fc.5.weight'" in err
    assert "expected shape (64, 64, 3), found (64, 64, 5)" in err and "fc.0" not in err
    assert all_files(out) == [], "a failed conversion must write nothing, not even the good skill"

    missing = release_state_dict(6)
    del missing["reward_fn.1.bias"]
    path = write_release_run(tmp_path / "r2", "descender", seed=6, sd=missing)
    with pytest.raises(ReleaseCheckpointError, match=r"tensor 'reward_fn\.1\.bias' is missing \(expected shape \(1,\)\)"):
        convert_release_rewards(out, checkpoint=path, progress=False, name_template="{skill}")
    extra = release_state_dict(7)
    extra["encoder.embed_blstats.0.weight"] = torch.zeros(128, 27)
    path = write_release_run(tmp_path / "r3", "descender", seed=7, sd=extra)
    with pytest.raises(ReleaseCheckpointError, match="unexpected tensor 'encoder.embed_blstats.0.weight'"):
        convert_release_rewards(out, checkpoint=path, progress=False, name_template="{skill}")
    assert all_files(out) == []


def test_policy_and_other_non_reward_files_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "ours"
    policy = tmp_path / "llama3_descender_default" / "checkpoint_p0" / "checkpoint_000001000_4096.pth"
    policy.parent.mkdir(parents=True)
    torch.save({"train_step": 1000, "env_steps": 4096, "optimizer": {},
                "model": {"encoder.embed.weight": torch.zeros(5976, 64), "critic_linear.weight": torch.zeros(1, 512)}},
               policy)
    with pytest.raises(ReleaseCheckpointError, match="policy checkpoint") as exc:
        convert_release_rewards(out, checkpoint=policy, progress=False, name_template="{skill}")
    assert str(policy) in str(exc.value)
    # a policy network under reward-checkpoint keys: missing reward tensors, named
    torch.save({"model": {"encoder.embed.weight": torch.zeros(5976, 64)}, "reward_mean": 0.0, "reward_var": 1.0},
               policy)
    with pytest.raises(ReleaseCheckpointError, match=r"'encoder.embed_diffstats.0.weight' is missing.*policy network"):
        convert_release_rewards(out, checkpoint=policy, progress=False, name_template="{skill}")
    # old reward checkpoints may carry action/critic entries: dropped, as the release's learner does
    sd = release_state_dict(8)
    sd["critic_linear.weight"] = torch.zeros(1, 512)
    sd["action_parameterization.distribution_linear.weight"] = torch.zeros(23, 512)
    ok = write_release_run(tmp_path / "r", "descender", seed=8, sd=sd)
    convert_release_rewards(out, checkpoint=ok, progress=False, name_template="{skill}")
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"not a checkpoint")
    with pytest.raises(ReleaseCheckpointError, match="garbage.pth: cannot be read"):
        convert_release_rewards(tmp_path / "o2", checkpoint=garbage, skill="descender", progress=False, name_template="{skill}")
    assert all_files(tmp_path / "o2") == []


def test_existing_output_is_kept_unless_overwrite(tmp_path: Path) -> None:
    release, out = tmp_path / "release", tmp_path / "ours"
    write_release_run(release, "descender", seed=9)
    convert_release_rewards(out, release_dir=release, progress=False, name_template="{skill}")
    first = {p: p.stat().st_mtime_ns for p in all_files(out)}
    older = out / "descender" / "checkpoint_p0" / "checkpoint_009999999.pth"  # e.g. a model trained here
    older.write_bytes(b"x")
    with pytest.raises(ReleaseCheckpointError, match="output exists.*--overwrite"):
        convert_release_rewards(out, release_dir=release, progress=False, name_template="{skill}")
    assert {p: p.stat().st_mtime_ns for p in all_files(out) if p != older} == first
    convert_release_rewards(out, release_dir=release, overwrite=True, progress=False, name_template="{skill}")
    assert not older.exists(), "with --overwrite the converted checkpoint must be the one loaded"
    assert load_skill_reward(out / "descender").checkpoint_path.name == "checkpoint_000003600.pth"
    assert not list(out.rglob("*.tmp"))


# ------------------------------------------------------------------ RL time and training


def test_rl_time_scoring_feeds_only_the_depth_change(tmp_path: Path) -> None:
    """At RL time the release's wrapper zeroes gold, hp, xp and hunger changes: the stat MLP must see
    [clip(depth change), 0, 0, 0, 0], through the intrinsic-reward path the environments use."""
    from rl_baseline.skills.intrinsic_reward import IntrinsicReward, ScoreCache

    write_release_run(tmp_path / "release", "descender", seed=10)
    convert_release_rewards(tmp_path / "ours", release_dir=tmp_path / "release", progress=False, name_template="{skill}")
    loaded = load_skill_reward(tmp_path / "ours" / "descender")
    seen = []
    hook = loaded.model.stats_mlp[0].register_forward_hook(lambda m, inp, out: seen.append(inp[0].clone()))
    reward = IntrinsicReward([loaded], [-1e9], beta=0.0, llm_coef=1.0, cache=ScoreCache())
    msg = encode_message(TEXTS[0])
    values = [reward.thresholded_score(0, msg, d) for d in (1, 3, -1)]
    hook.remove()
    fed = torch.cat(seen)
    assert fed[:, 1:].abs().sum() == 0 and fed[:, 0].tolist() == [1.0, 1.0, -1.0]
    sd = release_state_dict(10)
    zeros = torch.tensor([[1.0, 0, 0, 0, 0]])
    live = torch.tensor([[1.0, 1, -1, 1, 1]])  # what live gold/hp/xp/hunger changes would add
    with torch.no_grad():
        expected = (release_reference(sd, torch.from_numpy(msg[None]), zeros) - 0.7) / 1.5
        other = (release_reference(sd, torch.from_numpy(msg[None]), live) - 0.7) / 1.5
    assert values[0] == pytest.approx(float(expected), abs=1e-5)
    assert abs(float(other) - float(expected)) > 1e-3, "feeding the other stats must change the score"


def test_release_diffstats_are_the_releases_training_inputs() -> None:
    stats = np.zeros((3, 2, len(STAT_FIELDS)), dtype=np.int32)
    # depth, gold, hp, hpmax, xp level, hunger
    stats[0] = [[1, 10, 12, 12, 1, 1], [3, 50, 5, 20, 2, 2]]  # a hole, gold, damage, max hp, level up, hungry
    stats[1] = [[4, 10, 12, 12, 1, 1], [2, 0, 14, 12, 1, 0]]  # up two levels, lost gold, healed, satiated
    stats[2] = [[2, 0, 3, 9, 3, 1], [2, 0, 3, 9, 3, 1]]
    got = release_diffstats(stats)
    assert got.dtype == np.float32 and got.shape == (3, 5)
    # clipped to [-1, 1]; gold, hp, xp and hunger zeroed as the release's rlaif/data.py does
    assert got.tolist() == [[1, 0, 0, 0, 0], [-1, 0, 0, 0, 0], [0, 0, 0, 0, 0]]


def test_unique_inputs_of_the_release_arch_key_on_all_five_stats() -> None:
    from rlaif.train_reward import RewardInputs, unique_inputs

    diff = np.zeros((4, 5), dtype=np.float32)
    diff[1, 2] = 1.0  # differs from row 0 in a non-depth column only
    inputs = RewardInputs(np.zeros((1, 256), dtype=np.uint8), np.zeros(4, dtype=np.int64),
                          np.zeros(4, dtype=np.float32), diff)
    release = unique_inputs(inputs, "release")
    assert len(release.message_ids) == 2 and release.stats.shape == (2, 5) and sorted(release.counts) == [1, 3]
    small = unique_inputs(inputs, "small")
    assert len(small.message_ids) == 1 and small.stats.shape == (1,) and small.counts.tolist() == [4]


def test_release_arch_trains_through_train_reward_and_reloads(tmp_path: Path) -> None:
    from rlaif.train_reward import reward_inputs, train_reward
    from tests.test_train_reward import config, write_inputs

    dataset, _ = write_inputs(tmp_path, pairs=48, seed=11)
    result = train_reward(config(tmp_path, batch_size=16, num_epochs=1, model=RewardModelConfig(arch="release")))
    assert result["num_iters"] >= 2
    state = torch.load(result["checkpoint"], weights_only=True)
    assert state["model_config"]["arch"] == "release"
    loaded = load_skill_reward(Path(result["checkpoint"]).parents[1])
    assert isinstance(loaded.model, ReleaseRewardModel)
    # normalization statistics were computed over the distinct (message, diffstats) inputs
    inputs = reward_inputs(dataset)
    keys = np.unique(np.concatenate([inputs.message_ids[:, None], inputs.diffstats], axis=1), axis=0)
    scores = loaded.score(inputs.table[keys[:, 0].astype(np.int64)], keys[:, 1])
    assert abs(scores.mean()) < 1e-4 and scores.std() == pytest.approx(1.0, abs=1e-3)
