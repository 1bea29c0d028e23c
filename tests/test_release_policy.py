"""The release-shaped encoder and the converter of the release's sample-factory-1 policy checkpoint."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rl_baseline.models import render
from rl_baseline.models.obs import MODEL_OBS_KEYS, model_observation
from rl_baseline.sf.release_policy import ReleaseConversionError, convert_release_checkpoint
from scripts.convert_release_policy import main as convert_main

NUM_SKILLS = 5
NUM_ACTIONS = 28
STATS_IN = 30 + NUM_SKILLS
CORE_IN = 512 + 128 + STATS_IN + 128  # crop, stats MLP, raw scaled stats, message

# The release's SF1 actor-critic state dict ("model" of its checkpoint), names and shapes as its
# code builds them (nle_rgbcrop_encoder, convnet_simple on 3x72x72, three_hid_layers stats MLP,
# torchbeast message CNN, GRU 512, 28 actions), in its parameter order.
RELEASE_SHAPES: dict[str, tuple[int, ...]] = {
    "encoder.obs_encoder.enc.conv_head.0.weight": (32, 3, 8, 8),
    "encoder.obs_encoder.enc.conv_head.0.bias": (32,),
    "encoder.obs_encoder.enc.conv_head.2.weight": (64, 32, 4, 4),
    "encoder.obs_encoder.enc.conv_head.2.bias": (64,),
    "encoder.obs_encoder.enc.conv_head.4.weight": (128, 64, 3, 3),
    "encoder.obs_encoder.enc.conv_head.4.bias": (128,),
    "encoder.obs_encoder.enc.fc_layers.0.weight": (512, 1152),
    "encoder.obs_encoder.enc.fc_layers.0.bias": (512,),
    "encoder.vector_obs_head.0.weight": (128, STATS_IN),
    "encoder.vector_obs_head.0.bias": (128,),
    "encoder.vector_obs_head.2.weight": (128, 128),
    "encoder.vector_obs_head.2.bias": (128,),
    "encoder.vector_obs_head.4.weight": (128, 128),
    "encoder.vector_obs_head.4.bias": (128,),
    "encoder.vector_obs_head.6.weight": (128, 128),
    "encoder.vector_obs_head.6.bias": (128,),
    "encoder.char_lt.weight": (256, 32),
    "encoder.conv1.weight": (64, 32, 7),
    "encoder.conv1.bias": (64,),
    "encoder.message_head.2.weight": (64, 64, 7),
    "encoder.message_head.2.bias": (64,),
    "encoder.message_head.5.weight": (64, 64, 3),
    "encoder.message_head.5.bias": (64,),
    "encoder.message_head.7.weight": (64, 64, 3),
    "encoder.message_head.7.bias": (64,),
    "encoder.message_head.9.weight": (64, 64, 3),
    "encoder.message_head.9.bias": (64,),
    "encoder.message_head.11.weight": (64, 64, 3),
    "encoder.message_head.11.bias": (64,),
    "encoder.message_head.15.weight": (128, 320),
    "encoder.message_head.15.bias": (128,),
    "core.core.weight_ih_l0": (3 * 512, CORE_IN),
    "core.core.weight_hh_l0": (3 * 512, 512),
    "core.core.bias_ih_l0": (3 * 512,),
    "core.core.bias_hh_l0": (3 * 512,),
    "critic_linear.weight": (1, 512),
    "critic_linear.bias": (1,),
    "action_parameterization.distribution_linear.weight": (NUM_ACTIONS, 512),
    "action_parameterization.distribution_linear.bias": (NUM_ACTIONS,),
}

# the release's BLSTAT_NORMALIZATION_STATS (27 blstats + 3 Monk features), then 1 per skill
RELEASE_SCALE = np.array(
    [1 / 79, 1 / 21] + [0.0] * 8 + [1 / 10, 1 / 10, 0.0, 0.0, 1 / 10, 1 / 10, 1 / 10, 0.0, 1 / 10, 0.0, 1 / 1000, 1.0]
    + [0.0, 1.0, 0.0, 1.0, 0.0] + [1.0, 1.0, 1.0] + [1.0] * NUM_SKILLS,
    dtype=np.float32,
)


def _release_checkpoint(seed: int = 0, with_optimizer: bool = True) -> dict:
    """A checkpoint in the release's layout (its learner's _get_checkpoint_dict) with random weights."""
    gen = torch.Generator().manual_seed(seed)
    model = {}
    for name, shape in RELEASE_SHAPES.items():
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 64
        model[name] = torch.randn(shape, generator=gen) / np.sqrt(fan_in)
    model["encoder.char_lt.weight"][0] = 0.0  # padding_idx=0
    out = {"train_step": 976563, "env_steps": 4000002048, "model": model}
    if with_optimizer:
        params = [torch.nn.Parameter(t.clone()) for t in model.values()]
        opt = torch.optim.Adam(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-6)
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen)
        opt.step()
        out["optimizer"] = opt.state_dict()
    return out


@pytest.fixture(scope="module")
def monk_obs() -> dict:
    from rl_baseline.envs import make_monk_env

    env = make_monk_env(max_episode_steps=100)
    try:
        obs, _ = env.reset(seed=11)
        for action in (1, 2):
            obs, *_ = env.step(action)
        return {k: np.array(v, copy=True) for k, v in obs.items()}
    finally:
        env.close()


def _load_like_evaluation(train_dir: Path, experiment: str):
    """The steps of rl_baseline.sf.evaluate: saved config + CLI, model from the factory, newest checkpoint."""
    from rl_baseline.sf.cfg import resolve_experiment_cfg
    from rl_baseline.sf.checkpoints import checkpoint_dir, load_newest
    from rl_baseline.sf.release_policy import build_release_actor_critic

    cfg = resolve_experiment_cfg(train_dir / experiment, evaluation=False, files=False)
    assert cfg.encoder_arch == "release"
    model = build_release_actor_critic(cfg)
    loaded = load_newest(checkpoint_dir(train_dir, experiment), "latest", "cpu", fallback=False)
    model.load_state_dict(loaded.state["model"], strict=True)
    return cfg, model.eval(), loaded


def _reference(raw: dict, obs: list[dict], h0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The release's forward pass written with functional ops on its raw tensors."""
    w = {k: v.double() for k, v in raw.items()}
    imgs = []
    for o in obs:
        # the release crops the tty screen at the hero's map coordinates: hero one row lower
        chars = np.full_like(o["crop_chars"], ord(" "))
        colors = np.zeros_like(o["crop_colors"])
        chars[1:], colors[1:] = o["crop_chars"][:-1], o["crop_colors"][:-1]
        imgs.append(render.render_grid(chars, colors, render.CELL, palette="release").transpose(2, 0, 1))
    x = torch.from_numpy(np.stack(imgs)).double() / 255.0
    p = "encoder.obs_encoder.enc."
    x = F.elu(F.conv2d(x, w[p + "conv_head.0.weight"], w[p + "conv_head.0.bias"], stride=4))
    x = F.elu(F.conv2d(x, w[p + "conv_head.2.weight"], w[p + "conv_head.2.bias"], stride=2))
    x = F.elu(F.conv2d(x, w[p + "conv_head.4.weight"], w[p + "conv_head.4.bias"], stride=2))
    crop = F.elu(F.linear(x.flatten(1), w[p + "fc_layers.0.weight"], w[p + "fc_layers.0.bias"]))

    stats = torch.from_numpy(np.stack([
        np.concatenate([o["blstats"], o["monk_features"], o["skill_onehot"]]) * RELEASE_SCALE for o in obs
    ])).double()
    v = stats
    for i in (0, 2, 4, 6):
        v = F.elu(F.linear(v, w[f"encoder.vector_obs_head.{i}.weight"], w[f"encoder.vector_obs_head.{i}.bias"]))

    m = torch.from_numpy(np.stack([o["message"] for o in obs])).long()
    m = F.embedding(m, w["encoder.char_lt.weight"]).transpose(1, 2)
    m = F.conv1d(m, w["encoder.conv1.weight"], w["encoder.conv1.bias"])
    m = F.max_pool1d(F.relu(m), 3, 3)
    m = F.max_pool1d(F.relu(F.conv1d(m, w["encoder.message_head.2.weight"], w["encoder.message_head.2.bias"])), 3, 3)
    for i in (5, 7, 9, 11):
        m = F.relu(F.conv1d(m, w[f"encoder.message_head.{i}.weight"], w[f"encoder.message_head.{i}.bias"]))
    m = F.max_pool1d(m, 3, 3).flatten(1)
    m = F.relu(F.linear(m, w["encoder.message_head.15.weight"], w["encoder.message_head.15.bias"]))

    core_in = torch.cat([crop, v, stats, m], dim=1)
    assert core_in.shape[1] == CORE_IN
    h = h0.double()
    gi = F.linear(core_in, w["core.core.weight_ih_l0"], w["core.core.bias_ih_l0"])
    gh = F.linear(h, w["core.core.weight_hh_l0"], w["core.core.bias_hh_l0"])
    i_r, i_z, i_n = gi.chunk(3, dim=1)
    h_r, h_z, h_n = gh.chunk(3, dim=1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    h1 = (1 - z) * n + z * h
    logits = F.linear(h1, w["action_parameterization.distribution_linear.weight"],
                      w["action_parameterization.distribution_linear.bias"])
    value = F.linear(h1, w["critic_linear.weight"], w["critic_linear.bias"]).squeeze(1)
    return logits, value, h1


def test_converted_policy_matches_the_release_forward(tmp_path, monk_obs):
    from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs

    release = _release_checkpoint(seed=1)
    src = tmp_path / "checkpoint_000976563_4000002048.pth"
    torch.save(release, src)
    result = convert_release_checkpoint(src, tmp_path / "td", "rel")
    assert result.checkpoint.name == "checkpoint_000976563_4000002048.pth"
    assert result.optimizer_carried

    saved = json.loads(result.config.read_text())
    assert saved["encoder_arch"] == "release" and saved["rnn_type"] == "gru" and saved["num_skills"] == NUM_SKILLS
    assert "device" not in saved

    cfg, model, loaded = _load_like_evaluation(tmp_path / "td", "rel")
    assert loaded.path == result.checkpoint
    assert loaded.state["env_steps"] == 4000002048 and loaded.state["train_step"] == 976563
    assert model.encoder.get_out_size() == CORE_IN

    obs = [model_observation(monk_obs, skill, NUM_SKILLS) for skill in (0, 3)]
    obs[1]["monk_features"][:] = [2, 4, 1]
    assert obs[0]["crop_chars"][6, 6] == ord("@")
    batch = {k: torch.from_numpy(np.stack([o[k] for o in obs])) for k in MODEL_OBS_KEYS}
    h0 = 0.1 * torch.randn(2, 512, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = model(prepare_and_normalize_obs(model, batch), h0)
    logits, value, h1 = _reference(release["model"], obs, h0)
    torch.testing.assert_close(out["action_logits"].double(), logits, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(out["values"].double(), value, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(out["new_rnn_states"].double(), h1, atol=2e-5, rtol=1e-4)

    # the release's Adam moments follow their parameters
    opt = loaded.state["optimizer"]
    names = [n for n, _ in model.named_parameters()]
    src_index = list(RELEASE_SHAPES).index("critic_linear.weight")
    ours = opt["state"][names.index("critic_linear.weight")]
    torch.testing.assert_close(ours["exp_avg"], release["optimizer"]["state"][src_index]["exp_avg"])
    assert opt["param_groups"][0]["lr"] == 1e-4 and loaded.state["curr_lr"] == 1e-4
    fresh = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate)
    fresh.load_state_dict(opt)  # sample-factory's learner can resume from it


def _assert_nothing_written(train_dir: Path) -> None:
    assert not train_dir.exists() or not any(p.is_file() for p in train_dir.rglob("*"))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda m: m.__setitem__("action_parameterization.distribution_linear.weight", torch.zeros(23, 512)),
         r"action_parameterization\.distribution_linear\.weight .*\(23, 512\), expected \(28, 512\)"),
        (lambda m: m.__setitem__("encoder.vector_obs_head.0.weight", torch.zeros(128, 32)),
         r"encoder\.vector_obs_head\.0\.weight .*\(128, 32\), expected \(128, 35\)"),
        (lambda m: m.pop("core.core.bias_hh_l0"), r"core\.core\.bias_hh_l0 is missing \(expected shape \(1536,\)\)"),
        (lambda m: m.__setitem__("encoder.add_obs_encoder.enc.conv_head.0.weight", torch.zeros(16, 3, 8, 8)),
         r"unexpected tensor encoder\.add_obs_encoder\.enc\.conv_head\.0\.weight"),
    ],
    ids=["actions", "skills", "missing", "extra"],
)
def test_wrong_shapes_are_named_and_nothing_is_written(tmp_path, capsys, change, message):
    release = _release_checkpoint(with_optimizer=False)
    change(release["model"])
    src = tmp_path / "release.pth"
    torch.save(release, src)
    rc = convert_main(["--checkpoint", str(src), "--train_dir", str(tmp_path / "td"), "--experiment", "rel"])
    err = capsys.readouterr().err
    assert rc != 0
    assert str(src) in err
    assert re.search(message, err), err
    _assert_nothing_written(tmp_path / "td")


