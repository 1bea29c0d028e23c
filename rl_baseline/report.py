"""Collects the results of a run folder into one Markdown report and PNG plots.

Reads, anywhere below a root folder:

* evaluation results ``{train_dir}/{experiment}/eval/{task}_seed{code_seed}.json``
  (written by :mod:`rl_baseline.sf.evaluate`: task, measure, mean, stderr, episodes, ...);
* skill-training summaries: sample-factory's tensorboard event files
  ``{experiment}/.summary/0/events.out.tfevents.*`` (per-skill ``skills/{s}_share`` and
  ``intrinsic/{s}_mean`` over env steps) and, when there are no event files, the last
  values in ``{experiment}/skill_stats.json``;
* reward-model metrics ``{reward_train_dir}/{experiment}/reward_metrics/metrics.csv``
  (epoch, iteration, train/val loss and accuracy; written by :mod:`rlaif.train_reward`).

Writes ``results.md`` and ``success.png``, ``skill_training.png``, ``reward_accuracy.png``
(a plot is left out when there is nothing to draw). Imports neither NLE nor sample-factory.
"""
from __future__ import annotations

import csv
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from rl_baseline.paper_results import NOT_COMPARABLE_NOTE, PAPER_RESULTS, format_value
from rl_baseline.task_names import EVAL_TASKS, TASK_MEASURE
from rlaif.skills import SKILLS

logger = logging.getLogger(__name__)

RESULTS_MD = "results.md"
SUCCESS_PNG = "success.png"
TRAINING_PNG = "skill_training.png"
REWARD_PNG = "reward_accuracy.png"


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
    """Markdown table: task, measure, value +- s.e., episodes (and the paper's column)."""
    multi = len({r.experiment for r in results}) > 1
    head = ["task", "measure", "value +- s.e.", "episodes"]
    if multi:
        head.insert(0, "experiment")
    if paper:
        head.append("MaestroMotif (paper, not comparable)")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in results:
        row = [r.task, r.measure, format_value(r.measure, r.mean, r.stderr), str(r.episodes)]
        if multi:
            row.insert(0, r.experiment)
        if paper:
            ref = PAPER_RESULTS.get(r.task)
            row.append(ref.formatted() if ref else "n/a")
        lines.append("| " + " | ".join(row) + " |")
    if paper:
        lines += ["", f"Note: {NOT_COMPARABLE_NOTE}"]
    return "\n".join(lines)


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

    def skill_series(self, kind: str, skill: str) -> tuple[list[int], list[float]]:
        """``kind`` "share" or "intrinsic": the series of one skill (our observer's tag first)."""
        base = f"skills/{skill}_share" if kind == "share" else f"intrinsic/{skill}_mean"
        for tag in (base + "_mean", base):
            if tag in self.series and self.series[tag][0]:
                return self.series[tag]
        return [], []


def read_tensorboard_scalars(folder: str | Path, prefixes: Sequence[str] = ("skills/", "intrinsic/")) -> dict:
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
    lines = ["| experiment | skill | last share of steps | last mean intrinsic reward |", "|---|---|---|---|"]
    for run in runs:
        for skill in SKILLS:
            _, share = run.skill_series("share", skill)
            _, intr = run.skill_series("intrinsic", skill)
            if not share and not intr:
                continue
            lines.append(f"| {run.experiment} | {skill} | {_pct(share[-1]) if share else 'n/a'} | "
                         f"{f'{intr[-1]:.4f}' if intr else 'n/a'} |")
    return "\n".join(lines)


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


# ----------------------------------------------------------------------------- the report
@dataclass
class Report:
    markdown: str
    results: list[EvalResult]
    reward_runs: list[RewardRun]
    training_runs: list[TrainingRun]
    files: list[Path]


def build_report(roots: Sequence[str | Path], out_dir: Optional[str | Path] = None, paper: bool = True,
                 plots: bool = True) -> Report:
    """Collects everything below ``roots``; writes results.md and the plots to ``out_dir`` when given."""
    results: list[EvalResult] = []
    reward_runs: list[RewardRun] = []
    training_runs: list[TrainingRun] = []
    for root in roots:
        if not Path(root).is_dir():
            raise ReportError(f"{root}: no such folder")
        results += find_eval_results(root)
        reward_runs += find_reward_runs(root)
        training_runs += find_training_runs(root)
    if not (results or reward_runs or training_runs):
        raise ReportError(
            "found nothing to report below " + ", ".join(str(r) for r in roots)
            + " (looked for */eval/*_seed*.json, */reward_metrics/metrics.csv, */skill_stats.json, */.summary/)")
    parts = ["# Results", ""]
    if results:
        parts += ["## Zero-shot evaluation", "", results_table(results, paper), ""]
    if training_runs:
        parts += ["## Skill training", "", training_table(training_runs), ""]
    if reward_runs:
        parts += ["## Reward models", "", reward_table(reward_runs), ""]
    files: list[Path] = []
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        if plots:
            for ok, name, fn, items in ((results, SUCCESS_PNG, plot_success, results),
                                        (training_runs, TRAINING_PNG, plot_training, training_runs),
                                        (reward_runs, REWARD_PNG, plot_reward_accuracy, reward_runs)):
                if ok:
                    fn(items, out / name)
                    files.append(out / name)
            parts += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in files] + [""]
        md = out / RESULTS_MD
        md.write_text("\n".join(parts))
        files.insert(0, md)
    return Report("\n".join(parts), results, reward_runs, training_runs, files)
