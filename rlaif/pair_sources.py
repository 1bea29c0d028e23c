"""Where annotation reads its pairs: this project's datasets or Motif's layout.

:func:`rlaif.annotate.annotate_chunk` asks a source for the number of pairs, a fingerprint (which
dataset chunk files belong to) and the two captions of each pair it annotates:

* :class:`ObservationPairs` -- ``og_dataset/{skill}.npz`` (or the authors' ``.pkl``): pair ``k`` is
  samples ``2k`` and ``2k+1``, each captioned by :func:`rlaif.captions.caption_from_values`
  (messages before and after, stat changes);
* :class:`MotifPairs` -- Motif's layout (:mod:`rlaif.motif_dataset`), read from its memory map:
  each member is described by :func:`rlaif.captions.motif_description` (its messages, optionally
  its stats). As in Motif's annotator, a pair whose two descriptions are the same text is a tie
  without asking the judge (``decides_identical``).

Both caption each distinct observation once per run: NetHack repeats observations constantly.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol

import numpy as np

from common.nethack.messages import MESSAGE_LEN, decode_message
from rlaif.captions import caption_from_values, motif_description
from rlaif.dataset import STAT_FIELDS, ObservationDataset
from rlaif.motif_dataset import MotifLayout, layout_fingerprint

CAPTION_CACHE_SIZE = 200_000
STATS_BYTES = 2 * len(STAT_FIELDS) * 4  # int32 [2, 6] per sample


class PairSource(Protocol):
    """What annotation needs from a dataset."""

    path: str
    num_pairs: int
    #: pairs whose captions are the same text are ties without asking the judge
    decides_identical: bool

    def fingerprint(self) -> str: ...

    def captions(self, pairs: np.ndarray) -> list[tuple[str, str]]: ...


def dataset_fingerprint(dataset: ObservationDataset) -> str:
    """Short hash of the messages and stats: tells whether chunk files belong to this dataset."""
    h = hashlib.blake2b(digest_size=12)
    h.update(np.int64(len(dataset)).tobytes())
    h.update(memoryview(dataset.messages).cast("B"))
    h.update(memoryview(dataset.stats).cast("B"))
    return h.hexdigest()


class _Cache:
    """Captions of distinct observations, bounded (cleared when full)."""

    def __init__(self) -> None:
        self.items: dict[bytes, str] = {}

    def get(self, key: bytes) -> str | None:
        return self.items.get(key)

    def put(self, key: bytes, caption: str) -> None:
        if len(self.items) >= CAPTION_CACHE_SIZE:
            self.items.clear()
        self.items[key] = caption


class ObservationPairs:
    """Pairs of this project's datasets (samples ``2k``, ``2k+1``)."""

    decides_identical = False

    def __init__(self, dataset: ObservationDataset, path: str | Path) -> None:
        self.dataset = dataset
        self.path = str(path)
        self.num_pairs = dataset.num_pairs
        self._cache = _Cache()

    def fingerprint(self) -> str:
        return dataset_fingerprint(self.dataset)

    def captions(self, pairs: np.ndarray) -> list[tuple[str, str]]:
        messages, stats = self.dataset.messages, self.dataset.stats
        samples = np.stack([2 * pairs, 2 * pairs + 1], axis=1).reshape(-1)
        raw = messages[samples].tobytes()
        raw_stats = stats[samples].tobytes()
        values = None
        out: list[tuple[str, str]] = []
        for j in range(len(pairs)):
            caps = []
            for s in (2 * j, 2 * j + 1):
                off = s * 2 * MESSAGE_LEN
                key = raw[off:off + 2 * MESSAGE_LEN] + raw_stats[s * STATS_BYTES:(s + 1) * STATS_BYTES]
                cap = self._cache.get(key)
                if cap is None:
                    if values is None:
                        values = stats[samples].tolist()
                    cap = caption_from_values(
                        decode_message(raw[off:off + MESSAGE_LEN]),
                        decode_message(raw[off + MESSAGE_LEN:off + 2 * MESSAGE_LEN]),
                        values[s][0], values[s][1],
                    )
                    self._cache.put(key, cap)
                caps.append(cap)
            out.append((caps[0], caps[1]))
        return out


class MotifPairs:
    """Pairs of Motif's layout, described as Motif's annotator describes them."""

    decides_identical = True

    def __init__(self, layout: MotifLayout, use_messages: bool = True, use_blstats: bool = False) -> None:
        if not (use_messages or use_blstats):
            raise ValueError("a description needs the messages, the stats or both (--use-messages/--use-blstats)")
        if use_blstats and "blstats" not in layout.data:
            raise ValueError(f"{layout.directory}: --use-blstats needs data/blstats.npy")
        self.layout = layout
        self.path = str(layout.directory)
        self.num_pairs = layout.num_pairs
        self.use_messages = use_messages
        self.use_blstats = use_blstats
        self._cache = _Cache()

    @property
    def keys(self) -> tuple[str, ...]:
        return (("message",) if self.use_messages else ()) + (("blstats",) if self.use_blstats else ())

    def fingerprint(self) -> str:
        return layout_fingerprint(self.layout, self.keys or ("message",))

    def captions(self, pairs: np.ndarray) -> list[tuple[str, str]]:
        pairs = np.asarray(pairs)
        seq = self.layout.seq_len
        msgs = np.asarray(self.layout.messages[pairs], dtype=np.uint8) if self.use_messages else None
        bls = np.asarray(self.layout.data["blstats"][pairs]) if self.use_blstats else None
        out: list[tuple[str, str]] = []
        for j in range(len(pairs)):
            caps = []
            for m in range(2):
                key = (msgs[j, m].tobytes() if msgs is not None else b"") + (bls[j, m].tobytes() if bls is not None else b"")
                cap = self._cache.get(key)
                if cap is None:
                    texts = [decode_message(msgs[j, m, t]) for t in range(seq)] if msgs is not None else None
                    cap = motif_description(texts, bls[j, m] if bls is not None else None)
                    self._cache.put(key, cap)
                caps.append(cap)
            out.append((caps[0], caps[1]))
        return out


__all__ = ["MotifPairs", "ObservationPairs", "PairSource", "dataset_fingerprint"]
