"""CDGPT5-style encoder for sample-factory 2.1.1: one network for all skills.

Inputs are the observation of :mod:`rl_baseline.models.obs`:

- the 12x12 crop around the hero is rendered on the model's device to a
  72x72 RGB image through the cached glyph atlas, then a CNN reads it (the
  first layer has a 6x6 kernel with stride 6: one feature vector per map cell);
- the bottom-line stats (raw blstats, scaled here) concatenated with the
  active skill's one-hot go through an MLP;
- the message bytes go through a byte embedding and 1-D convolutions
  (a char-CNN) with global max pooling.

The three feature vectors are concatenated and projected to
``CDGPT5Config.out_size`` features. Sample-factory adds its own LSTM core and
action/value heads (``--use_rnn True --rnn_type lstm``).

Sample-factory's observation preprocessing must leave the integer inputs
alone: use ``--normalize_input False`` (or ``--normalize_input_keys blstats``)
and ``--obs_scale 1`` (its obs scaling only applies to a key named ``obs``,
which this observation does not have). The paper's observation scale of 255
is applied here, to the rendered pixels. :data:`SF_DEFAULTS` holds these
settings for ``parser.set_defaults``. :func:`register_cdgpt5` installs an
actor-critic factory that adapts sample-factory's flags accordingly (so the
paper's ``--obs_scale 255`` works); an encoder built directly with settings
that would corrupt its inputs refuses them with an error naming the flag.
"""
from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from nle import nethack
from sample_factory.model.encoder import Encoder
from torch import nn

from rl_baseline.models.obs import BLSTATS_SIZE, CROP_SIZE, MESSAGE_SIZE
from rl_baseline.models.render import CELL, NUM_CHARS, NUM_COLORS, glyph_atlas, render_grid_torch

logger = logging.getLogger(__name__)

#: sample-factory settings this encoder expects (for ``parser.set_defaults(**SF_DEFAULTS)``).
SF_DEFAULTS: dict[str, Any] = {
    "use_rnn": True,
    "rnn_type": "lstm",
    "normalize_input": False,
    "obs_scale": 1.0,
    "obs_subtract_mean": 0.0,
}

#: Observation keys that hold indices or flags and must reach the encoder unnormalised.
_INTEGER_KEYS: tuple[str, ...] = ("crop_chars", "crop_colors", "message", "skill_onehot", "skill_id")
_NUM_CONDITION_BITS: int = nethack.BL_MASK_BITS


@dataclass
class CDGPT5Config:
    """Sizes of the encoder's parts."""

    crop_channels: tuple[int, int, int] = (16, 32, 32)
    crop_out: int = 256
    stats_hidden: int = 128
    msg_embed: int = 16
    msg_channels: tuple[int, int] = (32, 64)
    msg_out: int = 128
    out_size: int = 512


def _blstats_scale() -> np.ndarray:
    """Per-entry multipliers that bring raw blstats to roughly unit range."""
    scale = np.ones(BLSTATS_SIZE, dtype=np.float32)
    per_entry = {
        nethack.NLE_BL_X: 1 / 79,
        nethack.NLE_BL_Y: 1 / 21,
        nethack.NLE_BL_STR25: 1 / 25,
        nethack.NLE_BL_STR125: 1 / 125,
        nethack.NLE_BL_DEX: 1 / 25,
        nethack.NLE_BL_CON: 1 / 25,
        nethack.NLE_BL_INT: 1 / 25,
        nethack.NLE_BL_WIS: 1 / 25,
        nethack.NLE_BL_CHA: 1 / 25,
        nethack.NLE_BL_SCORE: 0.0,  # unbounded: only its log is used
        nethack.NLE_BL_HP: 1 / 100,
        nethack.NLE_BL_HPMAX: 1 / 100,
        nethack.NLE_BL_DEPTH: 1 / 50,
        nethack.NLE_BL_GOLD: 0.0,  # log only
        nethack.NLE_BL_ENE: 1 / 100,
        nethack.NLE_BL_ENEMAX: 1 / 100,
        nethack.NLE_BL_AC: 1 / 20,
        nethack.NLE_BL_HD: 1 / 30,
        nethack.NLE_BL_XP: 1 / 30,
        nethack.NLE_BL_EXP: 0.0,  # log only
        nethack.NLE_BL_TIME: 0.0,  # log only
        nethack.NLE_BL_HUNGER: 1 / 6,
        nethack.NLE_BL_CAP: 1 / 5,
        nethack.NLE_BL_DNUM: 1 / 10,
        nethack.NLE_BL_DLEVEL: 1 / 50,
        nethack.NLE_BL_CONDITION: 0.0,  # a bit mask: expanded into bits
        nethack.NLE_BL_ALIGN: 1.0,
    }
    for index, value in per_entry.items():
        scale[index] = value
    return scale


