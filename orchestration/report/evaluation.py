"""Zero-shot evaluation results: reading ``{experiment}/eval/{task}_seed{code_seed}.json``
(:class:`EvalResult`, :func:`find_eval_results`), their table with the paper's column
(:func:`results_table`) and the warning naming the tasks whose meta-policy raised
(:func:`meta_policy_error_warning`)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from common.vocabulary import EVAL_TASKS, TASK_MEASURE
from orchestration.paper_results import NOT_COMPARABLE_NOTE, PAPER_RESULTS, format_value

from .shared import ReportError, _float, find_inputs, skip

# the package's logger: log lines keep the name they had before the package was split
logger = logging.getLogger(__package__)


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


def load_eval_result(path: str | Path) -> EvalResult:
    """One evaluation JSON; :class:`ReportError` naming the file when it is not one."""
    from common.file_errors import load_json

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
    )


def _task_order(task: str) -> int:
    return EVAL_TASKS.index(task) if task in EVAL_TASKS else len(EVAL_TASKS)


def find_eval_results(root: str | Path) -> list[EvalResult]:
    """Every ``*/eval/*_seed*.json`` below ``root``, sorted by experiment, then task order.

    Unreadable files are skipped with a warning."""
    out: list[EvalResult] = []
    for path in find_inputs(root, "eval/*_seed*.json"):
        try:
            out.append(load_eval_result(path))
        except ReportError as exc:
            skip(path, exc)
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
