"""CDGPT5-style encoders for sample-factory 2.1.1: one network for all skills.

Inputs are the observation of :mod:`rl_baseline.models.obs`. Two layouts, chosen with
``--encoder_arch`` (:data:`ENCODER_ARCHS`):

``project`` (:class:`CDGPT5Encoder`, this repository's own, smaller network):

- the 12x12 crop around the hero is rendered on the model's device to a
  72x72 RGB image through the cached glyph atlas, then a CNN reads it (the
  first layer has a 6x6 kernel with stride 6: one feature vector per map cell);
- the bottom-line stats (raw blstats, scaled here), the three Monk features
  (spellbook kind one-hot, potion and comestible slots) and the active skill's
  one-hot go through an MLP;
- the message bytes go through a byte embedding and 1-D convolutions
  (a char-CNN) with global max pooling.

The three feature vectors are concatenated and projected to
``CDGPT5Config.out_size`` features; the stats MLP's input (scaled stats, Monk
features, skill one-hot) is then appended unchanged, as the release appended
its normalised blstats: the recurrent core sees the skill directly.

``release`` (the default, :class:`ReleaseEncoder`): the release's ``nle_rgbcrop_encoder``
(sample-factory 1) layer for layer, so that its published weights can also be loaded
(:mod:`rl_baseline.sf.release_policy`); see that class. It computes the release's function
with two shortcuts tested against the layers as written (:meth:`ReleaseEncoder.forward_by_layers`):
the message CNN runs on the bytes a message holds, not on its 256 zero-padded bytes, and the
crop is rendered straight into channels-last memory. A batch's repeated messages are computed once,
and the inference copy keeps each distinct message until the weights change
(:meth:`ReleaseEncoder.message_embedding`).

Sample-factory adds its own core (GRU with the paper's defaults) and
action/value heads; the core's input size is ``encoder.get_out_size()``. Both encoders
compute under autocast to bfloat16 with ``--precision bf16`` and return float32
(:mod:`rl_baseline.models.autocast`).

Sample-factory's observation preprocessing must leave the integer inputs
alone: use ``--normalize_input False`` (or ``--normalize_input_keys blstats``)
and ``--obs_scale 1`` (its obs scaling only applies to a key named ``obs``,
which this observation does not have). The paper's observation scale of 255
is applied here, to the rendered pixels. :data:`SF_DEFAULTS` holds these
settings for ``parser.set_defaults``. :func:`register_cdgpt5` installs an
actor-critic factory that adapts sample-factory's flags accordingly (so the
paper's ``--obs_scale 255`` works); an encoder built directly with settings
that would corrupt its inputs refuses them with an error naming the flag.

One module on purpose: the two encoders' layers, their fast paths (tested
against the layers as written) and their sample-factory registration describe one network.
"""
from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from nle import nethack
from sample_factory.algo.utils.context import global_model_factory
from sample_factory.model.actor_critic import default_make_actor_critic_func
from sample_factory.model.encoder import Encoder
from torch import nn

from common.worker_exit import exit_with_parent, skip_final_collection_in_worker
from rl_baseline.models.autocast import as_float32, autocast, compute_dtype, keep_frozen_weights_in, make_core
from rl_baseline.models.obs import (
    BLSTATS_SIZE,
    CROP_SIZE,
    MESSAGE_SIZE,
    MONK_FEATURES_SIZE,
    SPELL_KINDS,
    STAIRS_KEY,
    STAIRS_SIZE,
)
from rl_baseline.models.render import CELL, NUM_CHARS, NUM_COLORS, glyph_atlas, render_grid_torch
from rl_baseline.models.skill_heads import PerSkillHeadsActorCritic

logger = logging.getLogger(__name__)

#: sample-factory settings this encoder expects (for ``parser.set_defaults(**SF_DEFAULTS)``).
SF_DEFAULTS: dict[str, Any] = {
    "use_rnn": True,
    "rnn_type": "gru",
    "normalize_input": False,
    "obs_scale": 1.0,
    "obs_subtract_mean": 0.0,
}

#: Observation keys that hold indices or flags and must reach the encoder unnormalised.
_INTEGER_KEYS: tuple[str, ...] = ("crop_chars", "crop_colors", "message", "skill_onehot", "skill_id", "monk_features",
                                   STAIRS_KEY)
_REQUIRED_KEYS: tuple[str, ...] = ("crop_chars", "crop_colors", "blstats", "message", "skill_onehot", "monk_features")
_NUM_CONDITION_BITS: int = nethack.BL_MASK_BITS
_SPACE: int = ord(" ")

#: Values of ``--encoder_arch``.
ENCODER_ARCHS: tuple[str, ...] = ("project", "release")
#: ``--encoder_arch``'s default (``rl_baseline.sf.cfg``); a configuration without the flag builds it
DEFAULT_ENCODER_ARCH: str = "release"


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


