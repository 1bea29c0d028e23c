"""The files between the environments and the annotator: message spools and the label store.

Both are append-only JSON-lines files, written whole-line at a time and read by tailing (a
reader remembers its offset and only parses complete lines), so any number of readers and one
writer per file need no locks, and a process that restarts reads everything again from the start:

* ``spool/{pid}-{nonce}.jsonl`` (one per environment process): ``{"k": skill, "m": message,
  "n": times seen since the last line}``; a message's first line announces it;
* ``labels.jsonl`` (the annotator's): ``{"k": skill, "m": message, "y": label}`` for the
  classification types, ``{"k": skill, "a": first, "b": second, "y": preference}`` for ranking,
  ``{"k": skill, "m": message, "goals": [...]}`` for ELLM-BoW. Each batch is flushed and fsynced
  before the annotator moves on, so a label on disk was never asked for twice.

Messages are NetHack's bytes up to the first zero, decoded as latin-1 (so every byte string
round-trips through JSON exactly).
"""
from __future__ import annotations

import json
import logging
import os
import secrets
from pathlib import Path
from typing import Any, Iterator, Optional

logger = logging.getLogger(__name__)

SPOOL_DIR = "spool"
LABELS_FILE = "labels.jsonl"
STATS_FILE = "stats.json"
CLASSIFIER_FILE = "classifier.pt"
RANKER_FILE = "ranker.pt"


class JsonlTail:
    """Reads the complete lines appended to a JSON-lines file since the last call."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.offset = 0
        self.bad_lines = 0
        self._reported = 0  # bad lines already reported in the log

    def read(self) -> list[dict[str, Any]]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self.offset:  # the file was replaced: start over
            self.offset = 0
        if size == self.offset:
            return []
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            data = fh.read(size - self.offset)
        end = data.rfind(b"\n")
        if end < 0:
            return []  # a line still being written
        self.offset += end + 1
        out = []
        for line in data[: end + 1].splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                self.bad_lines += 1
                continue
            if isinstance(record, dict):
                out.append(record)
            else:
                self.bad_lines += 1
        self.report_bad_lines()
        return out

    def report_bad_lines(self) -> None:
        """One warning per batch of newly skipped lines (a damaged line is never read again)."""
        if self.bad_lines > self._reported:
            logger.warning("%s: %d unreadable line(s) skipped so far (cut short or not JSON objects); "
                           "the other lines are used", self.path, self.bad_lines)
            self._reported = self.bad_lines


def append_jsonl(path: str | os.PathLike, records: list[dict[str, Any]], sync: bool = True) -> None:
    """Appends whole lines (one write call); ``sync`` makes them durable before returning."""
    if not records:
        return
    data = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records).encode("utf-8")
    with open(path, "ab") as fh:
        if fh.tell() and not _ends_with_newline(path):
            # a line cut short by a killed writer: end it, so it alone is skipped, not our first record
            data = b"\n" + data
        fh.write(data)
        fh.flush()
        if sync:
            os.fsync(fh.fileno())


def _ends_with_newline(path: str | os.PathLike) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


class MessageSpool:
    """The environment side: counts the messages one process meets and writes them out now and then."""

    def __init__(self, store_dir: str | os.PathLike) -> None:
        spool = Path(store_dir) / SPOOL_DIR
        spool.mkdir(parents=True, exist_ok=True)
        self.path = spool / f"{os.getpid()}-{secrets.token_hex(4)}.jsonl"
        self.pending: dict[tuple[int, str], int] = {}

    def note(self, skill: int, message: str) -> None:
        key = (skill, message)
        self.pending[key] = self.pending.get(key, 0) + 1

    def flush(self) -> None:
        if self.pending:
            # not fsynced: a crash loses a few counts, which the next episode sends again
            append_jsonl(self.path, [{"k": k, "m": m, "n": n} for (k, m), n in self.pending.items()], sync=False)
            self.pending.clear()


def spool_records(store_dir: str | os.PathLike, tails: dict[Path, JsonlTail]) -> Iterator[dict[str, Any]]:
    """New spool lines of every environment process (``tails`` keeps each file's offset)."""
    spool = Path(store_dir) / SPOOL_DIR
    if not spool.is_dir():
        return
    for path in sorted(spool.glob("*.jsonl")):
        tail = tails.get(path)
        if tail is None:
            tail = tails[path] = JsonlTail(path)
        yield from tail.read()


class LabelStore:
    """The labels on disk, read by tailing; the annotator appends, the environments read."""

    def __init__(self, store_dir: str | os.PathLike) -> None:
        self.dir = Path(store_dir)
        self.path = self.dir / LABELS_FILE
        self._tail = JsonlTail(self.path)
        self.labels: dict[tuple[int, str], int] = {}  # classification
        self.pairs: list[tuple[int, str, str, int]] = []  # ranking
        self.goals: dict[tuple[int, str], list[str]] = {}  # ELLM-BoW

    def refresh(self) -> int:
        """Reads the labels appended since the last call; returns how many."""
        records = self._tail.read()
        used = 0
        for r in records:
            try:
                skill = int(r.get("k", 0))
                if "goals" in r and "m" in r:
                    if not isinstance(r["goals"], list):
                        raise TypeError("goals is not a list")
                    self.goals[(skill, str(r["m"]))] = [str(g) for g in r["goals"]][:16]
                elif "a" in r and "b" in r and "y" in r:
                    self.pairs.append((skill, str(r["a"]), str(r["b"]), int(r["y"])))
                elif "m" in r and "y" in r:
                    self.labels[(skill, str(r["m"]))] = int(r["y"])
                else:
                    raise TypeError("neither a label, a pair nor goals")
                used += 1
            except (TypeError, ValueError, OverflowError):  # a line of another format: skipped and counted
                self._tail.bad_lines += 1
        self._tail.report_bad_lines()
        return used

    @property
    def bad_lines(self) -> int:
        """Lines of the label file skipped so far (not JSON, cut short, or not a label)."""
        return self._tail.bad_lines

    def append(self, records: list[dict[str, Any]]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        append_jsonl(self.path, records, sync=True)


def read_stats(store_dir: str | os.PathLike) -> Optional[dict[str, Any]]:
    """The annotator's last statistics (None before the first write or when unreadable)."""
    try:
        data = json.loads((Path(store_dir) / STATS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
