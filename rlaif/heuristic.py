"""A rule-based STAND-IN for the LLM annotator (not the paper's method).

The paper annotates pairs with Llama 3.1 70B. These hand-written rules, derived
from the five skill descriptions in :mod:`common.vocabulary`, exist for CPU smoke runs,
tests, and for measuring how often an LLM agrees with simple rules. They read the
same captions the LLM reads (parsed back out of the prompt text) and reply in the
same text format (a short explanation and an ``Answer: ...`` line), so the very
same parsing path runs as for a real model.

Rules in short (scores are compared; equal scores give ``Answer: none``):

* discoverer: gold picked up, items picked up (``f - a scroll ...``), monsters
  killed, experience gained; any change of dungeon level is strongly bad.
* descender (the release's goal: going down is urgent, staying strongly avoided, going up
  worse): going deeper is strongly good and going up strongly bad; on the same level a down
  staircase in sight is mildly good, and what keeps the hero busy there instead (a fight,
  being hit, hunger, eating, praying, picking things up, trading) is bad, as is losing hit
  points; other messages of the same level neither.
* ascender (only going up counts, staying strongly disliked whatever the consequences): the
  mirror image, with up staircases.
* worshipper: altar messages, and above all the black/amber flash of a
  dropped item on an altar; praying and angering the god are bad.
* merchant: shopkeeper greetings, offers, sales and purchases; stealing,
  owing money and angry shopkeepers are bad.
* every skill: dying and angering the god are very bad.

Motif's goal keys (``scripts.annotate_pairs_dataset --goal-key``), read from the judge's two
descriptions (messages, optionally with stats; :func:`rlaif.captions.motif_description`),
written from the goal descriptions of Motif's paper and nothing else:

* defaultgoal (a high game score): killing monsters, picking up gold, going down the dungeon
  (a descent message, a deeper "Dlvl"), gaining experience levels, picking up items;
* zeroknowledge (no goal in the prompt): the same rules as defaultgoal -- with no goal given,
  the stand-in falls back on what the game itself rewards, its score;
* combat: fighting (hitting, missing, being in a fight) and above all killing is good; any gold
  and any descent are bad;
* gold: gold is good; fighting, killing and descending are bad;
* stairs: descending is good, a staircase down in view mildly good; fighting, killing and gold
  are bad.

Dying and angering the god are very bad for every goal. A skill key on Motif's layout uses the
skill's message rules on the description text (and the depth change its stats show, if any).

The nine evaluation tasks as goal keys (the Motif task-specific baseline), written from the task
descriptions of :data:`common.vocabulary.TASK_DESCRIPTIONS`: the sum of the rules of the skills a
task needs (:data:`TASK_SKILL_RULES`) plus 2 per task word the description mentions
(:data:`TASK_WORDS`, e.g. "gnome" for gnomish, "oracle" for delphi). The stand-in reads only the two
descriptions: a context put before the goal (equivalent prompting) changes nothing in its labels.
Whatever the goal, these rules are a stand-in: their labels are not an LLM's.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Sequence

from common.llm import Backend, BackendError, Conversation, register_backend
from common.vocabulary import SKILLS, skill_index
from rlaif.captions import (
    LABEL_DEPTH,
    LABEL_GOLD,
    LABEL_HP,
    LABEL_HUNGER,
    LABEL_MSG_AFTER,
    LABEL_MSG_BEFORE,
    LABEL_XP,
)

logger = logging.getLogger(__name__)

STAND_IN_NOTICE = "heuristic annotator: a rule-based stand-in for the LLM"

_CAPTION_RE = re.compile(
    rf"{LABEL_MSG_BEFORE}: (.*)\n{LABEL_MSG_AFTER}: (.*)\n{LABEL_DEPTH}: (.*)\n{LABEL_GOLD}: (.*)\n"
    rf"{LABEL_HP}: (.*)\n{LABEL_XP}: (.*)\n{LABEL_HUNGER}: (.*)"
)
_DELTA_RE = re.compile(r"went (up|down) from (?:level )?(-?\d+) to (?:level )?(-?\d+)")


def _delta(text: str) -> int:
    if text.startswith("d"):  # "did not change (...)"
        return 0
    m = _DELTA_RE.match(text)
    if m is None:
        return 0
    return int(m.group(3)) - int(m.group(2))


@dataclass
class Observation:
    """What the rules look at, parsed from one caption."""

    message_before: str
    message_after: str
    depth_change: int
    gold_change: int
    hp_change: int
    xp_change: int

    @property
    def messages(self) -> str:
        return (self.message_before + " " + self.message_after).lower()


def parse_captions(text: str) -> list[Observation]:
    """All captions found in a prompt, in order."""
    out = []
    for before, after, depth, gold, hp, xp, _hunger in _CAPTION_RE.findall(text):
        out.append(
            Observation(
                message_before=before.strip('"'),
                message_after=after.strip('"'),
                depth_change=_delta(depth),
                gold_change=_delta(gold),
                hp_change=_delta(hp),
                xp_change=_delta(xp),
            )
        )
    return out


def _pattern(*words: str) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(w) for w in words))


_DEATH = _pattern("you die", "you starve", "killed by")
_GOD_ANGER = _pattern("you feel that", "is displeased", "you feel guilty", "angers you", "thou hast angered", "smited")
_KILL = _pattern("you kill", "you destroy", "is killed", "is destroyed")
_PICKUP = re.compile(r"(?:^|\s)[a-zA-Z$] - ")
_FIND = _pattern("you find")
_SHOP_GOOD = _pattern(
    "shopkeeper", "welcome to", "offers", "for your", "sell it", "you sold", "you bought", "gold pieces for",
    "for sale", "price", "itemized billing", "pay ", "you paid",
)
_SALE = _pattern("you sold", "gold pieces for")
_SHOP_BAD = _pattern("you stole", "you owe", "angry", "usage fee", "thief", "kops")
_ALTAR = _pattern("altar")
_FLASH = _pattern("black flash", "amber flash")
_DROP = _pattern("you drop", "on the altar")
_PRAY = _pattern("you begin praying", "you pray")
_DOWN_STAIRS = _pattern("staircase down", "stairs down")
_UP_STAIRS = _pattern("staircase up", "stairs up")
_DESCEND = _pattern("you descend", "you climb down", "you fall through", "you fly down")
_ASCEND = _pattern("you climb up")
_FIGHT = _pattern("you hit", "you miss", "you smite", "you kick", "you bite", "hits!", "misses!", "bites!")
# what keeps the hero busy on its level instead of changing level (the descender's and ascender's distractions)
_BUSY = _pattern(
    "you hit", "you miss", "you smite", "you kick", "you bite", "you kill", "you destroy", "hits!", "misses!",
    "bites!", "stings!", "touches you", "grabs you", "is killed", "hungry", "weak", "fainting", "you eat",
    "you finish eating", "this food", "delicious", "you begin praying", "you pray", "you feel a hopeful",
    "welcome to", "for sale", "offers", "sell it", "you sold", "you bought", "you stop", "you have a little trouble",
)
_GOLD = re.compile(r"\$ - \d+ gold piece|\d+ gold pieces?\.|you find \d+ gold")
_LEVEL_UP = _pattern("welcome to experience level")
_STATUS_RE = re.compile(r"Dlvl:(-?\d+) \$:(-?\d+)")


def _message_score(message_before: str, message_after: str, skill: str) -> float:
    """The part of the score read from the messages (cached: NetHack repeats messages)."""
    msgs = (message_before + " " + message_after).lower()
    after = message_after.lower()
    s = 0.0
    if _DEATH.search(msgs):
        s -= 20.0
    if _GOD_ANGER.search(msgs):
        s -= 10.0
    if skill == "discoverer":
        if _PICKUP.search(message_after):
            s += 2.0
        if _KILL.search(after):
            s += 3.0
        if _FIND.search(after):
            s += 0.5
    elif skill in ("descender", "ascender"):
        if (_DOWN_STAIRS if skill == "descender" else _UP_STAIRS).search(after):
            s += 1.0
        if _BUSY.search(after) or _PICKUP.search(message_after):
            s -= 2.0
    elif skill == "worshipper":
        if _FLASH.search(after):
            s += 6.0
        if _ALTAR.search(after):
            s += 2.0
        if _DROP.search(after):
            s += 1.0
        if _PRAY.search(msgs):
            s -= 2.0
    elif skill == "merchant":
        if _SHOP_GOOD.search(after):
            s += 3.0
        if _SALE.search(after):
            s += 2.0
        if _SHOP_BAD.search(msgs):
            s -= 6.0
    else:
        raise ValueError(f"unknown skill {skill!r}; valid skills: {', '.join(SKILLS)}")
    return s


def _stats_score(depth_change: int, gold_change: int, xp_change: int, skill: str, hp_change: int = 0) -> float:
    """The part of the score read from the stat changes."""
    d = depth_change
    if skill == "discoverer":
        return -10.0 * abs(d) + 3.0 * (gold_change > 0) + 2.0 * (xp_change > 0)
    if skill in ("descender", "ascender"):
        # the right way is all that counts; the wrong way is worse than staying; on the level, losing hit points
        # (a fight) keeps the hero from it
        towards = d if skill == "descender" else -d
        return 10.0 * towards - 1.0 * (d == 0 and hp_change < 0)
    return -2.0 * abs(d)  # worshipper, merchant: stay on the level


#: signal weights per Motif goal: (kill, fight, gold, descend, staircase down in view, level up, item)
_GOAL_WEIGHTS: dict[str, tuple[float, float, float, float, float, float, float]] = {
    "defaultgoal": (3.0, 0.0, 3.0, 4.0, 0.5, 2.0, 0.5),
    "combat": (4.0, 1.0, -5.0, -5.0, 0.0, 1.0, 0.0),
    "gold": (-3.0, -1.0, 5.0, -5.0, 0.0, 0.0, 0.0),
    "stairs": (-3.0, -1.0, -5.0, 6.0, 1.0, 0.0, 0.0),
}
_GOAL_WEIGHTS["zeroknowledge"] = _GOAL_WEIGHTS["defaultgoal"]


#: the skills whose rules a task's stand-in adds up (each task's description says what it needs)
TASK_SKILL_RULES: dict[str, tuple[str, ...]] = {
    "gnomish": ("descender",),
    "delphi": ("descender",),
    "minetown": ("descender",),
    "transactions": ("merchant",),
    "price": ("merchant",),
    "buc": ("worshipper",),
    "goldenexit": ("discoverer", "ascender"),
    "levelupsell": ("discoverer", "merchant"),
    "discoveryhunger": ("descender",),
}
#: words of a description that speak of a task's own goal (2 points each)
TASK_WORDS: dict[str, tuple[str, ...]] = {
    "gnomish": ("gnome", "gnomish", "dwarf", "mines"),
    "delphi": ("oracle", "delphi", "centaur", "fountain"),
    "minetown": ("gnome", "temple", "watchman", "minetown", "shop"),
    "transactions": ("you sold", "gold pieces for"),
    "price": ("offers", "sell it"),
    "buc": ("black flash", "amber flash", "lands on the altar"),
    "goldenexit": ("you kill", "gold", "climb up", "no return"),
    "levelupsell": ("welcome to experience level", "you sold"),
    "discoveryhunger": ("hungry", "you finish eating", "gnome", "oracle"),
}


def task_description_score(description: str, task: str) -> float:
    """Score of one of Motif's descriptions for an evaluation task (module docstring)."""
    text = description.lower()
    s = sum(description_score(description, skill) for skill in TASK_SKILL_RULES[task])
    return s + 2.0 * sum(word in text for word in TASK_WORDS[task])