class MonkFeatures(nn.Module):
    """``monk_features`` [B, 3] -> [B, 5]: spellbook kind one-hot (all zero for -1), then the
    potion and comestible slot counts / 10, clipped to [0, 5]."""

    out_size: int = len(SPELL_KINDS) + MONK_FEATURES_SIZE - 1

    def forward(self, monk: torch.Tensor) -> torch.Tensor:
        monk = monk.float()
        n = len(SPELL_KINDS)
        kind = monk[:, 0].round().long()
        slot = torch.where((kind >= 0) & (kind < n), kind, torch.full_like(kind, n))  # n: no spellbook
        onehot = torch.zeros(monk.shape[0], n + 1, device=monk.device)
        onehot.scatter_(1, slot.unsqueeze(1), 1.0)
        counts = torch.clamp(monk[:, 1:] * 0.1, 0.0, 5.0)
        return torch.cat([onehot[:, :n], counts], dim=1)


def _cached_on_weights(cache: dict[str, tuple[tuple, Any]], name: str, params: Any, compute: Any) -> Any:
    """``compute()``, a value that depends on the weights ``params`` only, cached in ``cache`` while no
    gradient is needed (inference). The key holds the tensors' version counters, which every in-place
    weight update (an optimiser step, sample-factory's ``load_state_dict``) bumps."""
    if torch.is_grad_enabled():
        return compute()
    # the autocast state too: under --precision bf16 the cached values are bfloat16
    key = tuple((p._version, p.data_ptr(), p.device, p.dtype, torch.is_autocast_enabled(p.device.type))
                for p in params)
    cached = cache.get(name)
    if cached is not None and cached[0] == key:
        return cached[1]
    value = compute()
    cache[name] = (key, value)
    return value


def _stairs_size(obs_space: Any) -> int:
    """Entries of the ``--stairs_input`` key in the observation (0 without the flag)."""
    return STAIRS_SIZE if STAIRS_KEY in obs_space.keys() else 0


def _stats_parts(obs_dict: dict[str, torch.Tensor], *parts: torch.Tensor) -> list[torch.Tensor]:
    """``parts`` with the ``--stairs_input`` flags added last, when the observation has them (they go before the
    skill one-hot, which stays the last ``num_skills`` features)."""
    stairs = obs_dict.get(STAIRS_KEY)
    return [*parts, stairs.float()] if stairs is not None else list(parts)


