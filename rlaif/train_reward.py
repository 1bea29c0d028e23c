"""Reward model training (phase 1b): distil pairwise preferences into a skill reward.

Reads a dataset (``{dataset_dir}/{skill}.npz`` or ``.pkl``, samples ``2k`` and ``2k+1``
form pair ``k``) and its preference file (``{preference_dir}/{annotator}.npy``, codes
0 first better, 1 second better, 2 tie, 3 unknown) -- or, when ``dataset_dir`` holds Motif's
layout (``data/``, :mod:`rlaif.motif_dataset`), its memory-mapped messages and
``{dataset_dir}/preference/{annotator}.npy``, each pair member being its one observation's
message (``L = 1``, as Motif's reward training reads it; no stat changes) -- and fits a reward model
(:func:`rlaif.reward_model.build_reward_model`) with the Bradley-Terry cross-entropy on
soft labels (first better = 0, second better = 1, tie = 0.5). Unknown pairs are left
out. A validation split (by pair, fixed by the seed) reports accuracy on non-tie pairs.

The architecture is ``cfg.model.arch`` (see :mod:`rlaif.reward_arch`): ``"release"`` (the
authors' network, the default for new runs) or ``"small"`` (our smaller char-CNN). A resumed
run keeps the architecture of its checkpoint.

Inputs of a sample: its current message (``messages[:, 1]``) and its stat changes. The small
model reads the depth change (``stats[:, 1, depth] - stats[:, 0, depth]``, clipped to [-1, 1]);
the release model reads the release's five diffstats
(:func:`rlaif.reward_arch.release_diffstats`: depth, gold, hp, xp level and hunger changes,
clipped, with the last four zeroed as the release's training data has them). Messages are
turned into ids of a table of distinct messages once, so every batch encodes each distinct
message once (both architectures encode the message apart from the stats).

Outputs, under ``{train_dir}/{experiment}``::

    checkpoint_p0/checkpoint_{iter:09d}.pth       torch dict (model, optimizer, reward_mean,
                                                  reward_var, tot_num_iter, model_config, ...)
    reward_metrics/train_norm_quantiles.csv       header: quantiles 0.05..0.95; one row per save
    reward_metrics/metrics.csv                    epoch, iteration, train/val loss and accuracy, validation
                                                  pairs (with a decided label)
    reward_metrics/curves.png                     loss and accuracy curves

A run started again resumes from its latest checkpoint; a finished run is a no-op.

One module on purpose: the training loop, its inputs (either layout), checkpoints, metrics and resume
share one run state; the model itself is in :mod:`rlaif.reward_model`.
"""
from __future__ import annotations

import csv
import logging
import math
import os
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from common.atomic_io import atomic_write
from common.estimates import MIN_VALIDATION_PAIRS, pair_count
from common.nethack.messages import decode_message
from common.torch_files import plain_numbers
from common.vocabulary import SKILL_INDEX, skill_from_experiment, skill_index
from rlaif.dataset import STAT_INDEX, DatasetError, ObservationDataset, find_dataset, load_dataset
from rlaif.motif_dataset import (
    MotifLayout,
    MotifLayoutError,
    is_motif_layout,
    load_motif_preferences,
    open_motif_layout,
)
from rlaif.preferences import FIRST, SECOND, UNKNOWN, PreferenceError, label_counts, load_preferences
from rlaif.reward_arch import DEFAULT_TRAIN_ARCH, release_diffstats
from rlaif.reward_model import (
    CHECKPOINT_DIRNAME,
    METRICS_DIRNAME,
    QUANTILES_CSV,
    LoadedSkillReward,
    RewardCheckpointError,
    RewardModel,
    RewardModelConfig,
    build_reward_model,
    clip_depth_change,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    model_from_checkpoint,
    resolve_device,
)

logger = logging.getLogger(__name__)

QUANTILES: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(1, 20))
METRICS_CSV = "metrics.csv"
CURVES_PNG = "curves.png"
#: ``val_pairs``: the validation pairs with a decided label ``val_acc`` rests on (a file written without the
#: column is still read; its rows get an empty count when a run resumes)
METRICS_HEADER = ("epoch", "iteration", "train_loss", "train_acc", "val_loss", "val_acc", "val_pairs")
EVAL_BATCH_PAIRS = 4096
PLOT_INTERVAL_S = 60.0  # the curves PNG is redrawn at a save at most this often, and always at the end


class RewardTrainingError(ValueError):
    """Bad input for reward training (files that do not match, empty data, bad sizes)."""