def _status_changes(description: str) -> tuple[int, int]:
    """Depth and gold change within a description that carries stats (first line to last; 0 without)."""
    found = _STATUS_RE.findall(description)
    if len(found) < 2:
        return 0, 0
    return int(found[-1][0]) - int(found[0][0]), int(found[-1][1]) - int(found[0][1])


def description_score(description: str, goal: str) -> float:
    """Score of one of Motif's descriptions for a Motif goal key or a skill (higher is better)."""
    if goal in TASK_SKILL_RULES:
        return task_description_score(description, goal)
    text = description.lower()
    depth_change, gold_change = _status_changes(description)
    if goal not in _GOAL_WEIGHTS:  # a skill: its message rules on the whole text, its depth rules on the stats
        if depth_change == 0:  # without stats, a stair message says which way the hero went
            depth_change = 1 if _DESCEND.search(text) else -1 if _ASCEND.search(text) else 0
        return _message_score("", description, goal) + _stats_score(depth_change, gold_change, 0, goal)
    kill, fight, gold, descend, down, level, item = _GOAL_WEIGHTS[goal]
    s = 0.0
    if _DEATH.search(text):
        s -= 20.0
    if _GOD_ANGER.search(text):
        s -= 10.0
    s += kill * bool(_KILL.search(text)) + fight * bool(_FIGHT.search(text))
    s += gold * bool(_GOLD.search(text) or gold_change > 0)
    s += descend * bool(_DESCEND.search(text) or depth_change > 0) + down * bool(_DOWN_STAIRS.search(text))
    s += level * bool(_LEVEL_UP.search(text)) + item * bool(_PICKUP.search(description) and not _GOLD.search(text))
    return s


