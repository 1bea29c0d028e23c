"""Preference label files: ``preference/{annotator}.npy``, int32 [num_pairs].

Codes (the same as the released files): 0 first better, 1 second better,
2 tie / neither, 3 unknown (not yet annotated or no parseable answer).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from common.atomic_io import atomic_save_npy
from common.file_errors import load_npy
from common.vocabulary import SKILL_SET

FIRST, SECOND, TIE, UNKNOWN = 0, 1, 2, 3
LABEL_NAMES: dict[int, str] = {FIRST: "first", SECOND: "second", TIE: "tie", UNKNOWN: "unknown"}


class PreferenceError(ValueError):
    """A preference file is missing, malformed or does not match its dataset."""


#: what to do about a preference file that does not fit its dataset (said once, at the end of the error)
ANNOTATE_AGAIN = "Annotate the dataset again (python -m scripts.annotate_pairs ... --ignore_existing), or pick the " \
                 "dataset these labels belong to"


def validate_preferences(labels: np.ndarray, num_pairs: int | None = None, source: str = "preferences",
                         remedy: str = ANNOTATE_AGAIN) -> np.ndarray:
    """``labels`` as int32, checked: 1-D integers 0-3, ``num_pairs`` of them when given; else
    :class:`PreferenceError` naming ``source``, then ``remedy``."""
    labels = np.asarray(labels)
    problem = None
    if labels.ndim != 1:
        problem = f"expected a 1-D array of labels, got shape {labels.shape}"
    elif not np.issubdtype(labels.dtype, np.integer):
        problem = f"labels must be integers, got dtype {labels.dtype}"
    else:
        bad = (labels < FIRST) | (labels > UNKNOWN)
        if bad.any():
            problem = f"{int(bad.sum())} labels outside 0-3 (values {sorted(set(labels[bad].tolist()))[:10]})"
        elif num_pairs is not None and len(labels) != num_pairs:
            problem = f"has {len(labels)} labels but the dataset has {num_pairs} pairs"
    if problem:
        raise PreferenceError(f"{source}: {problem}" + (f". {remedy}" if remedy else ""))
    return labels.astype(np.int32, copy=False)


def load_preferences(path: str | os.PathLike, num_pairs: int | None = None) -> np.ndarray:
    path = Path(path)
    if not path.exists():
        raise PreferenceError(f"preference file not found: {path}")
    labels = load_npy(path, "preference file (.npy, one integer label 0-3 per pair)", ANNOTATE_AGAIN, PreferenceError)
    return validate_preferences(labels, num_pairs, str(path))


def save_preferences(path: str | os.PathLike, labels: np.ndarray, dtype: Any = np.int32) -> None:
    """Atomic write (temp file in the same folder + rename): a crash never leaves half a file.

    ``dtype``: int32 for this project's files, int8 for Motif's layout (what its annotation script writes)."""
    path = Path(path)
    labels = validate_preferences(labels, source=str(path), remedy="")
    atomic_save_npy(path, labels.astype(dtype, copy=False))


def label_counts(labels: np.ndarray) -> dict[str, int]:
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=4)
    return {LABEL_NAMES[i]: int(counts[i]) for i in range(4)}


#: Label shares (first, second, tie, unknown) of the authors' released preference files
#: (``preference/llama3_{skill}_default.npy``, Llama-3.1-70B), to compare a run against: each skill file's
#: ``[reward] release_label_shares``, for the skills that have a released file.
RELEASE_LABEL_SHARES: dict[str, tuple[float, float, float, float]] = {
    spec.name: spec.release_label_shares for spec in SKILL_SET.specs if spec.release_label_shares is not None
}
#: A tie + unknown share above this (and well above the release's) is worth a look.
UNDECIDED_WARNING = 0.30


def label_shares(labels: np.ndarray) -> dict[str, float]:
    """Share of each label (unknown = not yet annotated or no parseable answer)."""
    counts = label_counts(labels)
    total = sum(counts.values())
    return {name: (n / total if total else 0.0) for name, n in counts.items()}


def compare_with_release(skill: str, labels: np.ndarray) -> str:
    """One line: this run's label shares next to the release's, for ``skill``."""
    shares = label_shares(labels)
    ours = " ".join(f"{name} {shares[name]:.3f}" for name in LABEL_NAMES.values())
    ref = RELEASE_LABEL_SHARES.get(skill)
    if ref is None:
        return f"label shares: {ours}"
    theirs = " ".join(f"{name} {value:.3f}" for name, value in zip(LABEL_NAMES.values(), ref))
    return f"label shares: {ours} (authors' release for {skill}: {theirs})"