class BlstatsNormalizer(nn.Module):
    """Raw blstats [B, 27] -> features [B, 27 + 27 + 2 + condition bits].

    Linear scaling (clipped), a signed log of every entry, HP and energy
    ratios, and the status-condition bits.
    """

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.from_numpy(_blstats_scale()), persistent=False)
        self.register_buffer(
            "bits", torch.tensor([1 << i for i in range(_NUM_CONDITION_BITS)], dtype=torch.long), persistent=False
        )

    @property
    def out_size(self) -> int:
        return 2 * BLSTATS_SIZE + 2 + _NUM_CONDITION_BITS

    def forward(self, blstats: torch.Tensor) -> torch.Tensor:
        b = blstats.float()
        linear = torch.clamp(b * self.scale, -5.0, 5.0)
        log = torch.sign(b) * torch.log1p(b.abs()) / 10.0
        hp_ratio = b[:, nethack.NLE_BL_HP] / b[:, nethack.NLE_BL_HPMAX].clamp(min=1.0)
        ene_ratio = b[:, nethack.NLE_BL_ENE] / b[:, nethack.NLE_BL_ENEMAX].clamp(min=1.0)
        cond = b[:, nethack.NLE_BL_CONDITION].long().unsqueeze(1)
        cond_bits = ((cond & self.bits) != 0).float()
        return torch.cat([linear, log, hp_ratio.unsqueeze(1), ene_ratio.unsqueeze(1), cond_bits], dim=1)