def split_descriptions(prompt_text: str, parts: Sequence[str]) -> tuple[str, str] | None:
    """The two descriptions of a prompt built as ``parts[0] + d1 + parts[1] + d2 + parts[2]``."""
    head, middle, tail = parts
    if not (prompt_text.startswith(head) and prompt_text.endswith(tail)):
        return None
    body = prompt_text[len(head):len(prompt_text) - len(tail)] if tail else prompt_text[len(head):]
    if middle not in body:
        return None
    first, _, second = body.partition(middle)
    return first, second


def judge_descriptions(prompt_text: str, goal: str, parts: Sequence[str], answer_key: str) -> str:
    """A reply in the answer format of Motif's prompt (``("best_description": 1)``) for a prompt of ``parts``."""
    found = split_descriptions(prompt_text, parts)
    if found is None:
        return "The rule-based stand-in could not find the two descriptions in the prompt."
    a, b = description_score(found[0], goal), description_score(found[1], goal)
    choice = "1" if a > b else "2" if b > a else "None"
    return (f"Rule-based stand-in ({goal}): description 1 scores {a:g}, description 2 scores {b:g}.\n"
            f'("{answer_key}": {choice})')


def score(observation: Observation, skill: str) -> float:
    """Higher is better for ``skill``."""
    o = observation
    return _message_score(o.message_before, o.message_after, skill) + _stats_score(
        o.depth_change, o.gold_change, o.xp_change, skill, o.hp_change
    )


