"""Preference label files: ``preference/{annotator}.npy``, int32 [num_pairs].

Codes (the same as the released files): 0 first better, 1 second better,
2 tie / neither, 3 unknown (not yet annotated or no parseable answer).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

FIRST, SECOND, TIE, UNKNOWN = 0, 1, 2, 3
LABEL_NAMES: dict[int, str] = {FIRST: "first", SECOND: "second", TIE: "tie", UNKNOWN: "unknown"}


class PreferenceError(ValueError):
    """A preference file is missing, malformed or does not match its dataset."""


def validate_preferences(labels: np.ndarray, num_pairs: int | None = None, source: str = "preferences") -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise PreferenceError(f"{source}: expected a 1-D array of labels, got shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise PreferenceError(f"{source}: labels must be integers, got dtype {labels.dtype}")
    bad = (labels < FIRST) | (labels > UNKNOWN)
    if bad.any():
        values = sorted(set(labels[bad].tolist()))[:10]
        raise PreferenceError(f"{source}: {int(bad.sum())} labels outside 0-3 (values {values})")
    if num_pairs is not None and len(labels) != num_pairs:
        raise PreferenceError(
            f"{source}: has {len(labels)} labels but the dataset has {num_pairs} pairs; "
            "annotate this dataset again (or pick the matching dataset)"
        )
    return labels.astype(np.int32, copy=False)


def load_preferences(path: str | os.PathLike, num_pairs: int | None = None) -> np.ndarray:
    path = Path(path)
    if not path.exists():
        raise PreferenceError(f"preference file not found: {path}")
    try:
        labels = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise PreferenceError(f"{path}: cannot read preference file ({exc})") from exc
    return validate_preferences(labels, num_pairs, str(path))


def save_preferences(path: str | os.PathLike, labels: np.ndarray) -> None:
    """Atomic write (temp file in the same folder + rename): a crash never leaves half a file."""
    path = Path(path)
    labels = validate_preferences(labels, source=str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, labels)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def label_counts(labels: np.ndarray) -> dict[str, int]:
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=4)
    return {LABEL_NAMES[i]: int(counts[i]) for i in range(4)}
