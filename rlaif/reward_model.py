"""Skill reward models: a char-CNN over the current message plus the depth change.

This module is pure PyTorch + numpy (no NLE, no sample-factory) so the RL phase can
import it inside environment workers. It holds:

* :class:`RewardModelConfig` - the architecture name and sizes, saved in every checkpoint
  so the model can be rebuilt from the checkpoint alone;
* two architectures, chosen by ``RewardModelConfig.arch`` and built by
  :func:`build_reward_model`:

  - ``"release"`` (:class:`rlaif.reward_arch.ReleaseRewardModel`): the authors' network
    (six unpadded convolutions with a position-keeping flatten, a 5-input stat MLP, a
    256-512 trunk); what ``scripts.train_reward`` trains by default and what
    ``scripts.convert_release_rewards`` rebuilds from the authors' released checkpoints;
  - ``"motif"`` (:class:`rlaif.reward_arch.MotifRewardModel`): Motif's network
    (``--reward_encoder nle_torchbeast_encoder``): the release's message branch and trunk without
    any stat input; what ``scripts.train_reward`` trains on Motif's dataset layout by default;
  - ``"small"`` (:class:`SkillRewardModel`): our smaller char-CNN with global max pooling
    and one depth input. Checkpoints whose ``model_config`` has no ``arch`` entry were
    written before the choice existed and hold this model.

  Both offer ``forward(messages [B, 256], depth_change [B]) -> [B]`` (identical messages in a
  batch are encoded once), ``encode_messages`` and ``head``. At RL time only the depth change
  is given: the release model reads it as its diffstats ``[d, 0, 0, 0, 0]``, as the release does
  (its reward training zeroes the same four stat changes, see :func:`rlaif.reward_arch.release_diffstats`);
* :func:`load_skill_reward` - loads ``{train_dir}/{experiment}`` (latest checkpoint +
  the normalized-reward quantile CSV) into a :class:`LoadedSkillReward` that scores
  numpy inputs with normalized rewards and gives quantile thresholds.

Layout of a reward directory (written by :mod:`rlaif.train_reward`, or by
:mod:`rlaif.release_reward` from the authors' checkpoints, without metrics.csv)::

    {reward_dir}/checkpoint_p0/checkpoint_{iter:09d}.pth
    {reward_dir}/reward_metrics/train_norm_quantiles.csv
    {reward_dir}/reward_metrics/metrics.csv
"""
from __future__ import annotations

import csv
import logging
import math
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from common.file_errors import read_text
from common.nethack.messages import MESSAGE_LEN
from common.torch_files import load_error_reason, plain_numbers, safe_load
from rlaif.reward_arch import FIXED_ARCHS, LEGACY_ARCH, MotifRewardModel, ReleaseRewardModel, check_arch

logger = logging.getLogger(__name__)

CHECKPOINT_DIRNAME = "checkpoint_p0"
METRICS_DIRNAME = "reward_metrics"
QUANTILES_CSV = "train_norm_quantiles.csv"
CHECKPOINT_RE = re.compile(r"^checkpoint_(\d+)\.pth$")


@dataclass
class RewardModelConfig:
    """Architecture name and sizes of a skill reward model.

    ``arch`` is ``"small"`` (the default of this dataclass, and what a saved config without
    an ``arch`` entry means), ``"release"`` or ``"motif"`` (fixed shapes, see :mod:`rlaif.reward_arch`;
    the size fields below must keep their defaults). New reward training defaults to
    ``"release"`` through :class:`rlaif.train_reward.RewardTrainingConfig`.

    Sizes of the small model: the message bytes go through an embedding, then one 1-D
    convolution per entry of ``conv_channels`` (kernel ``kernel_sizes[i]``, ReLU, max pooling by
    ``pool_sizes[i]``; a pool size of 1 means no pooling), then a max over the remaining
    positions. The resulting vector, concatenated with ``depth_scale * depth_change``, goes
    through an MLP with ``mlp_layers`` hidden layers of width ``hidden_dim`` to one scalar.
    """

    vocab_size: int = 256
    message_len: int = MESSAGE_LEN
    embed_dim: int = 32
    conv_channels: tuple[int, ...] = (64, 64, 64)
    kernel_sizes: tuple[int, ...] = (5, 5, 3)
    pool_sizes: tuple[int, ...] = (4, 4, 1)
    hidden_dim: int = 128
    mlp_layers: int = 2
    depth_scale: float = 1.0
    arch: str = LEGACY_ARCH

    def __post_init__(self) -> None:
        check_arch(self.arch)
        self.conv_channels = tuple(int(c) for c in self.conv_channels)
        self.kernel_sizes = tuple(int(k) for k in self.kernel_sizes)
        self.pool_sizes = tuple(int(p) for p in self.pool_sizes)
        n = len(self.conv_channels)
        if n == 0:
            raise ValueError("RewardModelConfig: conv_channels must list at least one layer")
        if len(self.kernel_sizes) != n or len(self.pool_sizes) != n:
            raise ValueError(
                f"RewardModelConfig: conv_channels ({n}), kernel_sizes ({len(self.kernel_sizes)}) and "
                f"pool_sizes ({len(self.pool_sizes)}) must have the same length"
            )
        length = self.message_len
        for p in self.pool_sizes:
            if p < 1:
                raise ValueError(f"RewardModelConfig: pool sizes must be >= 1, got {self.pool_sizes}")
            length //= p
        if length < 1:
            raise ValueError(
                f"RewardModelConfig: pooling {self.pool_sizes} shrinks a {self.message_len}-byte message to nothing"
            )
        if self.mlp_layers < 1:
            raise ValueError(f"RewardModelConfig: mlp_layers must be >= 1, got {self.mlp_layers}")
        if self.arch in FIXED_ARCHS:
            changed = [f.name for f in fields(self) if f.name != "arch" and getattr(self, f.name) != f.default]
            if changed:
                raise ValueError(
                    f"RewardModelConfig: the {self.arch} architecture has fixed shapes; {', '.join(changed)} "
                    "only apply to arch 'small'"
                )

    def to_dict(self) -> dict[str, Any]:
        """Plain types only (lists, ints, floats), so ``torch.load(weights_only=True)`` can read it."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RewardModelConfig":
        """Rebuilds a saved config; one without ``arch`` (saved before it existed) is ``small``."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"RewardModelConfig: unknown fields {sorted(unknown)}")
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items()})