@dataclass
class RewardTrainingConfig:
    """Settings of one reward training run. Defaults follow the paper (20 epochs, lr 1e-5,
    batch 1000 pairs, seed 777, Adam); the model is the release's architecture unless
    ``model`` says otherwise."""

    experiment: str = "llama3_descender_default"
    skill: str | None = None  # default: read from the experiment name
    dataset_dir: str = "og_dataset"
    dataset_path: str | None = None  # default: {dataset_dir}/{skill}.npz (or .pkl)
    preference_dir: str = "preference"
    annotator: str | None = None  # default: the experiment name
    train_dir: str = "train_dir/skill_rewards"
    batch_size: int = 1000
    num_workers: int = 0
    reward_lr: float = 1e-5
    num_epochs: int = 20
    seed: int = 777
    val_fraction: float = 0.05
    device: str = "auto"
    save_every: int = 0  # iterations between extra saves; 0 = once per epoch
    keep_checkpoints: int = 2
    model: RewardModelConfig = field(default_factory=lambda: RewardModelConfig(arch=DEFAULT_TRAIN_ARCH))
    progress: bool = True
    # the sizes of ``model`` the command asked for (--embed_dim, --hidden_dim, --conv_channels): a resume from a
    # checkpoint of other sizes is refused for these, the others are the checkpoint's
    asked_sizes: tuple[str, ...] = ()

    @property
    def motif_layout(self) -> bool:
        """The data is Motif's layout (``{dataset_dir}/data/``), not this project's ``{skill}.npz``."""
        return self.dataset_path is None and is_motif_layout(self.dataset_dir)

    @property
    def resolved_skill(self) -> str:
        """The skill trained; on Motif's layout a reward need not belong to a skill ("" then)."""
        if self.skill:
            skill_index(self.skill)
            return self.skill
        if self.motif_layout:
            for name in (self.experiment, self.annotator or ""):
                try:
                    return skill_from_experiment(name)
                except ValueError:
                    pass
            return ""
        return skill_from_experiment(self.experiment)

    @property
    def preference_path(self) -> Path:
        if self.motif_layout:  # Motif keeps the preferences inside the dataset folder
            return Path(self.dataset_dir) / "preference" / f"{self.annotator or self.experiment}.npy"
        return Path(self.preference_dir) / f"{self.annotator or self.experiment}.npy"

    @property
    def run_dir(self) -> Path:
        return Path(self.train_dir) / self.experiment


# ----------------------------------------------------------------------------- inputs

@dataclass
class RewardInputs:
    """Dataset samples as model inputs: a table of distinct messages and, per sample,
    the id of its current message in that table, its depth change and the release's diffstats."""

    table: np.ndarray  # uint8 [M, 256] distinct current messages
    message_ids: np.ndarray  # int64 [N]
    depth_change: np.ndarray  # float32 [N]
    diffstats: np.ndarray | None = None  # float32 [N, 5], see rlaif.reward_arch.release_diffstats

    @property
    def num_samples(self) -> int:
        return len(self.message_ids)

    def model_stats(self, arch: str) -> np.ndarray:
        """What the ``arch`` model reads next to the message: depth changes [N] (small) or
        diffstats [N, 5] (release)."""
        if arch == "release":
            if self.diffstats is None:
                raise ValueError("these RewardInputs carry no diffstats for the release architecture")
            return self.diffstats
        return self.depth_change


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows of a 2-D uint8 array (compared as byte strings), inverse ids and counts."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    keys = rows.view(np.dtype((np.void, rows.shape[1]))).ravel()
    _, first, inverse, counts = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    return rows[first], inverse.reshape(-1).astype(np.int64), counts


def reward_inputs(dataset: ObservationDataset) -> RewardInputs:
    """Current messages (as ids of distinct messages), depth changes and diffstats of every sample."""
    table, ids, _ = _unique_rows(dataset.messages[:, 1])
    depth = STAT_INDEX["depth"]
    change = dataset.stats[:, 1, depth].astype(np.int64) - dataset.stats[:, 0, depth]
    return RewardInputs(table, ids, clip_depth_change(change).astype(np.float32), release_diffstats(dataset.stats))


MOTIF_READ_BLOCK = 65536  # pairs read from the memory map at once


