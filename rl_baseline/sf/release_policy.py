"""Converts the release's skill-policy checkpoint (sample-factory 1) into this project's format.

The release publishes ``train_dir/skill_policy/default/checkpoint_p0/checkpoint_000976563_4000002048.pth``:
a ``torch.save`` dict ``{"train_step", "env_steps", "model", "optimizer"}`` (its learner's
``_get_checkpoint_dict``) whose ``model`` is the state dict of sample-factory 1's shared-weights
actor-critic with the ``nle_rgbcrop_encoder`` encoder, a GRU core of 512 and the release's
defaults (5 skills, 28 actions, ``--encoder_stats_model three_hid_layers``,
``--encoder_model_msg torchbeast``). Its tensors, in the release's order, and where they go in
sample-factory 2's actor-critic built with ``--encoder_arch release`` (shapes for 5 skills, 28
actions; the core input is 512 + 128 + 35 + 128 = 803):

==============================================  ==========================================  ==============
release (sample-factory 1)                      here (sample-factory 2)                     shape
==============================================  ==========================================  ==============
encoder.obs_encoder.enc.conv_head.{0,2,4}.*     encoder.crop_cnn.{0,2,4}.*                  32x3x8x8, 64x32x4x4, 128x64x3x3
encoder.obs_encoder.enc.fc_layers.0.*           encoder.crop_fc.0.*                         512x1152
encoder.vector_obs_head.{0,2,4,6}.*             encoder.stats_mlp.{0,2,4,6}.*               128x35, 3 x 128x128
encoder.char_lt.weight                          encoder.msg_embed.weight                    256x32
encoder.conv1.*                                 encoder.msg_conv1.*                         64x32x7
encoder.message_head.{2,5,7,9,11}.*             encoder.msg_cnn.{2,5,7,9,11}.*              64x64x7, 4 x 64x64x3
encoder.message_head.15.*                       encoder.msg_fc.0.*                          128x320
core.core.{weight,bias}_{ih,hh}_l0              core.core.{weight,bias}_{ih,hh}_l0          1536x803, 1536x512, 1536
critic_linear.*                                 critic_linear.*                             1x512
action_parameterization.distribution_linear.*   action_parameterization.distribution_linear.*  28x512
==============================================  ==========================================  ==============

:func:`convert_release_checkpoint` checks every tensor against the model this project builds for
the configuration (missing, extra or differently shaped tensors stop it, naming the first one),
carries the Adam moments over when they match parameter for parameter (else a fresh optimizer
state is written), and writes ``{train_dir}/{experiment}/checkpoint_p0/checkpoint_{train_step:09d}_{env_steps}.pth``
(keys ``model``, ``optimizer``, ``train_step``, ``env_steps``, ``curr_lr`` when known) plus the
experiment's ``config.json`` (our full configuration with ``encoder_arch release``), through
temporary files renamed at the end: a failed conversion writes nothing. An experiment folder
that already holds a config or checkpoints is only replaced with ``overwrite``.

The converted policy sees other pixels than the release's (glyph font and crop rows, see
:class:`rl_baseline.models.cdgpt5.ReleaseEncoder`).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from common.atomic_io import atomic_write, atomic_write_json
from common.flag_checks import output_folder
from common.torch_files import load_error_reason, plain_numbers, safe_load
from rl_baseline.sf.cfg import ConfigError, parse_cfg
from rl_baseline.sf.checkpoints import checkpoint_dir, list_checkpoints

logger = logging.getLogger(__name__)

#: Where the release keeps its policy (relative to its repository root).
RELEASE_CHECKPOINT = "train_dir/skill_policy/default/checkpoint_p0/checkpoint_000976563_4000002048.pth"
RELEASE_CONV_LAYERS = (0, 2, 4)
RELEASE_STATS_LAYERS = (0, 2, 4, 6)
RELEASE_MSG_CONV_LAYERS = (2, 5, 7, 9, 11)
RELEASE_MSG_FC_LAYER = 15


class ReleaseConversionError(RuntimeError):
    """The file cannot be converted; the message names the file and the first problem."""


def release_name_map(rnn_num_layers: int = 1) -> dict[str, str]:
    """Release (sample-factory 1) tensor name -> this project's (sample-factory 2) name, in the
    release's parameter order (the order of its optimizer's state)."""
    pairs: list[tuple[str, str]] = []

    def wb(src: str, dst: str) -> None:
        pairs.extend([(f"{src}.weight", f"{dst}.weight"), (f"{src}.bias", f"{dst}.bias")])

    for i in RELEASE_CONV_LAYERS:
        wb(f"encoder.obs_encoder.enc.conv_head.{i}", f"encoder.crop_cnn.{i}")
    wb("encoder.obs_encoder.enc.fc_layers.0", "encoder.crop_fc.0")
    for i in RELEASE_STATS_LAYERS:
        wb(f"encoder.vector_obs_head.{i}", f"encoder.stats_mlp.{i}")
    pairs.append(("encoder.char_lt.weight", "encoder.msg_embed.weight"))
    wb("encoder.conv1", "encoder.msg_conv1")
    for i in RELEASE_MSG_CONV_LAYERS:
        wb(f"encoder.message_head.{i}", f"encoder.msg_cnn.{i}")
    wb(f"encoder.message_head.{RELEASE_MSG_FC_LAYER}", "encoder.msg_fc.0")
    for layer in range(rnn_num_layers):
        for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            name = f"core.core.{kind}_l{layer}"
            pairs.append((name, name))
    wb("critic_linear", "critic_linear")
    wb("action_parameterization.distribution_linear", "action_parameterization.distribution_linear")
    return dict(pairs)


def read_release_checkpoint(path: str | Path) -> dict[str, Any]:
    """The release's checkpoint dict, read with torch's safe loader (tensors, containers, numbers).

    A bare state dict (tensor names -> tensors) is accepted and returned as ``{"model": ...}``.
    """
    import torch  # lazy: torch only to convert; the converter's --help stays light

    path = Path(path)
    if not path.is_file():
        raise ReleaseConversionError(f"{path}: no such file")
    try:
        state = safe_load(path)
    except Exception as exc:
        raise ReleaseConversionError(
            f"{path}: cannot be read as a torch checkpoint ({type(exc).__name__}: {load_error_reason(exc)})"
        ) from exc
    if isinstance(state, dict) and "model" not in state and state and all(torch.is_tensor(v) for v in state.values()):
        state = {"model": state}
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        found = sorted(map(str, state)) if isinstance(state, dict) else type(state).__name__
        raise ReleaseConversionError(
            f"{path}: not a sample-factory policy checkpoint (expected a dict with a 'model' state dict, found {found})"
        )
    return plain_numbers(state)


def map_release_state(release_model: dict[str, Any], expected: dict[str, Any], path: str | Path,
                      rnn_num_layers: int = 1) -> dict[str, Any]:
    """The release's tensors under this project's names, checked against ``expected`` (our model's
    state dict): raises :class:`ReleaseConversionError` naming the first missing, extra or
    mismatching tensor (release name, expected shape, found shape)."""
    import torch  # lazy: torch only to convert; the converter's --help stays light

    names = release_name_map(rnn_num_layers)
    ours_unmapped = [k for k in expected if k not in names.values()]
    if ours_unmapped:
        raise ReleaseConversionError(
            f"the model built for this configuration has tensors the release does not ({', '.join(ours_unmapped[:4])}"
            f"{', ...' if len(ours_unmapped) > 4 else ''}): convert with the release's architecture "
            "(--encoder_arch release, GRU core, no decoder layers, --normalize_input False)"
        )
    out: dict[str, Any] = {}
    for src, dst in names.items():
        want = tuple(expected[dst].shape)
        if src not in release_model:
            raise ReleaseConversionError(
                f"{path}: tensor {src} is missing (expected shape {want}); this is not the release's "
                "nle_rgbcrop_encoder skill policy"
            )
        value = release_model[src]
        if not torch.is_tensor(value) or not value.is_floating_point():
            kind = value.dtype if torch.is_tensor(value) else type(value).__name__
            raise ReleaseConversionError(f"{path}: tensor {src} holds {kind}, expected floating-point weights")
        found = tuple(value.shape)
        if found != want:
            raise ReleaseConversionError(
                f"{path}: tensor {src} (our {dst}) has shape {found}, expected {want}; the release's "
                "policy has 5 skills, 28 actions and a 512 GRU (check --num_skills / --rnn_size / --rnn_type)"
            )
        out[dst] = value.detach().to(dtype=expected[dst].dtype).clone().contiguous()
    extra = [k for k in release_model if k not in names]
    if extra:
        shape = tuple(getattr(release_model[extra[0]], "shape", ()))
        raise ReleaseConversionError(
            f"{path}: unexpected tensor {extra[0]} (shape {shape}) is not part of the release's policy "
            f"({len(extra)} unexpected in all)"
        )
    return out


def convert_optimizer(release_opt: Any, model: Any, cfg: Any, rnn_num_layers: int = 1) -> tuple[dict, bool]:
    """Adam state for ``model``: the release's moments when they match parameter for parameter
    (its parameters come in :func:`release_name_map` order), else a fresh state. Returns
    (state dict, carried over)."""
    import torch  # lazy: torch only to convert; the converter's --help stays light

    params = list(model.parameters())
    fresh = torch.optim.Adam(params, lr=cfg.learning_rate, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps)
    state = fresh.state_dict()
    if not isinstance(release_opt, dict):
        return state, False
    groups = release_opt.get("param_groups")
    moments = release_opt.get("state")
    if not isinstance(groups, list) or len(groups) != 1 or not isinstance(moments, dict):
        return state, False
    release_params = list(groups[0].get("params", []))
    names = list(release_name_map(rnn_num_layers).values())
    ours = dict(model.named_parameters())
    order = {name: i for i, name in enumerate(n for n, _ in model.named_parameters())}
    if len(release_params) != len(names) or len(names) != len(params):
        return state, False
    carried: dict[int, dict] = {}
    for position, (pid, dst) in enumerate(zip(release_params, names)):
        entry = moments.get(pid)
        if entry is None:
            continue  # never stepped
        if not isinstance(entry, dict) or any(
            not torch.is_tensor(entry.get(k)) or tuple(entry[k].shape) != tuple(ours[dst].shape)
            for k in ("exp_avg", "exp_avg_sq")
        ):
            return state, False
        step = entry.get("step", 0)
        carried[order[dst]] = {
            "step": step.float().clone() if torch.is_tensor(step) else torch.tensor(float(step)),
            "exp_avg": entry["exp_avg"].float().clone(),
            "exp_avg_sq": entry["exp_avg_sq"].float().clone(),
        }
    state["state"] = carried
    for key in ("lr", "betas", "eps"):
        if key in groups[0]:
            state["param_groups"][0][key] = groups[0][key]
    return state, True


def release_cfg(train_dir: str, experiment: str, extra_args: Sequence[str] = ()) -> Any:
    """Our full configuration for the converted experiment (``--encoder_arch release``)."""
    extra = list(extra_args)
    if extra and extra[0] == "--":
        extra = extra[1:]
    for i, a in enumerate(extra):
        key, eq, val = a.partition("=")
        if key == "--encoder_arch":
            value = val if eq else (extra[i + 1] if i + 1 < len(extra) else "")
            if value != "release":
                raise ReleaseConversionError(f"--encoder_arch {value}: the release's weights need --encoder_arch release")
        if key in ("--experiment", "--train_dir"):
            raise ReleaseConversionError(f"{key}: give it as the converter's own flag, not after the training flags")
    argv = ["--experiment", experiment, "--train_dir", str(train_dir), "--encoder_arch", "release"] + extra
    try:
        return parse_cfg(argv)
    except SystemExit as exc:  # argparse already printed the reason
        raise ReleaseConversionError(f"invalid training flags {extra}") from exc
    except ConfigError as exc:
        raise ReleaseConversionError(str(exc)) from exc


def build_release_actor_critic(cfg: Any) -> Any:
    """sample-factory 2's actor-critic for ``cfg`` (``--encoder_arch release``), on the CPU."""
    import gymnasium as gym  # lazy: gymnasium only to build the network
    from sample_factory.model.actor_critic import create_actor_critic  # lazy: sample-factory only to build the network

    from common.nethack.actions import ACTIONS  # lazy: imports NLE; only to build the network
    from rl_baseline.models.cdgpt5 import register_cdgpt5  # lazy: imports sample-factory and torch
    from rl_baseline.models.obs import model_observation_space  # lazy: imports NLE; only to build the network

    register_cdgpt5()
    return create_actor_critic(cfg, model_observation_space(int(cfg.num_skills)), gym.spaces.Discrete(len(ACTIONS)))


