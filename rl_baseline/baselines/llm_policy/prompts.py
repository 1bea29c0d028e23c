"""Prompts of the paper's LLM baselines, in this project's words.

Two questions are asked:

* **the next action** (LLM policy): the task, the action list, the observation as text
  (:mod:`rl_baseline.baselines.llm_policy.render`) and the last few steps; the reply ends with
  ``Action: <name>``. Two prompt kinds:

  - ``zero_shot``: the task's goal in one or two sentences (:data:`common.vocabulary.TASK_GOALS`), nothing
    else;
  - ``equivalent`` ("equivalent prompting"): everything MaestroMotif's language models are told
    about the game and the task on top: the game facts and the task's goal and strategy of the
    code-generation prompt (``code_generation/{task}/initial_prompt.txt``, with the task's
    ``max_depth`` filled in) and the skills with their descriptions and start/end
    conditions (:func:`code_generation.prompts.skills_text`). The knowledge is read from those
    files, so both methods are always told the same thing.

* **the next skill** (hierarchical LLM policy): asked when the running skill ended, with the same
  knowledge as ``equivalent``, the skill that ended, the skills that may start now and the
  hero's state; the reply ends with ``Skill: <name>``.

The answer lines are what :mod:`rl_baseline.baselines.llm_policy.parse` reads and what the rule-based
stand-in (:mod:`rl_baseline.baselines.llm_policy.stand_in`) recognises a prompt by.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Mapping, Sequence

from code_generation.prompts import PROMPT_DIR, skills_text
from common.vocabulary import SKILL_SET, TASK_GOALS, TASK_MEASURE, check_eval_target

PROMPT_KINDS: tuple[str, ...] = ("zero_shot", "equivalent")
ACTION_ANSWER = "Action:"
SKILL_ANSWER = "Skill:"
#: the line that closes every action prompt (the stand-in recognises the question by it)
ACTION_REQUEST = f"Think briefly about the situation, then end your reply with one line '{ACTION_ANSWER} <name>'"
SKILL_REQUEST = f"Think briefly about the plan, then end your reply with one line '{SKILL_ANSWER} <name>'"

#: what each action does (the names are common.nethack.actions.ACTION_NAMES)
ACTION_HELP: dict[str, str] = {
    "more": "continue past a --More-- on screen (the game usually does this by itself)",
    "north": "move one square north (up on the map); moving into a monster attacks it",
    "east": "move one square east (right)",
    "south": "move one square south (down on the map)",
    "west": "move one square west (left)",
    "northeast": "move one square northeast",
    "southeast": "move one square southeast",
    "southwest": "move one square southwest",
    "northwest": "move one square northwest",
    "far_north": "run north until something interesting happens",
    "far_east": "run east",
    "far_south": "run south",
    "far_west": "run west",
    "far_northeast": "run northeast",
    "far_southeast": "run southeast",
    "far_southwest": "run southwest",
    "far_northwest": "run northwest",
    "up": "climb the up staircase '<' the hero stands on (on depth 1 of the Dungeons of Doom this leaves the "
          "dungeon and ends the game)",
    "down": "go down the down staircase '>' the hero stands on",
    "wait": "rest for up to 25 turns (stops early when something happens)",
    "kick": "kick (the next action gives the direction)",
    "eat": "eat: the next action answers the item question, 'northwest' eats the first item offered and "
           "anything else cancels",
    "search": "search the squares around the hero for hidden doors and passages",
    "cast": "cast the first known spell (a healing spell is cast on the hero)",
    "enhance": "advance a weapon or fighting skill when the game allows it",
    "pray": "pray to the god (helps in trouble, angers the god if done too often)",
    "quaff": "drink: the next action answers the item question, 'northwest' drinks the first potion offered",
    "drop": "drop the first item picked up during the game that is not food or gold",
}


def _measure_text(task: str) -> str:
    if TASK_MEASURE[task] == "count":
        return "Your score is how many times this happens in the episode."
    return "The episode counts as a success once this is done."


@lru_cache(maxsize=None)
def coder_knowledge(task: str) -> tuple[str, str]:
    """``(game facts, task goal and strategy)`` exactly as MaestroMotif's code generator reads them
    (``code_generation/{task}/initial_prompt.txt``), with the task's ``max_depth`` filled in."""
    check_eval_target(task)
    text = (PROMPT_DIR / task / "initial_prompt.txt").read_text(encoding="utf-8")
    facts = next((line for line in text.splitlines() if line.startswith("About the game:")), "")
    goal = next((line for line in text.splitlines() if line.startswith(f'Task "{task}"')), "")
    if not facts or not goal:
        raise ValueError(f"code_generation/{task}/initial_prompt.txt has no 'About the game:' or 'Task \"{task}\"' "
                         "line to take the task's knowledge from")
    values = (PROMPT_DIR / task / "initial_values.txt").read_text(encoding="utf-8")
    depth = re.search(r"self\.max_depth\s*=\s*(\d+)", values)
    if depth:
        goal = goal.replace("max_depth", f"depth {depth.group(1)}")
    goal = goal.replace("(branch_depth > 0)", "")
    return facts.replace("About the game: ", ""), goal