def motif_reward_inputs(layout: MotifLayout) -> RewardInputs:
    """Samples of Motif's layout: pair ``k``'s members are samples ``2k`` and ``2k+1``, each its one
    observation's message (``L`` must be 1, as in Motif's reward training); there is no "before", so
    every stat change is 0. The memory-mapped messages are read block by block."""
    if layout.seq_len != 1:
        raise RewardTrainingError(
            f"{layout.directory}/data/message.npy holds {layout.seq_len} observations per pair member; reward "
            "training reads one (L = 1), as Motif's does (its reward model is built with seq_len 1)"
        )
    n = layout.num_pairs
    index: dict[bytes, int] = {}
    rows: list[np.ndarray] = []
    ids = np.empty(2 * n, dtype=np.int64)
    for start in range(0, n, MOTIF_READ_BLOCK):
        block = np.ascontiguousarray(layout.messages[start:start + MOTIF_READ_BLOCK, :, 0], dtype=np.uint8)
        flat = block.reshape(-1, block.shape[-1])
        table, inverse, _ = _unique_rows(flat)
        local = np.empty(len(table), dtype=np.int64)
        for i, row in enumerate(table):
            key = row.tobytes()
            if key not in index:
                index[key] = len(rows)
                rows.append(row)
            local[i] = index[key]
        ids[2 * start:2 * start + len(flat)] = local[inverse]
    table = np.stack(rows)
    # keep the table sorted as reward_inputs sorts it (by bytes), so equal data give equal ids
    order = np.argsort(table.view(np.dtype((np.void, table.shape[1]))).ravel(), kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    zeros = np.zeros(2 * n, dtype=np.float32)
    return RewardInputs(table[order], rank[ids], zeros, np.zeros((2 * n, 5), dtype=np.float32))


@dataclass
class UniqueInputs:
    """The distinct (message, model stats) inputs of a dataset and how often each occurs."""

    message_ids: np.ndarray  # int64 [K] ids into RewardInputs.table
    depth_change: np.ndarray  # float32 [K]
    counts: np.ndarray  # int64 [K]
    stats: np.ndarray | None = None  # what the model reads: [K] (small) or [K, 5] (release)


def unique_inputs(inputs: RewardInputs, arch: str = "small") -> UniqueInputs:
    """Distinct inputs of the ``arch`` model: (message, depth change) for the small model,
    (message, all five diffstats) for the release model."""
    stats = inputs.model_stats(arch)
    columns = stats.reshape(len(stats), -1).astype(np.float64)
    keys = np.concatenate([inputs.message_ids.astype(np.float64)[:, None], columns], axis=1)
    uniq, counts = np.unique(keys, axis=0, return_counts=True)
    model_stats = uniq[:, 1:].astype(np.float32)
    if stats.ndim == 1:
        model_stats = model_stats[:, 0]
    depth = model_stats if stats.ndim == 1 else model_stats[:, 0]
    return UniqueInputs(uniq[:, 0].astype(np.int64), depth.copy(), counts, model_stats)


# ----------------------------------------------------------------------------- loss

def soft_targets(labels: torch.Tensor) -> torch.Tensor:
    """Probability that the SECOND sample is better: 0 for code 0, 1 for code 1, 0.5 for ties."""
    targets = torch.full(labels.shape, 0.5, dtype=torch.float32, device=labels.device)
    targets[labels == FIRST] = 0.0
    targets[labels == SECOND] = 1.0
    return targets


def bradley_terry_loss(r_first: torch.Tensor, r_second: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy between the soft labels and ``softmax([r_first, r_second])``.

    ``labels`` are preference codes 0/1/2 (unknowns must be removed before)."""
    if (labels == UNKNOWN).any():
        raise ValueError("bradley_terry_loss: unknown (code 3) pairs must be excluded first")
    return F.binary_cross_entropy_with_logits(r_second - r_first, soft_targets(labels))


def pair_accuracy_counts(r_first: torch.Tensor, r_second: torch.Tensor, labels: torch.Tensor) -> tuple[int, int]:
    """(correct, total) over non-tie pairs: the preferred sample must get the higher reward."""
    decided = (labels == FIRST) | (labels == SECOND)
    if not bool(decided.any()):
        return 0, 0
    pred_second = r_second[decided] > r_first[decided]
    correct = pred_second == (labels[decided] == SECOND)
    return int(correct.sum()), int(decided.sum())


def split_pairs(num_pairs: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train and validation pair indices (sorted), fixed by ``seed``; independent of the labels."""
    if not 0.0 <= val_fraction < 1.0:
        raise RewardTrainingError(f"val_fraction must be in [0, 1), got {val_fraction}")
    perm = np.random.default_rng(seed).permutation(num_pairs)
    n_val = int(round(num_pairs * val_fraction))
    if val_fraction > 0 and n_val == 0 and num_pairs >= 2:
        n_val = 1
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


# ----------------------------------------------------------------------------- scoring helpers

def _pair_rewards(
    model: RewardModel, table: torch.Tensor, ids: torch.Tensor, stats: torch.Tensor
) -> torch.Tensor:
    """Rewards of samples given by message ids and model stats: each distinct id is encoded once."""
    uniq, inverse = torch.unique(ids, return_inverse=True)
    features = model.encode_messages(table[uniq])
    return model.head(features[inverse], stats)


def _sample_index(pairs: torch.Tensor) -> torch.Tensor:
    return torch.stack([2 * pairs, 2 * pairs + 1], dim=1).reshape(-1)


@torch.no_grad()
def evaluate_pairs(
    model: RewardModel,
    table: torch.Tensor,
    ids: torch.Tensor,
    depth: torch.Tensor,
    labels: torch.Tensor,
    pairs: torch.Tensor,
) -> tuple[float, float, int]:
    """(mean loss, accuracy on non-tie pairs, non-tie count) over ``pairs`` in eval mode."""
    if len(pairs) == 0:
        return float("nan"), float("nan"), 0
    was_training = model.training
    model.eval()
    loss_sum, correct, decided = 0.0, 0, 0
    for start in range(0, len(pairs), EVAL_BATCH_PAIRS):
        chunk = pairs[start:start + EVAL_BATCH_PAIRS]
        samples = _sample_index(chunk)
        r = _pair_rewards(model, table, ids[samples], depth[samples]).reshape(-1, 2)
        lab = labels[chunk]
        loss_sum += float(bradley_terry_loss(r[:, 0], r[:, 1], lab)) * len(chunk)
        c, n = pair_accuracy_counts(r[:, 0], r[:, 1], lab)
        correct += c
        decided += n
    model.train(was_training)
    return loss_sum / len(pairs), (correct / decided if decided else float("nan")), decided


@torch.no_grad()
def raw_rewards(
    model: RewardModel, table: torch.Tensor, ids: torch.Tensor, depth: torch.Tensor, batch: int = 8192
) -> np.ndarray:
    was_training = model.training
    model.eval()
    out = []
    for start in range(0, len(ids), batch):
        out.append(_pair_rewards(model, table, ids[start:start + batch], depth[start:start + batch]).float().cpu())
    model.train(was_training)
    return torch.cat(out).numpy() if out else np.zeros(0, dtype=np.float32)


def reward_statistics(rewards: np.ndarray) -> tuple[float, float, list[float]]:
    """Mean, variance and the normalized-reward quantiles 0.05..0.95 of raw rewards."""
    mean = float(np.mean(rewards))
    var = float(np.var(rewards))
    std = math.sqrt(var) if var > 1e-16 else 1.0
    normalized = (rewards - mean) / std
    return mean, var, [float(v) for v in np.quantile(normalized, QUANTILES)]


# ----------------------------------------------------------------------------- files

def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    def write(tmp: Path) -> None:
        with tmp.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows(rows)
    atomic_write(path, write)


def _read_csv_rows(path: Path) -> list[list[str]]:
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        rows = [row for row in csv.reader(fh) if row]
    return rows[1:]


def quantile_header() -> list[str]:
    return [f"{q:.2f}" for q in QUANTILES]


def _fmt(value: float) -> str:
    return "nan" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.6g}"


def plot_curves(metrics_csv: Path, out_png: Path) -> None:
    """Loss and accuracy (train/val) against iterations, from the metrics CSV."""
    import matplotlib  # lazy: the plot only; matplotlib takes a second to import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: after matplotlib.use("Agg") picks the backend

    rows = _read_csv_rows(metrics_csv)
    if not rows:
        return
    plotted = METRICS_HEADER.index("val_acc") + 1  # the counts after it are not curves
    data = np.array([[float(v) for v in row[:plotted]] for row in rows], dtype=np.float64)
    last = rows[-1][plotted] if len(rows[-1]) > plotted and rows[-1][plotted] else None
    validation = f"validation ({pair_count(None if last is None else int(last))})"
    it = data[:, 1]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, cols, title in ((axes[0], (2, 4), "Bradley-Terry loss"), (axes[1], (3, 5), "accuracy (non-tie pairs)")):
        ax.plot(it, data[:, cols[0]], marker="o", label="train")
        ax.plot(it, data[:, cols[1]], marker="s", label=validation)
        ax.set_xlabel("iteration")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    atomic_write(out_png, lambda tmp: fig.savefig(tmp, format="png", dpi=90))
    plt.close(fig)


# ----------------------------------------------------------------------------- batches

def _effective_workers(requested: int, num_batches: int) -> int:
    cores = os.cpu_count() or 1
    return max(0, min(int(requested), cores, num_batches))


def _iterate_batches(
    make: Callable[[np.ndarray], Any], batches: list[np.ndarray], workers: int
) -> Iterator[Any]:
    """Prepared batches in order; with ``workers`` > 0 they are prepared ahead in threads."""
    if workers <= 0:
        for b in batches:
            yield make(b)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reward-data") as pool:
        pending: deque = deque()
        it = iter(batches)
        for b in it:
            pending.append(pool.submit(make, b))
            if len(pending) >= 2 * workers:
                break
        for b in it:
            yield pending.popleft().result()
            pending.append(pool.submit(make, b))
        while pending:
            yield pending.popleft().result()


# ----------------------------------------------------------------------------- training

@dataclass
class TrainingData:
    """What a run trains on: the inputs of every sample, the labels of every pair, and where they came from."""

    source: Path  # the dataset file, or the Motif-layout folder
    num_pairs: int
    inputs: RewardInputs
    pref_path: Path
    labels: np.ndarray
    layout: str  # "observations" | "motif"


def _load_inputs(cfg: RewardTrainingConfig) -> TrainingData:
    pref_path = cfg.preference_path
    if cfg.motif_layout:
        try:
            # every array Motif's reward training loads must be there and agree, though only the messages are read
            layout = open_motif_layout(cfg.dataset_dir)
            labels = load_motif_preferences(cfg.dataset_dir, cfg.annotator or cfg.experiment, layout.num_pairs)
        except MotifLayoutError as exc:
            raise RewardTrainingError(f"--dataset_dir {cfg.dataset_dir}: {exc}") from exc
        return TrainingData(Path(cfg.dataset_dir), layout.num_pairs, motif_reward_inputs(layout), pref_path, labels,
                            "motif")
    dataset_path = Path(cfg.dataset_path) if cfg.dataset_path else find_dataset(cfg.dataset_dir, cfg.resolved_skill)
    dataset = load_dataset(dataset_path)
    if len(dataset) % 2:
        logger.warning("%s has an odd number of samples (%d); the last one is not part of a pair",
                       dataset_path, len(dataset))
    try:
        labels = load_preferences(pref_path, dataset.num_pairs)
    except PreferenceError as exc:
        raise RewardTrainingError(f"{exc} [dataset {dataset_path}: {len(dataset)} samples = "
                                  f"{dataset.num_pairs} pairs]") from exc
    return TrainingData(dataset_path, dataset.num_pairs, reward_inputs(dataset), pref_path, labels, "observations")


def preference_meta(pref_path: str | Path, layout: str = "observations",
                    source: str | Path | None = None) -> tuple[dict[str, Any], Path] | None:
    """The annotation metadata of a preference file (who labelled its pairs: ``backend``, ``model``,
    ``stand_in``, ``stand_in_share``, ``sources``) and where it was read; None when there is none readable.

    It sits beside the labels (``{stem}.meta.json``), or, for the Motif layout, in the dataset folder's
    ``annotation_state/``."""
    import json

    pref_path = Path(pref_path)
    candidates = [pref_path.with_name(pref_path.stem + ".meta.json")]
    if layout == "motif" and source is not None:
        candidates.insert(0, Path(source) / "annotation_state" / (pref_path.stem + ".meta.json"))
    for meta_path in candidates:
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict):
            return meta, meta_path
    return None


