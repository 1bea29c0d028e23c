"""Two annotators' labels of the same pairs, compared: label shares, agreement, the order bias of each, and, on
the pairs where exactly one moment changed the dungeon level, how often each picked that moment.

The level-change pairs are the ones whose answer the goal decides for the descender and the ascender (and that
the discoverer must reject), so they say more about an annotator than agreement over mostly-dull pairs does.
Used by ``scripts.compare_labels`` and ``bench.local_llm_annotation``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from rlaif.dataset import STAT_INDEX, ObservationDataset
from rlaif.preferences import FIRST, SECOND, UNKNOWN, label_shares

_DEPTH = STAT_INDEX["depth"]


def label_agreement(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """How often two annotators agree (e.g. the heuristic stand-in against an LLM).

    ``agreement``: equal labels among pairs both labelled 0-2; ``decisive_agreement``: the
    same, among pairs both called 0 or 1; ``compared``/``decisive``: those pair counts."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise ValueError(f"label arrays differ in shape: {a.shape} vs {b.shape}")
    known = (a != UNKNOWN) & (b != UNKNOWN)
    decisive = (a <= 1) & (b <= 1)
    same = a == b
    return {
        "compared": int(known.sum()),
        "agreement": float(same[known].mean()) if known.any() else float("nan"),
        "decisive": int(decisive.sum()),
        "decisive_agreement": float(same[decisive].mean()) if decisive.any() else float("nan"),
    }


def depth_changes(dataset: ObservationDataset) -> np.ndarray:
    """Per sample, the dungeon depth after the step minus before (positive: went down)."""
    return dataset.stats[:, 1, _DEPTH] - dataset.stats[:, 0, _DEPTH]


def level_change_picks(labels: np.ndarray, depth_change: np.ndarray, direction: int = 1) -> dict[str, float]:
    """On the pairs where exactly one moment changed the level in ``direction`` (1 down, -1 up): how many there
    are and the share labelled for that moment (ties and unknowns count as not picked)."""
    labels = np.asarray(labels)
    moved = np.sign(np.asarray(depth_change)) == direction
    first, second = moved[0::2], moved[1::2]
    if len(first) != len(labels):
        raise ValueError(f"{len(labels)} labels for {len(first)} pairs")
    one = first ^ second
    n = int(one.sum())
    if n == 0:
        return {"pairs": 0, "picked": float("nan")}
    picked = (first & (labels == FIRST)) | (second & (labels == SECOND))
    return {"pairs": n, "picked": float(picked[one].sum()) / n}


def first_share(labels: np.ndarray) -> float:
    """Among the pairs called for one moment, the share called for the first: 0.5 without an order bias."""
    labels = np.asarray(labels)
    decisive = (labels == FIRST) | (labels == SECOND)
    return float((labels[decisive] == FIRST).mean()) if decisive.any() else float("nan")


@dataclass
class LabelComparison:
    """Two annotators (``a``, ``b``) on the same pairs of one skill."""

    pairs: int
    shares_a: dict[str, float]
    shares_b: dict[str, float]
    agreement: dict[str, float]
    first_share_a: float
    first_share_b: float
    descents_a: dict[str, float]
    descents_b: dict[str, float]
    ascents_a: dict[str, float]
    ascents_b: dict[str, float]

    def as_dict(self) -> dict:
        return asdict(self)


def compare_labels(dataset: ObservationDataset, a: np.ndarray, b: np.ndarray) -> LabelComparison:
    """``a`` and ``b`` label the pairs (samples 2k, 2k+1) of ``dataset``; ValueError when the counts differ."""
    a, b = np.asarray(a), np.asarray(b)
    n = len(dataset.messages) // 2
    for name, labels in (("first", a), ("second", b)):
        if len(labels) != n:
            raise ValueError(f"the {name} labels hold {len(labels)} pairs, the dataset {n}")
    change = depth_changes(dataset)
    return LabelComparison(
        pairs=n, shares_a=label_shares(a), shares_b=label_shares(b), agreement=label_agreement(a, b),
        first_share_a=first_share(a), first_share_b=first_share(b),
        descents_a=level_change_picks(a, change, 1), descents_b=level_change_picks(b, change, 1),
        ascents_a=level_change_picks(a, change, -1), ascents_b=level_change_picks(b, change, -1),
    )
