"""Collects the results of a run folder into one Markdown report and PNG plots.

Reads, anywhere below a root folder:

* evaluation results ``{train_dir}/{experiment}/eval/{task}_seed{code_seed}.json``
  (written by :mod:`rl_baseline.sf.evaluate`: task, measure, mean, stderr, episodes, and
  ``meta_policy_errors``, the exceptions the task's generated meta-policy raised);
* skill-training summaries: sample-factory's tensorboard event files
  ``{experiment}/.summary/0/events.out.tfevents.*`` and, when there are no event files, the
  last values in ``{experiment}/skill_stats.json``. The runtime's ``episode_extra_stats``
  reach tensorboard under their own key (``skills/{s}_share``, ``intrinsic/{s}_return``,
  ``measures/{s}/{measure}``, ...: sample-factory keeps a key containing ``/`` as the tag and
  writes the mean over the last ``--stats_avg`` episodes once that many have ended) and,
  for ``skills/`` and ``intrinsic/``, also as ``{key}_mean`` (our ``SkillStatsObserver``,
  same mean, from the first episode on); sample-factory's episode length is ``len/len``
  (with ``len/len_min``, ``len/len_max``). Of a key and its ``_mean`` twin the longer
  series is used;
* reward-model metrics ``{reward_train_dir}/{experiment}/reward_metrics/metrics.csv``
  (epoch, iteration, train/val loss and accuracy; written by :mod:`rlaif.train_reward`);
* the forced-skill evaluation of a trained experiment, ``{experiment}/skill_report.md``
  (copied into the report with its explanations, headings moved down, image links left
  out), ``skill_report.json`` (the table is built from it when the Markdown file is
  missing) and ``skill_report.png``.

Writes ``results.md`` (tables: zero-shot evaluation with meta-policy errors and a warning
naming the tasks whose meta-policy raised; skill training; final value of every
``measures/`` tag and episode statistics; the forced-skill evaluation; reward models) and
the plots ``success.png``, ``skill_training.png``, ``curves_intrinsic_return.png``,
``curves_skill_share.png``, ``curves_nonzero_fraction.png``, ``curves_episode_length.png``,
``curves_skill_measures.png``, ``reward_accuracy.png`` and a copy of ``skill_report.png``
(a plot is left out when there is nothing to draw). Imports neither NLE nor sample-factory.
"""
from __future__ import annotations

import csv
import json
import logging
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from common.vocabulary import EVAL_TASKS, SKILLS, TASK_MEASURE
from orchestration.paper_results import NOT_COMPARABLE_NOTE, PAPER_RESULTS, format_value
from rl_baseline.tasks.skill_measures import MAIN_MEASURE, SKILL_MEASURES

logger = logging.getLogger(__name__)

RESULTS_MD = "results.md"
SUCCESS_PNG = "success.png"
TRAINING_PNG = "skill_training.png"
REWARD_PNG = "reward_accuracy.png"
RETURN_PNG = "curves_intrinsic_return.png"
SHARE_PNG = "curves_skill_share.png"
NONZERO_PNG = "curves_nonzero_fraction.png"
LENGTH_PNG = "curves_episode_length.png"
MEASURES_PNG = "curves_skill_measures.png"
SKILL_REPORT_MD = "skill_report.md"
SKILL_REPORT_JSON = "skill_report.json"
SKILL_REPORT_PNG = "skill_report.png"
SKILL_REPORT_HEADING = "Skills held one at a time (forced-skill evaluation)"

#: tensorboard tag prefixes read from the event files (``len/``: sample-factory's episode length)
TB_PREFIXES = ("skills/", "intrinsic/", "measures/", "len/")
EPISODE_LEN_TAG = "len/len"
#: the "final value" of a curve is the mean of its last points (each already a mean over episodes)
FINAL_POINTS = 5
#: episode statistics (not per skill) listed with their final value
EPISODE_STATS = (("episode length", EPISODE_LEN_TAG), ("intrinsic reward sum", "intrinsic/episode_sum"),
                 ("skill switches", "skills/switches"), ("skill restarts", "skills/restarts"),
                 ("max depth", "skills/max_depth"), ("meta-policy errors", "skills/meta_policy_errors"))