def reward_labels_meta(reward_dir: str | Path) -> dict[str, Any] | None:
    """The annotation metadata (:func:`preference_meta`) of the labels a trained reward model was distilled
    from: its newest checkpoint names its preference file. None when the checkpoint or the metadata cannot
    be read (an older run, files moved)."""
    ckpt = latest_checkpoint(Path(reward_dir) / CHECKPOINT_DIRNAME)
    if ckpt is None:
        return None
    try:
        state = load_checkpoint(ckpt)
    except (RewardCheckpointError, OSError):
        return None
    if not state.get("preferences"):
        return None
    found = preference_meta(state["preferences"], str(state.get("layout", "observations")), state.get("dataset"))
    return found[0] if found else None


def _stand_in_note(pref_path: Path, data: "TrainingData") -> str:
    """A warning when the preferences came from a rule-based stand-in (the annotation metadata says so)."""
    found = preference_meta(pref_path, data.layout, data.source)
    if found is None or not found[0].get("stand_in"):
        return ""
    meta, meta_path = found
    share = float(meta.get("stand_in_share", 1.0))
    stand_ins = sorted({src["backend"] for src in meta.get("sources", []) if src.get("stand_in")}) or [
        meta.get("backend")]
    if share >= 1.0:
        return (f"{pref_path} holds labels of the {', '.join(map(str, stand_ins))} backend, a stand-in for "
                f"the LLM (see {meta_path}): this reward model is not distilled from an LLM")
    return (f"{100 * share:.1f}% of the labels in {pref_path} came from the {', '.join(map(str, stand_ins))} "
            f"backend, a stand-in for the LLM (see {meta_path}, 'sources', for which pairs): this reward "
            "model is only partly distilled from an LLM")


