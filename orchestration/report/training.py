"""Skill training: the episode statistics of each run read from its tensorboard event files or
``skill_stats.json`` (:class:`TrainingRun`, :func:`find_training_runs`), the final value of a
curve (:func:`final_value`), the means over a tag's first and last env steps (:func:`tag_windows`: the one
home of that windowing, ``scripts.training_window`` uses it too) and the training tables (per skill, episode
statistics, skill measures, first against last window) with the warning naming runs whose meta-policy raised
during training."""
from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence

from common.vocabulary import SKILLS
from rl_baseline.tasks.skill_measures import MAIN_MEASURE, SKILL_MEASURES

from .shared import _num, _pct, find_inputs, run_name, skip

# the package's logger: log lines keep the name they had before the package was split
logger = logging.getLogger(__package__)

#: tensorboard tag prefixes read from the event files (``len/``: sample-factory's episode length)
TB_PREFIXES = ("skills/", "intrinsic/", "measures/", "len/", "messages/")
EPISODE_LEN_TAG = "len/len"
#: the "final value" of a curve is the mean of its last points (each already a mean over episodes)
FINAL_POINTS = 5
#: episode statistics (not per skill) listed with their final value
EPISODE_STATS = (("episode length", EPISODE_LEN_TAG), ("intrinsic reward sum", "intrinsic/episode_sum"),
                 ("skill switches", "skills/switches"), ("skill restarts", "skills/restarts"),
                 ("max depth", "skills/max_depth"), ("meta-policy errors", "skills/meta_policy_errors"))


@dataclass
class TrainingRun:
    experiment: str
    path: Path
    # tag -> (env steps, values)
    series: dict[str, tuple[list[int], list[float]]] = field(default_factory=dict)
    final_env_steps: Optional[int] = None

    def get(self, tag: str) -> tuple[list[int], list[float]]:
        """The series of an episode statistic: sample-factory's ``tag`` or our observer's
        ``{tag}_mean`` (the same window mean, logged from the first episode), the longer one."""
        found = [self.series[t] for t in (tag + "_mean", tag) if t in self.series and self.series[t][0]]
        return max(found, key=lambda s: len(s[0])) if found else ([], [])

    def skill_series(self, kind: str, skill: str) -> tuple[list[int], list[float]]:
        """The series of one skill; ``kind`` is a key of :data:`SKILL_TAGS` ("share", "intrinsic", ...)."""
        return self.get(SKILL_TAGS[kind].format(skill=skill))

    def measure_tags(self) -> list[tuple[str, str]]:
        """``(skill, measure)`` of every ``measures/{skill}/{measure}`` series, in skill then
        measure order (:data:`SKILL_MEASURES`; unknown ones after, by name)."""
        found: set[tuple[str, str]] = set()
        for tag in self.series:
            parts = tag.split("/")
            if len(parts) != 3 or parts[0] != "measures":
                continue
            skill, measure = parts[1], parts[2]
            base = measure[:-len("_mean")] if measure.endswith("_mean") else None
            if base and (base in SKILL_MEASURES.get(skill, ()) or f"measures/{skill}/{base}" in self.series):
                measure = base  # our observer's twin of sample-factory's tag
            found.add((skill, measure))

        def order(item: tuple[str, str]) -> tuple:
            skill, measure = item
            known = SKILL_MEASURES.get(skill, ())
            return (SKILLS.index(skill) if skill in SKILLS else len(SKILLS), skill,
                    known.index(measure) if measure in known else len(known), measure)

        return sorted(found, key=order)


#: tensorboard tag of each per-skill statistic of the runtime's episode_extra_stats
SKILL_TAGS = {
    "share": "skills/{skill}_share",
    "activations": "skills/{skill}_activations",
    "success": "skills/{skill}_success",
    "intrinsic": "intrinsic/{skill}_mean",
    "return": "intrinsic/{skill}_return",
    "nonzero": "intrinsic/{skill}_nonzero_frac",
}


def final_value(values: Sequence[float], points: int = FINAL_POINTS) -> float:
    """Mean of the last ``points`` finite values (NaN when there are none)."""
    finite = [v for v in values if v == v and not math.isinf(v)]
    tail = finite[-points:]
    return sum(tail) / len(tail) if tail else math.nan


def window_means(series: tuple[list[int], list[float]], window: int) -> tuple[float, int, float, int]:
    """Mean and count of the finite values logged in the first and in the last ``window`` env steps of
    ``series`` (each value is already a mean over recent episodes); NaN and 0 where a window is empty."""
    w = tag_windows(series, window)
    return w.first, w.n_first, w.last, w.n_last


