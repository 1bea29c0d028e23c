"""Observation datasets: the contract between data collection, annotation and reward training.

File format (``og_dataset/{skill}.npz``, read with ``allow_pickle=False``):

* ``messages`` uint8 [N, 2, 256]: previous and current message, zero padded;
* ``stats`` int32 [N, 2, 6]: (depth, gold, hp, hpmax, xp level, hunger) before/after;
* ``meta``: a JSON string (source, seeds, character, policy, ...).

Samples ``2k`` and ``2k+1`` form pair ``k``. The authors' ``{skill}.pkl`` files (a list
of dicts with ``msg_strs`` and ``stats_list``) are read through a restricted unpickler
that only builds plain containers, strings, numbers and numpy arrays.
"""
from __future__ import annotations

import io
import json
import os
import pickle
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from common.atomic_io import atomic_write
from common.file_errors import check_array, load_npz, reading
from common.nethack.messages import MESSAGE_LEN, decode_message, encode_message

STAT_FIELDS: tuple[str, ...] = ("depth", "gold", "hp", "hpmax", "xp_level", "hunger")
STAT_INDEX: dict[str, int] = {name: i for i, name in enumerate(STAT_FIELDS)}
# NetHack's hunger states as NLE's blstats report them (0 = satiated, 1 = not hungry).
HUNGER_NAMES: tuple[str, ...] = ("satiated", "not hungry", "hungry", "weak", "fainting", "fainted", "starved")
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


class DatasetError(ValueError):
    """A dataset file is missing, malformed or unsafe."""


@dataclass
class ObservationDataset:
    messages: np.ndarray  # uint8 [N, 2, 256]
    stats: np.ndarray  # int32 [N, 2, 6]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.messages.ndim != 3 or self.messages.shape[1:] != (2, MESSAGE_LEN):
            raise DatasetError(f"messages must have shape [N, 2, {MESSAGE_LEN}], got {self.messages.shape}")
        if self.stats.ndim != 3 or self.stats.shape[1:] != (2, len(STAT_FIELDS)):
            raise DatasetError(f"stats must have shape [N, 2, {len(STAT_FIELDS)}], got {self.stats.shape}")
        if len(self.messages) != len(self.stats):
            raise DatasetError(f"messages ({len(self.messages)}) and stats ({len(self.stats)}) differ in length")
        self.messages = np.ascontiguousarray(self.messages, dtype=np.uint8)
        self.stats = np.ascontiguousarray(self.stats, dtype=np.int32)

    def __len__(self) -> int:
        return len(self.messages)

    @property
    def num_pairs(self) -> int:
        return len(self) // 2

    def message_text(self, index: int, which: int = 1) -> str:
        """Decoded message ``which`` (0 = previous, 1 = current) of sample ``index``."""
        return decode_message(self.messages[index, which])


def save_dataset(path: str | os.PathLike, dataset: ObservationDataset) -> None:
    """Writes the ``.npz`` atomically (temp file + rename), so a reader never sees half a file.

    The bytes depend only on the content (no timestamps), so equal datasets give equal files.
    """
    arrays = {
        "messages": dataset.messages,
        "stats": dataset.stats,
        "meta": np.array(json.dumps(dataset.meta, sort_keys=True)),
    }

    def write(tmp: Path) -> None:
        # Same content -> same bytes: zip entries get a fixed timestamp (np.savez stamps the clock).
        with zipfile.ZipFile(tmp, mode="w", compression=zipfile.ZIP_DEFLATED) as zf:
            for key, value in arrays.items():
                info = zipfile.ZipInfo(key + ".npy", date_time=_ZIP_EPOCH)
                info.compress_type = zipfile.ZIP_DEFLATED
                with zf.open(info, "w", force_zip64=True) as fid:
                    np.lib.format.write_array(fid, np.asanyarray(value), allow_pickle=False)

    path = atomic_write(path, write)


