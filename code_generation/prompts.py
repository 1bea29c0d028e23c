"""Prompt files of the code-generation phase, and parsing of the model's answers.

Layout (all under the package folder ``code_generation/``):

* ``system_prompt.txt``, ``unit_test_prompt.txt``
* ``unit_test_harness.py``: a template, rendered for the active skill set by
  :func:`code_generation.skill_rules.render_harness` (:func:`harness_text`)
* ``skill_functions_prompt.txt`` (asks for ``skill_precondition`` / ``skill_termination``)
* ``parts/skill_functions.py``: the template of the reference ``skill_precondition`` /
  ``skill_termination`` methods (``skill_termination``'s branches rendered from the skill files by
  :mod:`code_generation.skill_rules`), joined by ``scripts.combine`` when a run generated none (their one copy)
* ``{task}/initial_prompt.txt``, ``check_prompt.txt``, ``rewrite_prompt.txt``,
  ``initial_values.txt`` (the ``set_initial_values`` method), ``reference_check.py`` (the
  task's reference unit test), and for composite tasks ``attributes_prompt.txt``.
* parts of the shipped modules, read by ``scripts.combine`` (the prompts do not read them):
  ``{task}/reference_policy.py`` (the hand-written reference policy), ``parts/navigation.py``, and a
  ``{task}/skill_functions.py`` where a task's skill functions differ on purpose (none does today).

The skills themselves (their names, descriptions, when each may start and when it ends, and how many there
are) come from the skill files (``skills/*.toml``, :data:`common.vocabulary.SKILL_SET`), never from here.

Placeholders are written ``{{name}}`` and replaced verbatim (code contains braces).
"""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from code_generation.sandbox import PLAYER_CLASS, split_unit_test
from code_generation.skill_rules import budget_attributes_text, render_harness
from common.skill_files import SkillSet
from common.vocabulary import COMPOSITE_TASKS, SKILL_SET, SKILLS, TRAINING_TASK, check_task

PROMPT_DIR = Path(__file__).resolve().parent
TASK_FILES = ("initial_prompt.txt", "check_prompt.txt", "rewrite_prompt.txt", "initial_values.txt", "reference_check.py")

# Hooks a composite task's class must define after the attribute follow-up.
TASK_HOOKS: dict[str, dict[str, int]] = {
    "goldenexit": {"update_gold": 1, "defeat_monster": 0},
    "levelupsell": {"update_xp_level": 1},
    "discoveryhunger": {},  # no hook: the run-time sets the attribute eaten_food (TASK_ATTRIBUTES)
}
# Attributes a composite task's class must set (checked in the source text).
TASK_ATTRIBUTES: dict[str, tuple[str, ...]] = {"discoveryhunger": ("eaten_food",)}


class PromptError(FileNotFoundError):
    """A prompt file is missing."""


def fill(template: str, **values: str) -> str:
    for key, value in values.items():
        template = template.replace("{{" + key + "}}", value)
    left = re.findall(r"\{\{(\w+)\}\}", template)
    if left:
        raise PromptError(f"prompt placeholders left unfilled: {', '.join(sorted(set(left)))}")
    return template


def _read(path: Path) -> str:
    if not path.is_file():
        raise PromptError(f"prompt file not found: {path}")
    return path.read_text(encoding="utf-8")


def skills_text(skill_set: SkillSet = SKILL_SET) -> str:
    """The skills, each with its description and when it may start and ends (the skill files' texts)."""
    return "\n".join(f"{s.index}. {s.name}: {s.description}.\n   Can start: {s.can_start}\n   Ends: {s.ends}"
                     for s in skill_set.specs)


def harness_text(prompt_dir: str | Path | None = None) -> str:
    """The unit-test harness (``unit_test_harness.py``) rendered for the active skill set: the text the model is
    shown and the sandbox runs before every unit test."""
    path = (Path(prompt_dir) if prompt_dir is not None else PROMPT_DIR) / "unit_test_harness.py"
    return render_harness(_read(path), where=str(path))


