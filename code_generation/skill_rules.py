"""The skills' start and end rules as code: the texts code generation renders from the skill files.

Each skill file (``skills/*.toml``, :mod:`common.skill_files`) chooses a start rule from ``START_RULES`` and an
end rule from ``END_RULES``. From them this module renders, text to text (the callers read the templates):

* the reference skill functions, ``parts/skill_functions.py``: ``skill_precondition`` as written there (the
  runtime's menu of start conditions: a shopkeeper or an altar in the 7x7 window) and ``skill_termination``, whose
  per-skill branches are rendered here (:func:`termination_branches`);
* the unit-test harness, ``unit_test_harness.py``: its skill table, how the simulated dungeon plays each skill
  (chosen by the skill's rules), which skills need a shopkeeper or an altar, and its checks of
  ``skill_termination`` (:func:`render_harness`);
* the prompt's list of the time budgets ``set_initial_values`` defines (:func:`budget_attributes_text`).

The harness's text is shown to the language model, so it is part of every code-generation prompt: for the
designed five skills every rendering here gives the text written before the skills were files, byte for byte
(tests/test_skill_files_codegen.py).

Placeholders (:func:`render`): a line that is only ``# {{name}}`` takes a block of lines at its indentation;
any other ``{{name}}`` takes the value as it is; a line starting ``## `` is a note on the template, dropped. A
template stays parseable Python, so the project's checks that read every ``.py`` file read it too.
"""
from __future__ import annotations

import re

from common.skill_files import END_RULES, START_RULES, SkillSet, SkillSpec
from common.vocabulary import SKILL_SET


class TemplateError(ValueError):
    """A template that cannot be filled, or a skill the renderings have no text for."""


_BLOCK = re.compile(r"([ \t]*)# \{\{(\w+)\}\}")
#: a line of a template that says it is one (dropped from the rendering)
TEMPLATE_NOTE = "## "
_INLINE = re.compile(r"\{\{(\w+)\}\}")


def render(template: str, where: str, **values: str) -> str:
    """``template`` with its placeholders filled (see the module docstring); every placeholder must be given."""
    lines = []
    for line in template.splitlines(keepends=True):
        block = _BLOCK.fullmatch(line.rstrip("\n"))
        if line.startswith(TEMPLATE_NOTE):
            continue
        if block and block.group(2) in values:
            indent = block.group(1)
            lines += [indent + row + "\n" if row else "\n" for row in values[block.group(2)].splitlines()]
        else:
            lines.append(line)
    text = "".join(lines)
    left = sorted(set(_INLINE.findall(text)) - set(values))
    if left:
        raise TemplateError(f"{where}: placeholders left unfilled: {', '.join(left)}")
    return _INLINE.sub(lambda m: values[m.group(1)], text)


def _quoted(names: list[str]) -> str:
    """A tuple literal of names, as the harness writes ``SIM_SKILLS``."""
    inner = ", ".join(f'"{n}"' for n in names)
    return f"({inner},)" if len(names) == 1 else f"({inner})"


