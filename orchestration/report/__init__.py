"""Collects the results of a run folder into one Markdown report and PNG plots.

Reads, anywhere below a root folder:

* evaluation results ``{train_dir}/{experiment}/eval/{task}_seed{code_seed}.json``
  (written by :mod:`rl_baseline.evaluation`: task, measure, mean, stderr, episodes, and
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

The package, one responsibility a module (all the names below are importable from the package):
:mod:`.evaluation` (evaluation results), :mod:`.training` (skill training runs and their tables),
:mod:`.rewards` (reward-model metrics), :mod:`.skill_section` (the forced-skill evaluation),
:mod:`.plots` (the PNG files), :mod:`.build` (:func:`build_report`, ``results.md``) and
:mod:`.shared` (:class:`ReportError` and the number helpers).
"""
from __future__ import annotations

from .build import RESULTS_MD, Report, build_report
from .evaluation import EvalResult, find_eval_results, load_eval_result, meta_policy_error_warning, results_table
from .plots import (
    CURVE_PLOTS,
    LENGTH_PNG,
    MEASURES_PNG,
    NONZERO_PNG,
    RETURN_PNG,
    REWARD_PNG,
    SHARE_PNG,
    SUCCESS_PNG,
    TRAINING_PNG,
    plot_episode_length,
    plot_reward_accuracy,
    plot_skill_curves,
    plot_skill_measures,
    plot_success,
    plot_training,
)
from .rewards import RewardRun, find_reward_runs, load_reward_metrics, reward_table
from .shared import ReportError
from .skill_section import (
    SKILL_REPORT_HEADING,
    SKILL_REPORT_JSON,
    SKILL_REPORT_MD,
    SKILL_REPORT_PNG,
    SkillReport,
    find_skill_reports,
    markdown_tables,
    skill_report_body,
    skill_report_json_table,
    skill_report_section,
)
from .training import (
    DEFAULT_WINDOW,
    EPISODE_LEN_TAG,
    EPISODE_STATS,
    FINAL_POINTS,
    SKILL_TAGS,
    TB_PREFIXES,
    WINDOW_NOTE,
    TagWindows,
    TrainingRun,
    episode_stats_table,
    final_value,
    find_training_runs,
    measures_table,
    read_tensorboard_scalars,
    run_extent,
    tag_windows,
    training_error_warning,
    training_table,
    window_means,
    window_table,
)

__all__ = [
    "CURVE_PLOTS",
    "EPISODE_LEN_TAG",
    "EPISODE_STATS",
    "EvalResult",
    "FINAL_POINTS",
    "LENGTH_PNG",
    "MEASURES_PNG",
    "NONZERO_PNG",
    "RESULTS_MD",
    "RETURN_PNG",
    "REWARD_PNG",
    "Report",
    "ReportError",
    "RewardRun",
    "SHARE_PNG",
    "SKILL_REPORT_HEADING",
    "SKILL_REPORT_JSON",
    "SKILL_REPORT_MD",
    "SKILL_REPORT_PNG",
    "SKILL_TAGS",
    "SUCCESS_PNG",
    "SkillReport",
    "TB_PREFIXES",
    "DEFAULT_WINDOW",
    "TRAINING_PNG",
    "TrainingRun",
    "build_report",
    "episode_stats_table",
    "final_value",
    "find_eval_results",
    "find_reward_runs",
    "find_skill_reports",
    "find_training_runs",
    "load_eval_result",
    "load_reward_metrics",
    "markdown_tables",
    "measures_table",
    "meta_policy_error_warning",
    "plot_episode_length",
    "plot_reward_accuracy",
    "plot_skill_curves",
    "plot_skill_measures",
    "plot_success",
    "plot_training",
    "read_tensorboard_scalars",
    "results_table",
    "reward_table",
    "skill_report_body",
    "skill_report_json_table",
    "skill_report_section",
    "training_error_warning",
    "training_table",
    "TagWindows",
    "WINDOW_NOTE",
    "run_extent",
    "tag_windows",
    "window_means",
    "window_table",
]