@dataclass(frozen=True)
class TagWindows:
    """One tag's first and last window: the first from the tag's own first record on, the last ending at its
    last record; where they share records (a tag logged over less than two windows) they are not two
    measurements, and :meth:`first_cell` says so instead of giving a second mean."""

    first: float
    n_first: int
    last: float
    n_last: int
    #: env step of the tag's first record (None: never logged)
    start: Optional[int] = None
    #: records in both windows
    shared: int = 0
    #: the tag's first record lies after the run's first window (a skill that started late)
    late: bool = False

    def first_cell(self) -> str:
        """``mean (points)``; where the windows share records, that they overlap; for a late tag, where it
        starts."""
        if self.n_first == 0:
            text = "n/a (0)"
        elif self.shared:
            text = f"overlaps the last window ({self.shared} of its {self.n_last} points)"
        else:
            text = f"{_num(self.first)} ({self.n_first})"
        if self.late:
            text += f", first logged at {self.start:,} env steps"
        return text

    def last_cell(self) -> str:
        return f"{_num(self.last)} ({self.n_last})"


def tag_windows(series: tuple[list[int], list[float]], window: int,
                run_start: Optional[int] = None) -> TagWindows:
    """The means of the finite values of ``series`` in its first ``window`` env steps (from its own first
    record) and its last ``window`` env steps, the records the two share, and whether the tag starts after
    the first ``window`` env steps of a run whose first record is at ``run_start``."""
    steps, values = series
    if not steps:
        return TagWindows(math.nan, 0, math.nan, 0)
    finite = [i for i, v in enumerate(values) if v == v]
    head = [i for i in finite if steps[i] <= steps[0] + window]
    tail = [i for i in finite if steps[i] >= steps[-1] - window]
    mean = lambda idx: sum(values[i] for i in idx) / len(idx) if idx else math.nan  # noqa: E731
    late = run_start is not None and steps[0] > run_start + window
    return TagWindows(mean(head), len(head), mean(tail), len(tail), start=int(steps[0]),
                      shared=len(set(head) & set(tail)), late=late)


def run_extent(series: Iterable[tuple[list[int], list[float]]]) -> Optional[tuple[int, int]]:
    """The first and the last env step of any record of a run's ``series`` (None when none has one)."""
    logged = [steps for steps, _ in series if steps]
    if not logged:
        return None
    return min(s[0] for s in logged), max(s[-1] for s in logged)


WINDOW_NOTE = ("Each tag's first window starts at its own first record; \"first logged at\" names a tag that "
               "starts after the run's first window (a skill that ran late), and \"overlaps the last window\" "
               "a tag logged over less than two windows, whose first and last windows share points and so show "
               "no change.")


