"""The PNG plots of the report: zero-shot evaluation against the paper (:func:`plot_success`),
skill training, the training curves of :data:`CURVE_PLOTS` (intrinsic return, skill share,
non-zero fraction, episode length, skill measures; a light moving average over the logged
points) and the reward models' validation accuracy. matplotlib is imported when a plot is drawn."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Sequence

from common.estimates import pair_count
from common.vocabulary import SKILLS
from orchestration.paper_results import PAPER_RESULTS
from rl_baseline.tasks.skill_measures import MAIN_MEASURE

from .evaluation import EvalResult
from .rewards import RewardRun
from .training import EPISODE_LEN_TAG, TrainingRun

SUCCESS_PNG = "success.png"
TRAINING_PNG = "skill_training.png"
REWARD_PNG = "reward_accuracy.png"
RETURN_PNG = "curves_intrinsic_return.png"
SHARE_PNG = "curves_skill_share.png"
NONZERO_PNG = "curves_nonzero_fraction.png"
LENGTH_PNG = "curves_episode_length.png"
MEASURES_PNG = "curves_skill_measures.png"


def _pyplot():
    import matplotlib  # lazy: slow to import; only when a plot is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: only once the Agg backend is chosen

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
    """Validation accuracy of each reward model over iterations, each labelled with its pair count
    (:func:`common.estimates.pair_count`: flagged below the minimum)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for run in runs:
        ax.plot(run.iterations, run.val_acc, marker="o",
                label=f"{run.skill or run.experiment} ({pair_count(run.final_val_pairs)})")
    ax.axhline(0.5, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("iteration")
    ax.set_ylabel("validation accuracy (non-tie pairs)")
    ax.set_title("reward models")
    if runs:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_tag_curves(runs: Sequence[tuple[str, Callable[[str], tuple[list[int], list[float]]]]],
                    tags: Sequence[str], path: Path, title: str = "") -> None:
    """One panel per tensorboard tag, one curve per run (``(label, series of a tag)``), against env steps: the
    measures of several runs over training side by side (``scripts.training_window --plot``)."""
    plt = _pyplot()
    cols = min(3, len(tags))
    rows = math.ceil(len(tags) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.4 * rows), squeeze=False)
    for ax, tag in zip(axes.flat, tags):
        for label, series in runs:
            steps, values = series(tag)
            if steps:
                _curve(ax, steps, values, label)
        ax.set_title(tag, fontsize=10)
        ax.set_xlabel("env steps")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(tags):]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
