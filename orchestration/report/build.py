"""The report itself: :func:`build_report` collects evaluations, training runs, forced-skill
evaluations and reward models below the root folders and writes ``results.md`` and the plots
(:class:`Report`)."""
from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from .costs import cost_table, find_costs
from .evaluation import EvalResult, find_eval_results, meta_policy_error_warning, results_table
from .plots import CURVE_PLOTS, REWARD_PNG, SUCCESS_PNG, TRAINING_PNG, plot_reward_accuracy, plot_success, plot_training
from .rewards import RewardRun, find_reward_runs, reward_table
from .shared import SKIPPED, ReportError
from .skill_section import SKILL_REPORT_HEADING, SKILL_REPORT_PNG, SkillReport, find_skill_reports, skill_report_section
from .training import (
    DEFAULT_WINDOW,
    FINAL_POINTS,
    WINDOW_NOTE,
    TrainingRun,
    episode_stats_table,
    find_training_runs,
    measures_table,
    training_error_warning,
    training_table,
    window_table,
)

# the package's logger: log lines keep the name they had before the package was split
logger = logging.getLogger(__package__)

RESULTS_MD = "results.md"


@dataclass
class Report:
    markdown: str
    results: list[EvalResult]
    reward_runs: list[RewardRun]
    training_runs: list[TrainingRun]
    files: list[Path]
    skill_reports: list[SkillReport] = field(default_factory=list)


def build_report(roots: Sequence[str | Path], out_dir: Optional[str | Path] = None, paper: bool = True,
                 plots: bool = True, window: int = DEFAULT_WINDOW) -> Report:
    """Collects everything below ``roots``; writes results.md and the plots to ``out_dir`` when given.
    ``window``: env steps at each end of a training run for the first-against-last table."""
    SKIPPED.clear()
    results: list[EvalResult] = []
    reward_runs: list[RewardRun] = []
    training_runs: list[TrainingRun] = []
    skill_reports: list[SkillReport] = []
    for root in roots:
        if Path(root).exists() and not Path(root).is_dir():
            raise ReportError(f"{root}: a file, not a folder; give the folder of runs (a --train_dir or a pipeline's "
                              "--out_dir)")
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
    costs = []
    for root in roots:
        costs += find_costs(root)
    if costs:
        parts += ["## Cost per method", "", cost_table(costs), ""]
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
        windows = window_table(training_runs, window)
        if windows:
            parts += ["### First and last window of training", "",
                      "Means of the logged points (each a mean over recent episodes) in the first and in the last "
                      "window of each run. " + WINDOW_NOTE, "", windows, ""]
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
    if SKIPPED:
        parts += ["## Files skipped", "",
                  "These input files could not be read (damaged, or of another kind) and are left out above:", ""]
        parts += [f"- {line}" for line in SKIPPED] + [""]
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