class SkillRewardModel(nn.Module):
    """The ``small`` architecture: scalar reward of (current message bytes, depth change)."""

    def __init__(self, config: RewardModelConfig | None = None) -> None:
        super().__init__()
        self.config = config or RewardModelConfig()
        cfg = self.config
        if cfg.arch != "small":
            raise ValueError(f"SkillRewardModel is the 'small' architecture; build {cfg.arch!r} with build_reward_model")
        self.embedding = nn.Embedding(cfg.vocab_size, cfg.embed_dim, padding_idx=0)
        layers: list[nn.Module] = []
        in_ch = cfg.embed_dim
        for ch, k, p in zip(cfg.conv_channels, cfg.kernel_sizes, cfg.pool_sizes):
            layers.append(nn.Conv1d(in_ch, ch, kernel_size=k, padding=k // 2))
            layers.append(nn.ReLU())
            if p > 1:
                layers.append(nn.MaxPool1d(p))
            in_ch = ch
        self.convs = nn.Sequential(*layers)
        mlp: list[nn.Module] = []
        width = in_ch + 1
        for _ in range(cfg.mlp_layers):
            mlp += [nn.Linear(width, cfg.hidden_dim), nn.ReLU()]
            width = cfg.hidden_dim
        mlp.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*mlp)

    @property
    def feature_dim(self) -> int:
        return self.config.conv_channels[-1]

    def encode_messages(self, messages: torch.Tensor) -> torch.Tensor:
        """Message bytes [B, L] (any integer dtype) -> features [B, feature_dim]."""
        x = self.embedding(messages.long())  # [B, L, E]
        x = self.convs(x.transpose(1, 2))  # [B, C, L']
        return x.amax(dim=2)

    def head(self, features: torch.Tensor, depth_change: torch.Tensor) -> torch.Tensor:
        """Features [B, C] + depth change [B] -> reward [B]."""
        depth = depth_change.to(features.dtype).reshape(-1, 1) * self.config.depth_scale
        return self.mlp(torch.cat([features, depth], dim=1)).squeeze(1)

    def forward(self, messages: torch.Tensor, depth_change: torch.Tensor, dedup: bool = True) -> torch.Tensor:
        """Rewards [B] of messages [B, 256] (uint8 or long) and depth changes [B].

        With ``dedup`` (the default) each distinct message is encoded once and its
        features are shared by all rows that carry it.
        """
        if messages.dim() != 2:
            raise ValueError(f"messages must be [B, {self.config.message_len}], got shape {tuple(messages.shape)}")
        if depth_change.reshape(-1).shape[0] != messages.shape[0]:
            raise ValueError(
                f"depth_change has {depth_change.numel()} values for {messages.shape[0]} messages"
            )
        if dedup and messages.shape[0] > 1:
            unique, inverse = torch.unique(messages, dim=0, return_inverse=True)
            features = self.encode_messages(unique)[inverse]
        else:
            features = self.encode_messages(messages)
        return self.head(features, depth_change.reshape(-1))


RewardModel = SkillRewardModel | ReleaseRewardModel | MotifRewardModel


def build_reward_model(config: RewardModelConfig | None = None) -> RewardModel:
    """A freshly initialized reward model of ``config.arch`` (default config: small)."""
    config = config or RewardModelConfig()
    if config.arch == "release":
        return ReleaseRewardModel(config)
    if config.arch == "motif":
        return MotifRewardModel(config)
    return SkillRewardModel(config)


def resolve_device(device: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu; ``cuda`` without a GPU is a clear error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but torch sees no CUDA device; use --device cpu or auto")
    return torch.device(device)


def list_checkpoints(checkpoint_dir: str | Path) -> list[tuple[int, Path]]:
    """``(iteration, path)`` of every ``checkpoint_{iter}.pth`` in the folder, oldest first."""
    checkpoint_dir = Path(checkpoint_dir)
    if not checkpoint_dir.is_dir():
        return []
    found = []
    for path in checkpoint_dir.iterdir():
        match = CHECKPOINT_RE.match(path.name)
        if match and path.is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(checkpoint_dir: str | Path) -> Path | None:
    found = list_checkpoints(checkpoint_dir)
    return found[-1][1] if found else None


def read_quantile_csv(path: str | Path) -> dict[float, float]:
    """The LAST row of a quantile CSV as ``{quantile (rounded to 2 decimals): normalized reward}``.

    A file cut short (its last line without its newline: the writer ends every row with one),
    not text, or not numbers is a :class:`RewardCheckpointError` naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"reward quantile file not found: {path}")
    what = "reward quantile file (a header of quantiles, then rows of normalized rewards)"
    remedy = "Train the reward model again (python -m scripts.train_reward, same --experiment) to rewrite it"
    text = read_text(path, what, remedy, RewardCheckpointError)
    if text and not text.endswith("\n"):
        raise RewardCheckpointError(f"{path}: not a readable {what} (cut short: its last line is incomplete). {remedy}")
    rows = [row for row in csv.reader(text.splitlines()) if row]
    if len(rows) < 2:
        raise RewardCheckpointError(f"{path}: not a readable {what} (a header and at least one row of values "
                                    f"expected, found {len(rows)} row(s)). {remedy}")
    try:
        header = [round(float(v), 2) for v in rows[0]]
        values = [float(v) for v in rows[-1]]
    except ValueError as exc:
        raise RewardCheckpointError(f"{path}: not a readable {what} (non-numeric entry: {exc}). {remedy}") from None
    if len(header) != len(values):
        raise RewardCheckpointError(f"{path}: not a readable {what} (last row has {len(values)} values for "
                                    f"{len(header)} quantiles). {remedy}")
    return dict(zip(header, values))


DEPTH_CHANGE_LIMIT = 1


def clip_depth_change(change: Any) -> Any:
    """The depth change a reward model reads, clipped to [-1, 1] as in the release.

    A trapdoor, a hole or a skill that goes down twice gives |change| >= 2, outside what the
    model learns from one-step pairs; the release clips both its training inputs and its
    RL-time inputs. Works on a number or an array.
    """
    if isinstance(change, np.ndarray):
        return np.clip(change, -DEPTH_CHANGE_LIMIT, DEPTH_CHANGE_LIMIT)
    return max(-DEPTH_CHANGE_LIMIT, min(DEPTH_CHANGE_LIMIT, change))


class RewardCheckpointError(ValueError):
    """A reward-model checkpoint that cannot be read; the message names the file."""


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> dict[str, Any]:
    """Reads a checkpoint with ``weights_only=True`` (tensors and plain containers only).

    Checkpoints are written with plain Python numbers (see ``train_reward``); numpy scalars of
    files written elsewhere are read as numbers too (:func:`common.torch_files.safe_load`).
    Raises :class:`RewardCheckpointError` naming the file.
    """
    path = Path(path)
    try:
        state = plain_numbers(safe_load(path, device))
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise RewardCheckpointError(
            f"{path}: cannot be read as a reward-model checkpoint ({type(exc).__name__}: {load_error_reason(exc)}); "
            "re-run python -m scripts.train_reward for this skill, or remove the damaged file to use an older one"
        ) from exc
    if not isinstance(state, dict) or "model" not in state or "reward_mean" not in state:
        keys = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise RewardCheckpointError(
            f"{path}: not a reward-model checkpoint (expected the keys model, reward_mean, reward_var; found {keys})"
        )
    return state


def model_from_checkpoint(state: dict[str, Any], device: str | torch.device = "cpu") -> RewardModel:
    """The model a checkpoint holds, rebuilt from its ``model_config`` (no ``arch``: small)."""
    config = RewardModelConfig.from_dict(state.get("model_config", {}))
    model = build_reward_model(config)
    model.load_state_dict(state["model"])
    return model.to(device)


@dataclass
class LoadedSkillReward:
    """A trained skill reward model ready for scoring (eval mode), with its normalization."""

    model: RewardModel
    reward_mean: float
    reward_std: float
    quantiles: dict[float, float]
    skill: str
    checkpoint_path: Path
    quantile_csv: Path | None = None
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    def score(self, messages: np.ndarray, depth_change: np.ndarray) -> np.ndarray:
        """Normalized rewards ``(r - mean) / std`` (float32 [B]) of messages uint8 [B, 256]
        and depth changes [B]. A single message [256] with a scalar depth change also works.

        The release architecture reads each depth change as the diffstats ``[d, 0, 0, 0, 0]``
        (``d`` clipped to [-1, 1]), the input its authors give it at RL time."""
        msgs = np.asarray(messages)
        if msgs.ndim == 1:
            msgs = msgs[None]
        depth = np.asarray(depth_change, dtype=np.float32).reshape(-1)
        if msgs.ndim != 2 or msgs.shape[1] != self.model.config.message_len:
            raise ValueError(
                f"messages must be [B, {self.model.config.message_len}] bytes, got shape {np.shape(messages)}"
            )
        if depth.shape[0] != msgs.shape[0]:
            raise ValueError(f"depth_change has {depth.shape[0]} values for {msgs.shape[0]} messages")
        if msgs.shape[0] == 0:
            return np.zeros(0, dtype=np.float32)
        with torch.no_grad():
            m = torch.from_numpy(np.ascontiguousarray(msgs, dtype=np.uint8)).to(self.device)
            d = torch.from_numpy(depth).to(self.device)
            raw = self.model(m, d).float().cpu().numpy()
        return ((raw - self.reward_mean) / self.reward_std).astype(np.float32)

    def threshold(self, q: float) -> float:
        """Normalized reward at quantile ``q`` (one of the CSV's columns, e.g. 0.85)."""
        key = round(float(q), 2)
        if key not in self.quantiles or abs(key - float(q)) > 1e-9:
            raise ValueError(
                f"quantile {q} is not in {self.quantile_csv or 'the quantile CSV'}; available quantiles: "
                + ", ".join(f"{k:.2f}" for k in sorted(self.quantiles))
            )
        return float(self.quantiles[key])


def load_skill_reward(reward_dir: str | Path, device: str = "cpu") -> LoadedSkillReward:
    """Loads ``{train_dir}/{experiment}``: its latest checkpoint and the last quantile row.

    Raises FileNotFoundError naming what is missing (the folder, a checkpoint, the CSV).
    """
    reward_dir = Path(reward_dir)
    if not reward_dir.is_dir():
        raise FileNotFoundError(
            f"reward directory not found: {reward_dir} (expected {{train_dir}}/{{experiment}} written by "
            "python -m scripts.train_reward)"
        )
    ckpt_dir = reward_dir / CHECKPOINT_DIRNAME
    ckpt = latest_checkpoint(ckpt_dir)
    if ckpt is None:
        raise FileNotFoundError(f"no checkpoint_*.pth in {ckpt_dir}; train the reward model first")
    csv_path = reward_dir / METRICS_DIRNAME / QUANTILES_CSV
    if not csv_path.is_file():
        raise FileNotFoundError(f"reward quantile file not found: {csv_path}")
    dev = resolve_device(device)
    state = load_checkpoint(ckpt, dev)
    model = model_from_checkpoint(state, dev).eval()
    mean = float(state["reward_mean"])
    var = float(state["reward_var"])
    bad = [name for name, t in model.state_dict().items() if t.is_floating_point() and not torch.isfinite(t).all()]
    if bad or not (math.isfinite(mean) and math.isfinite(var)):
        raise RewardCheckpointError(
            f"{ckpt}: a diverged model ({'non-finite weights: ' + ', '.join(bad[:3]) if bad else 'non-finite reward mean or variance'}); "
            "train it again with a smaller --reward_lr")
    std = math.sqrt(var) if var > 0 else 0.0
    if std < 1e-8:
        logger.warning("%s: reward variance is %.3g; scores are centred but not scaled", ckpt, var)
        std = 1.0
    quantiles = read_quantile_csv(csv_path)
    if not all(math.isfinite(v) for v in quantiles.values()):
        raise RewardCheckpointError(f"{csv_path}: non-finite quantiles (a diverged model); train it again with a "
                                    "smaller --reward_lr")
    logger.info("loaded %s reward model from %s", state.get("skill", "?"), ckpt)
    return LoadedSkillReward(
        model=model,
        reward_mean=mean,
        reward_std=std,
        quantiles=quantiles,
        skill=str(state.get("skill", "")),
        checkpoint_path=ckpt,
        quantile_csv=csv_path,
        device=dev,
    )