class CDGPT5Encoder(Encoder):
    """Crop CNN + stats/Monk/skill MLP + message char-CNN, fused, plus the MLP's raw input.

    ``get_out_size()`` = ``out_size`` + :attr:`stats_in_size` (scaled blstats, Monk features,
    skill one-hot): the last ``num_skills`` features are the skill one-hot itself.
    """

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
        self.monk_norm = MonkFeatures()
        self.stats_in_size = self.blstats_norm.out_size + self.monk_norm.out_size + _stairs_size(obs_space) \
            + self.num_skills
        self.stats_mlp = nn.Sequential(
            nn.Linear(self.stats_in_size, mc.stats_hidden),
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
        self._weight_cache: dict[str, tuple[tuple, torch.Tensor]] = {}  # see _weights_only
        self.compute_dtype = compute_dtype(cfg)  # --precision (rl_baseline.models.autocast)
        logger.info("CDGPT5 encoder: %d parameters, %d skills", sum(p.numel() for p in self.parameters()), self.num_skills)

    def get_out_size(self) -> int:
        return self.model_cfg.out_size + self.stats_in_size

    def type_for_input_tensor(self, input_tensor_name: str) -> torch.dtype:
        return _input_type(input_tensor_name)

    def render(self, crop_chars: torch.Tensor, crop_colors: torch.Tensor) -> torch.Tensor:
        """The crop as uint8 [B, 3, 72, 72], identical to :func:`render.render_crop`."""
        return render_grid_torch(crop_chars, crop_colors, self.atlas)

    def forward(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        """The features in float32; under ``--precision bf16`` computed under autocast to bfloat16."""
        keep_frozen_weights_in(self, self.compute_dtype)  # an inference worker's copy (rl_baseline.models.autocast)
        with autocast(self.compute_dtype, obs_dict["blstats"].device):
            features = self._features(obs_dict)
        return as_float32(features)

    def _features(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        crop = self.crop_fc(self.crop_cnn[1:](self.cell_features(obs_dict["crop_chars"], obs_dict["crop_colors"])))

        skill = obs_dict["skill_onehot"].float()
        stats_in = torch.cat(
            _stats_parts(obs_dict, self.blstats_norm(obs_dict["blstats"]), self.monk_norm(obs_dict["monk_features"]))
            + [skill], dim=1
        )
        stats = self.stats_mlp(stats_in)

        msg = self.msg_fc(self.message_features(obs_dict["message"]))

        # the stats MLP's input goes on to the core unchanged (the release's skip of its
        # normalised blstats, which end with the skill one-hot)
        return torch.cat([self.fuse(torch.cat([crop, stats, msg], dim=1)), stats_in], dim=1)

    def forward_by_pixels(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        """:meth:`forward` as the layers are written down: the crop rendered to 72x72 RGB and read by
        the whole crop CNN, the message CNN over all 256 bytes. Same function, several times slower;
        kept as the reference the fast path is tested against."""
        rgb = self.render(obs_dict["crop_chars"], obs_dict["crop_colors"]).float() * (1.0 / 255.0)
        crop = self.crop_fc(self.crop_cnn(rgb))
        skill = obs_dict["skill_onehot"].float()
        stats_in = torch.cat(
            _stats_parts(obs_dict, self.blstats_norm(obs_dict["blstats"]), self.monk_norm(obs_dict["monk_features"]))
            + [skill], dim=1
        )
        stats = self.stats_mlp(stats_in)
        msg = self.msg_embed(obs_dict["message"].long().clamp(0, 255)).transpose(1, 2)  # [B, embed, 256]
        msg = self.msg_fc(self.msg_cnn(msg))
        return torch.cat([self.fuse(torch.cat([crop, stats, msg], dim=1)), stats_in], dim=1)

    # -- the fast path -------------------------------------------------------------------------
    def _weights_only(self, name: str, params: tuple[torch.Tensor, ...], compute: Any) -> torch.Tensor:
        """``compute()`` cached while no gradient is needed (:func:`_cached_on_weights`)."""
        return _cached_on_weights(self._weight_cache, name, params, compute)

    def _glyph_table(self) -> torch.Tensor:
        """The first crop layer applied to every glyph tile: [256 * 16, c1]."""
        conv = self.crop_cnn[0]
        weight, bias = conv.weight, conv.bias

        def compute() -> torch.Tensor:
            tiles = self.atlas.permute(0, 3, 1, 2).reshape(self.atlas.shape[0], -1).to(weight.dtype) * (1.0 / 255.0)
            return nn.functional.linear(tiles, weight.reshape(weight.shape[0], -1), bias)

        return self._weights_only("glyph_table", (weight, bias), compute)

    def _empty_message_positions(self, sequence: int) -> torch.Tensor:
        """The message CNN's second-layer output [m2, sequence // 4] for an all-zero message."""
        conv1, act1, pool, conv2, act2 = (self.msg_cnn[i] for i in range(5))

        def compute() -> torch.Tensor:
            codes = torch.zeros(1, sequence, dtype=torch.long, device=conv1.weight.device)
            return act2(conv2(pool(act1(conv1(self.msg_embed(codes).transpose(1, 2))))))[0]

        params = (self.msg_embed.weight, conv1.weight, conv1.bias, conv2.weight, conv2.bias)
        return self._weights_only(f"empty_message_{sequence}", params, compute)

    def cell_features(self, crop_chars: torch.Tensor, crop_colors: torch.Tensor) -> torch.Tensor:
        """The first crop layer's output [B, c1, 12, 12] without rendering pixels.

        That layer's kernel and stride are the cell size (6), so its output at a map cell is a
        linear function of that cell's 6x6 RGB tile alone, and the tile is fixed by the cell's
        (character, colour). Applying the layer to the 4096 atlas tiles once per forward pass and
        looking the result up per cell is the same function as rendering the crop to 72x72 and
        convolving it, with the same weights, at a fraction of the cost.
        """
        index = (crop_chars.long() & 255) * NUM_COLORS + (crop_colors.long() & 15)
        return self._glyph_table()[index].permute(0, 3, 1, 2)

    def message_features(self, message: torch.Tensor) -> torch.Tensor:
        """The message char-CNN's output [B, m2], reading only the bytes that matter.

        Messages are short and zero-padded to 256 bytes. A position of the second convolution whose
        receptive field (29 bytes) holds only padding has the value it has for an all-zero message
        at the same position, so the global max over the 64 positions is the max of (a) the
        positions reached by some message byte, computed on a slice as long as the batch's longest
        message (plus the receptive-field margin), and (b) the all-zero message's values beyond
        them, a suffix maximum of one extra sequence. Same values and gradients as reading all 256
        bytes; batches with a message of 243 bytes or more take the full path.
        """
        codes = message.long().clamp(0, 255)
        nonzero = (codes != 0).any(dim=0)
        length = int(nonzero.nonzero().max().item()) + 1 if bool(nonzero.any()) else 0
        # conv2 output j is reached by bytes 4(j-1)-2 .. 4(j+1)+5: positions 0..last_j can differ
        # from the all-zero message's
        last_j = (length + 1) // 4 + 1
        sequence = codes.shape[1]
        pooled = sequence // 4
        span = 4 * last_j + 10  # bytes read: conv1 outputs up to 4(last_j + 2) - 1 come out exact
        if last_j + 1 >= pooled or span > sequence:
            return self.msg_cnn(self.msg_embed(codes).transpose(1, 2))
        conv1, act1, pool, conv2, act2 = (self.msg_cnn[i] for i in range(5))
        x = self.msg_embed(codes[:, :span]).transpose(1, 2)
        h1 = act1(conv1(x))[:, :, : 4 * (last_j + 2)]
        h2 = act2(conv2(pool(h1)))[:, :, : last_j + 1]
        # the all-zero message's values past last_j
        tail = self._empty_message_positions(sequence)[:, last_j + 1 :].amax(dim=1)
        return torch.maximum(h2.amax(dim=2), tail.unsqueeze(0))


def _input_type(input_tensor_name: str) -> torch.dtype:
    # indices stay uint8 on their way to the device (4x less to copy than float)
    if input_tensor_name in ("crop_chars", "crop_colors", "message"):
        return torch.uint8
    return torch.float32


#: The release's per-entry blstats multipliers (its ``BlstatsWrapper.BLSTAT_NORMALIZATION_STATS``),
#: NLE's 27 blstats then the 3 Monk features; the skill one-hot that follows is multiplied by 1.
#: Zeros drop an entry (strength, charisma, score, depth, gold, ... reach the network as 0); no
#: clipping (the release declared a clip range but never applied it), so time (/1000) and the
#: condition bit mask (x1) grow unbounded.
RELEASE_BLSTATS_SCALE: tuple[float, ...] = (
    1 / 79, 1 / 21,  # x, y
    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,  # str25, str125, dex, con, int, wis, cha, score
    1 / 10, 1 / 10, 0.0, 0.0, 1 / 10, 1 / 10, 1 / 10,  # hp, hpmax, depth, gold, energy, energymax, ac
    0.0,  # monster level (HD)
    1 / 10, 0.0, 1 / 1000, 1.0,  # experience level, experience points, time, hunger state
    0.0, 1.0, 0.0, 1.0, 0.0,  # carrying capacity, dungeon number, level number, condition, alignment
    1.0, 1.0, 1.0,  # Monk features: spellbook kind, potion slots, comestible slots
)


@dataclass
class ReleaseEncoderConfig:
    """Sizes of the release's ``nle_rgbcrop_encoder`` (sample-factory 1 defaults of the release)."""

    conv_filters: tuple[tuple[int, int, int, int], ...] = ((3, 32, 8, 4), (32, 64, 4, 2), (64, 128, 3, 2))
    crop_fc: int = 512  # --hidden_size 512, --encoder_extra_fc_layers 1
    stats_hidden: int = 128
    stats_layers: int = 4  # --encoder_stats_model three_hid_layers
    msg_embed: int = 32
    msg_hidden: int = 64


class ReleaseEncoder(Encoder):
    """The release's encoder (``rl_baseline/encoders_nle.py``, ``nle_rgbcrop_encoder``), layer for layer.

    Output, in the release's order, ``[crop 512 | stats MLP 128 | stats input 30 + num_skills |
    message 128]`` (803 features with 5 skills):

    - crop: the 12x12 crop rendered to RGB 72x72 (divided by 255, the release's
      ``--obs_scale 255``), conv 32 k8 s4, 64 k4 s2, 128 k3 s2 (ELU each, [128, 3, 3]), then
      Linear 1152 -> 512 + ELU;
    - stats: ``blstats`` (27) + ``monk_features`` (3) + ``skill_onehot``, times
      :data:`RELEASE_BLSTATS_SCALE`, through 4 x (Linear 128 + ELU); the scaled input itself is
      also passed on to the core (the release's "direct access by LSTM core");
    - message: byte embedding 256 x 32 (index 0 is padding), Conv1d 32 -> 64 k7, ReLU, max-pool 3,
      Conv1d k7, ReLU, max-pool 3, 4 x (Conv1d k3, ReLU), max-pool 3 -> [64, 5], Linear 320 -> 128,
      ReLU.

    What the pixels are made of differs from the release (converted weights see other pixels):
    the release drew ``tty_chars`` with the Hack TrueType font at 9 pt resized to 6x6, here the
    glyph shapes are :mod:`rl_baseline.models.render`'s atlas, tinted with the release's 16
    colours (:data:`rl_baseline.models.render.RELEASE_PALETTE`). The release cropped the tty
    screen (map row r is tty row r + 1) at the hero's map coordinates, so its hero sits one row
    lower, at crop row 7; this encoder shifts the map crop down one row to match, leaving the
    top row blank (the release showed the map row above there, or the message / status line
    near the screen edge).
    """

    def __init__(self, cfg: Any, obs_space: Any, model_cfg: ReleaseEncoderConfig | None = None) -> None:
        super().__init__(cfg)
        _check_sf_cfg(cfg, obs_space)
        self.model_cfg = mc = model_cfg or ReleaseEncoderConfig()
        self.num_skills = int(obs_space["skill_onehot"].shape[0])
        atlas = torch.from_numpy(np.array(glyph_atlas(CELL, "release"))).reshape(NUM_CHARS * NUM_COLORS, CELL, CELL, 3)
        # not saved: the checkpoint holds exactly the release's tensors
        self.register_buffer("atlas", atlas, persistent=False)
        stairs = _stairs_size(obs_space)  # --stairs_input (not the release's): before the one-hot, times 1
        scale = torch.tensor(RELEASE_BLSTATS_SCALE + (1.0,) * (stairs + self.num_skills), dtype=torch.float32)
        self.register_buffer("stats_scale", scale, persistent=False)

        # the submodules are created in the release's order, so that the parameters (and an
        # optimizer's state) come in the same order as in its checkpoint
        layers: list[nn.Module] = []
        for in_ch, out_ch, kernel, stride in mc.conv_filters:
            layers += [nn.Conv2d(in_ch, out_ch, kernel, stride=stride), nn.ELU()]
        self.crop_cnn = nn.Sequential(*layers, nn.Flatten())
        side = CROP_SIZE * CELL
        with torch.no_grad():
            conv_out = int(self.crop_cnn(torch.zeros(1, 3, side, side)).shape[1])
        self.crop_fc = nn.Sequential(nn.Linear(conv_out, mc.crop_fc), nn.ELU())

        self.stats_in_size = len(RELEASE_BLSTATS_SCALE) + stairs + self.num_skills
        stats: list[nn.Module] = []
        for i in range(mc.stats_layers):
            stats += [nn.Linear(self.stats_in_size if i == 0 else mc.stats_hidden, mc.stats_hidden), nn.ELU()]
        self.stats_mlp = nn.Sequential(*stats)

        e, h = mc.msg_embed, mc.msg_hidden
        self.msg_embed = nn.Embedding(256, e, padding_idx=0)
        self.msg_conv1 = nn.Conv1d(e, h, kernel_size=7)
        self.msg_cnn = nn.Sequential(
            nn.ReLU(), nn.MaxPool1d(kernel_size=3, stride=3),
            nn.Conv1d(h, h, kernel_size=7), nn.ReLU(), nn.MaxPool1d(kernel_size=3, stride=3),
            nn.Conv1d(h, h, kernel_size=3), nn.ReLU(),
            nn.Conv1d(h, h, kernel_size=3), nn.ReLU(),
            nn.Conv1d(h, h, kernel_size=3), nn.ReLU(),
            nn.Conv1d(h, h, kernel_size=3), nn.ReLU(),
            nn.MaxPool1d(kernel_size=3, stride=3),
            nn.Flatten(),
        )
        with torch.no_grad():
            msg_out = int(self.msg_cnn(self.msg_conv1(torch.zeros(1, e, MESSAGE_SIZE))).shape[1])
        self.msg_positions = msg_out // h  # the message CNN's output positions (5)
        self._weight_cache: dict[str, tuple[tuple, Any]] = {}  # see _padding_values and message_embedding
        self.msg_fc = nn.Sequential(nn.Linear(msg_out, 2 * h), nn.ReLU())
        self.out_size = mc.crop_fc + mc.stats_hidden + self.stats_in_size + 2 * h
        self.compute_dtype = compute_dtype(cfg)  # --precision (rl_baseline.models.autocast)
        self._atlas_cache: dict[tuple, torch.Tensor] = {}  # see _scaled_atlas_rows
        logger.info("release encoder: %d parameters, %d skills, %d features", sum(p.numel() for p in self.parameters()),
                    self.num_skills, self.out_size)

    def get_out_size(self) -> int:
        return self.out_size

    def release_default_layers(self) -> list[nn.Module]:
        """The layers the release leaves at PyTorch's default initialisation (weights and biases).

        Its sample-factory 1 actor-critic initialises layers whose type is exactly ``nn.Conv2d`` or
        ``nn.Linear`` (orthogonal, zero bias). The crop CNN and its 1152 -> 512 layer sit in a module
        scripted with ``torch.jit.script``, whose submodules are ``RecursiveScriptModule`` s, and the
        message convolutions are ``nn.Conv1d``: neither matches, so they keep their default init."""
        return ([m for m in self.crop_cnn if isinstance(m, nn.Conv2d)] + [self.crop_fc[0], self.msg_conv1]
                + [m for m in self.msg_cnn if isinstance(m, nn.Conv1d)])

    def restore_release_initialisation(self) -> None:
        """Puts :meth:`release_default_layers` back to PyTorch's default initialisation, undoing
        sample-factory 2's (which orthogonalises the crop layers and zeroes every bias)."""
        for layer in self.release_default_layers():
            layer.reset_parameters()

    def type_for_input_tensor(self, input_tensor_name: str) -> torch.dtype:
        return _input_type(input_tensor_name)

    def render(self, crop_chars: torch.Tensor, crop_colors: torch.Tensor) -> torch.Tensor:
        """uint8 [B, 3, 72, 72]: the crop one row lower (hero at row 7, as the release), top row blank."""
        chars = torch.full_like(crop_chars, _SPACE)
        colors = torch.zeros_like(crop_colors)
        chars[:, 1:] = crop_chars[:, :-1]
        colors[:, 1:] = crop_colors[:, :-1]
        return render_grid_torch(chars, colors, self.atlas)

    def stats_input(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        """The release's ``norm_blstats``: [blstats, Monk features, skill one-hot] x scale."""
        raw = torch.cat(
            _stats_parts(obs_dict, obs_dict["blstats"].float(), obs_dict["monk_features"].float())
            + [obs_dict["skill_onehot"].float()], dim=1
        )
        return raw * self.stats_scale

    def pixels(self, crop_chars: torch.Tensor, crop_colors: torch.Tensor) -> torch.Tensor:
        """:meth:`render`'s image as the crop CNN reads it: float [B, 3, 72, 72] divided by 255, in
        channels-last memory (the tiles are copied once into place; the convolutions run faster on it).

        The tiles are read from the atlas already divided by 255, in the dtype the first convolution computes
        in (bfloat16 under autocast, ``--precision bf16``: the values autocast would round the float32 image
        to), so the image is written once, at half the size under bf16.

        The image is gathered one tile row at a time (``index_select`` of whole rows, in the order of the image's
        memory): about 2.5x cheaper than gathering whole tiles and then permuting them into place."""
        chars = torch.cat([torch.full_like(crop_chars[:, :1], _SPACE), crop_chars[:, :-1]], dim=1)
        colors = torch.cat([torch.zeros_like(crop_colors[:, :1]), crop_colors[:, :-1]], dim=1)
        b, h, w = chars.shape
        kind = self.atlas.device.type
        dtype = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else torch.float32
        glyphs = (chars.long() & 255) * NUM_COLORS + (colors.long() & 15)  # [B, H, W]
        # image row CELL * y + dy, cell x is tile row dy of glyph [y, x]: rows ordered [B, H, dy, W]
        rows = glyphs.unsqueeze(2) * CELL + torch.arange(CELL, device=glyphs.device).view(1, 1, CELL, 1)
        image = self._scaled_atlas_rows(dtype).index_select(0, rows.reshape(-1))  # [B * H*CELL * W, CELL * 3]
        return image.view(b, h * CELL, w * CELL, 3).permute(0, 3, 1, 2)

    def _scaled_atlas_rows(self, dtype: torch.dtype) -> torch.Tensor:
        """The glyph atlas divided by 255 (float32 arithmetic, as the image was), then in ``dtype``, one tile row
        (CELL pixels x RGB) per table row: row ``CELL * glyph + dy`` is row ``dy`` of ``glyph``'s tile; cached."""
        key = (dtype, self.atlas.device)
        cached = self._atlas_cache.get(key)
        if cached is None:
            scaled = (self.atlas.float() * (1.0 / 255.0)).to(dtype)  # [glyphs, CELL, CELL, 3]
            cached = self._atlas_cache[key] = scaled.reshape(-1, CELL * 3)
        return cached

    def forward(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        """The features in float32; under ``--precision bf16`` computed under autocast to bfloat16."""
        keep_frozen_weights_in(self, self.compute_dtype)  # an inference worker's copy (rl_baseline.models.autocast)
        with autocast(self.compute_dtype, obs_dict["blstats"].device):
            features = self._features(obs_dict)
        return as_float32(features)

    def _features(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        crop = self.crop_fc(self.crop_cnn(self.pixels(obs_dict["crop_chars"], obs_dict["crop_colors"])))
        stats_in = self.stats_input(obs_dict)
        stats = self.stats_mlp(stats_in)
        msg = self.message_embedding(obs_dict["message"])
        return torch.cat([crop, stats, stats_in, msg], dim=1)

    def forward_by_layers(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        """:meth:`forward` as the release wrote it: the rendered crop in plain memory layout, the message
        CNN over all 256 bytes of every message. The same function, slower; the reference
        :meth:`pixels` and :meth:`message_features` are tested against."""
        rgb = self.render(obs_dict["crop_chars"], obs_dict["crop_colors"]).float() * (1.0 / 255.0)
        crop = self.crop_fc(self.crop_cnn(rgb))
        stats_in = self.stats_input(obs_dict)
        stats = self.stats_mlp(stats_in)
        msg = self.msg_embed(obs_dict["message"].long().clamp(0, 255)).transpose(1, 2)
        msg = self.msg_fc(self.msg_cnn(self.msg_conv1(msg)))
        return torch.cat([crop, stats, stats_in, msg], dim=1)

    # -- each distinct message once: per batch, and per weights version in the inference worker ------
    #: distinct messages kept per weights version (:meth:`message_embedding`); more, and the cache starts again
    MESSAGE_CACHE_SIZE: int = 4096

    def message_embedding(self, message: torch.Tensor) -> torch.Tensor:
        """The message branch's output [B, 128]: ``msg_fc(message_features(message))``, computed once per
        distinct message.

        On the CPU the branch runs on the batch's distinct messages and is indexed back to its rows (the same
        values; a repeated message's gradient is the sum of its rows', as computed row by row): messages repeat
        (a wall bumped into, "You see here ..."; in 32 steps of 16 games played at random only one non-empty
        message in five is new, docs/performance.md). In a frozen copy (the inference worker's: no parameter requires a gradient, none is wanted)
        each distinct message is also kept from one call to the next, until a weights update (sample-factory
        loads the learner's weights after each of its steps) empties the cache: at inference batches of a few
        observations the message CNN's cost is its some 40 small operations per call, not its arithmetic, and
        precision does not change it. On a GPU the branch is computed as is."""
        if message.device.type != "cpu" or message.shape[0] == 0:
            return self.msg_fc(self.message_features(message))
        if torch.is_grad_enabled() or self.msg_fc[0].weight.requires_grad:
            rows = np.ascontiguousarray(message.numpy())
            keys = rows.view(np.dtype((np.void, rows.shape[1] * rows.itemsize))).ravel()
            _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
            if len(first) == len(keys):
                return self.msg_fc(self.message_features(message))
            distinct = self.msg_fc(self.message_features(message[torch.from_numpy(first)]))
            return distinct[torch.from_numpy(inverse.reshape(-1))]
        params = (self.msg_embed.weight, *(p for layer in self._message_layers() for p in layer.parameters()),
                  *self.msg_fc.parameters())
        cache: dict[bytes, torch.Tensor] = _cached_on_weights(self._weight_cache, "messages", params, dict)
        if len(cache) > self.MESSAGE_CACHE_SIZE:
            cache.clear()
        keys = [row.tobytes() for row in message.numpy()]
        missing: dict[bytes, int] = {}
        for i, key in enumerate(keys):
            if key not in cache and key not in missing:
                missing[key] = i
        if missing:
            rows = torch.tensor(list(missing.values()), dtype=torch.long)
            computed = self.msg_fc(self.message_features(message[rows]))
            for key, value in zip(missing, computed):
                cache[key] = value
        return torch.stack([cache[key] for key in keys])

    # -- the message CNN on the bytes that matter ------------------------------------------------
    #: message length buckets of :meth:`message_features` (bytes up to the last non-zero one): each
    #: bucket is computed on a slice as long as its longest message; empty messages cost nothing
    MESSAGE_BUCKETS: tuple[int, ...] = (0, 24, 64)
    #: a bucket with fewer messages goes with the next longer one (each bucket costs some 40 small
    #: operations: inference batches of a few observations run as one bucket)
    MESSAGE_BUCKET_MIN_ROWS: int = 32

    def _message_layers(self) -> list[nn.Module]:
        """The message CNN's layers from the first convolution to the last pooling (no Flatten)."""
        return [self.msg_conv1, *list(self.msg_cnn)[:-1]]

    def _padding_values(self) -> list[torch.Tensor]:
        """Each message layer's input (then the final output) at a position whose receptive field holds
        padding bytes only, [1, C, 1]: the release's convolutions and poolings pad nothing, so such a
        position has the same value everywhere. Computed from the weights (gradients flow through it),
        cached while no gradient is needed."""

        def compute() -> list[torch.Tensor]:
            zero = torch.zeros(1, 1, dtype=torch.long, device=self.msg_embed.weight.device)
            value = self.msg_embed(zero).transpose(1, 2)  # the padding byte's embedding (padding_idx: no gradient)
            values = [value]
            for layer in self._message_layers():
                if isinstance(layer, nn.Conv1d):
                    value = layer(value.expand(-1, -1, layer.kernel_size[0]))
                elif not isinstance(layer, nn.MaxPool1d):  # a pooling of equal values is that value
                    value = layer(value)
                values.append(value)
            return values

        params = (self.msg_embed.weight,) + tuple(
            p for layer in self._message_layers() if isinstance(layer, nn.Conv1d) for p in (layer.weight, layer.bias))
        return _cached_on_weights(self._weight_cache, "padding_values", params, compute)

    def _message_prefix(self, codes: torch.Tensor, length: int, values: list[torch.Tensor]) -> torch.Tensor:
        """The message CNN's output [b, 64, 5] for messages zero after their first ``length`` bytes.

        Each layer is computed on the positions whose receptive field reaches a message byte (a
        prefix of the sequence, ``n`` positions) followed by just enough padding values for the next
        layer's windows; the positions beyond hold ``values[i]``. Same values and gradients as the
        layers over all 256 bytes (:meth:`forward_by_layers`)."""
        b, total = codes.shape
        x = self.msg_embed(codes[:, :length]).transpose(1, 2)
        n = length
        for layer, value in zip(self._message_layers(), values):
            if isinstance(layer, nn.Conv1d):
                k = layer.kernel_size[0]
                out_total = total - k + 1
                if n + k - 1 >= total:  # the windows reach the end: the whole sequence
                    x, n = layer(torch.cat([x, value.expand(b, -1, total - n)], dim=2)), out_total
                else:
                    x = layer(torch.cat([x, value.expand(b, -1, k - 1)], dim=2))
                total = out_total
            elif isinstance(layer, nn.MaxPool1d):
                k = layer.kernel_size if isinstance(layer.kernel_size, int) else layer.kernel_size[0]
                out_total = total // k
                m = -(-n // k)
                if m >= out_total:
                    x = torch.cat([x, value.expand(b, -1, total - n)], dim=2)[:, :, : out_total * k]
                    m = out_total
                else:
                    x = torch.cat([x, value.expand(b, -1, m * k - n)], dim=2)
                x, n, total = layer(x), m, out_total
            else:
                x = layer(x)
        return torch.cat([x, values[-1].expand(b, -1, total - n)], dim=2)

    def message_features(self, message: torch.Tensor) -> torch.Tensor:
        """The message CNN's flattened output [B, 320] (what :attr:`msg_fc` reads), computed per
        length bucket (:data:`MESSAGE_BUCKETS`) on the bytes up to each bucket's longest message.

        Messages are zero-padded to 256 bytes and the padding byte's embedding is the same at every
        position, so a layer position whose receptive field holds padding only has one value for every
        message and position (:meth:`_padding_values`); the release's message CNN (about 60% of the
        encoder's work over 256 bytes) is computed on the positions a message byte reaches.
        """
        codes = message.long().clamp(0, 255)
        b, total = codes.shape
        values = self._padding_values()
        final = values[-1]
        if b == 0:
            return final.expand(0, -1, self.msg_positions).flatten(1)
        nonzero = codes != 0
        positions = torch.arange(1, total + 1, device=codes.device)
        lengths = (nonzero * positions).amax(dim=1)  # bytes up to the last non-zero one (0: empty)
        edges = (*self.MESSAGE_BUCKETS, total)
        bucket = torch.bucketize(lengths, torch.tensor(edges[:-1], device=codes.device), right=False)
        # bucket 0: empty; bucket i: edges[i-1] < length <= edges[i]
        rows_of: list[torch.Tensor] = []
        parts: list[torch.Tensor] = []
        carried = bucket.new_empty(0)
        for i in range(len(edges)):
            rows = (bucket == i).nonzero().squeeze(1)
            if i > 0:
                rows = torch.cat([carried, rows]).sort().values if carried.numel() else rows  # in batch order
                if rows.numel() < self.MESSAGE_BUCKET_MIN_ROWS and i + 1 < len(edges):
                    carried = rows
                    continue
                carried = bucket.new_empty(0)
            if rows.numel() == 0:
                continue
            if i == 0:
                part = final.expand(rows.numel(), -1, self.msg_positions)
            else:
                part = self._message_prefix(codes[rows], int(lengths[rows].max().item()), values)
            if rows.numel() == b:
                return part.flatten(1)
            rows_of.append(rows)
            parts.append(part)
        order = torch.argsort(torch.cat(rows_of))  # back to the batch's order
        return torch.cat(parts, dim=0)[order].flatten(1)


def _check_sf_cfg(cfg: Any, obs_space: Any) -> None:
    """Fails early, with the fix, on sample-factory settings that would corrupt the inputs."""
    missing = [k for k in _REQUIRED_KEYS if k not in obs_space.keys()]
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


def make_cdgpt5_encoder(cfg: Any, obs_space: Any) -> Encoder:
    """Encoder factory for sample-factory's model factory: ``--encoder_arch`` picks the layout."""
    arch = getattr(cfg, "encoder_arch", None) or DEFAULT_ENCODER_ARCH
    if arch == "project":
        return CDGPT5Encoder(cfg, obs_space)
    if arch == "release":
        return ReleaseEncoder(cfg, obs_space)
    raise ValueError(f"--encoder_arch {arch!r}: expected one of {', '.join(ENCODER_ARCHS)}")


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
    """sample-factory's default actor-critic, built with :func:`adapt_sf_cfg`'s settings; with
    ``--policy_heads per_skill`` the ablation's one head per skill (:mod:`rl_baseline.models.skill_heads`).
    With the release's encoder, the layers the release never initialised itself keep PyTorch's default
    initialisation (:meth:`ReleaseEncoder.release_default_layers`); every other layer is initialised as
    sample-factory does (``--policy_initialization``, orthogonal by default, zero biases), as the release did."""
    skip_final_collection_in_worker()  # the learner and inference workers: their exit was seconds of collection
    exit_with_parent()  # a killed trainer takes its workers with it
    cfg = adapt_sf_cfg(cfg, obs_space)
    if getattr(cfg, "policy_heads", "shared") == "per_skill":
        if not getattr(cfg, "actor_critic_share_weights", True):
            raise ValueError("--policy_heads per_skill is built on the shared-weights actor-critic: drop "
                             "--actor_critic_share_weights False")
        model = PerSkillHeadsActorCritic(global_model_factory(), obs_space, action_space, cfg)
    else:
        model = default_make_actor_critic_func(cfg, obs_space, action_space)
    for module in model.modules():  # the release's initialisation (see ReleaseEncoder.release_default_layers)
        if isinstance(module, ReleaseEncoder):
            module.restore_release_initialisation()
    return model


def register_cdgpt5() -> None:
    """Makes sample-factory build :class:`CDGPT5Encoder` (or :class:`ReleaseEncoder`) models
    (safe to call repeatedly).

    Registers the encoder factory, an actor-critic factory that adapts the
    input preprocessing flags (see :func:`adapt_sf_cfg`) and a core factory that runs
    sample-factory's recurrent core under autocast with ``--precision bf16``
    (:mod:`rl_baseline.models.autocast`); the core and the heads are sample-factory's own.
    """
    factory = global_model_factory()
    if factory.make_model_encoder_func is not make_cdgpt5_encoder:
        factory.register_encoder_factory(make_cdgpt5_encoder)
    if factory.make_model_core_func is not make_core:  # sample-factory's core, under autocast with bf16
        factory.register_model_core_factory(make_core)
    if factory.make_actor_critic_func is not make_cdgpt5_actor_critic:
        factory.register_actor_critic_factory(make_cdgpt5_actor_critic)
