"""What the annotator asks the LLM, in this project's words, and how the answers are read.

Three questions, each about the game's top-line messages only (as in ONI):

* classification (ONI-Retrieval, ONI-Classification): is this one message a sign of real
  progress towards the goal? The answer ends with ``<label>FOO</label>`` (yes) or
  ``<label>BAR</label>`` (no): neutral tokens, so the model's taste for "yes" or "no" does not
  leak into the labels (ONI's choice). ``FOO`` anywhere in the answer counts as yes, then ``BAR``
  as no; an answer with neither is malformed (not labelled; ONI took it as no);
* ranking (ONI-Ranking): which of two messages shows more progress? ``Answer: 1``, ``2`` or
  ``none``, read with the annotation phase's parser;
* goals (ELLM-BoW): after this message, what should the player try next? Up to five goals,
  one per line starting with ``- ``.

The goal is a goal key of ONI/Motif (``defaultgoal``, ``zeroknowledge``, ``combat``, ``gold``,
``stairs``) or, with the skill environment, a skill's description.
"""
from __future__ import annotations

import re
from typing import Optional

from common.llm import Conversation
from common.vocabulary import SKILL_DESCRIPTIONS

#: The goal keys of ONI and Motif, described in this project's words.
GOAL_DESCRIPTIONS: dict[str, str] = {
    "defaultgoal": "make progress in the game the way a strong player would: defeat monsters to gain "
                   "experience, collect gold, and go deeper into the dungeon",
    "zeroknowledge": "",
    "combat": "defeat as many monsters as possible",
    "gold": "collect as much gold as possible",
    "stairs": "find staircases and go down them, deeper into the dungeon",
}
DEFAULT_GOAL_KEY = "defaultgoal"

SYSTEM_PROMPT = (
    "You are an honest and careful judge of NetHack gameplay. You know the game well. When you are "
    "not sure about something, say so instead of inventing facts."
)

_CLASSIFY = """I am playing NetHack and want to know whether one message from the game is a sign of progress.
{goal_line}
Here is the message, between braces:
{{"{message}"}}

First write what you know about NetHack that matters here, then one sentence analysing the message. \
A message counts as progress only when it clearly helps reach the goal; a message that is merely \
informative, neutral or only slightly useful does not count. An empty message shows nothing.
Answer in exactly this format and nothing else:
<knowledge> ... </knowledge>
<analysis> ... </analysis>
<label> FOO </label> if the message shows progress, or <label> BAR </label> if it does not."""

_RANK = """I am playing NetHack. Two moments of play are described by the message the game showed; a \
message may be empty.
{goal_line}
Message 1: "{first}"
Message 2: "{second}"

Say what you know about NetHack that matters here, compare the two messages, then decide which one \
shows more progress towards the goal. End with one line: "Answer: 1", "Answer: 2", or "Answer: none" \
when neither is better."""

_GOALS = """I am playing NetHack. The game just showed this message (it may be empty): "{message}"
{goal_line}
Suggest up to five short, concrete things I should try to do next, one per line, each line starting \
with "- ". Write nothing else."""

_LABEL = re.compile(r"FOO|BAR")
_GOAL_LINE = re.compile(r"^\s*[-*]\s+(.+?)\s*$", re.M)


def goal_text(goal_key: Optional[str] = None, skill: Optional[str] = None) -> str:
    """The goal the prompts name: a skill's description, else a goal key's."""
    if skill is not None:
        return SKILL_DESCRIPTIONS[skill]
    key = goal_key or DEFAULT_GOAL_KEY
    if key not in GOAL_DESCRIPTIONS:
        raise ValueError(f"unknown goal key {key!r}; valid: {', '.join(GOAL_DESCRIPTIONS)}")
    return GOAL_DESCRIPTIONS[key]


def _goal_line(goal: str) -> str:
    return f"My goal: {goal}." if goal else "I have no particular goal beyond playing well."


def _chat(user: str) -> Conversation:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def classification_conversation(message: str, goal: str) -> Conversation:
    return _chat(_CLASSIFY.format(goal_line=_goal_line(goal), message=message))


def ranking_conversation(first: str, second: str, goal: str) -> Conversation:
    return _chat(_RANK.format(goal_line=_goal_line(goal), first=first, second=second))


def goals_conversation(message: str, goal: str) -> Conversation:
    return _chat(_GOALS.format(goal_line=_goal_line(goal), message=message))


def parse_label(reply: str) -> Optional[int]:
    """1 for ``FOO`` (checked first, as ONI), 0 for ``BAR``, None when the reply has neither."""
    found = _LABEL.findall(reply or "")
    if not found:
        return None
    return 1 if "FOO" in found else 0


def parse_goals(reply: str, limit: int = 5) -> Optional[list[str]]:
    """The ``- goal`` lines of a reply (at most ``limit``), or None when there is none."""
    goals = [g for g in _GOAL_LINE.findall(reply or "") if g][:limit]
    return goals or None
