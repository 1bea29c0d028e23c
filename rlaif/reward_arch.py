"""The authors' reward-model architectures ("release", "motif"), next to our smaller one ("small").

Architecture names (``RewardModelConfig.arch``):

* ``"small"``: :class:`rlaif.reward_model.SkillRewardModel`, a char-CNN with global max pooling
  whose MLP reads the message features and one depth change;
* ``"release"``: :class:`ReleaseRewardModel`, the shapes of the release's reward network
  (``rlaif/reward_model.py`` RewardSharedWeights around ``rl_baseline/torchbeast_encoder.py``
  TorchBeastEncoder with its defaults: ``--encoder_msg_model lt_cnn``, ``--use_diffstats True``,
  ``--diffstats_size 5``, glyphs/crop/blstats off, embedding dim 128, hidden dim 512, no RNN core);
* ``"motif"``: :class:`MotifRewardModel`, Motif's reward network (facebookresearch/motif,
  ``--reward_encoder nle_torchbeast_encoder`` with its defaults: message model ``lt_cnn``,
  glyphs, crop and blstats off): the same message branch, no stat input at all.

The release network, written out::

    message bytes [B, 256] -> Embedding(256, 32, padding 0) -> Conv1d(32, 64, 7) -> ReLU -> MaxPool(3)
        -> Conv1d(64, 64, 7) -> ReLU -> MaxPool(3) -> 4 x [Conv1d(64, 64, 3) -> ReLU] -> MaxPool(3)
        -> flatten (64 x 5 = 320) -> Linear(320, 128) -> ReLU                          = message features
    diffstats [B, 5] -> Linear(5, 128) -> ReLU -> Linear(128, 128) -> ReLU               = stat features
    concat(stat features, message features) [B, 256] -> Linear(256, 256) -> ReLU -> Linear(256, 512)
        -> ReLU -> Linear(512, 1)                                                          = reward

No convolution is padded, so the pooled message map keeps its position (5 slots of 64
channels) instead of being max-pooled over the whole message as in the small model.
Initialization as the release's ``initialize_weights``: every ``nn.Linear`` gets an
orthogonal weight (gain 1) and a zero bias; the 1-D convolutions and the embedding keep
PyTorch's default initialization (the release only re-initializes Linear and Conv2d layers).

Motif's network is the release's without the stat MLP (the release added the diffstats to it)::

    message bytes [B, 256] -> (the message branch above)                                = message features
    message features [B, 128] -> Linear(128, 256) -> ReLU -> Linear(256, 512) -> ReLU -> Linear(512, 1)

with the same initialization. It reads the message alone: given depth changes or diffstats (the
interface every architecture shares), it ignores them.

The five "diffstats" are the changes of (depth, gold, hp, xp level, hunger) between the two
observations of a sample, each clipped to [-1, 1]; the release then zeroes all but the
depth change, both when it trains the reward model and at RL time. See :func:`release_diffstats`.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from rlaif.dataset import STAT_INDEX

ARCHS: tuple[str, ...] = ("release", "small", "motif")
#: architectures whose shapes are fixed (the size fields of RewardModelConfig must keep their defaults)
FIXED_ARCHS: tuple[str, ...] = ("release", "motif")
#: Motif's ``--reward_encoder`` names -> our architecture names; our names are accepted as they are
REWARD_ENCODERS: dict[str, str] = {"nle_torchbeast_encoder": "motif", "motif": "motif", "release": "release",
                                   "small": "small"}
MOTIF_REWARD_ENCODER = "nle_torchbeast_encoder"  # Motif's default (and only message-based) reward encoder
DEFAULT_TRAIN_ARCH = "release"  # what new reward training builds (scripts.train_reward --reward_arch)
LEGACY_ARCH = "small"  # what a checkpoint without an ``arch`` entry in its model_config holds

# the release's diffstats, in its order (rlaif/data.py drops max HP from its six stats)
RELEASE_STATS: tuple[str, ...] = ("depth", "gold", "hp", "xp_level", "hunger")
NUM_DIFFSTATS = len(RELEASE_STATS)
STAT_CLIP = 1.0

MSG_EMBED = 32
MSG_CHANNELS = 64
MSG_POOL = 3
MSG_SLOTS = 5  # positions left after the three poolings of a 256-byte message
MSG_FEATURES = 2 * MSG_CHANNELS  # 128
STAT_FEATURES = 128  # the release's --encoder_embedding_dim
HIDDEN = 512  # the release's --encoder_hidden_dim


def check_arch(arch: str) -> str:
    if arch not in ARCHS:
        raise ValueError(f"unknown reward model architecture {arch!r}; choose one of: {', '.join(ARCHS)}")
    return arch


def arch_of_reward_encoder(name: str) -> str:
    """Our architecture name for a ``--reward_encoder`` value (Motif's ``nle_torchbeast_encoder`` or one
    of :data:`ARCHS`); ValueError naming the valid values otherwise. Motif's other encoder,
    ``nle_rgbcrop_encoder``, reads the rendered screen, which reward models here never see."""
    try:
        return REWARD_ENCODERS[name]
    except KeyError:
        raise ValueError(
            f"--reward_encoder {name!r}: expected {MOTIF_REWARD_ENCODER} (Motif's message encoder) or one of "
            f"{', '.join(ARCHS)}" + (" (nle_rgbcrop_encoder reads the rendered screen; reward models here read the "
                                     "message)" if name == "nle_rgbcrop_encoder" else "")
        ) from None


def release_diffstats(stats: np.ndarray) -> np.ndarray:
    """The release's five stat inputs of each sample: float32 [N, 5] from our stats [N, 2, 6].

    Columns (depth, gold, hp, xp level, hunger): value after minus value before, clipped to
    [-1, 1] (max HP is not used). As the release does in ``rlaif/data.py`` (``get_arrays``), the
    last four columns are then set to zero, so the reward model is trained on the depth change
    alone; at RL time the release's observation wrapper (``rl_baseline/obs_wrappers.py``) zeroes
    the same four columns, which :func:`depth_diffstats` reproduces from the depth change.
    Both sides feed the model the same kind of input.
    """
    stats = np.asarray(stats)
    if stats.ndim != 3 or stats.shape[1] != 2:
        raise ValueError(f"stats must be [N, 2, {len(STAT_INDEX)}] (before, after), got shape {stats.shape}")
    cols = [STAT_INDEX[name] for name in RELEASE_STATS]
    picked = stats[:, :, cols].astype(np.float64)
    change = np.clip(picked[:, 1] - picked[:, 0], -STAT_CLIP, STAT_CLIP).astype(np.float32)
    change[:, 1:] = 0.0
    return change


def depth_diffstats(depth_change: torch.Tensor) -> torch.Tensor:
    """RL-time diffstats [B, 5] from depth changes [B]: ``[clip(d, -1, 1), 0, 0, 0, 0]``."""
    d = depth_change.reshape(-1, 1).clamp(-STAT_CLIP, STAT_CLIP)
    return torch.cat([d, d.new_zeros(d.shape[0], NUM_DIFFSTATS - 1)], dim=1)


def _message_branch() -> tuple[nn.Embedding, nn.Sequential, nn.Linear]:
    """The message encoder shared by the release's and Motif's reward networks (see the module
    docstring): byte embedding, six unpadded convolutions with three poolings, a linear layer."""
    c = MSG_CHANNELS
    embedding = nn.Embedding(256, MSG_EMBED, padding_idx=0)
    cnn = nn.Sequential(
        nn.Conv1d(MSG_EMBED, c, kernel_size=7), nn.ReLU(), nn.MaxPool1d(MSG_POOL),
        nn.Conv1d(c, c, kernel_size=7), nn.ReLU(), nn.MaxPool1d(MSG_POOL),
        nn.Conv1d(c, c, kernel_size=3), nn.ReLU(),
        nn.Conv1d(c, c, kernel_size=3), nn.ReLU(),
        nn.Conv1d(c, c, kernel_size=3), nn.ReLU(),
        nn.Conv1d(c, c, kernel_size=3), nn.ReLU(), nn.MaxPool1d(MSG_POOL),
        nn.Flatten(),
    )
    return embedding, cnn, nn.Linear(MSG_SLOTS * c, MSG_FEATURES)


def _orthogonal_linears(module: nn.Module) -> None:
    """The authors' initialization: orthogonal Linear weights (gain 1), zero biases."""
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            nn.init.orthogonal_(sub.weight, gain=1.0)
            nn.init.zeros_(sub.bias)