def _newest_readable(existing: list[tuple[int, Path]], device: Any, unreadable: set[Path]) -> tuple[Path, dict[str, Any]]:
    """The newest checkpoint that loads: a damaged newer one (a save cut short, a full disk) is
    skipped with a warning naming it and left in place; none readable is an error naming them all
    (training never starts over from zero on its own)."""
    skipped = []
    for _, path in reversed(existing):
        try:
            state = load_checkpoint(path, device)
            if skipped:
                logger.warning("resuming from %s, the newest readable checkpoint", path)
            return path, state
        except RewardCheckpointError as exc:
            logger.warning("skipping unreadable checkpoint (left in place): %s", exc)
            skipped.append(str(path))
            unreadable.add(path)
    raise RewardTrainingError(
        f"cannot resume: none of the {len(skipped)} checkpoint(s) can be read ({', '.join(skipped)}); move them "
        "away to train this reward model from the start, or use another --experiment")


def _check_resume(state: dict[str, Any], cfg: RewardTrainingConfig, skill: str, ckpt: Path) -> None:
    problems = []
    if state.get("skill") != skill:
        problems.append(f"skill {state.get('skill')!r} (now {skill!r})")
    for key, now in (("batch_size", cfg.batch_size), ("seed", cfg.seed), ("val_fraction", cfg.val_fraction)):
        if key in state and state[key] != now:
            problems.append(f"{key} {state[key]!r} (now {now!r})")
    if problems:
        raise RewardTrainingError(
            f"cannot resume from {ckpt}: it was trained with {', '.join(problems)}; use the same settings, "
            f"another --experiment name, or remove {ckpt.parent}"
        )


