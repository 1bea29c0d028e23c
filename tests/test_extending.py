"""docs/extending.md holds: every task of the vocabulary is in each place the guide lists for a new task,
and the task descriptions have one home (common.vocabulary) without any prompt having changed."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Callable

import pytest

from common.vocabulary import (
    ALL_TASKS,
    COMPOSITE_TASKS,
    EVAL_TASKS,
    SKILLS,
    TASK_DESCRIPTIONS,
    TASK_GOALS,
    TASK_MEASURE,
)

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "extending.md"


def _in_vocabulary(task: str) -> bool:
    return task in EVAL_TASKS and all(task in table for table in (TASK_MEASURE, TASK_DESCRIPTIONS, TASK_GOALS))


def _code_generation_files(task: str) -> bool:
    from code_generation.prompts import TASK_FILES

    names = TASK_FILES + ("reference_policy.py",) + (("attributes_prompt.txt",) if task in COMPOSITE_TASKS else ())
    return all((REPO / "code_generation" / task / name).is_file() for name in names)


def _code_generation_hooks(task: str) -> bool:
    from code_generation.prompts import TASK_HOOKS

    return task in TASK_HOOKS


def _meta_policy(task: str) -> bool:
    folder = REPO / "rl_baseline" / "meta_policies" / task
    return all((folder / name).is_file() for name in ("__init__.py", "seed42/__init__.py", "seed42/execution.py"))


def _detector(task: str) -> bool:
    from rl_baseline.tasks.detectors import has_detector

    return has_detector(task)


def _release_rule(task: str) -> bool:
    from rl_baseline.tasks.release_protocol import RELEASE_RULES

    return task in RELEASE_RULES


def _paper_result(task: str) -> bool:
    from orchestration.paper_results import PAPER_RESULTS

    return task in PAPER_RESULTS


def _heuristic_rules(task: str) -> bool:
    from rlaif.heuristic import TASK_SKILL_RULES, TASK_WORDS

    return task in TASK_SKILL_RULES and task in TASK_WORDS


def _settings_test(task: str) -> bool:
    from tests.test_meta_policy_settings import RELEASE_SETTINGS

    return task in RELEASE_SETTINGS


def _named_in(path: str) -> Callable[[str], bool]:
    def named(task: str) -> bool:
        text = (REPO / path).read_text(encoding="utf-8")
        return re.search(rf"\b{re.escape(task)}\b", text) is not None

    return named


def _main_docstring(task: str) -> bool:
    import scripts.main

    return re.search(rf"\b{re.escape(task)}\b", scripts.main.__doc__ or "") is not None


#: the places of "Add a task" in docs/extending.md -> (the tasks that need it, whether a task is there)
TASK_PLACES: dict[str, tuple[tuple[str, ...], Callable[[str], bool]]] = {
    "common/vocabulary.py": (EVAL_TASKS, _in_vocabulary),
    "code_generation/{task}/": (ALL_TASKS, _code_generation_files),
    "code_generation/prompts.py": (COMPOSITE_TASKS, _code_generation_hooks),
    "rl_baseline/meta_policies/{task}/seed42/": (ALL_TASKS, _meta_policy),
    "rl_baseline/tasks/detectors.py": (EVAL_TASKS, _detector),
    "rl_baseline/tasks/release_protocol.py": (EVAL_TASKS, _release_rule),
    "orchestration/paper_results.py": (EVAL_TASKS, _paper_result),
    "rlaif/heuristic.py": (EVAL_TASKS, _heuristic_rules),
    "tests/test_meta_policy_settings.py": (EVAL_TASKS, _settings_test),
    "scripts/main.py": (EVAL_TASKS, _main_docstring),
    "README.md": (EVAL_TASKS, _named_in("README.md")),
    "docs/phases.md": (EVAL_TASKS, _named_in("docs/phases.md")),
}


def _guide_task_places() -> list[str]:
    """The paths of the list items of the guide's "Add a task" section (``- `path`: ...``)."""
    section = GUIDE.read_text(encoding="utf-8").split("## Add a task", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^- `([^`]+)`", section, flags=re.MULTILINE)


def _is_there(there: Callable[[str], bool], task: str) -> bool:
    try:
        return there(task)
    except AssertionError:  # a table's own check at import (it does not cover the vocabulary): not there either
        return False


def _missing(task: str, tasks_of: Callable[[tuple[str, ...]], tuple[str, ...]] = lambda t: t) -> list[str]:
    """The places of the guide that should hold ``task`` (``tasks_of``: a place's task list) and do not."""
    return [place for place, (tasks, there) in TASK_PLACES.items()
            if task in tasks_of(tasks) and not _is_there(there, task)]


def test_the_guide_and_this_test_name_the_same_places():
    assert _guide_task_places() == list(TASK_PLACES)
    for place in TASK_PLACES:
        assert (REPO / place.split("{task}")[0]).exists(), place


@pytest.mark.parametrize("task", ALL_TASKS)
def test_every_task_is_in_every_place_of_the_guide(task):
    missing = _missing(task)
    assert not missing, f"task {task!r} is missing from {missing} (docs/extending.md, 'Add a task')"


def test_a_task_missing_from_the_places_is_named():
    """The check is live: a task added to the vocabulary alone is missing from every other place."""
    missing = _missing("fakequest", tasks_of=lambda tasks: tasks + ("fakequest",))
    assert missing == list(TASK_PLACES)


# ----------------------------------------------------------------------------- the LLM policies' prompts
#: sha256 of every task's prompts (zero-shot and equivalent action prompts, the skill prompt) as they were
#: when the skills' descriptions took the release's termination rules (code_generation/skills/*_termination.txt).
#: A prompt is part of a recorded result and of the reply cache's key: change these only on purpose.
PROMPT_SHA256: dict[str, str] = {
    "gnomish": "3589622b967e8db5f531b9cbd05690c08e2a167fe7d507359f3d031752821717",
    "delphi": "c674c799887250e4b89d7ab87f57a7321dc97b8fa07a36c4ee3e58e577c53a3d",
    "minetown": "050e77531d6b850b3aea3a67beb86a117da6bf86e31d5e67682d17cc777abbe2",
    "transactions": "e9409ca8570aa181586343b2126fd2d3d0d04a43d79394087c4505a637771d45",
    "price": "7e4967fe14f499e7d9bca5745ba5f47b591162e468298de427d2233132c05a39",
    "buc": "03123794950e8b02c609e6c2c8c79e4f4c05a5bd803232fb079769439ebb44f4",
    "goldenexit": "263ad78626adbc7816f30b5cfcfd31be1788e4f8e43b2876b833a3daf01aaaef",
    "levelupsell": "d42a27e74766b124d1413b8cb373c83a0794bb2ccb1d066c6874e2b7017b93c8",
    "discoveryhunger": "77c54768ce0fa290b9330488b03e1cf31994437265fe1b3e7225ea0c968dfac4",
}


def _prompts(task: str) -> dict[str, list[dict[str, str]]]:
    from rl_baseline.baselines.llm_policy import prompts

    names = tuple(prompts.ACTION_HELP)
    out = {kind: prompts.action_conversation(task, kind, "the map\nthe status lines",
                                             ["step 1: north", "step 2: down"], names)
           for kind in prompts.PROMPT_KINDS}
    out["skill"] = prompts.skill_conversation(task, {"depth": 2, "gold": 13}, "descender", SKILLS[:3],
                                              ["discoverer"])
    return out


@pytest.mark.parametrize("task", EVAL_TASKS)
def test_the_prompts_are_unchanged(task):
    digest = hashlib.sha256(json.dumps(_prompts(task), sort_keys=True).encode("utf-8")).hexdigest()
    assert digest == PROMPT_SHA256[task]