_MESSAGE_CACHE: dict[tuple[str, str, str], float] = {}
_CACHE_SIZE = 200_000


def _fast_score(fields: tuple[str, ...], skill: str) -> float:
    before, after, depth, gold, hp, xp, _hunger = fields
    key = (skill, before, after)
    value = _MESSAGE_CACHE.get(key)
    if value is None:
        value = _message_score(before.strip('"'), after.strip('"'), skill)
        if len(_MESSAGE_CACHE) >= _CACHE_SIZE:
            _MESSAGE_CACHE.clear()
        _MESSAGE_CACHE[key] = value
    return value + _stats_score(_delta(depth), _delta(gold), _delta(xp), skill, _delta(hp))


def judge(prompt_text: str, skill: str) -> str:
    """A reply in the LLM's answer format for a prompt holding two captions."""
    found = _CAPTION_RE.findall(prompt_text)
    if len(found) != 2:
        return f"The rule-based stand-in found {len(found)} observation descriptions instead of 2."
    a, b = _fast_score(found[0], skill), _fast_score(found[1], skill)
    choice = "1" if a > b else "2" if b > a else "none"
    return f"Rule-based stand-in ({skill}): moment 1 scores {a:g}, moment 2 scores {b:g}.\nAnswer: {choice}"


class HeuristicBackend(Backend):
    """The rules above as an LLM backend (``--backend heuristic``), for the one client of
    :mod:`common.llm`: the same prompts go in, the same reply format comes out."""

    name = "heuristic"

    def __init__(self, skill: str | None = None, prompt_parts: Sequence[str] | None = None,
                 answer_key: str | None = None, **_: Any) -> None:
        """``skill``: a skill, or (with ``prompt_parts``) one of Motif's goal keys; ``prompt_parts``
        and ``answer_key``: Motif's prompts (:class:`rlaif.motif_prompts.MotifPromptBuilder`)."""
        if skill is None:
            raise BackendError("the heuristic backend needs the skill or goal key (pass skill=...)")
        if prompt_parts is None:
            skill_index(skill)
        elif skill not in _GOAL_WEIGHTS and skill not in TASK_SKILL_RULES:
            skill_index(skill)
        self.skill = skill
        self.prompt_parts = tuple(prompt_parts) if prompt_parts is not None else None
        self.answer_key = answer_key or "best_description"
        logger.info(STAND_IN_NOTICE)

    def _judge(self, prompt_text: str) -> str:
        if self.prompt_parts is not None:
            return judge_descriptions(prompt_text, self.skill, self.prompt_parts, self.answer_key)
        return judge(prompt_text, self.skill)

    def generate(self, conversations: Sequence[Conversation]) -> list[str]:
        out = []
        for conv in conversations:
            users = [m["content"] for m in conv if m["role"] == "user"]
            reply = self._judge(users[0] if users else "")
            if len(users) > 1:  # a retry: answer with the bare line, as asked
                reply = reply.rsplit("\n", 1)[-1]
            out.append(reply)
        return out

    def describe(self) -> str:
        return "heuristic (rule-based stand-in for the LLM)"


register_backend("heuristic", HeuristicBackend)
