"""The paper's headline zero-shot results (MaestroMotif column and best baseline), one home.

Values are as reported in the MaestroMotif paper (ICLR 2025) for each evaluation task:
success tasks as a rate in [0, 1], count tasks as a mean count per episode; the
``stderr`` is the reported standard error on the same scale. Pure Python: scripts and
reports import it without NLE or sample-factory.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from common.vocabulary import EVAL_TASKS, TASK_MEASURE


@dataclass(frozen=True)
class PaperResult:
    """One row of the paper's results table."""

    task: str
    measure: str  # "success" (rate in [0, 1]) or "count" (mean per episode), as TASK_MEASURE
    description: str
    value: float
    stderr: float
    best_baseline: str

    def formatted(self) -> str:
        return format_value(self.measure, self.value, self.stderr)


PAPER_RESULTS: dict[str, PaperResult] = {
    r.task: r
    for r in (
        PaperResult("gnomish", "success", "reach the Gnomish Mines", 0.46, 0.017, "Motif 9%"),
        PaperResult("delphi", "success", "reach the Oracle level", 0.29, 0.012, "Motif 2%"),
        PaperResult("minetown", "success", "reach Minetown", 0.072, 0.005, "0%"),
        PaperResult("transactions", "count", "shop sales per episode", 0.66, 0.01, "Motif 0.08"),
        PaperResult("price", "count", "items price-identified per episode", 0.47, 0.01, "Motif 0.02"),
        PaperResult("buc", "count", "items BUC-identified at an altar per episode", 1.60, 0.01, "Motif 0.05"),
        PaperResult("goldenexit", "success",
                    "visit levels 1-3, collect >= 20 gold, defeat 25 monsters, then try to leave the dungeon",
                    0.248, 0.012, "0%"),
        PaperResult("levelupsell", "success",
                    "stay on level 1 until XP level 4, then sell an item, then survive 300 more steps",
                    0.071, 0.010, "0%"),
        PaperResult("discoveryhunger", "success",
                    "find the Gnomish Mines and eat there after getting hungry, then reach the Oracle level",
                    0.079, 0.015, "0%"),
    )
}

# Kept in step with the task list and measures by construction; a mismatch is a bug here.
assert tuple(PAPER_RESULTS) == EVAL_TASKS, "PAPER_RESULTS must follow EVAL_TASKS"
assert all(PAPER_RESULTS[t].measure == TASK_MEASURE[t] for t in EVAL_TASKS)

NOT_COMPARABLE_NOTE = (
    "The paper column is MaestroMotif at full scale (Llama 3.1 70B/405B, 4e9 env steps); "
    "a small run is NOT comparable to it."
)


def format_value(measure: str, value: Optional[float], stderr: Optional[float] = None) -> str:
    """``46.0% +- 1.7`` for success rates, ``0.66 +- 0.01`` for counts; ``n/a`` when missing."""
    if value is None or value != value:  # None or NaN
        return "n/a"
    if measure == "success":
        text = f"{100.0 * value:.1f}%"
        if stderr is not None and stderr == stderr:
            text += f" +- {100.0 * stderr:.1f}"
        return text
    text = f"{value:.2f}"
    if stderr is not None and stderr == stderr:
        text += f" +- {stderr:.2f}"
    return text


def paper_result(task: str) -> PaperResult:
    try:
        return PAPER_RESULTS[task]
    except KeyError:
        raise ValueError(f"no paper result for task {task!r}; tasks: {', '.join(PAPER_RESULTS)}") from None
