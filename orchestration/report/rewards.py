"""Reward models: reading ``reward_metrics/metrics.csv`` (:class:`RewardRun`,
:func:`find_reward_runs`) and their table of final train and validation accuracy, the latter with
the number of pairs it rests on (:func:`reward_table`)."""
from __future__ import annotations

import csv
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from common.estimates import ACCURACY_NOTE, format_accuracy
from common.file_errors import read_text, reading
from common.vocabulary import SKILLS

from .shared import ReportError, _float, _pct, find_inputs, skip

# the package's logger: log lines keep the name they had before the package was split
logger = logging.getLogger(__package__)


@dataclass
class RewardRun:
    experiment: str
    skill: Optional[str]
    iterations: list[int]
    train_acc: list[float]
    val_acc: list[float]
    path: Path
    #: validation pairs with a decided label behind each val_acc (None: a file written without the column)
    val_pairs: Optional[list[Optional[int]]] = None

    @property
    def final_val_acc(self) -> float:
        vals = [v for v in self.val_acc if v == v]
        return vals[-1] if vals else math.nan

    @property
    def final_val_pairs(self) -> Optional[int]:
        """The pair count of the row :attr:`final_val_acc` comes from, or of the last row when no row has an
        accuracy (no validation pair had a decided label: 0); None when unknown."""
        if not self.val_pairs:
            return None
        rows = [i for i, v in enumerate(self.val_acc) if v == v]
        return self.val_pairs[rows[-1] if rows else -1]

    @property
    def final_train_acc(self) -> float:
        vals = [v for v in self.train_acc if v == v]
        return vals[-1] if vals else math.nan


def _skill_of(name: str) -> Optional[str]:
    for part in name.split("_"):
        if part in SKILLS:
            return part
    return None


def load_reward_metrics(path: str | Path) -> RewardRun:
    path = Path(path)
    what, remedy = "reward metrics CSV", "Train the reward model again (python -m scripts.train_reward) to rewrite it"
    text = read_text(path, what, remedy, ReportError)
    if not text.endswith("\n") or "\0" in text:  # the writer ends every row with a newline
        raise ReportError(f"{path}: not a readable {what} (cut short or overwritten). {remedy}")
    with reading(path, what, remedy, ReportError):
        reader = csv.DictReader(text.splitlines())
        rows = list(reader)
    if not {"iteration", "val_acc"} <= set(reader.fieldnames or ()):
        raise ReportError(f"{path}: not a readable {what} (needs columns iteration and val_acc). {remedy}")
    experiment = path.parent.parent.name
    return RewardRun(
        experiment=experiment,
        skill=_skill_of(experiment),
        iterations=[int(_float(r.get("iteration"))) if r.get("iteration") else 0 for r in rows],
        train_acc=[_float(r.get("train_acc")) for r in rows],
        val_acc=[_float(r.get("val_acc")) for r in rows],
        path=path,
        val_pairs=[_count(r.get("val_pairs")) for r in rows] if "val_pairs" in (reader.fieldnames or ()) else None,
    )


def _count(value: object) -> Optional[int]:
    number = _float(value)
    return int(number) if number == number and number >= 0 else None


def find_reward_runs(root: str | Path) -> list[RewardRun]:
    out = []
    for path in find_inputs(root, "reward_metrics/metrics.csv"):
        try:
            out.append(load_reward_metrics(path))
        except ReportError as exc:
            skip(path, exc)
    out.sort(key=lambda r: (SKILLS.index(r.skill) if r.skill in SKILLS else len(SKILLS), r.experiment))
    return out


def reward_table(runs: Sequence[RewardRun]) -> str:
    """Final train and validation accuracy of each reward model, the latter with its pair count and flagged
    below :data:`common.estimates.MIN_VALIDATION_PAIRS` (the note under the table says so)."""
    lines = ["| reward model | skill | iterations | train acc | val acc (non-tie pairs) |", "|---|---|---|---|---|"]
    for r in runs:
        iters = str(r.iterations[-1]) if r.iterations else "0"
        lines.append(f"| {r.experiment} | {r.skill or '?'} | {iters} | {_pct(r.final_train_acc)} | "
                     f"{format_accuracy(r.final_val_acc, r.final_val_pairs)} |")
    return "\n".join(lines + ["", ACCURACY_NOTE])
