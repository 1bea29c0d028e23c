"""A rule-based STAND-IN for the LLM annotator (not the paper's method).

The paper annotates pairs with Llama 3.1 70B. These hand-written rules exist for CPU smoke runs, tests, and for
measuring how often an LLM agrees with simple rules. They read the same captions the LLM reads (parsed back out
of the prompt text) and reply in the same text format (a short explanation and an ``Answer: ...`` line), so the
very same parsing path runs as for a real model. Scores are compared; equal scores give ``Answer: none``.

Each skill's rules come from its skill file's ``[stand_in]`` table (:mod:`common.skill_files`, compiled by
:class:`StandInRules`): stat terms (levels gone down or up, gold and experience gained, hit points lost on the
level), then message rules in file order, each adding its score once when one of its named patterns
(:data:`NAMED_PATTERNS`) or phrases is in the current message (or in the previous and the current one). For
every skill, dying (-20) and angering the god (-10) are very bad.

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
from typing import Any, Callable, Sequence

from common.llm import Backend, BackendError, Conversation, register_backend
from common.skill_files import STAND_IN_PATTERNS, STAND_IN_STATS, SkillSpec
from common.vocabulary import SKILL_SPECS, SKILLS, skill_index
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


#: the named patterns a skill file's message rule may match (``[stand_in] message``'s ``match``)
NAMED_PATTERNS: dict[str, re.Pattern[str]] = {
    "pickup": _PICKUP, "kill": _KILL, "find": _FIND, "down_stairs": _DOWN_STAIRS, "up_stairs": _UP_STAIRS,
    "busy": _BUSY, "flash": _FLASH, "altar": _ALTAR, "drop": _DROP, "pray": _PRAY, "shop_good": _SHOP_GOOD,
    "sale": _SALE, "shop_bad": _SHOP_BAD, "fight": _FIGHT,
}
assert set(NAMED_PATTERNS) == set(STAND_IN_PATTERNS), "the stand-in defines exactly the patterns files may name"
#: patterns searched on the raw message, not the lower-cased one: an inventory letter's case matters
_CASE_SENSITIVE = frozenset({"pickup"})

#: the stat terms a skill file weighs (``[stand_in] stats``), from the depth, gold, experience and hit point changes
_STAT_TERMS: dict[str, Callable[[int, int, int, int], int]] = {
    "level_down": lambda depth, gold, xp, hp: max(depth, 0),
    "level_up": lambda depth, gold, xp, hp: max(-depth, 0),
    "level_change": lambda depth, gold, xp, hp: abs(depth),
    "gold_gained": lambda depth, gold, xp, hp: int(gold > 0),
    "xp_gained": lambda depth, gold, xp, hp: int(xp > 0),
    "hp_lost_on_level": lambda depth, gold, xp, hp: int(depth == 0 and hp < 0),
}
assert tuple(_STAT_TERMS) == STAND_IN_STATS, "the stand-in computes exactly the stat terms files may weigh"


@dataclass(frozen=True)
class _MessageRule:
    score: float
    both: bool  # where = "both": the previous and the current message, else the current one
    lowered: tuple[re.Pattern[str], ...]  # searched on the lower-cased text (the phrases are lower-cased on reading)
    raw: tuple[re.Pattern[str], ...]  # searched on the text as the game wrote it


@dataclass(frozen=True)
class StandInRules:
    """One skill's stand-in rules, compiled from its file's ``[stand_in]`` table."""

    skill: str
    messages: tuple[_MessageRule, ...]
    stats: tuple[tuple[float, Callable[[int, int, int, int], int]], ...]

    @classmethod
    def from_spec(cls, spec: SkillSpec) -> StandInRules:
        messages = []
        for rule in spec.stand_in_messages:
            lowered = [NAMED_PATTERNS[m] for m in rule.match if m not in _CASE_SENSITIVE]
            if rule.phrases:
                lowered.append(_pattern(*rule.phrases))
            raw = tuple(NAMED_PATTERNS[m] for m in rule.match if m in _CASE_SENSITIVE)
            messages.append(_MessageRule(rule.score, rule.where == "both", tuple(lowered), raw))
        # the terms in one fixed order (STAND_IN_STATS), whatever the file's
        stats = tuple((spec.stand_in_stats[term], _STAT_TERMS[term]) for term in STAND_IN_STATS
                      if term in spec.stand_in_stats)
        return cls(spec.name, tuple(messages), stats)

    def message_score(self, message_before: str, message_after: str) -> float:
        """The part of the score read from the messages."""
        both_raw = message_before + " " + message_after
        msgs = both_raw.lower()
        after = message_after.lower()
        s = 0.0
        if _DEATH.search(msgs):
            s -= 20.0
        if _GOD_ANGER.search(msgs):
            s -= 10.0
        for rule in self.messages:
            lowered, raw = (msgs, both_raw) if rule.both else (after, message_after)
            if any(p.search(lowered) for p in rule.lowered) or any(p.search(raw) for p in rule.raw):
                s += rule.score
        return s

    def stats_score(self, depth_change: int, gold_change: int, xp_change: int, hp_change: int = 0) -> float:
        """The part of the score read from the stat changes."""
        s = 0.0
        for weight, term in self.stats:
            s += weight * term(depth_change, gold_change, xp_change, hp_change)
        return s


_RULES: dict[str, StandInRules] = {name: StandInRules.from_spec(spec) for name, spec in SKILL_SPECS.items()}


def rules_for(skill: str) -> StandInRules:
    """The stand-in rules of a skill of this process's skill set, with an error that lists the valid names."""
    try:
        return _RULES[skill]
    except KeyError:
        raise ValueError(f"unknown skill {skill!r}; valid skills: {', '.join(SKILLS)}") from None


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
        rules = rules_for(goal)
        return rules.message_score("", description) + rules.stats_score(depth_change, gold_change, 0)
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
    o, rules = observation, rules_for(skill)
    return rules.message_score(o.message_before, o.message_after) + rules.stats_score(
        o.depth_change, o.gold_change, o.xp_change, o.hp_change
    )


#: message scores by (skill, message before, message after): NetHack repeats its messages
_MESSAGE_CACHE: dict[tuple[str, str, str], float] = {}
_CACHE_SIZE = 200_000


def _fast_score(fields: tuple[str, ...], skill: str) -> float:
    before, after, depth, gold, hp, xp, _hunger = fields
    rules = rules_for(skill)
    key = (skill, before, after)
    value = _MESSAGE_CACHE.get(key)
    if value is None:
        value = rules.message_score(before.strip('"'), after.strip('"'))
        if len(_MESSAGE_CACHE) >= _CACHE_SIZE:
            _MESSAGE_CACHE.clear()
        _MESSAGE_CACHE[key] = value
    return value + rules.stats_score(_delta(depth), _delta(gold), _delta(xp), _delta(hp))


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
