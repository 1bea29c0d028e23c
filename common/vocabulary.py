"""The project's vocabulary: the skills and the tasks (their one home for every layer).

Skills: read from the skill files (:mod:`common.skill_files`; ``skills/*.toml``, or the set ``--skills`` chose):
names, index order and short descriptions. The index order is used everywhere: the one-hot input of the policy
network, ``--reward_dir`` lists, ``--eps_threshold_quantile`` lists and meta-policy code.

Tasks: the training policy's task and the nine evaluation tasks of the paper, with how each
result is measured and the words that describe them (:data:`TASK_DESCRIPTIONS`, :data:`TASK_GOALS`).
docs/extending.md lists every file a new task touches.

Pure Python on purpose: every layer imports it, annotation and code generation without NLE.
"""
from __future__ import annotations

from common.skill_files import SkillSet, SkillSpec, active_skill_set

#: the skill set of this process (``--skills``; the designed five by default), each skill's file as read
SKILL_SET: SkillSet = active_skill_set()
SKILL_SPECS: dict[str, SkillSpec] = {s.name: s for s in SKILL_SET.specs}
SKILLS: tuple[str, ...] = SKILL_SET.names
NUM_SKILLS: int = len(SKILLS)
SKILL_INDEX: dict[str, int] = {name: i for i, name in enumerate(SKILLS)}

SKILL_DESCRIPTIONS: dict[str, str] = {s.name: s.description for s in SKILL_SET.specs}
#: the skills a policy over skills may start at any time (``[rules] start = "always"``); the others need what
#: their start rule detects (a shopkeeper or an altar in view)
ALWAYS_STARTABLE: tuple[str, ...] = tuple(s.name for s in SKILL_SET.specs if s.start == "always")


def skill_index(name: str) -> int:
    """Index of a skill by name, with an error that lists the valid names."""
    try:
        return SKILL_INDEX[name]
    except KeyError:
        raise ValueError(f"unknown skill {name!r}; valid skills: {', '.join(SKILLS)}") from None


def skill_from_experiment(experiment: str) -> str:
    """Reads the skill out of an annotator/experiment string such as ``llama3_descender_default``."""
    for part in experiment.split("_"):
        if part in SKILL_INDEX:
            return part
    raise ValueError(
        f"cannot read a skill from experiment name {experiment!r}: expected one of "
        f"{', '.join(SKILLS)} as a '_'-separated part (e.g. llama3_descender_default); pass --skill"
    )


# --------------------------------------------------------------------------- tasks
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


#: What each evaluation task asks for, in this project's words (written from the paper's task table,
#: docs/paper.md). The one home of these sentences: the baselines put them into annotation prompts
#: (Motif task-specific) and embed them (the embedding-similarity reward); the LLM policies are told the
#: shorter :data:`TASK_GOALS` below.
TASK_DESCRIPTIONS: dict[str, str] = {
    "gnomish": "Find the entrance to the Gnomish Mines, a branch of the dungeon that starts a few levels down, "
               "and go down into it.",
    "delphi": "Go down the main dungeon until you reach the level of the Oracle of Delphi, usually between "
              "dungeon levels 5 and 9.",
    "minetown": "Enter the Gnomish Mines and go down them until you reach Minetown, the small town a few levels "
                "inside the Mines.",
    "transactions": "Sell as many items as possible to shopkeepers: every completed sale counts.",
    "price": "Find out what unidentified items are by the price shopkeepers offer for them: every item whose "
             "identity a sell offer reveals counts.",
    "buc": "Find out whether items are blessed, uncursed or cursed by dropping them on an altar: every item "
           "whose status an altar reveals counts.",
    "goldenexit": "Visit dungeon levels 1, 2 and 3, collect at least 20 gold pieces and kill 25 monsters, then "
                  "climb the up staircase of level 1 to try to leave the dungeon.",
    "levelupsell": "Stay on dungeon level 1 until you reach experience level 4, then sell an item to a "
                   "shopkeeper, then stay alive for 300 more steps.",
    "discoveryhunger": "Find the Gnomish Mines, get hungry and eat something while inside the Mines, then reach "
                       "the level of the Oracle of Delphi in the main dungeon.",
}


#: What each evaluation task asks for in a zero-shot prompt (the LLM policy baselines,
#: rl_baseline.baselines.llm_policy.prompts): the goal only, no strategy and no facts about where things are. Shorter
#: than :data:`TASK_DESCRIPTIONS` and worded for the model that plays; kept as written, since a prompt's
#: text is part of a recorded result (and of the LLM reply cache's keys).
TASK_GOALS: dict[str, str] = {
    "gnomish": "Enter the Gnomish Mines, a branch of the dungeon.",
    "delphi": "Reach the level of the Oracle (Delphi) in the main dungeon, the Dungeons of Doom.",
    "minetown": "Reach Minetown, the town inside the Gnomish Mines.",
    "transactions": "Sell as many items as possible to shopkeepers.",
    "price": "Learn what as many unidentified items as possible are from the prices shopkeepers offer for them.",
    "buc": "Learn whether as many items as possible are blessed, uncursed or cursed, by dropping them on an altar.",
    "goldenexit": "Visit dungeon levels 1, 2 and 3, hold at least 20 gold pieces and defeat at least 25 monsters; "
                  "only then leave the dungeon by going up the up staircase of level 1.",
    "levelupsell": "Stay on dungeon level 1 until the hero reaches experience level 4, then sell an item to a "
                   "shopkeeper, then stay alive for 300 more turns.",
    "discoveryhunger": "Find the Gnomish Mines, eat something there once the hero is hungry, then reach the level "
                       "of the Oracle in the Dungeons of Doom.",
}


def check_eval_target(name: str) -> str:
    if name not in EVAL_TASKS:
        raise ValueError(f"unknown eval target {name!r}; valid targets: {', '.join(EVAL_TASKS)}")
    return name


def check_task(name: str) -> str:
    if name not in ALL_TASKS:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(ALL_TASKS)}")
    return name