@dataclass
class TaskPrompts:
    """Every prompt text of one task, placeholders of the fixed parts already filled."""

    task: str
    system: str
    initial: str
    check: str
    rewrite: str
    initial_values: str
    reference_test: str
    harness: str
    attributes: str | None = None
    skill_functions: str | None = None
    hooks: dict[str, int] = field(default_factory=dict)
    attributes_required: tuple[str, ...] = ()

    @classmethod
    def load(cls, task: str, existing_class: str, prompt_dir: str | Path | None = None) -> "TaskPrompts":
        check_task(task)
        base = Path(prompt_dir) if prompt_dir is not None else PROMPT_DIR
        folder = base / task
        harness = harness_text(base)
        unit_test_request = _read(base / "unit_test_prompt.txt")
        skills = skills_text()
        number = SKILL_SET.number_word  # the prompts say how many skills there are, from the skill files
        common = dict(existing_class=existing_class.strip(), harness=harness.strip(), skills=skills,
                      unit_test_request=unit_test_request.strip(), task=task, number_of_skills=number)
        initial = fill(_read(folder / "initial_prompt.txt"), **common)
        attributes = None
        if task in COMPOSITE_TASKS:
            attributes = fill(_read(folder / "attributes_prompt.txt"), task=task)
        skill_fn = fill(_read(base / "skill_functions_prompt.txt"), skills=skills, harness=harness.strip(),
                        number_of_skills=number, budget_attributes=budget_attributes_text())
        return cls(task=task, system=_read(base / "system_prompt.txt").strip(), initial=initial,
                   check=_read(folder / "check_prompt.txt"), rewrite=_read(folder / "rewrite_prompt.txt"),
                   initial_values=_read(folder / "initial_values.txt"),
                   reference_test=_read(folder / "reference_check.py"), harness=harness,
                   attributes=attributes, skill_functions=skill_fn,
                   hooks=dict(TASK_HOOKS.get(task, {})), attributes_required=TASK_ATTRIBUTES.get(task, ()))

    def check_text(self, output: str) -> str:
        return fill(self.check, output=output, task=self.task)

    def rewrite_text(self, output: str) -> str:
        return fill(self.rewrite, output=output, task=self.task)


def skeleton_text(prompt_dir: Path = PROMPT_DIR) -> str:
    """The bare skeleton of the training policy, its comment naming the skills of the set (wrapped as written)."""
    names = [f'"{s}"' for s in SKILLS]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    comment = (f"current_skill: the skill that just ended ({listed}); dungeon_depth: the current depth; "
               "branch_number: 0 in the Dungeons of Doom, 2 in the Gnomish Mines; merchant_precondition: a "
               "shopkeeper is in view of the hero and items can be sold; worshipper_precondition: an altar is in "
               "view of the hero and items can be identified.")
    indent = "        # "
    lines = textwrap.wrap(comment, width=94, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)
    return _read(prompt_dir / "skeleton.py").replace(indent + "{{perform_task_arguments}}", "\n".join(lines))


def existing_class_source(task: str, seed: int, meta_root: str | Path | None = None,
                          prompt_dir: str | Path | None = None) -> str:
    """The class shown in a task's initial prompt.

    The training policy is written from the bare skeleton (``skeleton.py``); every
    evaluation task starts from the training policy's class (the module of the same
    seed if there is one, else the seed-42 reference), without its skill functions.
    """
    base = Path(prompt_dir) if prompt_dir is not None else PROMPT_DIR
    if task == TRAINING_TASK:
        return skeleton_text(base)
    root = Path(meta_root) if meta_root is not None else PROMPT_DIR.parent / "rl_baseline" / "meta_policies"
    for candidate in (root / TRAINING_TASK / f"seed{seed}" / "execution.py",
                      root / TRAINING_TASK / "seed42" / "execution.py"):
        if candidate.is_file():
            return split_unit_test(candidate.read_text(encoding="utf-8"))[0]
    return skeleton_text(base)


_BLOCK = re.compile(r"```[ \t]*(?:python|py|Python)?[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(answer: str) -> str | None:
    """The python block of an answer: the last block defining the player class, else the last block."""
    blocks = [b.strip("\n") + "\n" for b in _BLOCK.findall(answer)]
    if not blocks:
        return None
    with_class = [b for b in blocks if f"class {PLAYER_CLASS}" in b]
    return (with_class or blocks)[-1]


def no_code_feedback(answer: str) -> str:
    """What the model is told when :func:`extract_code` finds no block: an opened but unclosed block
    (usually an answer cut at the token limit) is named as such."""
    if re.search(r"```[ \t]*(?:python|py|Python)?[ \t]*\n", answer) and answer.count("```") % 2 == 1:
        return ("Your answer opened a ```python code block but never closed it (it may have been cut at the "
                "answer's token limit), so nothing could be run. Give the whole class again, shorter, in one "
                "closed ```python block.")
    return "Your answer contained no ```python code block, so nothing could be run."


_VERDICT = re.compile(r"VERDICT\s*:\s*\**\s*(YES|NO)\b", re.IGNORECASE)


def parse_verdict(answer: str) -> bool | None:
    """True for 'VERDICT: YES', False for 'VERDICT: NO', None when neither is found."""
    found = _VERDICT.findall(answer)
    if found:
        return found[-1].upper() == "YES"
    head = answer.strip().lower()
    if head.startswith("yes"):
        return True
    if head.startswith("no"):
        return False
    return None