def _spoken(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def in_start_order(skill_set: SkillSet) -> list[SkillSpec]:
    """The skills by start rule (its place in ``START_RULES``: always, then shopkeeper, then altar), then index:
    the order of ``skill_termination``'s branches as the release wrote them (discoverer, descender, ascender,
    merchant, worshipper), so that the rendering of the designed five is today's text."""
    return sorted(skill_set.specs, key=lambda s: (START_RULES.index(s.start), s.index))


# ----------------------------------------------------------------------------- skill_termination
#: what ``skill_termination`` returns for a skill, by its end rule (``{budget}``: its time budget)
_TERMINATION_RETURNS: dict[str, str] = {
    "time_budget": "return skill_time >= {budget}",
    "depth_increase": "return current_depth > previous_depth  # only going down ends it",
    "depth_decrease": "return current_depth < previous_depth  # only going up ends it",
}
if set(_TERMINATION_RETURNS) != set(END_RULES):  # a new end rule needs its code here
    raise TemplateError(f"code_generation/skill_rules.py renders the end rules {sorted(_TERMINATION_RETURNS)}, "
                        f"common/skill_files.py defines {sorted(END_RULES)}")


def _budget(spec: SkillSpec) -> str:
    attribute = f"self.{spec.budget_attribute}"
    if spec.budget_default is None:
        return attribute
    # getattr is refused by the code check (code_generation/sandbox.py); hasattr is not
    return f'({attribute} if hasattr(self, "{spec.budget_attribute}") else {spec.budget_default})'


def termination_branches(skill_set: SkillSet = SKILL_SET) -> str:
    """One ``if skill == ...: return ...`` per skill, in :func:`in_start_order`."""
    return "\n".join(f'if skill == "{s.name}":\n    ' + _TERMINATION_RETURNS[s.end].format(budget=_budget(s))
                     for s in in_start_order(skill_set))


def render_skill_functions(template: str, skill_set: SkillSet = SKILL_SET,
                           where: str = "parts/skill_functions.py") -> str:
    """``parts/skill_functions.py`` with ``skill_termination``'s branches rendered for ``skill_set``."""
    return render(template, where, skill_termination_branches=termination_branches(skill_set))


def time_budget_skills(skill_set: SkillSet = SKILL_SET) -> list[SkillSpec]:
    """The skills that end after a time budget, in :func:`in_start_order`."""
    return [s for s in in_start_order(skill_set) if s.end == "time_budget"]


def budget_attributes_text(skill_set: SkillSet = SKILL_SET) -> str:
    """What the skill-functions prompt says of the time budgets ``set_initial_values()`` defines (one with a
    default in its skill file may be left unset)."""
    budgets = time_budget_skills(skill_set)
    required = [f"self.{s.budget_attribute}" for s in budgets if s.budget_default is None]
    optional = [f"self.{s.budget_attribute} unset (then use {s.budget_default} turns)"
                for s in budgets if s.budget_default is not None]
    parts = [f"assume set_initial_values() defines {_spoken(required)}"] if required else []
    if optional:
        parts.append(f"set_initial_values() may leave {_spoken(optional)}: test with hasattr")
    return "; ".join(parts) or "no skill has a time budget"


# ----------------------------------------------------------------------------- the unit-test harness
#: How the simulated dungeon plays a skill (in one step, to its end), chosen by the skill's rules; the order is
#: that of ``SimDungeon.step``'s branches, the text that of the harness's list of skills.
_SIM_NOTES: dict[str, tuple[str, ...]] = {
    "explores": ("explores the level: gold, kills, experience, items; may bring the",
                 "hero near a shopkeeper or an altar; eats when hungry."),
    "descends": ("goes one level down. On the Dungeons of Doom level holding the",
                 "Gnomish Mines entrance, half of the descents lead into the Mines."),
    "ascends": ("goes one level up; from the first Mines level back to the Dungeons",
                "of Doom; from depth 1 of the Dungeons of Doom out of the dungeon."),
    "sells": ("sells one item when a shopkeeper is near the hero.",),
    "identifies": ("drops the items on an altar near the hero (BUC identification).",),
}
#: the simulation of a skill that goes on until its time budget is spent, by its start rule
_BUDGET_SIMULATIONS: dict[str, str] = {"always": "explores", "shopkeeper_in_view": "sells",
                                       "altar_in_view": "identifies"}


def simulation(spec: SkillSpec) -> str:
    """How the harness's dungeon plays ``spec`` (a key of the harness's step branches)."""
    if spec.end == "depth_increase":
        return "descends"
    if spec.end == "depth_decrease":
        return "ascends"
    if spec.end == "time_budget" and spec.start in _BUDGET_SIMULATIONS:
        return _BUDGET_SIMULATIONS[spec.start]
    raise TemplateError(f"the unit-test harness has no simulation for the skill {spec.name!r} (start "
                        f"{spec.start!r}, end {spec.end!r}; {spec.path}): it simulates the start rules "
                        f"{', '.join(_BUDGET_SIMULATIONS)} with the end rule time_budget, and the end rules "
                        "depth_increase and depth_decrease")


def _simulated(skill_set: SkillSet) -> dict[str, list[str]]:
    """The skills of each simulation, by index (each skill in exactly one)."""
    out: dict[str, list[str]] = {kind: [] for kind in _SIM_NOTES}
    for spec in skill_set.specs:
        out[simulation(spec)].append(spec.name)
    return out


def _is_one_of(names: list[str]) -> str:
    if len(names) == 1:
        return f'skill == "{names[0]}"'
    return f"skill in {_quoted(names)}" if names else "skill in ()"


def _chosen_is_not(names: list[str]) -> str:
    if not names:
        return "False"  # no skill of the set needs it: nothing to check
    return f'entry["skill"] != "{names[0]}"' if len(names) == 1 else f'entry["skill"] not in {_quoted(names)}'


def _termination_checks(spec: SkillSpec) -> list[str]:
    """The harness's checks of a generated ``skill_termination`` for ``spec``, by its rules."""
    n = spec.name
    if spec.end == "depth_increase":
        return [f'assert term("{n}", 5, 2, 1, none), "{n} must end when the depth changed"',
                f'assert not term("{n}", 5, 1, 1, none), "{n} must go on while the depth is the same"']
    if spec.end == "depth_decrease":
        return [f'assert term("{n}", 5, 1, 2, none), "{n} must end when the depth changed"',
                f'assert not term("{n}", 5, 2, 2, none), "{n} must go on while the depth is the same"']
    checks = []
    # as the release's harness checks (its text is in the prompts): not at time 0 for an altar skill (the loader
    # refuses a module that ends any skill at once, code_generation/loader.py), and later for the skills that
    # need a shopkeeper or an altar (their budgets are 20 times the discoverer's in every task)
    if spec.start != "altar_in_view":
        checks.append(f'assert not term("{n}", 0, 1, 1, none), "{n} must not end at once"')
    late = 6 if spec.start == "always" else 7
    checks.append(f'assert term("{n}", 10 ** {late}, 1, 1, none), "{n} must end after a fixed time"')
    return checks


#: the order of the harness's checks of ``skill_termination``: by end rule, then :func:`in_start_order`
_CHECK_ORDER = ("depth_increase", "depth_decrease", "time_budget")


def render_harness(template: str, skill_set: SkillSet = SKILL_SET, where: str = "unit_test_harness.py") -> str:
    """``unit_test_harness.py`` for ``skill_set``; raises :class:`TemplateError` for a skill it cannot simulate."""
    simulated = _simulated(skill_set)
    width = max(len(name) for name in skill_set.names) + 2
    notes = []
    for kind in _SIM_NOTES:
        for name in simulated[kind]:
            first, *rest = _SIM_NOTES[kind]
            notes.append(f"#   {name.ljust(width)}{first}")
            notes += [f"#   {' ' * width}{line}" for line in rest]
    ordered = sorted(in_start_order(skill_set), key=lambda s: _CHECK_ORDER.index(s.end))
    shopkeeper = [s.name for s in skill_set.specs if s.start == "shopkeeper_in_view"]
    altar = [s.name for s in skill_set.specs if s.start == "altar_in_view"]
    return render(
        template, where,
        sim_skill_notes="\n".join(notes),
        sim_skills=_quoted(list(skill_set.names)),
        # the runtime starts an episode with the first skill (rl_baseline/skills/runtime.py)
        first_skill=f'"{skill_set.names[0]}"',
        # every skill has one simulation, so the last branch (written ``else:``) plays exactly the last one's
        **{f"{kind}_skills": _is_one_of(simulated[kind]) for kind in list(_SIM_NOTES)[:-1]},
        termination_checks="\n".join(line for s in ordered for line in _termination_checks(s)),
        shopkeeper_skills=" or ".join(shopkeeper) or "no skill",
        altar_skills=" or ".join(altar) or "no skill",
        not_a_shopkeeper_skill=_chosen_is_not(shopkeeper),
        not_an_altar_skill=_chosen_is_not(altar),
    )
