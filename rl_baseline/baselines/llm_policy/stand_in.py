"""A RULE-BASED STAND-IN for the language model of the LLM baselines: a few rules, no model.

CPU smoke runs and tests need the LLM baselines to run end to end where no language model can be
loaded. These rules read the very prompts a model would read (:mod:`rl_baseline.baselines.llm_policy.prompts`;
the observation lines of :mod:`rl_baseline.baselines.llm_policy.render`) and answer in the same format
(``Action: <name>`` / ``Skill: <name>``), so prompting, parsing, caching and counting run exactly
as with a model. Every reply starts with "Rule-based stand-in (no language model)", and results
made with it are labelled so. Its numbers say nothing about what a language model would do.

Action rules, first match wins: answer a yes/no question (yes to a sale offer, no otherwise);
cancel an item question unless hungry; eat when hungry; go down a staircase the message says the
hero stands on when the task wants to go deeper; attack an adjacent monster; walk towards the
nearest feature the task wants (a down staircase, an altar for ``buc``, a shopkeeper-like ``@``
for the selling tasks); else walk (or run) to a walkable neighbour picked from the turn number,
or search when there is none.

Skill rules: the merchant / worshipper when it can start and the task wants it; after the
discoverer the descender (the ascender for ``goldenexit`` from depth 3 on; the discoverer again
for ``levelupsell``); after any other skill the discoverer. The skills are named by their files' rules
(:data:`SELLER` and the others below), so a skill set whose skills are named otherwise gets the same rules.

:class:`StandInBackend` is registered as the ``stand_in`` backend of :mod:`common.llm`;
:func:`answer` serves the same rules to the HTTP stand-in server
(:mod:`rl_baseline.baselines.oni.stand_in_server`).
"""
from __future__ import annotations

import hashlib
import logging
import re
from typing import Any, Optional, Sequence

from common.llm import Backend, BackendError, Conversation, register_backend
from common.vocabulary import SKILL_SET
from rl_baseline.baselines.llm_policy.prompts import ACTION_REQUEST, SKILL_REQUEST
from rl_baseline.skills.meta_policy import FALLBACK_SKILL

logger = logging.getLogger(__name__)

NOTICE = "Rule-based stand-in (no language model)"
WALKABLE = frozenset(".#<>_{+$?!%)[=/\"*(")
_TASK = re.compile(r"^Task: (\w+)\.", re.MULTILINE)
_NEIGHBOURS = re.compile(r"^Next to the hero: (.*)$", re.MULTILINE)
_SEEN = re.compile(r"^Seen on the map: (.*)$", re.MULTILINE)
_STATUS = re.compile(r"^Status: depth (\d+).*?hunger: ([a-z ]+),.*?turn (\d+)", re.MULTILINE)
_DIR = re.compile(r"(north|south|east|west)")
_FEATURE = re.compile(r"^(down staircase|up staircase|altar|gold|item|creature|fountain) '(.)' (.*)$")
_CAN_START = re.compile(r"^Skills that can start now: (.*)\.$", re.MULTILINE)
_ENDED = re.compile(r"The (\w+) skill just ended\.")
_HERO_DEPTH = re.compile(r"The hero now: depth (\d+)")
SELLING_TASKS = ("transactions", "price", "levelupsell")


def _first_skill(start: Optional[str] = None, end: Optional[str] = None) -> Optional[str]:
    """The first skill (index order) with this start / end rule; None when the skill set has none."""
    return next((s.name for s in SKILL_SET.specs if start in (None, s.start) and end in (None, s.end)), None)


# the skills the rules choose, by what their files say they do (the designed set's names in comments)
EXPLORER = FALLBACK_SKILL  # discoverer
SELLER = _first_skill(start="shopkeeper_in_view")  # merchant
WORSHIPPER = _first_skill(start="altar_in_view")  # worshipper
DESCENDER = _first_skill(end="depth_increase")  # descender
ASCENDER = _first_skill(end="depth_decrease")  # ascender


def is_action_prompt(prompt: str) -> bool:
    return ACTION_REQUEST in prompt


def is_skill_prompt(prompt: str) -> bool:
    return SKILL_REQUEST in prompt


def _stable_pick(options: Sequence[str], salt: str) -> str:
    digest = hashlib.sha256(salt.encode()).digest()
    return options[digest[0] % len(options)]


def _wants_down(task: str, depth: int) -> bool:
    if task in ("gnomish", "delphi", "minetown", "discoveryhunger"):
        return True
    if task == "goldenexit":
        return depth < 3
    if task == "levelupsell":
        return False
    return depth < 4  # the interaction tasks look for shops and altars on the first levels


def _step_towards(rel: str) -> str:
    """``3 east and 2 south`` -> ``southeast``."""
    words = set(_DIR.findall(rel))
    ns = "north" if "north" in words else "south" if "south" in words else ""
    ew = "east" if "east" in words else "west" if "west" in words else ""
    return (ns + ew) or "search"