class _RestrictedUnpickler(pickle.Unpickler):
    """Builds only plain data: refuses every global except numpy's array reconstruction."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("builtins", "bytearray"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise DatasetError(
            f"refusing to unpickle {module}.{name}: dataset pickles may only contain plain "
            "containers, strings, numbers and numpy arrays"
        )


def restricted_pickle_load(data: bytes) -> Any:
    return _RestrictedUnpickler(io.BytesIO(data)).load()


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return decode_message(np.frombuffer(bytes(value), dtype=np.uint8))
    if isinstance(value, np.ndarray):
        return decode_message(value)
    raise DatasetError(f"message of unexpected type {type(value).__name__}")


def dataset_from_records(records: Sequence[dict], meta: dict | None = None) -> ObservationDataset:
    """Builds a dataset from the authors' list-of-dicts layout (``msg_strs``, ``stats_list``)."""
    if not isinstance(records, (list, tuple)):
        raise DatasetError(f"expected a list of samples, got {type(records).__name__}")
    n = len(records)
    messages = np.zeros((n, 2, MESSAGE_LEN), dtype=np.uint8)
    stats = np.zeros((n, 2, len(STAT_FIELDS)), dtype=np.int32)
    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or "msg_strs" not in rec or "stats_list" not in rec:
            raise DatasetError(f"sample {i} lacks 'msg_strs'/'stats_list'")
        msgs, st = rec["msg_strs"], rec["stats_list"]
        if len(msgs) != 2 or len(st) != 2:
            raise DatasetError(f"sample {i}: expected 2 messages and 2 stats vectors")
        for j in range(2):
            messages[i, j] = encode_message(_as_text(msgs[j]))
            vec = np.asarray(st[j], dtype=np.int64).reshape(-1)
            if vec.size < len(STAT_FIELDS):
                raise DatasetError(f"sample {i}: stats vector has {vec.size} values, need {len(STAT_FIELDS)}")
            stats[i, j] = vec[: len(STAT_FIELDS)]
    return ObservationDataset(messages, stats, dict(meta or {"source": "pkl"}))


_DATASET_REMEDY = ("Collect it again (python -m scripts.collect_dataset --skill SKILL --force), or put back the "
                   "file you downloaded")


def load_dataset(path: str | os.PathLike) -> ObservationDataset:
    """Loads ``.npz`` (no pickles) or the authors' ``.pkl`` (restricted unpickler); any damage, or a
    file of another kind, is a :class:`DatasetError` naming the file."""
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"dataset file not found: {path}")
    if path.suffix == ".npz":
        what = "observation dataset (.npz with messages [N, 2, 256] uint8 and stats [N, 2, 6])"
        arrays = load_npz(path, ("messages", "stats"), what, _DATASET_REMEDY, DatasetError)
        messages = check_array(arrays["messages"], path, what, _DATASET_REMEDY, DatasetError, "u",
                               (None, 2, MESSAGE_LEN))
        stats = check_array(arrays["stats"], path, what, _DATASET_REMEDY, DatasetError, "iu",
                            (messages.shape[0], 2, len(STAT_FIELDS)))
        meta: Any = {}
        if "meta" in arrays:
            with reading(path, what + " (its meta entry)", _DATASET_REMEDY, DatasetError):
                meta = json.loads(str(arrays["meta"]))
        return ObservationDataset(messages, stats, meta if isinstance(meta, dict) else {})
    if path.suffix == ".pkl":
        what = "released dataset (.pkl: a list of samples with msg_strs and stats_list)"
        with reading(path, what, _DATASET_REMEDY, DatasetError):
            records = restricted_pickle_load(path.read_bytes())
        try:
            return dataset_from_records(records, {"source": f"pkl:{path.name}"})
        except DatasetError as exc:
            raise DatasetError(f"{path}: not a readable {what} ({exc}). {_DATASET_REMEDY}") from None
    if path.is_dir():
        raise DatasetError(f"{path}: a folder, not a dataset file; give one file ({{skill}}.npz, as "
                           "scripts.collect_dataset writes, or the release's .pkl), or the folder with --dataset_dir")
    if not path.exists():
        raise DatasetError(f"{path}: no such dataset file")
    raise DatasetError(f"{path}: unsupported dataset extension (use .npz or .pkl)")


def find_dataset(directory: str | os.PathLike, skill: str) -> Path:
    """``{directory}/{skill}.npz`` if present, else ``{skill}.pkl``; error naming both otherwise."""
    directory = Path(directory)
    for ext in (".npz", ".pkl"):
        candidate = directory / f"{skill}{ext}"
        if candidate.exists():
            return candidate
    raise DatasetError(
        f"no dataset for skill {skill!r}: looked for {directory / (skill + '.npz')} and "
        f"{directory / (skill + '.pkl')}; create one with python -m scripts.collect_dataset --skill {skill}"
    )