class ReportError(ValueError):
    """Nothing to report, or an unreadable input file."""


# ----------------------------------------------------------------------------- evaluation
@dataclass
class EvalResult:
    task: str
    measure: str
    mean: float
    stderr: float
    episodes: int
    experiment: str
    code_seed: Optional[int]
    env_steps: Optional[int]
    path: Path
    # exceptions the task's generated meta-policy raised (None: an older file without the key)
    meta_policy_errors: Optional[int] = None


def _experiment_of(path: Path) -> str:
    # {experiment}/eval/{task}_seed{N}.json
    return path.parent.parent.name if path.parent.name == "eval" else path.parent.name


def _float(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def load_eval_result(path: str | Path) -> EvalResult:
    """One evaluation JSON; :class:`ReportError` naming the file when it is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: cannot read evaluation result ({exc})") from exc
    if not isinstance(data, dict) or "task" not in data or "mean" not in data:
        raise ReportError(f"{path}: not an evaluation result (needs at least 'task' and 'mean')")
    task = str(data["task"])
    seed = data.get("code_seed")
    steps = data.get("env_steps")
    errors = data.get("meta_policy_errors")
    return EvalResult(
        task=task,
        measure=str(data.get("measure") or TASK_MEASURE.get(task, "success")),
        mean=_float(data.get("mean")),
        stderr=_float(data.get("stderr")),
        episodes=int(data.get("episodes") or 0),
        experiment=str(data.get("experiment") or _experiment_of(path)),
        code_seed=int(seed) if isinstance(seed, (int, float)) else None,
        env_steps=int(steps) if isinstance(steps, (int, float)) else None,
        path=path,
        meta_policy_errors=int(errors) if isinstance(errors, (int, float)) and errors == errors else None,
    )


def _task_order(task: str) -> int:
    return EVAL_TASKS.index(task) if task in EVAL_TASKS else len(EVAL_TASKS)


def find_eval_results(root: str | Path) -> list[EvalResult]:
    """Every ``*/eval/*_seed*.json`` below ``root``, sorted by experiment, then task order.

    Unreadable files are skipped with a warning."""
    out: list[EvalResult] = []
    for path in sorted(Path(root).rglob("eval/*_seed*.json")):
        try:
            out.append(load_eval_result(path))
        except ReportError as exc:
            logger.warning("%s", exc)
    out.sort(key=lambda r: (r.experiment, _task_order(r.task), r.task, r.code_seed or 0))
    return out


def results_table(results: Sequence[EvalResult], paper: bool = True) -> str:
    """Markdown table: task, measure, value +- s.e., episodes, meta-policy errors (blank for files
    written before they were counted) and the paper's column."""
    multi = len({r.experiment for r in results}) > 1
    head = ["task", "measure", "value +- s.e.", "episodes", "meta-policy errors"]
    if multi:
        head.insert(0, "experiment")
    if paper:
        head.append("MaestroMotif (paper, not comparable)")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in results:
        row = [r.task, r.measure, format_value(r.measure, r.mean, r.stderr), str(r.episodes),
               "" if r.meta_policy_errors is None else str(r.meta_policy_errors)]
        if multi:
            row.insert(0, r.experiment)
        if paper:
            ref = PAPER_RESULTS.get(r.task)
            row.append(ref.formatted() if ref else "n/a")
        lines.append("| " + " | ".join(row) + " |")
    if paper:
        lines += ["", f"Note: {NOT_COMPARABLE_NOTE}"]
    return "\n".join(lines)


def meta_policy_error_warning(results: Sequence[EvalResult]) -> Optional[str]:
    """One line naming the evaluations whose generated meta-policy raised (None when none did):
    an exception falls back to a default skill, so the task's number is not the code's."""
    bad = [r for r in results if r.meta_policy_errors]
    if not bad:
        return None
    multi = len({r.experiment for r in results}) > 1
    named = ", ".join(f"{r.experiment}/{r.task}" if multi else r.task for r in bad)
    counts = ", ".join(f"{r.task}: {r.meta_policy_errors}" for r in bad)
    return (f"**Warning:** the generated meta-policy raised exceptions during the evaluation of {named} "
            f"({counts}); those results are not the meta-policy's alone.")


# ----------------------------------------------------------------------------- reward models
@dataclass
class RewardRun:
    experiment: str
    skill: Optional[str]
    iterations: list[int]
    train_acc: list[float]
    val_acc: list[float]
    path: Path

    @property
    def final_val_acc(self) -> float:
        vals = [v for v in self.val_acc if v == v]
        return vals[-1] if vals else math.nan

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
    try:
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise ReportError(f"{path}: cannot read reward metrics ({exc})") from exc
    if rows and not {"iteration", "val_acc"} <= set(rows[0]):
        raise ReportError(f"{path}: not a reward metrics CSV (needs columns iteration and val_acc)")
    experiment = path.parent.parent.name
    return RewardRun(
        experiment=experiment,
        skill=_skill_of(experiment),
        iterations=[int(_float(r.get("iteration"))) if r.get("iteration") else 0 for r in rows],
        train_acc=[_float(r.get("train_acc")) for r in rows],
        val_acc=[_float(r.get("val_acc")) for r in rows],
        path=path,
    )


def find_reward_runs(root: str | Path) -> list[RewardRun]:
    out = []
    for path in sorted(Path(root).rglob("reward_metrics/metrics.csv")):
        try:
            out.append(load_reward_metrics(path))
        except ReportError as exc:
            logger.warning("%s", exc)
    out.sort(key=lambda r: (SKILLS.index(r.skill) if r.skill in SKILLS else len(SKILLS), r.experiment))
    return out


def reward_table(runs: Sequence[RewardRun]) -> str:
    lines = ["| reward model | skill | iterations | train acc | val acc (non-tie pairs) |", "|---|---|---|---|---|"]
    for r in runs:
        iters = str(r.iterations[-1]) if r.iterations else "0"
        lines.append(f"| {r.experiment} | {r.skill or '?'} | {iters} | {_pct(r.final_train_acc)} | "
                     f"{_pct(r.final_val_acc)} |")
    return "\n".join(lines)


def _pct(x: float) -> str:
    return "n/a" if x != x else f"{100.0 * x:.1f}%"


# ----------------------------------------------------------------------------- skill training
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


def read_tensorboard_scalars(folder: str | Path, prefixes: Sequence[str] = TB_PREFIXES) -> dict:
    """Scalars whose tag starts with one of ``prefixes`` from every event file below ``folder``."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
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
            logger.warning("%s: stopped reading (%s)", path, exc)
    return {tag: (sorted(v), [v[s] for s in sorted(v)]) for tag, v in out.items()}


def find_training_runs(root: str | Path) -> list[TrainingRun]:
    """Experiments below ``root`` with tensorboard summaries or a ``skill_stats.json``."""
    root = Path(root)
    folders = {p.parent for p in root.rglob("skill_stats.json")}
    folders |= {p.parent for p in root.rglob(".summary") if p.is_dir()}
    runs = []
    for folder in sorted(folders):
        run = TrainingRun(folder.name, folder)
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
            except (OSError, ValueError, TypeError, AttributeError) as exc:
                logger.warning("%s: cannot read (%s)", stats_path, exc)
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


def _num(x: float) -> str:
    return "n/a" if x != x else f"{x:.4g}"


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
    return ("**Warning:** the generated meta-policy raised exceptions during skill training of "
            + ", ".join(bad) + " (skills/meta_policy_errors > 0).")


# ----------------------------------------------------------------------------- plots
def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_success(results: Sequence[EvalResult], path: Path) -> None:
    """Success rate (success tasks) and count per episode (count tasks) with s.e. error bars."""
    plt = _pyplot()
    groups = [("success", "success rate"), ("count", "count per episode")]
    present = [(m, label) for m, label in groups if any(r.measure == m for r in results)]
    fig, axes = plt.subplots(1, len(present), figsize=(6 * len(present), 4), squeeze=False)
    for ax, (measure, label) in zip(axes[0], present):
        rows = [r for r in results if r.measure == measure]
        names = [f"{r.task}\n{r.experiment}" if len({x.experiment for x in results}) > 1 else r.task for r in rows]
        ax.bar(range(len(rows)), [0.0 if r.mean != r.mean else r.mean for r in rows],
               yerr=[0.0 if r.stderr != r.stderr else r.stderr for r in rows], capsize=5, color="tab:blue",
               label="this run")
        paper = [PAPER_RESULTS[r.task].value if r.task in PAPER_RESULTS else math.nan for r in rows]
        ax.scatter(range(len(rows)), paper, marker="_", s=400, color="tab:red",
                   label="paper (full scale, not comparable)")
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(names, rotation=30, ha="right")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    fig.suptitle("zero-shot evaluation (mean +- s.e.)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_training(runs: Sequence[TrainingRun], path: Path) -> None:
    """Per-skill mean intrinsic reward and share of steps against env steps."""
    plt = _pyplot()
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
    for run in runs:
        prefix = f"{run.experiment}: " if len(runs) > 1 else ""
        for skill in SKILLS:
            steps, values = run.skill_series("intrinsic", skill)
            if steps:
                ax0.plot(steps, values, marker="o" if len(steps) < 3 else None, label=prefix + skill)
            steps, values = run.skill_series("share", skill)
            if steps:
                ax1.plot(steps, values, marker="o" if len(steps) < 3 else None, label=prefix + skill)
    ax0.set_title("intrinsic reward per step, by active skill")
    ax1.set_title("share of steps per skill")
    for ax in (ax0, ax1):
        ax.set_xlabel("env steps")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _smooth(values: Sequence[float]) -> tuple[list[float], int]:
    """Trailing moving average over about a tenth of the points (at most 10): each point is
    already a mean over the last ``--stats_avg`` episodes, so only a light extra smoothing."""
    window = min(10, max(1, len(values) // 10))
    out, acc = [], []
    for v in values:
        acc.append(v)
        if len(acc) > window:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out, window


def _curve(ax, steps: Sequence[int], values: Sequence[float], label: str) -> None:
    """The logged points as a thin line, the moving average (when there is one) on top."""
    smooth, window = _smooth(values)
    if window == 1:
        ax.plot(steps, values, marker="o" if len(steps) < 3 else None, label=label)
        return
    line, = ax.plot(steps, values, linewidth=0.8, alpha=0.35)
    ax.plot(steps, smooth, color=line.get_color(), linewidth=1.8,
            label=f"{label} (moving avg, {window} points)")


def _finish(fig, ax, title: str, ylabel: str, path: Path) -> None:
    ax.set_title(title)
    ax.set_xlabel("env steps")
    ax.set_ylabel(ylabel)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def plot_skill_curves(runs: Sequence[TrainingRun], kind: str, path: Path, title: str, ylabel: str) -> bool:
    """One line per skill (and run) of the per-skill statistic ``kind``; False (and no file)
    when no run logged it."""
    lines = []
    for run in runs:
        for skill in SKILLS:
            steps, values = run.skill_series(kind, skill)
            # a return of 0 is logged for every skill; leave out the skills the run never used
            if not steps or (kind == "return" and not any(run.skill_series("share", skill)[1])
                             and not any(values)):
                continue
            lines.append((f"{run.experiment}: {skill}" if len(runs) > 1 else skill, steps, values))
    if not lines:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, steps, values in lines:
        _curve(ax, steps, values, label)
    _finish(fig, ax, title, ylabel, path)
    plt.close(fig)
    return True


def plot_episode_length(runs: Sequence[TrainingRun], path: Path) -> bool:
    """sample-factory's mean episode length, with its min-max band over the same episodes."""
    lines = [(run, *run.get(EPISODE_LEN_TAG)) for run in runs]
    lines = [item for item in lines if item[1]]
    if not lines:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for run, steps, values in lines:
        label = run.experiment if len(runs) > 1 else "mean"
        _curve(ax, steps, values, label)
        lo_steps, lo = run.get(EPISODE_LEN_TAG + "_min")
        hi_steps, hi = run.get(EPISODE_LEN_TAG + "_max")
        if lo_steps and lo_steps == hi_steps:
            ax.fill_between(lo_steps, lo, hi, alpha=0.12,
                            label=f"{run.experiment} min-max" if len(runs) > 1 else "min-max")
    _finish(fig, ax, "episode length (mean over the last --stats_avg episodes)", "steps", path)
    plt.close(fig)
    return True


def plot_skill_measures(runs: Sequence[TrainingRun], path: Path) -> bool:
    """A grid with one subplot per ``measures/{skill}/{measure}`` tag (a line per run)."""
    tags: list[tuple[str, str]] = []
    for run in runs:
        tags += [t for t in run.measure_tags() if t not in tags]
    if not tags:
        return False
    plt = _pyplot()
    cols = min(4, len(tags))
    rows = math.ceil(len(tags) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax, (skill, measure) in zip(axes.flat, tags):
        for run in runs:
            steps, values = run.get(f"measures/{skill}/{measure}")
            if steps:
                _curve(ax, steps, values, run.experiment)
        main = " (main)" if MAIN_MEASURE.get(skill) == measure else ""
        ax.set_title(f"{skill}: {measure}{main}", fontsize=9)
        ax.set_xlabel("env steps", fontsize=8)
        ax.tick_params(labelsize=7)
        if len(runs) > 1 and ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(tags):]:
        ax.set_visible(False)
    fig.suptitle("skill measures per episode, over the steps each skill was active")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


#: the training curves: file, caption (the alt text of its image link), how it is drawn
CURVE_PLOTS: tuple[tuple[str, str, Callable[[Sequence[TrainingRun], Path], bool]], ...] = (
    (RETURN_PNG, "intrinsic return per episode, by skill",
     lambda runs, p: plot_skill_curves(runs, "return", p, "intrinsic return per episode (while the skill "
                                       "was active)", "intrinsic return")),
    (SHARE_PNG, "share of episode steps, by skill",
     lambda runs, p: plot_skill_curves(runs, "share", p, "share of episode steps per skill", "share")),
    (NONZERO_PNG, "fraction of steps with non-zero intrinsic reward, by skill",
     lambda runs, p: plot_skill_curves(runs, "nonzero", p, "fraction of a skill's steps with non-zero "
                                       "intrinsic reward", "fraction")),
    (LENGTH_PNG, "episode length", plot_episode_length),
    (MEASURES_PNG, "skill measures (measures/{skill}/{measure})", plot_skill_measures),
)


def plot_reward_accuracy(runs: Sequence[RewardRun], path: Path) -> None:
    """Validation accuracy of each reward model over iterations."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for run in runs:
        ax.plot(run.iterations, run.val_acc, marker="o", label=run.skill or run.experiment)
    ax.axhline(0.5, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("iteration")
    ax.set_ylabel("validation accuracy (non-tie pairs)")
    ax.set_title("reward models")
    if runs:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ----------------------------------------------------------------------------- skill report
@dataclass
class SkillReport:
    """The forced-skill evaluation files of one trained experiment (any may be missing)."""

    experiment: str
    folder: Path

    @property
    def md(self) -> Optional[Path]:
        return self._file(SKILL_REPORT_MD)

    @property
    def json(self) -> Optional[Path]:
        return self._file(SKILL_REPORT_JSON)

    @property
    def png(self) -> Optional[Path]:
        return self._file(SKILL_REPORT_PNG)

    def _file(self, name: str) -> Optional[Path]:
        path = self.folder / name
        return path if path.is_file() else None


def find_skill_reports(root: str | Path) -> list[SkillReport]:
    """Experiments below ``root`` with a ``skill_report.md`` or ``skill_report.json``."""
    folders = {p.parent for name in (SKILL_REPORT_MD, SKILL_REPORT_JSON) for p in Path(root).rglob(name)}
    return [SkillReport(folder.name, folder) for folder in sorted(folders)]


def markdown_tables(text: str) -> list[str]:
    """The Markdown tables (runs of lines starting with ``|``) of ``text``."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.lstrip().startswith("|"):
            current.append(line.strip())
        elif current:
            tables.append("\n".join(current))
            current = []
    return tables


def skill_report_body(text: str) -> str:
    """``skill_report.md`` to go under this report's heading: its tables with the text that
    explains them (CI, policies, verdict), headings moved two levels down, and without its
    image links (relative to the experiment folder; the image is linked from the report folder)."""
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("![") and stripped.endswith(")"):
            continue
        if stripped.startswith("#"):
            line = "##" + stripped
        lines.append(line)
    return "\n".join(lines).strip()


def _ci_cell(entry: object) -> str:
    if not isinstance(entry, dict):
        return "n/a"
    mean = _float(entry.get("mean"))
    ci = entry.get("ci95")
    text = _num(mean)
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        text += f" [{_num(_float(ci[0]))}, {_num(_float(ci[1]))}]"
    return text


def skill_report_json_table(data: dict) -> Optional[str]:
    """The main measure of each skill per policy (mean [95% CI]) from ``skill_report.json``."""
    skills = data.get("skills") if isinstance(data, dict) else None
    if not isinstance(skills, dict) or not skills:
        return None
    policies = ("trained", "untrained", "random")
    lines = ["| skill | main measure | " + " | ".join(policies) + " |", "|---|---|" + "---|" * len(policies)]
    for skill, entry in skills.items():
        if not isinstance(entry, dict):
            continue
        measure = str(entry.get("main_measure") or MAIN_MEASURE.get(skill, "?"))
        per_policy = entry.get("policies") if isinstance(entry.get("policies"), dict) else {}
        cells = [_ci_cell(((per_policy.get(p) or {}).get("measures") or {}).get(measure)) for p in policies]
        lines.append(f"| {skill} | {measure} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def skill_report_section(report: SkillReport) -> list[str]:
    """Markdown lines of one experiment's forced-skill evaluation (no image link)."""
    parts: list[str] = []
    episodes, data = None, None
    if report.json is not None:
        try:
            data = json.loads(report.json.read_text())
            episodes = data.get("episodes") if isinstance(data, dict) else None
        except (OSError, ValueError) as exc:
            logger.warning("%s: cannot read (%s)", report.json, exc)
            data = None
    text = ""
    if report.md is not None:
        try:
            text = report.md.read_text()
        except OSError as exc:
            logger.warning("%s: cannot read (%s)", report.md, exc)
    if markdown_tables(text):
        parts += [f"From `{report.md}`:", "", skill_report_body(text), ""]
        return parts
    table = skill_report_json_table(data) if data is not None else None
    if table:
        if isinstance(episodes, (int, float)):
            parts += [f"{int(episodes)} episodes per skill and policy; main measure, mean [95% CI] per "
                      f"episode (from `{report.json}`).", ""]
        parts += [table, ""]
    else:
        parts += [f"(no table in {report.md or report.json})", ""]
    return parts


# ----------------------------------------------------------------------------- the report
@dataclass
class Report:
    markdown: str
    results: list[EvalResult]
    reward_runs: list[RewardRun]
    training_runs: list[TrainingRun]
    files: list[Path]
    skill_reports: list[SkillReport] = field(default_factory=list)


def build_report(roots: Sequence[str | Path], out_dir: Optional[str | Path] = None, paper: bool = True,
                 plots: bool = True) -> Report:
    """Collects everything below ``roots``; writes results.md and the plots to ``out_dir`` when given."""
    results: list[EvalResult] = []
    reward_runs: list[RewardRun] = []
    training_runs: list[TrainingRun] = []
    skill_reports: list[SkillReport] = []
    for root in roots:
        if not Path(root).is_dir():
            raise ReportError(f"{root}: no such folder")
        results += find_eval_results(root)
        reward_runs += find_reward_runs(root)
        training_runs += find_training_runs(root)
        skill_reports += find_skill_reports(root)
    if not (results or reward_runs or training_runs or skill_reports):
        raise ReportError(
            "found nothing to report below " + ", ".join(str(r) for r in roots)
            + " (looked for */eval/*_seed*.json, */reward_metrics/metrics.csv, */skill_stats.json, */.summary/, "
              "*/skill_report.md)")
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    parts = ["# Results", ""]
    if results:
        parts += ["## Zero-shot evaluation", "", results_table(results, paper), ""]
        warning = meta_policy_error_warning(results)
        if warning:
            logger.warning("%s", warning.replace("**", ""))
            parts += [warning, ""]
    if training_runs:
        parts += ["## Skill training", "", training_table(training_runs), ""]
        warning = training_error_warning(training_runs)
        if warning:
            logger.warning("%s", warning.replace("**", ""))
            parts += [warning, ""]
        stats = episode_stats_table(training_runs)
        if stats:
            parts += [f"Episode statistics (final value: mean of the last {FINAL_POINTS} logged points):", "",
                      stats, ""]
        measures = measures_table(training_runs)
        if measures:
            parts += ["### Skill measures during training", "",
                      "Per episode, over the steps the skill was active (measures/{skill}/{measure}):", "",
                      measures, ""]
    if skill_reports:
        parts += [f"## {SKILL_REPORT_HEADING}", ""]
        for report in skill_reports:
            if len(skill_reports) > 1:
                parts += [f"### {report.experiment}", ""]
            parts += skill_report_section(report)
            if out is not None and plots and report.png is not None:
                name = SKILL_REPORT_PNG if len(skill_reports) == 1 else f"skill_report_{report.experiment}.png"
                shutil.copyfile(report.png, out / name)
                files.append(out / name)
                parts += [f"![forced-skill evaluation of {report.experiment}]({name})", ""]
    if reward_runs:
        parts += ["## Reward models", "", reward_table(reward_runs), ""]
    if out is not None:
        if plots:
            drawn: list[tuple[Path, str]] = []
            for ok, name, fn, items in ((results, SUCCESS_PNG, plot_success, results),
                                        (training_runs, TRAINING_PNG, plot_training, training_runs),
                                        (reward_runs, REWARD_PNG, plot_reward_accuracy, reward_runs)):
                if ok:
                    fn(items, out / name)
                    drawn.append((out / name, Path(name).stem))
            for name, caption, draw in CURVE_PLOTS:
                if training_runs and draw(training_runs, out / name):
                    drawn.append((out / name, caption))
            files += [path for path, _ in drawn]
            parts += ["## Plots", ""] + [f"![{caption}]({path.name})" for path, caption in drawn] + [""]
        md = out / RESULTS_MD
        md.write_text("\n".join(parts))
        files.insert(0, md)
    return Report("\n".join(parts), results, reward_runs, training_runs, files, skill_reports)