def read_tensorboard_scalars(folder: str | Path, prefixes: Sequence[str] = TB_PREFIXES) -> dict:
    """Scalars whose tag starts with one of ``prefixes`` from every event file below ``folder``."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader  # lazy: optional
    except ImportError:  # tensorboard comes with sample-factory; without it only skill_stats.json is read
        logger.warning("tensorboard is not installed: reading skill_stats.json only")
        return {}
    out: dict[str, dict[int, float]] = {}
    for path in sorted(Path(folder).rglob("events.out.tfevents.*")):
        try:
            for event in EventFileLoader(str(path)).Load():
                if not event.HasField("summary"):
                    continue
                for value in event.summary.value:
                    if not value.tag.startswith(tuple(prefixes)):
                        continue
                    if value.HasField("simple_value"):
                        number = float(value.simple_value)
                    elif value.HasField("tensor") and value.tensor.float_val:
                        number = float(value.tensor.float_val[0])
                    else:
                        continue
                    out.setdefault(value.tag, {})[int(event.step)] = number
        except Exception as exc:  # a truncated file from a killed run: keep what was read
            skip(path, f"read up to the damage ({type(exc).__name__}: {str(exc)[:120]})")
    return {tag: (sorted(v), [v[s] for s in sorted(v)]) for tag, v in out.items()}


def find_training_runs(root: str | Path) -> list[TrainingRun]:
    """Experiments below ``root`` with tensorboard summaries or a ``skill_stats.json``."""
    root = Path(root)
    folders = {p.parent for p in find_inputs(root, "skill_stats.json")}
    folders |= {p.parent for p in find_inputs(root, ".summary") if p.is_dir()}
    runs = []
    for folder in sorted(folders):
        run = TrainingRun(run_name(folder, root), folder)
        summary = folder / ".summary"
        if summary.is_dir():
            run.series = read_tensorboard_scalars(summary)
        stats_path = folder / "skill_stats.json"
        if stats_path.is_file():
            try:
                stats = json.loads(stats_path.read_text())
                step = int(stats.get("env_steps", 0))
                run.final_env_steps = step
                for tag, value in (stats.get("means") or {}).items():
                    if tag not in run.series:
                        run.series[tag] = ([step], [float(value)])
            except Exception as exc:  # noqa: BLE001 - a damaged file: skipped, named
                skip(stats_path, f"not a readable skill statistics file ({type(exc).__name__})")
        runs.append(run)
    return runs


def training_table(runs: Sequence[TrainingRun]) -> str:
    lines = ["| experiment | skill | last share of steps | last mean intrinsic reward | "
             "intrinsic return per episode (final) | steps with non-zero intrinsic reward (final) |",
             "|---|---|---|---|---|---|"]
    for run in runs:
        for skill in SKILLS:
            _, share = run.skill_series("share", skill)
            _, intr = run.skill_series("intrinsic", skill)
            if not share and not intr:
                continue
            _, ret = run.skill_series("return", skill)
            _, nonzero = run.skill_series("nonzero", skill)
            lines.append(f"| {run.experiment} | {skill} | {_pct(share[-1]) if share else 'n/a'} | "
                         f"{f'{intr[-1]:.4f}' if intr else 'n/a'} | {_num(final_value(ret))} | "
                         f"{_pct(final_value(nonzero))} |")
    return "\n".join(lines)


def measures_table(runs: Sequence[TrainingRun]) -> Optional[str]:
    """Final value (mean of the last :data:`FINAL_POINTS` points) of every ``measures/`` tag;
    None when no run logged one."""
    rows = []
    for run in runs:
        for skill, measure in run.measure_tags():
            steps, values = run.get(f"measures/{skill}/{measure}")
            main = " (main)" if MAIN_MEASURE.get(skill) == measure else ""
            rows.append(f"| {run.experiment} | {skill} | {measure}{main} | {_num(final_value(values))} | "
                        f"{len(values)} | {steps[-1] if steps else 'n/a'} |")
    if not rows:
        return None
    return "\n".join([f"| experiment | skill | measure | final value (mean of last {FINAL_POINTS} points) | "
                      "points | last env step |", "|---|---|---|---|---|---|"] + rows)


def episode_stats_table(runs: Sequence[TrainingRun]) -> Optional[str]:
    """Final value of the episode statistics (length, switches, meta-policy errors, ...)."""
    rows = []
    for run in runs:
        cells = [_num(final_value(run.get(tag)[1])) for _, tag in EPISODE_STATS]
        if any(c != "n/a" for c in cells):
            rows.append("| " + " | ".join([run.experiment] + cells) + " |")
    if not rows:
        return None
    head = ["experiment"] + [name for name, _ in EPISODE_STATS]
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"] + rows)


def training_error_warning(runs: Sequence[TrainingRun]) -> Optional[str]:
    """A line naming the runs in which the meta-policy raised during training (None when none)."""
    bad = [run.experiment for run in runs if any(v > 0 for v in run.get("skills/meta_policy_errors")[1])]
    if not bad:
        return None
    return ("**Warning:** the generated meta-policy raised exceptions or ran past its time bound during "
            "skill training of " + ", ".join(bad) + " (skills/meta_policy_errors > 0; the training log names "
            "each call and what happened).")


#: the window the "over training" figures of docs/results.md use (first and last 0.5M env steps)
DEFAULT_WINDOW = 500_000


def fitted_window(window: int, span: int) -> int:
    """``window``, or a quarter of a run that spans fewer than four windows, so that its first and last windows
    never overlap (and never give the same means)."""
    return min(window, max(1, span // 4))


def window_rows(run: TrainingRun) -> list[tuple[str, str]]:
    """``(label, tag)`` of the statistics compared between a run's first and last window: the episode
    statistics, then per skill that was ever active its share of steps, intrinsic return and main measure,
    then the message stream's shares."""
    rows = [("episode length", EPISODE_LEN_TAG), ("skill switches", "skills/switches")]
    for skill in SKILLS:
        _, share = run.skill_series("share", skill)
        if not any(v > 0 for v in share if v == v):
            continue
        rows.append((f"{skill}: share of steps", SKILL_TAGS["share"].format(skill=skill)))
        rows.append((f"{skill}: intrinsic return", SKILL_TAGS["return"].format(skill=skill)))
        if skill in MAIN_MEASURE:
            rows.append((f"{skill}: {MAIN_MEASURE[skill]}", f"measures/{skill}/{MAIN_MEASURE[skill]}"))
    rows += [("steps with an empty message", "messages/empty_share"), ("steps with a wall message", "messages/wall_share")]
    return rows


def window_table(runs: Sequence[TrainingRun], window: int = DEFAULT_WINDOW) -> Optional[str]:
    """For each run with tensorboard curves, the mean of each :func:`window_rows` statistic over its first and
    its last ``window`` env steps (:func:`tag_windows`). A run shorter than four windows uses a quarter of
    its length instead; the table names the window each run used, a tag that starts late and windows that
    overlap (:data:`WINDOW_NOTE`). None when no run has curves."""
    rows = []
    for run in runs:
        stats = window_rows(run)
        if not any(len(run.get(tag)[0]) > 1 for _, tag in stats):
            continue
        extent = run_extent(run.series.values())
        if extent is None:
            continue
        used = fitted_window(window, extent[1] - extent[0])
        for label, tag in stats:
            w = tag_windows(run.get(tag), used, run_start=extent[0])
            if w.n_first == 0 and w.n_last == 0:
                continue
            rows.append(f"| {run.experiment} | {used:,} | {label} | {w.first_cell()} | {w.last_cell()} |")
    if not rows:
        return None
    return "\n".join(["| experiment | window (env steps) | statistic | first window (points) | last window (points) |",
                      "|---|---|---|---|---|"] + rows)