def _check_fixed_config(config: Any, arch: str) -> None:
    if getattr(config, "arch", arch) != arch:
        raise ValueError(f"{arch} reward model needs a config with arch {arch!r}, got {config.arch!r}")
    if config.message_len != 256 or config.vocab_size != 256:
        raise ValueError(f"the {arch} architecture reads 256-byte messages over a 256-symbol vocabulary")


def _encode(model: Any, messages: torch.Tensor, stats: torch.Tensor, dedup: bool) -> torch.Tensor:
    """``forward`` of the fixed architectures: each distinct message of the batch is encoded once."""
    if messages.dim() != 2:
        raise ValueError(f"messages must be [B, {model.config.message_len}], got shape {tuple(messages.shape)}")
    rows = stats.shape[0] if stats.dim() > 0 else 1
    if rows != messages.shape[0]:
        raise ValueError(f"stats has {rows} rows for {messages.shape[0]} messages")
    if dedup and messages.shape[0] > 1:
        unique, inverse = torch.unique(messages, dim=0, return_inverse=True)
        features = model.encode_messages(unique)[inverse]
    else:
        features = model.encode_messages(messages)
    return model.head(features, stats)


class _MessageRewardModel(nn.Module):
    """What the release's and Motif's reward networks share: the message branch's features
    (``embedding``, ``message_cnn``, ``message_fc``, built by each subclass in its own parameter
    order) and ``forward``, which encodes each distinct message of a batch once and calls ``head``."""

    @property
    def feature_dim(self) -> int:
        return MSG_FEATURES

    def encode_messages(self, messages: torch.Tensor) -> torch.Tensor:
        """Message bytes [B, 256] (any integer dtype) -> features [B, 128]."""
        x = self.embedding(messages.long()).transpose(1, 2)  # [B, 32, 256]
        return torch.relu(self.message_fc(self.message_cnn(x)))

    def forward(self, messages: torch.Tensor, stats: torch.Tensor, dedup: bool = True) -> torch.Tensor:
        """Rewards [B] of messages [B, 256] and depth changes [B] or diffstats [B, 5] (ignored by
        Motif's network, which only needs B rows)."""
        return _encode(self, messages, stats, dedup)


