"""Scoring and agreement: the reward model's scores of samples (:func:`score_samples`, training's
inputs: current message and one-step depth change), and :func:`agreement_stats`, the share of
decided pairs whose preferred sample the model scores higher (the reward training's validation
accuracy rule). ``_mean`` is shared with the sibling modules that summarise scores."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rlaif.dataset import STAT_INDEX, ObservationDataset
from rlaif.preferences import FIRST, SECOND

SCORE_BATCH = 4096


@dataclass
class AgreementStats:
    """Reward model vs annotator over a set of labelled pairs."""

    pairs: int
    decided: int  # pairs labelled first or second better
    agree: int
    agreement: float  # agree / decided (nan when nothing was decided)
    stderr: float  # binomial standard error of the agreement
    model_ties: int  # decided pairs the reward model scores equally (counted as "first")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def agreement_stats(score_first: np.ndarray, score_second: np.ndarray, labels: np.ndarray) -> AgreementStats:
    """Share of decided pairs (labels 0/1) whose preferred sample the model scores higher.

    The reward training's validation accuracy rule
    (:func:`rlaif.train_reward.pair_accuracy_counts`): the model prefers the second sample
    when its score is strictly higher; ties and unknowns (labels 2/3) are not counted."""
    import torch  # lazy: only to score; the package imports without torch

    from rlaif.train_reward import pair_accuracy_counts  # lazy: pulls in torch

    labels = np.asarray(labels, dtype=np.int64)
    first = np.asarray(score_first, dtype=np.float64)
    second = np.asarray(score_second, dtype=np.float64)
    if not (len(first) == len(second) == len(labels)):
        raise ValueError(f"{len(first)} first scores, {len(second)} second scores and {len(labels)} labels")
    agree, decided = pair_accuracy_counts(torch.from_numpy(first), torch.from_numpy(second), torch.from_numpy(labels))
    mask = (labels == FIRST) | (labels == SECOND)
    p = agree / decided if decided else math.nan
    stderr = math.sqrt(p * (1 - p) / decided) if decided else math.nan
    return AgreementStats(len(labels), decided, agree, p, stderr, int(np.count_nonzero(first[mask] == second[mask])))


def score_samples(reward: Any, messages: np.ndarray, depth_change: np.ndarray) -> np.ndarray:
    """Normalised reward-model scores of current messages [N, 256] with depth changes [N]."""
    from rlaif.reward_model import clip_depth_change  # lazy: pulls in torch

    depth = clip_depth_change(np.asarray(depth_change, dtype=np.float32).reshape(-1))
    out = [reward.score(messages[i:i + SCORE_BATCH], depth[i:i + SCORE_BATCH])
           for i in range(0, len(messages), SCORE_BATCH)]
    return np.concatenate(out).astype(np.float64) if out else np.zeros(0, dtype=np.float64)


def one_step_depth_change(stats: np.ndarray) -> np.ndarray:
    """Depth after minus depth before, per sample: what the reward model reads in training."""
    d = STAT_INDEX["depth"]
    return stats[:, 1, d].astype(np.int64) - stats[:, 0, d]


def pair_scores(reward: Any, dataset: ObservationDataset) -> tuple[np.ndarray, np.ndarray]:
    """Scores of the first and second sample of every pair of ``dataset`` (training's inputs)."""
    scores = score_samples(reward, dataset.messages[:, 1], one_step_depth_change(dataset.stats))
    n = 2 * dataset.num_pairs
    return scores[0:n:2], scores[1:n:2]


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if len(values) else math.nan
