"""Skill measures counted from the game's messages, one function each: how a new skill's file gets a measure.

A function here takes one message (as NetHack shows it) and returns how much it adds to its measure (0 for most
messages). :func:`message_measure` registers it under the name a skill file's ``[measures]`` gives, and, with
``rate=``, also a rate per 1,000 of the skill's active steps. :class:`rl_baseline.tasks.skill_measures.SkillMeasures`
counts every registered measure a skill names, on that skill's active steps only, as it counts the built-in ones.

Pure Python on purpose: :mod:`common.skill_files` checks a skill file's measures against this registry in every
phase, annotation and code generation included.
"""
from __future__ import annotations

import re
from typing import Callable

MessageMeasure = Callable[[str], float]

#: measure name -> the function that counts it from one message
MESSAGE_MEASURES: dict[str, MessageMeasure] = {}
#: rate measure name -> the message measure it divides by the skill's active steps (per 1,000 steps)
RATE_MEASURES: dict[str, str] = {}


def message_measure(name: str, rate: str | None = None) -> Callable[[MessageMeasure], MessageMeasure]:
    """Registers a message measure (and its rate per 1,000 active steps, when ``rate`` names one)."""

    def register(fn: MessageMeasure) -> MessageMeasure:
        if name in MESSAGE_MEASURES or name in RATE_MEASURES:
            raise ValueError(f"message measure {name!r} is registered twice")
        MESSAGE_MEASURES[name] = fn
        if rate is not None:
            if rate in MESSAGE_MEASURES or rate in RATE_MEASURES:
                raise ValueError(f"message measure rate {rate!r} is registered twice")
            RATE_MEASURES[rate] = name
        return fn

    return register


_HERO_KILL = re.compile(r"\bYou (?:kill|destroy) (?!yourself)")


@message_measure("monsters_killed", rate="kills_per_1000_steps")
def monsters_killed(message: str) -> float:
    """Monsters the hero killed: "You kill the newt!", "You destroy the kobold zombie!" (a pet's kill is not the
    hero's: "The little dog kills the newt.")."""
    return float(len(_HERO_KILL.findall(message)))
