"""Zero-shot evaluation results: reading ``{experiment}/eval/{task}_seed{code_seed}.json``
(:class:`EvalResult`, :func:`find_eval_results`), their table with the paper's column
(:func:`results_table`) and the warning naming the tasks whose meta-policy raised
(:func:`meta_policy_error_warning`)."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from common.estimates import INTERVAL_NOTE, held_in_range
from common.file_errors import load_json
from common.vocabulary import EVAL_TASKS, TASK_MEASURE
from orchestration.baseline_cost import annotation_model, stand_in_annotated
from orchestration.paper_results import NOT_COMPARABLE_NOTE, PAPER_RESULTS, format_value
from rl_baseline.flag_types import parse_list_flag

from .shared import (
    COST_FILE,
    STRUCTURE_FOLDERS,
    ReportError,
    _float,
    baseline_folder,
    baseline_of,
    baseline_title,
    find_inputs,
    read_cost,
    skip,
)

# the package's logger: log lines keep the name they had before the package was split
logger = logging.getLogger(__package__)


MAESTROMOTIF = "MaestroMotif"
STAND_IN_ANNOTATOR = "skill rewards from the heuristic stand-in annotator (rules, not an LLM)"
#: a skill policy trained with --skill_reward progress: each skill paid its own measure, not a reward model
PROGRESS_DIAGNOSTIC = "the privileged progress diagnostic (--skill_reward progress): not the method"
#: the label of a pipeline run annotated by a language model (``--annotator smollm2``: the model's name)
LLM_ANNOTATOR_PREFIX = "skill rewards from labels by the language model "
LLM_ANNOTATOR = LLM_ANNOTATOR_PREFIX + "{model}"


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
    # the method the result belongs to: "MaestroMotif", or a baseline's name (``baselines/{name}/`` in its
    # path, or the ``method`` the JSON names); ``label`` is the column's honest name (a stand-in said so)
    method: str = MAESTROMOTIF
    label: str = ""
    variant: str = ""  # one of several runs of a method (an annotator size, ...); empty for one run
    #: the headline's 95% interval (None: a file that records none)
    ci95: Optional[tuple[float, float]] = None

    @property
    def column(self) -> tuple[str, str]:
        """The results-table column of this result: MaestroMotif's experiments each get one, a
        baseline one per variant (its per-task runs share it)."""
        return (self.method, self.experiment if self.method == MAESTROMOTIF else self.variant)


def _experiment_of(path: Path) -> str:
    # {experiment}/eval/{task}_seed{N}.json (or eval_untrained/, eval_random/)
    return path.parent.parent.name if path.parent.name.startswith("eval") else path.parent.name


def load_eval_result(path: str | Path) -> EvalResult:
    """One evaluation JSON; :class:`ReportError` naming the file when it is not one."""
    path = Path(path)
    data = load_json(path, "evaluation result (JSON written by scripts.main --evaluation True)",
                     "Run the evaluation again to rewrite it", ReportError)
    if "task" not in data or "mean" not in data:
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
        method=str(data.get("method") or MAESTROMOTIF),
        label=str(data.get("label") or ""),
        ci95=_pair(data.get("ci95")),
    )


def _pair(value: object) -> Optional[tuple[float, float]]:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return _float(value[0]), _float(value[1])
    return None


#: the evaluation measures that cannot go below zero (a success rate, a count per episode): their printed interval
#: is held within [0, ...] (:func:`common.estimates.held_in_range`), whatever a file recorded
NON_NEGATIVE_MEASURES = ("success", "count")


def format_interval(measure: str, ci: Optional[tuple[float, float]]) -> str:
    """``[20.1%, 79.9%]`` for a success rate, ``[1.00, 3.00]`` for a count; ``n/a`` when there is none. The interval
    of a success rate is printed within [0, 1] and that of a count within [0, ...], so a file that recorded bounds
    below zero (another tool's, or edited) does not print one."""
    if ci is None or ci[0] != ci[0] or ci[1] != ci[1]:
        return "n/a"
    if measure in NON_NEGATIVE_MEASURES:
        ci = held_in_range(ci[0], ci[1], 0.0, 1.0 if measure == "success" else float("inf"))
    if measure == "success":
        return f"[{100.0 * ci[0]:.1f}%, {100.0 * ci[1]:.1f}%]"
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _task_order(task: str) -> int:
    return EVAL_TASKS.index(task) if task in EVAL_TASKS else len(EVAL_TASKS)


#: the reference evaluations of ``scripts.main --eval_policy`` (folder beside ``eval/``: the column's name)
REFERENCE_FOLDERS = {"eval_untrained": "untrained network (reference)", "eval_random": "random actions (reference)"}


def find_eval_results(root: str | Path) -> list[EvalResult]:
    """Every ``*/eval/*_seed*.json`` below ``root`` (and the references of ``--eval_policy`` in
    ``*/eval_untrained/``, ``*/eval_random/``), sorted by experiment, then task order.

    Unreadable files are skipped with a warning."""
    out: list[EvalResult] = []
    costs: dict[Path, Optional[dict]] = {}  # each baseline's cost.json, by folder
    own_labels: dict[Path, str] = {}  # what paid each experiment's skills (its config.json), by folder
    stand_in = Path(root).is_dir() and stand_in_annotated(root)  # this run's skills: the stand-in labelled them
    llm = annotation_model(root) if Path(root).is_dir() and not stand_in else None  # ... or a language model
    paths = [p for folder in ("eval",) + tuple(REFERENCE_FOLDERS) for p in find_inputs(root, f"{folder}/*_seed*.json")]
    for path in paths:
        try:
            result = load_eval_result(path)
        except ReportError as exc:
            skip(path, exc)
            continue
        name = baseline_of(path, root)
        if path.parent.name in REFERENCE_FOLDERS:
            # scripts.main --eval_policy untrained/random: a reference column, never the method's own
            result.method = REFERENCE_FOLDERS[path.parent.name]
            result.variant = path.parent.parent.name
        elif name is not None:
            _as_baseline(result, name, Path(root), path, costs)
        elif not result.label and _experiment_label(path.parent.parent, own_labels):
            own = own_labels[path.parent.parent]
            # the root's annotation markers also know the answer mode, which the labels' metadata does not keep
            result.label = LLM_ANNOTATOR.format(model=llm) if llm and own.startswith(LLM_ANNOTATOR_PREFIX) else own
        elif not result.label and stand_in:
            result.label = STAND_IN_ANNOTATOR
        elif not result.label and llm:
            result.label = LLM_ANNOTATOR.format(model=llm)
        out.append(result)
    _drop_common_parts(out)
    out.sort(key=lambda r: (r.experiment, _task_order(r.task), r.task, r.code_seed or 0))
    return out


def _as_baseline(result: EvalResult, name: str, root: Path, path: Path, costs: dict) -> None:
    """A result under ``baselines/{name}/``: its method, the label of the baseline's ``cost.json`` (which
    says when a stand-in played the LLM), and the run it belongs to when the baseline has several."""
    result.method = name
    base = baseline_folder(path, root)
    if base is not None and base not in costs:  # read once per baseline (a warning once if unreadable)
        costs[base] = read_cost(base / COST_FILE)
    cost = costs.get(base) if base is not None else None
    if cost is not None and cost.get("label"):
        result.label = str(cost["label"])
    # the folders between baselines/{name}/ and eval/ that are not the task's own or the plan's
    # structure name the run: an annotator size, a per-skill-heads experiment, ...
    inner = path.parent.parent.relative_to(base).parts if base is not None else ()
    parts = [p for p in inner if p not in STRUCTURE_FOLDERS and p != result.task and p != name]
    if result.experiment not in (result.task, name) and result.experiment not in parts:
        parts.append(result.experiment)
    result.variant = "/".join(dict.fromkeys(p for p in parts if p != result.task))


def _drop_common_parts(results: Sequence[EvalResult]) -> None:
    """A baseline's run names keep only what tells its runs apart (``8b/scale`` and ``70b/scale``: 8b, 70b)."""
    by_method: dict[str, list[EvalResult]] = {}
    for r in results:
        if r.method != MAESTROMOTIF:
            by_method.setdefault(r.method, []).append(r)
    for rs in by_method.values():
        parts = [r.variant.split("/") if r.variant else [] for r in rs]
        common = set.intersection(*(set(p) for p in parts)) if parts else set()
        for r, p in zip(rs, parts):
            r.variant = "/".join(x for x in p if x not in common)


def _experiment_label(experiment_dir: Path, seen: dict[Path, str]) -> str:
    """What paid an experiment's skills, from its saved ``config.json`` (read once per folder into ``seen``):
    :data:`PROGRESS_DIAGNOSTIC` for ``--skill_reward progress``; for reward models, who labelled the pairs they
    were distilled from (each ``--reward_dir`` model's checkpoint names its preferences, whose metadata says):
    :data:`STAND_IN_ANNOTATOR` when any was a rule-based stand-in, else the language model. Empty when it
    cannot be told (no readable config or metadata): the report root's annotation logs decide then."""
    if experiment_dir not in seen:
        seen[experiment_dir] = ""
        try:
            config = json.loads((experiment_dir / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return ""
        if not isinstance(config, dict):
            return ""
        if config.get("skill_reward") == "progress":
            seen[experiment_dir] = PROGRESS_DIAGNOSTIC
        else:
            seen[experiment_dir] = _reward_models_label(config.get("reward_dir"))
    return seen[experiment_dir]


def _reward_models_label(reward_dir: object) -> str:
    """The column label for skills paid by the reward models of a ``--reward_dir`` value (see
    :func:`_experiment_label`); empty when no model's annotation metadata can be read."""
    from rlaif.train_reward import reward_labels_meta  # lazy: torch, only for a report over trained runs

    dirs = [str(d) for d in parse_list_flag(reward_dir, "--reward_dir")]
    metas = [m for m in (reward_labels_meta(d) for d in dirs) if m is not None]
    if any(m.get("stand_in") for m in metas):
        return STAND_IN_ANNOTATOR
    model = next((str(m["model"]) for m in metas if m.get("model")), None)
    return LLM_ANNOTATOR.format(model=model) if model else ""


def column_label(results: Sequence[EvalResult]) -> str:
    """The heading of one column: the method's short name, its run when it has several, and
    "stand-in" when its label says a rule-based stand-in played the LLM (the legend has the full label)."""
    first = results[0]
    if first.method == MAESTROMOTIF:
        if any(r.label == PROGRESS_DIAGNOSTIC for r in results):
            return f"progress diagnostic ({first.experiment}; not the method)"
        stand_in = any("stand-in" in r.label for r in results)
        llm = next((r.label[len(LLM_ANNOTATOR_PREFIX):] for r in results if r.label.startswith(LLM_ANNOTATOR_PREFIX)),
                   None)
        return f"MaestroMotif ({first.experiment}{', stand-in' if stand_in else ''}{', ' + llm if llm else ''})"
    title = baseline_title(first.method)
    if first.variant:
        title += f" [{first.variant}]"
    if any("stand-in" in r.label for r in results):
        title += " (stand-in)"
    return title


def column_full_label(results: Sequence[EvalResult]) -> str:
    """What ran behind a column: the baseline's own label (from its ``cost.json`` or result JSON)."""
    return next((r.label for r in results if r.label), "")


def column_scale(results: Sequence[EvalResult]) -> str:
    """How big the run behind a column is: its policy's training env steps and the episodes per task."""
    steps = sorted({r.env_steps for r in results if r.env_steps})
    episodes = sorted({r.episodes for r in results})
    trained = ("no training" if not steps else
               f"policy trained {steps[0]:,} env steps" if len(steps) == 1 else
               f"policies trained {steps[0]:,} to {steps[-1]:,} env steps")
    runs = f"{episodes[0]}" if len(episodes) == 1 else f"{episodes[0]} to {episodes[-1]}"
    return f"{trained}; {runs} evaluation episodes per task"


def columns_of(results: Sequence[EvalResult]) -> dict[tuple[str, str], list[EvalResult]]:
    """The results by column, MaestroMotif's first, then the baselines in name order."""
    out: dict[tuple[str, str], list[EvalResult]] = {}
    for r in sorted(results, key=lambda r: (r.method != MAESTROMOTIF, r.column)):
        out.setdefault(r.column, []).append(r)
    return out


def results_table(results: Sequence[EvalResult], paper: bool = True) -> str:
    """Markdown table: task, measure, value +- s.e., its 95% interval (the note names the methods), episodes,
    meta-policy errors (blank for files written before they were counted) and the paper's column. With more
    than one column of results (experiments, baselines): one row per task, one column per method, the paper's
    MaestroMotif and best baseline next to them, and a legend giving each column's scale
    (:func:`wide_results_table`)."""
    if len(columns_of(results)) > 1:
        return wide_results_table(results, paper)
    multi = len({r.experiment for r in results}) > 1
    head = ["task", "measure", "value +- s.e.", "95% interval", "episodes", "meta-policy errors"]
    if multi:
        head.insert(0, "experiment")
    if paper:
        head.append("MaestroMotif (paper, not comparable)")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in results:
        row = [r.task, r.measure, format_value(r.measure, r.mean, r.stderr), format_interval(r.measure, r.ci95),
               str(r.episodes), "" if r.meta_policy_errors is None else str(r.meta_policy_errors)]
        if multi:
            row.insert(0, r.experiment)
        if paper:
            ref = PAPER_RESULTS.get(r.task)
            row.append(ref.formatted() if ref else "n/a")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", INTERVAL_NOTE + " n/a: no interval (a single episode, or a file that records none)."]
    if paper:
        lines += ["", f"Note: {NOT_COMPARABLE_NOTE}"]
    return "\n".join(lines)


def wide_results_table(results: Sequence[EvalResult], paper: bool = True) -> str:
    columns = columns_of(results)
    head = ["task", "measure"] + [column_label(rs) for rs in columns.values()]
    if paper:
        head += ["MaestroMotif (paper)", "best baseline (paper)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    tasks = sorted({r.task for r in results}, key=lambda t: (_task_order(t), t))
    for task in tasks:
        measure = next(r.measure for r in results if r.task == task)
        row = [task, measure]
        for rs in columns.values():
            cell = [r for r in rs if r.task == task]
            row.append("; ".join(f"{format_value(r.measure, r.mean, r.stderr)} ({r.episodes})" for r in cell)
                       if cell else "")
        if paper:
            ref = PAPER_RESULTS.get(task)
            row += [ref.formatted() if ref else "n/a", ref.best_baseline if ref else "n/a"]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Each cell: mean +- standard error (episodes). The columns, and the scale of the run behind each:", ""]
    for rs in columns.values():
        where = sorted({str(r.path.parent) for r in rs})
        full = column_full_label(rs)
        lines.append(f"- **{column_label(rs)}**: {full + '; ' if full else ''}{column_scale(rs)}; "
                     f"`{where[0]}`{' and ' + str(len(where) - 1) + ' more' if len(where) > 1 else ''}")
    if any(r.label == STAND_IN_ANNOTATOR for r in results):
        lines += ["", "This run's skill reward models were labelled by the heuristic stand-in annotator; the "
                      "baselines that reuse them (skills in isolation, per-skill heads, the hierarchical LLM "
                      "policy) inherit it."]
    if paper:
        lines += ["", f"Note: {NOT_COMPARABLE_NOTE} The paper's best baseline is the best of its baselines on "
                      "the task, at the paper's scale."]
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
