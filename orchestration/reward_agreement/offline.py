"""The offline side: the reward model's validation split recomputed from the dataset, preference
file, seed and validation fraction saved in its checkpoint (:func:`offline_split`), or the
``val_acc`` of its ``metrics.csv`` when those files cannot be read (:func:`metrics_val_acc`), and
the agreement section written for it (:func:`offline_section`)."""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from rlaif.dataset import DatasetError, ObservationDataset, load_dataset
from rlaif.preferences import PreferenceError, label_counts, label_shares, load_preferences

from .scoring import _mean, agreement_stats, pair_scores

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class OfflineSplit:
    """The reward model's validation pairs, from the files its training read."""

    dataset: ObservationDataset  # the validation pairs only (pair k = samples 2k, 2k+1)
    labels: np.ndarray  # the training annotator's labels of those pairs (unknowns included)
    dataset_path: Path
    preference_path: Path
    seed: int
    val_fraction: float


def _resolve(path_text: str) -> Optional[Path]:
    """A path saved in a checkpoint: as written (relative to this directory) or to the repository."""
    path = Path(path_text)
    for candidate in (path, REPO_ROOT / path):
        if candidate.is_file():
            return candidate
    return None


def offline_split(checkpoint_path: Path) -> tuple[Optional[OfflineSplit], str]:
    """The validation split of the reward model's training data, or None and the reason."""
    from rlaif.reward_model import RewardCheckpointError, load_checkpoint  # lazy: pulls in torch
    from rlaif.train_reward import RewardTrainingError, split_pairs  # lazy: pulls in torch

    try:
        state = load_checkpoint(checkpoint_path)
    except (OSError, RewardCheckpointError) as exc:
        return None, f"cannot read {checkpoint_path}: {exc}"
    missing = [k for k in ("dataset", "preferences", "seed", "val_fraction") if k not in state]
    if missing:
        return None, f"{checkpoint_path} does not record its training data ({', '.join(missing)} missing)"
    dataset_path, pref_path = _resolve(str(state["dataset"])), _resolve(str(state["preferences"]))
    if dataset_path is None or pref_path is None:
        gone = state["dataset"] if dataset_path is None else state["preferences"]
        return None, f"the training data recorded in {checkpoint_path} is not reachable: {gone}"
    try:
        dataset = load_dataset(dataset_path)
        labels = load_preferences(pref_path, dataset.num_pairs)
        _, val_idx = split_pairs(dataset.num_pairs, float(state["val_fraction"]), int(state["seed"]))
    except (DatasetError, PreferenceError, RewardTrainingError) as exc:
        return None, f"the training data recorded in {checkpoint_path} cannot be used: {exc}"
    if len(val_idx) == 0:
        return None, f"{checkpoint_path} was trained without a validation split (val_fraction {state['val_fraction']})"
    samples = np.stack([2 * val_idx, 2 * val_idx + 1], axis=1).reshape(-1)
    val = ObservationDataset(dataset.messages[samples], dataset.stats[samples], {"source": str(dataset_path)})
    return OfflineSplit(val, labels[val_idx], dataset_path, pref_path, int(state["seed"]),
                        float(state["val_fraction"])), ""


def _last_metrics_value(reward_dir: Path, column: str) -> Optional[float]:
    """``column`` of the last row of ``{reward_dir}/reward_metrics/metrics.csv`` (None if absent)."""
    from rlaif.reward_model import METRICS_DIRNAME  # lazy: pulls in torch

    path = reward_dir / METRICS_DIRNAME / "metrics.csv"
    if not path.is_file():
        return None
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows or column not in rows[-1]:
        return None
    try:
        return float(rows[-1][column])
    except (TypeError, ValueError):
        return None


def metrics_val_acc(reward_dir: Path) -> Optional[float]:
    """``val_acc`` of the last row of ``{reward_dir}/reward_metrics/metrics.csv`` (None if absent)."""
    return _last_metrics_value(reward_dir, "val_acc")


def metrics_val_pairs(reward_dir: Path) -> Optional[int]:
    """The validation pairs behind :func:`metrics_val_acc` (None for a file written without the count)."""
    pairs = _last_metrics_value(reward_dir, "val_pairs")
    return None if pairs is None or pairs != pairs else int(pairs)


def offline_section(reward: Any, reward_dir: Path, split: Optional[OfflineSplit], reason: str) -> dict[str, Any]:
    """Agreement, label shares and mean score on the offline validation split (or the
    fallback, see the module docstring)."""
    if split is not None:
        first, second = pair_scores(reward, split.dataset)
        stats = agreement_stats(first, second, split.labels)
        return {
            "source": "validation_split",
            "note": (f"the reward model's validation split recomputed from its training data (split_pairs, seed "
                     f"{split.seed}, val_fraction {split.val_fraction}), labels of the training annotator"),
            "dataset": str(split.dataset_path),
            "preferences": str(split.preference_path),
            "annotator": split.preference_path.stem,
            **stats.to_dict(),
            "label_counts": label_counts(split.labels),
            "label_shares": label_shares(split.labels),
            "mean_score": _mean(np.concatenate([first, second])),
        }
    val_acc = metrics_val_acc(reward_dir)
    path = reward_dir / "reward_metrics" / "metrics.csv"
    if val_acc is None:
        return {"source": "unavailable", "note": f"{reason}; no val_acc in {path} either", "agreement": math.nan}
    return {"source": "metrics_csv", "note": f"{reason}; val_acc of the last row of {path} instead",
            "metrics_csv": str(path), "agreement": val_acc, "val_pairs": metrics_val_pairs(reward_dir)}