def action_answer(prompt: str) -> str:
    """The stand-in's reply to an action prompt."""
    now = prompt.split("The game now:", 1)[-1]
    task = (_TASK.search(prompt) or [None, ""])[1]
    message = now.split("Message:", 1)[-1].split("\n", 1)[0] if "Message:" in now else ""
    status = _STATUS.search(now)
    depth, hunger, turn = (int(status.group(1)), status.group(2).strip(), status.group(3)) if status else (1, "", "0")
    hungry = hunger in ("hungry", "weak", "fainting")
    found = _NEIGHBOURS.search(now)
    neighbours = dict(re.findall(r"(\w+) '(.)'", found.group(1))) if found else {}
    seen = _SEEN.search(now)
    features = [m.groups() for m in (_FEATURE.match(p.strip()) for p in (seen.group(1).split(";") if seen else []))
                if m]

    def reply(action: str, why: str) -> str:
        return f"{NOTICE}: {why}.\nAction: {action}"

    if "[yn" in message or "? [" in message:
        if "Sell it" in message or "sell" in message.lower():
            return reply("northwest", "a sale offer: yes")
        if "eat it" in message and hungry:
            return reply("northwest", "hungry: eat it")
        return reply("southeast", "a question: no")
    if "What do you want to eat" in message or "What do you want to drink" in message:
        return reply("northwest" if hungry else "southeast", "the item question")
    if hungry:
        return reply("eat", "hungry")
    if "staircase down here" in message and _wants_down(task, depth):
        return reply("down", "on a down staircase and the task goes deeper")
    for direction, ch in neighbours.items():
        if ch.isalpha() or ch in "&':;~":
            return reply(direction, f"a monster '{ch}' next to the hero: attack")
    wanted = []
    if _wants_down(task, depth):
        wanted.append("down staircase")
    if task == "buc":
        wanted.insert(0, "altar")
    for what, ch, rel in features:
        shopkeeper = what == "creature" and ch == "@" and task in SELLING_TASKS
        if what in wanted or shopkeeper:
            step = _step_towards(rel)
            if step != "search" and neighbours.get(step, " ") in WALKABLE | {"@"}:
                return reply(step, f"towards the {what} {rel}")
            for part in _DIR.findall(rel):  # blocked diagonally: try one axis
                if neighbours.get(part, " ") in WALKABLE:
                    return reply(part, f"towards the {what} {rel}")
    open_ways = [d for d, ch in neighbours.items() if ch in WALKABLE]
    if not open_ways:
        return reply("search", "no way out: search for hidden passages")
    step = _stable_pick(open_ways, f"{turn}:{now[:400]}")
    if neighbours.get(step) in (".", "#") and int(turn) % 3 == 0:
        return reply("far_" + step, "explore")
    return reply(step, "explore")


def skill_answer(prompt: str) -> str:
    """The stand-in's reply to a next-skill prompt."""
    task = (_TASK.search(prompt) or [None, ""])[1]
    found = _CAN_START.search(prompt)
    can = [s.strip() for s in found.group(1).split(",")] if found else [EXPLORER]
    ended = (_ENDED.search(prompt) or [None, ""])[1]
    depth = int((_HERO_DEPTH.search(prompt) or [None, "1"])[1])

    def reply(skill: str, why: str) -> str:
        return f"{NOTICE}: {why}.\nSkill: {skill}"

    if SELLER in can and task in SELLING_TASKS:
        return reply(SELLER, "a shopkeeper is near and the task sells")
    if WORSHIPPER in can and task == "buc":
        return reply(WORSHIPPER, "an altar is near")
    if ended == EXPLORER:
        if task == "levelupsell":
            return reply(EXPLORER, "stay on this level")
        if task == "goldenexit" and depth >= 3 and ASCENDER is not None:
            return reply(ASCENDER, "deep enough: go back up")
        if DESCENDER is not None:
            return reply(DESCENDER, "the level was explored: go down")
    return reply(EXPLORER, "explore the level")


def answer(prompt: str) -> Optional[str]:
    """The reply to an LLM-baseline prompt, or None when ``prompt`` is not one."""
    if is_action_prompt(prompt):
        return action_answer(prompt)
    if is_skill_prompt(prompt):
        return skill_answer(prompt)
    return None


class StandInBackend(Backend):
    """The ``stand_in`` backend: :func:`answer` on the last user message of each conversation."""

    name = "stand_in"

    def __init__(self, **_: Any) -> None:
        logger.warning("the stand_in backend is a RULE-BASED STAND-IN for the LLM: no language model is called")

    def generate(self, conversations: Sequence[Conversation]) -> list[str]:
        out = []
        for conv in conversations:
            users = [m["content"] for m in conv if m.get("role") == "user"]
            text = answer(users[-1] if users else "")
            if text is None:
                raise BackendError("the stand_in backend answers only the LLM baselines' action and next-skill "
                                   "prompts (rl_baseline.baselines.llm_policy.prompts)")
            out.append(text)
        return out

    def describe(self) -> str:
        return "stand_in (rule-based stand-in for the LLM, no language model)"


register_backend("stand_in", StandInBackend)