def knowledge_block(task: str) -> str:
    """MaestroMotif's prior knowledge of ``task``: game facts, the skills, the goal and strategy."""
    facts, goal = coder_knowledge(task)
    return (f"About the game: {facts}\n\n"
            f"An experienced player splits the game into {SKILL_SET.number_word} skills (the same ones a trained "
            "agent has):\n"
            f"{skills_text()}\n\n"
            f"{goal}")


# ----------------------------------------------------------------------------- actions


def action_list_text(action_names: Sequence[str]) -> str:
    return "\n".join(f"- {name}: {ACTION_HELP.get(name, '')}" for name in action_names)


def action_system_prompt(action_names: Sequence[str]) -> str:
    return ("You are playing NetHack as a human neutral male Monk, one action at a time. Every turn you are shown "
            "the game as text and choose exactly one action from this list:\n"
            f"{action_list_text(action_names)}\n\n"
            "When the game asks a yes/no question, 'northwest' (the y key) answers yes and 'southeast' (the n key) "
            "answers no. Map symbols are NetHack's: '.' floor, '#' corridor, '|' and '-' walls or open doors, '+' a "
            "closed door, '<' and '>' staircases, '_' an altar, '{' a fountain, '$' gold, letters are monsters and "
            "@ is a human (the hero is the @ marked on the map).")


def action_user_prompt(task: str, kind: str, observation: str, history: Sequence[str]) -> str:
    """The question for one step (``history``: the last steps, oldest first, as text lines)."""
    if kind not in PROMPT_KINDS:
        raise ValueError(f"unknown prompt kind {kind!r}; valid: {', '.join(PROMPT_KINDS)}")
    head = f"Task: {task}. {TASK_GOALS[task]} {_measure_text(task)}"
    if kind == "equivalent":
        head += "\n\nWhat is known about the game and this task:\n" + knowledge_block(task)
    past = "\n".join(history) if history else "(this is the first step of the episode)"
    return (f"{head}\n\nRecent steps (oldest first):\n{past}\n\nThe game now:\n{observation}\n\n"
            f"{ACTION_REQUEST}, where <name> is one action of the list.")


def action_conversation(task: str, kind: str, observation: str, history: Sequence[str],
                        action_names: Sequence[str]) -> list[dict[str, str]]:
    return [{"role": "system", "content": action_system_prompt(action_names)},
            {"role": "user", "content": action_user_prompt(task, kind, observation, history)}]


# ----------------------------------------------------------------------------- skills


def skill_system_prompt() -> str:
    return (f"You direct a NetHack agent, a human neutral male Monk, that has {SKILL_SET.number_word} trained "
            "skills. The agent plays the game with the skill you choose until the skill ends by its own rule; then "
            "you choose the next skill. You never control single moves.")


def skill_user_prompt(task: str, state: Mapping[str, object], ended: str, can_start: Sequence[str],
                      history: Sequence[str]) -> str:
    """The question asked when a skill ended (``ended``: its name, or "" at the start of an episode)."""
    status = ", ".join(f"{k} {v}" for k, v in state.items())
    what = f"The {ended} skill just ended." if ended else "The episode just started; choose the first skill."
    past = "\n".join(history) if history else "(none yet)"
    return (f"Task: {task}. {TASK_GOALS[task]} {_measure_text(task)}\n\n"
            f"What is known about the game and this task:\n{knowledge_block(task)}\n\n"
            f"Skills used so far in this episode (oldest first):\n{past}\n\n"
            f"{what}\nThe hero now: {status}.\n"
            f"Skills that can start now: {', '.join(can_start)}.\n\n"
            f"{SKILL_REQUEST}, where <name> is one of the skills that can start now.")


def skill_conversation(task: str, state: Mapping[str, object], ended: str, can_start: Sequence[str],
                       history: Sequence[str]) -> list[dict[str, str]]:
    return [{"role": "system", "content": skill_system_prompt()},
            {"role": "user", "content": skill_user_prompt(task, state, ended, can_start, history)}]


__all__ = ["PROMPT_KINDS", "ACTION_ANSWER", "SKILL_ANSWER", "ACTION_REQUEST", "SKILL_REQUEST", "ACTION_HELP",
           "coder_knowledge", "knowledge_block", "action_conversation", "skill_conversation", "action_user_prompt",
           "skill_user_prompt"]