class ReleaseRewardModel(_MessageRewardModel):
    """Scalar reward of (current message bytes, five stat changes), the release's shapes.

    Same interface as :class:`rlaif.reward_model.SkillRewardModel`: ``encode_messages`` (the
    message branch, shared by identical messages), ``head(features, stats)`` and
    ``forward(messages, stats)``. ``stats`` is either the depth change [B] (RL time; the four
    other stats are zero, see :func:`depth_diffstats`) or full diffstats [B, 5] (training, from
    :func:`release_diffstats`).

    Submodules are declared in the release's parameter order (stat MLP, embedding, convolutions,
    message linear, trunk, reward head), so an Adam state saved by the release lines up with
    ``self.parameters()``.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        _check_fixed_config(config, "release")
        self.stats_mlp = nn.Sequential(
            nn.Linear(NUM_DIFFSTATS, STAT_FEATURES), nn.ReLU(), nn.Linear(STAT_FEATURES, STAT_FEATURES), nn.ReLU()
        )
        self.embedding, self.message_cnn, self.message_fc = _message_branch()
        self.trunk = nn.Sequential(
            nn.Linear(STAT_FEATURES + MSG_FEATURES, HIDDEN // 2), nn.ReLU(), nn.Linear(HIDDEN // 2, HIDDEN)
        )
        self.reward_head = nn.Linear(HIDDEN, 1)
        _orthogonal_linears(self)

    def diffstats(self, stats: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """[B] depth changes -> RL-time diffstats; [B, 5] diffstats pass through."""
        stats = stats.to(device=like.device, dtype=like.dtype)
        if stats.dim() == 2 and stats.shape[1] == NUM_DIFFSTATS:
            return stats
        if stats.dim() <= 1 or (stats.dim() == 2 and stats.shape[1] == 1):
            return depth_diffstats(stats)
        raise ValueError(f"stats must be depth changes [B] or diffstats [B, {NUM_DIFFSTATS}], got {tuple(stats.shape)}")

    def head(self, features: torch.Tensor, stats: torch.Tensor) -> torch.Tensor:
        """Message features [B, 128] + depth changes [B] or diffstats [B, 5] -> reward [B]."""
        stat_features = self.stats_mlp(self.diffstats(stats, features))
        hidden = self.trunk(torch.cat([stat_features, features], dim=1))
        return self.reward_head(torch.relu(hidden)).squeeze(1)


class MotifRewardModel(_MessageRewardModel):
    """Motif's reward network (``--reward_encoder nle_torchbeast_encoder``): the message alone.

    Same interface as the other architectures; ``stats`` (depth changes [B] or diffstats [B, 5])
    is accepted and ignored, because Motif's encoder reads no stats with its default flags.
    Submodules are declared in Motif's parameter order (embedding, convolutions, message
    linear, trunk, reward head; see :data:`MOTIF_TO_OURS`).
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        _check_fixed_config(config, "motif")
        self.embedding, self.message_cnn, self.message_fc = _message_branch()
        self.trunk = nn.Sequential(nn.Linear(MSG_FEATURES, HIDDEN // 2), nn.ReLU(), nn.Linear(HIDDEN // 2, HIDDEN))
        self.reward_head = nn.Linear(HIDDEN, 1)
        _orthogonal_linears(self)

    def head(self, features: torch.Tensor, stats: Any = None) -> torch.Tensor:
        """Message features [B, 128] -> reward [B]; ``stats`` is ignored (no stat input)."""
        return self.reward_head(torch.relu(self.trunk(features))).squeeze(1)


# The release's parameter names (a RewardSharedWeights state dict) -> ours, in the release's order.
# conv2_6_fc indices follow its Sequential: 0 ReLU, 1 pool, 2 conv2, 3 ReLU, 4 pool, 5 conv3, 6 ReLU,
# 7 conv4, 8 ReLU, 9 conv5, 10 ReLU, 11 conv6, 12 ReLU, 13 pool, 14 flatten, 15 linear, 16 ReLU.
_RELEASE_LAYERS: tuple[tuple[str, str], ...] = (
    ("encoder.embed_diffstats.0", "stats_mlp.0"),
    ("encoder.embed_diffstats.2", "stats_mlp.2"),
    ("encoder.char_lt", "embedding"),
    ("encoder.conv1", "message_cnn.0"),
    ("encoder.conv2_6_fc.2", "message_cnn.3"),
    ("encoder.conv2_6_fc.5", "message_cnn.6"),
    ("encoder.conv2_6_fc.7", "message_cnn.8"),
    ("encoder.conv2_6_fc.9", "message_cnn.10"),
    ("encoder.conv2_6_fc.11", "message_cnn.12"),
    ("encoder.conv2_6_fc.15", "message_fc"),
    ("encoder.fc.0", "trunk.0"),
    ("encoder.fc.2", "trunk.2"),
    ("reward_fn.1", "reward_head"),
)
RELEASE_TO_OURS: dict[str, str] = {}
for _theirs, _ours in _RELEASE_LAYERS:
    RELEASE_TO_OURS[f"{_theirs}.weight"] = f"{_ours}.weight"
    if _ours != "embedding":
        RELEASE_TO_OURS[f"{_theirs}.bias"] = f"{_ours}.bias"
del _theirs, _ours

# Motif's parameter names (RewardSharedWeights around its TorchBeastEncoder with the default flags) -> ours.
MOTIF_TO_OURS: dict[str, str] = {
    theirs + suffix: ours + suffix
    for theirs, ours in _RELEASE_LAYERS
    if not theirs.startswith("encoder.embed_diffstats")
    for suffix in ((".weight",) if ours == "embedding" else (".weight", ".bias"))
}


__all__ = [
    "ARCHS",
    "DEFAULT_TRAIN_ARCH",
    "FIXED_ARCHS",
    "MOTIF_REWARD_ENCODER",
    "MOTIF_TO_OURS",
    "MotifRewardModel",
    "REWARD_ENCODERS",
    "arch_of_reward_encoder",
    "LEGACY_ARCH",
    "NUM_DIFFSTATS",
    "RELEASE_STATS",
    "RELEASE_TO_OURS",
    "ReleaseRewardModel",
    "check_arch",
    "depth_diffstats",
    "release_diffstats",
]
