"""Names of the evaluation tasks and the training policy (their one home).

Pure Python on purpose: code generation and scripts import it without NLE.
"""
from __future__ import annotations

TRAINING_TASK = "exploration"
NAVIGATION_TASKS: tuple[str, ...] = ("gnomish", "delphi", "minetown")
INTERACTION_TASKS: tuple[str, ...] = ("transactions", "price", "buc")
COMPOSITE_TASKS: tuple[str, ...] = ("goldenexit", "levelupsell", "discoveryhunger")
EVAL_TASKS: tuple[str, ...] = NAVIGATION_TASKS + INTERACTION_TASKS + COMPOSITE_TASKS
ALL_TASKS: tuple[str, ...] = (TRAINING_TASK,) + EVAL_TASKS

# How each task's result is measured: "success" is a rate over episodes, "count" a
# mean count per episode (as reported in the paper's tables).
TASK_MEASURE: dict[str, str] = {
    "gnomish": "success",
    "delphi": "success",
    "minetown": "success",
    "transactions": "count",
    "price": "count",
    "buc": "count",
    "goldenexit": "success",
    "levelupsell": "success",
    "discoveryhunger": "success",
}


def check_eval_target(name: str) -> str:
    if name not in EVAL_TASKS:
        raise ValueError(f"unknown eval target {name!r}; valid targets: {', '.join(EVAL_TASKS)}")
    return name


def check_task(name: str) -> str:
    if name not in ALL_TASKS:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(ALL_TASKS)}")
    return name