def train_reward(cfg: RewardTrainingConfig) -> dict[str, Any]:
    """Trains (or resumes, or confirms finished) one skill reward model; returns the final metrics:
    ``train_acc`` (full training split, eval mode), ``val_acc``, ``train_loss``, ``val_loss``,
    ``val_pairs`` (validation pairs with a decided label), ``num_iters``, ``checkpoint`` (path),
    ``reward_mean``, ``reward_std``, ``already_finished``, counts, and the time this call spent
    preparing batches, computing and saving (``data_seconds``, ``compute_seconds``, ``save_seconds``)."""
    skill = cfg.resolved_skill
    if cfg.batch_size < 1:
        raise RewardTrainingError(f"batch size must be >= 1, got {cfg.batch_size}")
    if cfg.num_epochs < 1:
        raise RewardTrainingError(f"num_epochs must be >= 1, got {cfg.num_epochs}")
    if cfg.keep_checkpoints < 1:
        raise RewardTrainingError(f"keep_checkpoints must be >= 1, got {cfg.keep_checkpoints}")
    data = _load_inputs(cfg)
    dataset_path, pref_path, labels, num_pairs = data.source, data.pref_path, data.labels, data.num_pairs
    counts = label_counts(labels)
    logger.info("dataset %s (%s layout): %d samples, %d pairs; preferences %s: first %d, second %d, tie %d, "
                "unknown %d (unknown pairs excluded)", dataset_path, data.layout, data.inputs.num_samples, num_pairs,
                pref_path, counts["first"], counts["second"], counts["tie"], counts["unknown"])
    note = _stand_in_note(pref_path, data)
    if note:
        logger.warning("%s", note)

    train_idx, val_idx = split_pairs(num_pairs, cfg.val_fraction, cfg.seed)
    train_idx = train_idx[labels[train_idx] != UNKNOWN]
    val_idx = val_idx[labels[val_idx] != UNKNOWN]
    if len(train_idx) == 0:
        raise RewardTrainingError(
            f"no training pairs left: {pref_path} has {counts['unknown']} unknown labels out of {len(labels)} "
            f"pairs (dataset {dataset_path}, {num_pairs} pairs); annotate the dataset first"
        )
    if cfg.batch_size > len(train_idx):
        raise RewardTrainingError(
            f"batch size {cfg.batch_size} is larger than the {len(train_idx)} training pairs "
            f"(dataset {dataset_path}: {num_pairs} pairs, {counts['unknown']} unknown in {pref_path}, "
            f"validation fraction {cfg.val_fraction}); lower --batch_size"
        )
    iters_per_epoch = math.ceil(len(train_idx) / cfg.batch_size)
    total_iters = iters_per_epoch * cfg.num_epochs

    run_dir = cfg.run_dir
    ckpt_dir = run_dir / CHECKPOINT_DIRNAME
    metrics_dir = run_dir / METRICS_DIRNAME
    device = resolve_device(cfg.device)

    torch.manual_seed(cfg.seed)
    existing = list_checkpoints(ckpt_dir)
    state: dict[str, Any] | None = None
    unreadable: set[Path] = set()
    if existing:
        ckpt, state = _newest_readable(existing, device, unreadable)
        _check_resume(state, cfg, skill, ckpt)
        tot_done = int(state["tot_num_iter"])
        if tot_done >= total_iters:
            logger.info("%s: already finished (%d iterations >= %d = %d epochs x %d); nothing to do",
                        ckpt, tot_done, total_iters, cfg.num_epochs, iters_per_epoch)
            result = dict(state.get("final_metrics") or {})
            result.update(checkpoint=str(ckpt), num_iters=tot_done, already_finished=True)
            return result
        model = model_from_checkpoint(state, device)
        if model.config.arch != cfg.model.arch:
            logger.warning("%s holds a %r reward model; resuming it as %r (not %r as asked). To train a %r model, "
                           "use another --experiment", ckpt, model.config.arch, model.config.arch, cfg.model.arch,
                           cfg.model.arch)
        elif model.config != cfg.model:
            differ = [f"{name} {getattr(model.config, name)!r} (now {getattr(cfg.model, name)!r})"
                      for name in cfg.asked_sizes if getattr(model.config, name) != getattr(cfg.model, name)]
            if differ:
                raise RewardTrainingError(
                    f"cannot resume from {ckpt}: its model was built with {', '.join(differ)}; drop the flag (the "
                    "checkpoint's sizes are kept), or train the new sizes into another --experiment")
            logger.info("resuming with the checkpoint's model config %s", model.config)
        logger.info("resuming from %s at iteration %d of %d", ckpt, tot_done, total_iters)
    else:
        model = build_reward_model(cfg.model).to(device)
        tot_done = 0
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.reward_lr)
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
        for group in optimizer.param_groups:
            group["lr"] = cfg.reward_lr

    # on resume, forget CSV rows written after the checkpoint we resume from
    metrics_rows = _read_csv_rows(metrics_dir / METRICS_CSV)
    quantile_rows = _read_csv_rows(metrics_dir / QUANTILES_CSV)
    if state is not None:
        metrics_rows = metrics_rows[: int(state.get("metrics_rows", len(metrics_rows)))]
        quantile_rows = quantile_rows[: int(state.get("quantile_rows", len(quantile_rows)))]
        # rows of a file written before the val_pairs column: an empty (unknown) count
        metrics_rows = [row + [""] * (len(METRICS_HEADER) - len(row)) for row in metrics_rows]
    else:
        metrics_rows, quantile_rows = [], []

    arch = model.config.arch
    inputs = data.inputs
    uniq = unique_inputs(inputs, arch)
    table = torch.from_numpy(inputs.table).to(device)
    ids = torch.from_numpy(inputs.message_ids).to(device)
    depth = torch.from_numpy(np.ascontiguousarray(inputs.model_stats(arch))).to(device)  # [N] or [N, 5]
    labels_t = torch.from_numpy(labels.astype(np.int64)).to(device)
    train_t = torch.from_numpy(train_idx.astype(np.int64)).to(device)
    val_t = torch.from_numpy(val_idx.astype(np.int64)).to(device)
    uniq_ids = torch.from_numpy(uniq.message_ids).to(device)
    uniq_depth = torch.from_numpy(np.ascontiguousarray(uniq.stats)).to(device)
    logger.info("%s reward model (%d parameters); %d training pairs, %d validation pairs (%d non-tie); "
                "%d distinct messages, %d distinct (message, %s) inputs; %d iterations per epoch, device %s",
                arch, sum(p.numel() for p in model.parameters()), len(train_idx), len(val_idx),
                int(((labels[val_idx] == FIRST) | (labels[val_idx] == SECOND)).sum()), len(inputs.table),
                len(uniq.message_ids), {"release": "diffstats", "motif": "nothing else"}.get(arch, "depth change"),
                iters_per_epoch, device)
    val_decided_pairs = int(((labels[val_idx] == FIRST) | (labels[val_idx] == SECOND)).sum())
    if val_decided_pairs < MIN_VALIDATION_PAIRS:
        logger.warning("only %d validation pairs with a decided label (fewer than %d): the validation accuracy "
                       "will say little about the model; more pairs or a larger --val_fraction give a readable one",
                       val_decided_pairs, MIN_VALIDATION_PAIRS)
    workers = _effective_workers(cfg.num_workers, iters_per_epoch)
    logger.info("data loading: %d prefetch thread(s) (asked for %d; capped by %d cores and %d batches per epoch)",
                workers, cfg.num_workers, os.cpu_count() or 1, iters_per_epoch)

    def make_batch(pairs_np: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        pairs = torch.from_numpy(pairs_np).to(device)
        samples = _sample_index(pairs)
        u, inv = torch.unique(ids[samples], return_inverse=True)
        return table[u], inv, depth[samples], labels_t[pairs], pairs

    last_ckpt: Path | None = Path(existing[-1][1]) if existing else None
    seg = {"loss": 0.0, "pairs": 0, "correct": 0, "decided": 0}
    final: dict[str, Any] = {}
    last_plot = [time.monotonic()]

    def save(epoch_progress: float, finished: bool) -> Path:
        nonlocal last_ckpt, final
        val_loss, val_acc, val_decided = evaluate_pairs(model, table, ids, depth, labels_t, val_t)
        train_loss = seg["loss"] / seg["pairs"] if seg["pairs"] else float("nan")
        train_acc = seg["correct"] / seg["decided"] if seg["decided"] else float("nan")
        metrics_rows.append([f"{epoch_progress:.4f}", str(tot_done), _fmt(train_loss), _fmt(train_acc),
                             _fmt(val_loss), _fmt(val_acc), str(val_decided)])
        rewards = raw_rewards(model, table, uniq_ids, uniq_depth)
        mean, var, qvals = reward_statistics(rewards)
        bad = [name for name, t in model.state_dict().items() if t.is_floating_point() and not torch.isfinite(t).all()]
        if bad or not all(math.isfinite(v) for v in [mean, var] + list(qvals)):
            # a diverged model (a learning rate too large): never saved, the last good checkpoint stays the newest
            raise RewardTrainingError(
                f"training diverged at iteration {tot_done}: "
                + (f"non-finite weights ({', '.join(bad[:3])})" if bad else "non-finite rewards or quantiles")
                + f"; nothing saved ({'the newest checkpoint is ' + str(last_ckpt) if last_ckpt else 'no checkpoint'})"
                f"; lower --reward_lr (now {cfg.reward_lr:g})")
        quantile_rows.append([f"{v:.6f}" for v in qvals])
        _write_csv(metrics_dir / METRICS_CSV, list(METRICS_HEADER), metrics_rows)
        _write_csv(metrics_dir / QUANTILES_CSV, quantile_header(), quantile_rows)
        if finished or time.monotonic() - last_plot[0] >= PLOT_INTERVAL_S:
            try:
                plot_curves(metrics_dir / METRICS_CSV, metrics_dir / CURVES_PNG)
            except Exception as exc:  # a plotting problem must not lose the checkpoint
                logger.warning("could not draw %s: %s", metrics_dir / CURVES_PNG, exc)
            last_plot[0] = time.monotonic()
        final = {
            "train_loss": train_loss, "train_acc": train_acc, "val_loss": val_loss, "val_acc": val_acc,
            "val_pairs": val_decided, "num_iters": tot_done, "reward_mean": mean, "reward_std": math.sqrt(var),
            "train_pairs": len(train_idx), "unknown_excluded": counts["unknown"], "skill": skill,
            "annotator": pref_path.stem,
        }
        if finished:
            full_loss, full_acc, _ = evaluate_pairs(model, table, ids, depth, labels_t, train_t)
            final.update(train_loss=full_loss, train_acc=full_acc)
        payload = {
            "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "reward_mean": mean, "reward_var": var, "tot_num_iter": tot_done,
            "model_config": model.config.to_dict(), "skill": skill, "skill_index": SKILL_INDEX.get(skill, -1),
            "layout": data.layout, "annotator": pref_path.stem,
            "seed": cfg.seed, "batch_size": cfg.batch_size, "val_fraction": cfg.val_fraction,
            "num_epochs": cfg.num_epochs, "reward_lr": cfg.reward_lr, "experiment": cfg.experiment,
            "dataset": str(dataset_path), "preferences": str(pref_path),
            "quantiles": {f"{q:.2f}": v for q, v in zip(QUANTILES, qvals)},
            "metrics_rows": len(metrics_rows), "quantile_rows": len(quantile_rows),
            "finished": finished, "final_metrics": final,
        }
        path = ckpt_dir / f"checkpoint_{tot_done:09d}.pth"
        if path in unreadable:
            # the resumed run reached the iteration of a file skipped as unreadable: keep its bytes aside
            kept = path.with_name(path.name + ".unreadable")
            os.replace(path, kept)
            unreadable.discard(path)
            logger.warning("kept the unreadable %s as %s before saving iteration %d", path, kept, tot_done)
        payload = plain_numbers(payload)  # torch's safe loader refuses numpy scalars
        atomic_write(path, lambda tmp: torch.save(payload, tmp))
        # rotation never removes a checkpoint skipped as unreadable at resume
        readable = [p for _, p in list_checkpoints(ckpt_dir) if p not in unreadable]
        for old in readable[: -cfg.keep_checkpoints]:
            old.unlink(missing_ok=True)
        last_ckpt = path
        logger.info("iteration %d (epoch %.2f): train loss %.4f acc %.3f | val loss %.4f acc %.3f (%d pairs) | "
                    "reward mean %.4f std %.4f | saved %s", tot_done, epoch_progress, train_loss, train_acc,
                    val_loss, val_acc, val_decided, mean, math.sqrt(var), path)
        seg.update(loss=0.0, pairs=0, correct=0, decided=0)
        return path

    model.train()
    start_epoch = tot_done // iters_per_epoch
    timing = {"data_seconds": 0.0, "compute_seconds": 0.0, "save_seconds": 0.0, "trained_pairs": 0}
    bar = tqdm(total=total_iters, initial=tot_done, desc=f"reward {skill or pref_path.stem}", unit="it",
               disable=not cfg.progress)
    for epoch in range(start_epoch, cfg.num_epochs):
        perm = np.random.default_rng([cfg.seed, epoch]).permutation(train_idx)
        batches = [perm[i:i + cfg.batch_size] for i in range(0, len(perm), cfg.batch_size)]
        skip = tot_done - epoch * iters_per_epoch
        batches = batches[skip:]
        data_time = compute_time = 0.0
        t_mark = time.perf_counter()
        for msgs, inv, dch, lab, _ in _iterate_batches(make_batch, batches, workers):
            t_data = time.perf_counter()
            data_time += t_data - t_mark
            features = model.encode_messages(msgs)
            r = model.head(features[inv], dch).reshape(-1, 2)
            loss = bradley_terry_loss(r[:, 0], r[:, 1], lab)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            c, n = pair_accuracy_counts(r[:, 0].detach(), r[:, 1].detach(), lab)
            seg["loss"] += float(loss.detach()) * len(lab)
            seg["pairs"] += len(lab)
            seg["correct"] += c
            seg["decided"] += n
            tot_done += 1
            bar.update(1)
            t_mark = time.perf_counter()
            compute_time += t_mark - t_data
            end_of_epoch = tot_done % iters_per_epoch == 0
            if cfg.save_every > 0 and tot_done % cfg.save_every == 0 and not end_of_epoch:
                save(tot_done / iters_per_epoch, finished=False)
                timing["save_seconds"] += time.perf_counter() - t_mark
                t_mark = time.perf_counter()
        total = data_time + compute_time
        logger.info("epoch %d/%d: %.1fs (data %.1f%%, compute %.1f%%), %.0f pairs/s", epoch + 1, cfg.num_epochs,
                    total, 100 * data_time / max(total, 1e-9), 100 * compute_time / max(total, 1e-9),
                    sum(len(b) for b in batches) / max(total, 1e-9))
        timing["data_seconds"] += data_time
        timing["compute_seconds"] += compute_time
        timing["trained_pairs"] += sum(len(b) for b in batches)
        t_save = time.perf_counter()
        save(tot_done / iters_per_epoch, finished=tot_done >= total_iters)
        timing["save_seconds"] += time.perf_counter() - t_save
    bar.close()
    result = dict(final)
    result.update(checkpoint=str(last_ckpt), num_iters=tot_done, already_finished=False, **timing)
    return result


# ----------------------------------------------------------------------------- inspection

@dataclass
class ScoredInput:
    message: str
    depth_change: float
    count: int
    reward: float  # normalized


def score_dataset_inputs(loaded: LoadedSkillReward, dataset: ObservationDataset) -> list[ScoredInput]:
    """Every distinct (current message, depth change) of a dataset with its normalized reward,
    best first."""
    inputs = reward_inputs(dataset)
    uniq = unique_inputs(inputs)
    scores: list[np.ndarray] = []
    for start in range(0, len(uniq.message_ids), 8192):
        sl = slice(start, start + 8192)
        scores.append(loaded.score(inputs.table[uniq.message_ids[sl]], uniq.depth_change[sl]))
    values = np.concatenate(scores) if scores else np.zeros(0, dtype=np.float32)
    order = np.argsort(-values, kind="stable")
    return [
        ScoredInput(decode_message(inputs.table[uniq.message_ids[i]]), float(uniq.depth_change[i]),
                    int(uniq.counts[i]), float(values[i]))
        for i in order
    ]


__all__ = [
    "QUANTILES",
    "RewardInputs",
    "RewardTrainingConfig",
    "RewardTrainingError",
    "ScoredInput",
    "bradley_terry_loss",
    "evaluate_pairs",
    "pair_accuracy_counts",
    "reward_inputs",
    "reward_statistics",
    "score_dataset_inputs",
    "soft_targets",
    "split_pairs",
    "train_reward",
    "unique_inputs",
    "DatasetError",
]