@dataclass
class ConversionResult:
    checkpoint: Path
    config: Path
    train_step: int
    env_steps: int
    optimizer_carried: bool
    removed: tuple[Path, ...] = ()


def convert_release_checkpoint(
    checkpoint: str | Path,
    train_dir: str | Path = "train_dir/skill_policy",
    experiment: str = "release",
    overwrite: bool = False,
    extra_args: Sequence[str] = (),
) -> ConversionResult:
    """Converts the release's ``checkpoint`` into ``{train_dir}/{experiment}`` (see the module docstring)."""
    import torch  # lazy: torch only to convert; the converter's --help stays light
    from sample_factory.cfg.arguments import cfg_dict  # lazy: sample-factory only to convert

    checkpoint = Path(checkpoint)
    # the experiment folder first: a refusal comes before the checkpoint is read and converted
    exp_dir = output_folder("--train_dir", Path(train_dir) / experiment, ReleaseConversionError)
    ckpt_dir = checkpoint_dir(train_dir, experiment)
    cfg_path = exp_dir / "config.json"
    existing = list_checkpoints(ckpt_dir, "latest") + list_checkpoints(ckpt_dir, "best")
    if (existing or cfg_path.exists()) and not overwrite:
        held = [str(p) for p in ([cfg_path] if cfg_path.exists() else []) + existing]
        raise ReleaseConversionError(
            f"{exp_dir} already holds {', '.join(held[:3])}{' ...' if len(held) > 3 else ''}: pass --overwrite to "
            "replace them, or choose another --experiment"
        )
    cfg = release_cfg(str(train_dir), experiment, extra_args)
    if not cfg.use_rnn or cfg.rnn_type != "gru":
        raise ReleaseConversionError("the release's policy has a GRU core: do not pass --use_rnn False / --rnn_type lstm")
    if not cfg.actor_critic_share_weights:
        raise ReleaseConversionError("the release's actor and critic share weights: drop --actor_critic_share_weights")
    state = read_release_checkpoint(checkpoint)
    model = build_release_actor_critic(cfg)
    layers = int(cfg.rnn_num_layers)
    converted = map_release_state(state["model"], model.state_dict(), checkpoint, layers)
    model.load_state_dict(converted, strict=True)
    optimizer, carried = convert_optimizer(state.get("optimizer"), model, cfg, layers)

    train_step = _count(state.get("train_step", 0), "train_step", checkpoint)
    env_steps = _count(state.get("env_steps", 0), "env_steps", checkpoint)
    out = {"train_step": train_step, "env_steps": env_steps, "model": converted, "optimizer": optimizer}
    lr = optimizer["param_groups"][0].get("lr")
    if carried and isinstance(lr, (int, float)):
        out["curr_lr"] = float(lr)

    saved_cfg = dict(cfg_dict(cfg))
    saved_cfg.pop("device", None)  # the machine that evaluates picks its own device
    saved_cfg["converted_from"] = str(checkpoint)
    ckpt_path = ckpt_dir / f"checkpoint_{train_step:09d}_{env_steps}.pth"
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(cfg_path, saved_cfg, indent=2)
    atomic_write(ckpt_path, lambda tmp: torch.save(out, tmp))
    removed = tuple(p for p in existing if p != ckpt_path)
    for old in removed:  # --overwrite: the converted checkpoint must be the one evaluation loads
        old.unlink(missing_ok=True)
    logger.info("wrote %s (train step %d, env steps %d, Adam moments %s) and %s", ckpt_path, train_step, env_steps,
                "carried over" if carried else "fresh", cfg_path)
    return ConversionResult(ckpt_path, cfg_path, train_step, env_steps, carried, removed)


def _count(value: Any, key: str, path: Path) -> int:
    import torch  # lazy: torch only to convert; the converter's --help stays light

    if torch.is_tensor(value) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or int(value) != value:
        raise ReleaseConversionError(f"{path}: '{key}' is {value!r}, expected a non-negative integer")
    return int(value)