class CDGPT5Encoder(Encoder):
    """Crop CNN + stats/skill MLP + message char-CNN -> ``get_out_size()`` features."""

    def __init__(self, cfg: Any, obs_space: Any, model_cfg: CDGPT5Config | None = None) -> None:
        super().__init__(cfg)
        _check_sf_cfg(cfg, obs_space)
        self.model_cfg = mc = model_cfg or CDGPT5Config()
        self.num_skills = int(obs_space["skill_onehot"].shape[0])

        atlas = torch.from_numpy(np.array(glyph_atlas(CELL))).reshape(NUM_CHARS * NUM_COLORS, CELL, CELL, 3)
        # saved with the weights, so a checkpoint keeps the pixels it was trained on
        self.register_buffer("atlas", atlas)

        c1, c2, c3 = mc.crop_channels
        act = nn.ELU
        self.crop_cnn = nn.Sequential(
            nn.Conv2d(3, c1, kernel_size=CELL, stride=CELL),  # one vector per map cell: [c1, 12, 12]
            act(),
            nn.Conv2d(c1, c2, kernel_size=3, padding=1),
            act(),
            nn.Conv2d(c2, c3, kernel_size=3, stride=2, padding=1),  # [c3, 6, 6]
            act(),
            nn.Flatten(),
        )
        side = (CROP_SIZE + 1) // 2
        self.crop_fc = nn.Sequential(nn.Linear(c3 * side * side, mc.crop_out), act())

        self.blstats_norm = BlstatsNormalizer()
        self.stats_mlp = nn.Sequential(
            nn.Linear(self.blstats_norm.out_size + self.num_skills, mc.stats_hidden),
            act(),
            nn.Linear(mc.stats_hidden, mc.stats_hidden),
            act(),
        )

        m1, m2 = mc.msg_channels
        self.msg_embed = nn.Embedding(256, mc.msg_embed)
        self.msg_cnn = nn.Sequential(
            nn.Conv1d(mc.msg_embed, m1, kernel_size=5, padding=2),
            act(),
            nn.MaxPool1d(4),
            nn.Conv1d(m1, m2, kernel_size=3, padding=1),
            act(),
            nn.AdaptiveMaxPool1d(1),
            nn.Flatten(),
        )
        self.msg_fc = nn.Sequential(nn.Linear(m2, mc.msg_out), act())

        self.fuse = nn.Sequential(nn.Linear(mc.crop_out + mc.stats_hidden + mc.msg_out, mc.out_size), act())
        logger.info("CDGPT5 encoder: %d parameters, %d skills", sum(p.numel() for p in self.parameters()), self.num_skills)

    def get_out_size(self) -> int:
        return self.model_cfg.out_size

    def type_for_input_tensor(self, input_tensor_name: str) -> torch.dtype:
        # indices stay uint8 on their way to the device (4x less to copy than float)
        if input_tensor_name in ("crop_chars", "crop_colors", "message"):
            return torch.uint8
        return torch.float32

    def render(self, crop_chars: torch.Tensor, crop_colors: torch.Tensor) -> torch.Tensor:
        """The crop as uint8 [B, 3, 72, 72], identical to :func:`render.render_crop`."""
        return render_grid_torch(crop_chars, crop_colors, self.atlas)

    def forward(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        rgb = self.render(obs_dict["crop_chars"], obs_dict["crop_colors"]).float() * (1.0 / 255.0)
        crop = self.crop_fc(self.crop_cnn(rgb))

        skill = obs_dict["skill_onehot"].float()
        stats = self.stats_mlp(torch.cat([self.blstats_norm(obs_dict["blstats"]), skill], dim=1))

        msg = obs_dict["message"].long().clamp(0, 255)
        msg = self.msg_embed(msg).transpose(1, 2)  # [B, embed, 256]
        msg = self.msg_fc(self.msg_cnn(msg))

        return self.fuse(torch.cat([crop, stats, msg], dim=1))


def _check_sf_cfg(cfg: Any, obs_space: Any) -> None:
    """Fails early, with the fix, on sample-factory settings that would corrupt the inputs."""
    missing = [k for k in ("crop_chars", "crop_colors", "blstats", "message", "skill_onehot") if k not in obs_space.keys()]
    if missing:
        raise ValueError(f"CDGPT5Encoder needs observation keys {missing}; build observations with rl_baseline.models.obs")
    if getattr(cfg, "normalize_input", False):
        keys = getattr(cfg, "normalize_input_keys", None)
        touched = [k for k in _INTEGER_KEYS if k in obs_space.keys() and (keys is None or k in keys)]
        if touched:
            raise ValueError(
                f"--normalize_input True would normalise {touched}, which hold characters/bytes/skill flags; "
                "use --normalize_input False (the encoder scales blstats itself) or --normalize_input_keys blstats"
            )
    scale = getattr(cfg, "obs_scale", 1.0)
    sub = getattr(cfg, "obs_subtract_mean", 0.0)
    if "obs" not in obs_space.keys() and (abs(scale - 1.0) > 1e-6 or abs(sub) > 1e-6):
        raise ValueError(
            f"--obs_scale {scale} / --obs_subtract_mean {sub}: sample-factory applies these only to an 'obs' key, "
            "which this observation does not have; CDGPT5Encoder scales its inputs itself, use --obs_scale 1 "
            "--obs_subtract_mean 0"
        )


def make_cdgpt5_encoder(cfg: Any, obs_space: Any) -> CDGPT5Encoder:
    """Encoder factory for sample-factory's model factory."""
    return CDGPT5Encoder(cfg, obs_space)


def adapt_sf_cfg(cfg: Any, obs_space: Any) -> Any:
    """A copy of ``cfg`` with sample-factory's input preprocessing set for this encoder.

    The paper's ``--obs_scale 255`` is honoured by the encoder itself (pixels
    are divided by 255 after rendering); sample-factory would apply it to a key
    named ``obs``, which does not exist here, so the copy has ``obs_scale 1``.
    ``--normalize_input True`` without ``--normalize_input_keys`` (sample-factory's
    default) would normalise characters and bytes: the copy turns it off, since
    the encoder scales blstats itself. Explicit keys are kept (and checked by
    the encoder). Observation spaces with an ``obs`` key are left alone.
    """
    if "obs" in obs_space.keys():
        return cfg
    changes: dict[str, Any] = {}
    if abs(getattr(cfg, "obs_scale", 1.0) - 1.0) > 1e-6 or abs(getattr(cfg, "obs_subtract_mean", 0.0)) > 1e-6:
        changes.update(obs_scale=1.0, obs_subtract_mean=0.0)
    if getattr(cfg, "normalize_input", False) and getattr(cfg, "normalize_input_keys", None) is None:
        changes["normalize_input"] = False
    if not changes:
        return cfg
    logger.info(
        "CDGPT5: model built with %s (obs_scale %s is applied to the rendered pixels inside the encoder; "
        "blstats are scaled by the encoder)",
        changes,
        getattr(cfg, "obs_scale", 1.0),
    )
    adapted = copy.copy(cfg)
    for key, value in changes.items():
        setattr(adapted, key, value)
    return adapted


def make_cdgpt5_actor_critic(cfg: Any, obs_space: Any, action_space: Any) -> Any:
    """sample-factory's default actor-critic, built with :func:`adapt_sf_cfg`'s settings."""
    from sample_factory.model.actor_critic import default_make_actor_critic_func

    return default_make_actor_critic_func(adapt_sf_cfg(cfg, obs_space), obs_space, action_space)


def register_cdgpt5() -> None:
    """Makes sample-factory build :class:`CDGPT5Encoder` models (safe to call repeatedly).

    Registers the encoder factory and an actor-critic factory that adapts the
    input preprocessing flags (see :func:`adapt_sf_cfg`); the LSTM core and the
    heads are sample-factory's own.
    """
    from sample_factory.algo.utils.context import global_model_factory

    factory = global_model_factory()
    if factory.make_model_encoder_func is not make_cdgpt5_encoder:
        factory.register_encoder_factory(make_cdgpt5_encoder)
    if factory.make_actor_critic_func is not make_cdgpt5_actor_critic:
        factory.register_actor_critic_factory(make_cdgpt5_actor_critic)