def test_wrong_kind_of_file(tmp_path, capsys):
    train_dir = tmp_path / "td"
    text = tmp_path / "notes.pth"
    text.write_text("not a checkpoint")
    ours = tmp_path / "ours.pth"  # a checkpoint of this project (sample-factory 2 names)
    torch.save({"train_step": 1, "env_steps": 2, "model": {"encoder.crop_cnn.0.weight": torch.zeros(32, 3, 8, 8)}}, ours)
    no_model = tmp_path / "reward.pth"
    torch.save({"train_step": 1, "reward_mean": torch.zeros(1)}, no_model)
    for path, message in ((text, "cannot be read"),
                          (ours, "tensor encoder.obs_encoder.enc.conv_head.0.weight is missing"),
                          (no_model, "not a sample-factory policy checkpoint"),
                          (tmp_path / "absent.pth", "no such file")):
        rc = convert_main(["--checkpoint", str(path), "--train_dir", str(train_dir)])
        err = capsys.readouterr().err
        assert rc != 0 and str(path) in err and message in err, err
    _assert_nothing_written(train_dir)
    with pytest.raises(ReleaseConversionError, match="--encoder_arch release"):
        convert_release_checkpoint(ours, train_dir, "rel", extra_args=["--encoder_arch", "project"])


def test_existing_experiment_needs_overwrite(tmp_path, capsys):
    src = tmp_path / "release.pth"
    torch.save(_release_checkpoint(with_optimizer=False), src)
    train_dir = tmp_path / "td"
    ckpt_dir = train_dir / "rel" / "checkpoint_p0"
    ckpt_dir.mkdir(parents=True)
    older = ckpt_dir / "checkpoint_000000010_999.pth"
    older.write_bytes(b"a checkpoint of a previous run")
    argv = ["--checkpoint", str(src), "--train_dir", str(train_dir), "--experiment", "rel"]
    assert convert_main(argv) != 0
    assert "--overwrite" in capsys.readouterr().err
    assert sorted(p.name for p in ckpt_dir.iterdir()) == [older.name] and not (train_dir / "rel" / "config.json").exists()

    assert convert_main(argv + ["--overwrite", "--llm_reward", "0"]) == 0
    assert sorted(p.name for p in ckpt_dir.iterdir()) == ["checkpoint_000976563_4000002048.pth"]
    saved = json.loads((train_dir / "rel" / "config.json").read_text())
    assert saved["llm_reward"] == 0.0 and saved["encoder_arch"] == "release"
    # the release had no optimizer here: a fresh Adam state
    from rl_baseline.sf.checkpoints import load_checkpoint_file

    state = load_checkpoint_file(ckpt_dir / "checkpoint_000976563_4000002048.pth")
    assert state["optimizer"]["state"] == {} and "curr_lr" not in state


def test_script_help_describes_every_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        convert_main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--checkpoint", "--train_dir", "--experiment", "--overwrite"):
        assert flag in out
