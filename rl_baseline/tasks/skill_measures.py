"""What each skill achieves while it is active: one definition for training and evaluation.

The measures (per episode, counting only the steps on which that skill was the active one):

========== ======================== ==========================================================
skill      measure                  definition
========== ======================== ==========================================================
discoverer cells_per_1000_steps     map cells revealed (a cell of a level's map that was blank
                                    and no longer is; each level's own best count, so a level
                                    seen again is not counted twice) per 1000 active steps, on
                                    levels the discoverer did not go to itself (its skill is the
                                    current level: a level it took the stairs to pays it nothing)
discoverer cells_revealed           the same cells, in all (a rate alone favours a policy that
                                    dies early: the first room is most of what it sees)
discoverer new_levels               dungeon levels entered for the first time
descender  levels_descended         new deepest levels: per dungeon branch, how much deeper than
                                    anything reached before in the episode (by any skill) the
                                    descender took the hero; a trip up and down again counts
                                    nothing
descender  depth_increases          every depth increase, a trip up and down again included (the
                                    loop levels_descended ignores: their difference shows it)
descender  steps_to_first_descent   active steps before the first new deepest level; an episode
                                    without one counts all its active steps (censored)
descender  down_stairs_known_share  share of the active steps on which a staircase (or ladder)
                                    down of the current level had been seen (``>`` on the map,
                                    by any skill)
descender  down_stairs_reached      arrivals on a seen staircase down (the hero's ``@`` where
                                    the ``>`` was); with the two above this tells "never finds
                                    the stairs" from "finds them and does not go down"
ascender   levels_ascended          dungeon levels gone up (sum of depth decreases)
merchant   shops_entered            a shopkeeper's greeting ("Welcome [again] to X's store!")
merchant   sale_offers              a shopkeeper's sell offer ("X offers N gold pieces for ...")
merchant   prices_identified        offers that identify the item's type by its price (as the
                                    ``price`` task counts them: once per appearance)
merchant   items_sold               completed sales (as the ``transactions`` task counts them)
worshipper altars_found             levels on which an altar (``_`` in colour 7, as the skill
                                    start checks read it) was first seen
worshipper altar_drops              items landing on an altar (any message of it, status known
                                    before or not)
worshipper buc_identified           items whose blessed/uncursed/cursed status the altar
                                    revealed (as the ``buc`` task counts them)
========== ======================== ==========================================================

Messages are read with the task detectors (:mod:`rl_baseline.tasks.detectors`): the skill
statistics of training (``measures/{skill}/{measure}`` in tensorboard) and the forced-skill
evaluation (``--eval_skill``) use this tracker, so they cannot disagree with the tasks.
"""
from __future__ import annotations

import re
from typing import Any, Optional

import numpy as np

from common.vocabulary import SKILLS
from rl_baseline.tasks.detectors import (
    buc_from_altar_message,
    identified_appearance,
    is_sale_message,
    parse_sale_offer,
    step_messages,
)

SKILL_MEASURES: dict[str, tuple[str, ...]] = {
    "discoverer": ("cells_per_1000_steps", "cells_revealed", "new_levels"),
    "descender": ("levels_descended", "depth_increases", "steps_to_first_descent", "down_stairs_known_share",
                  "down_stairs_reached"),
    "ascender": ("levels_ascended",),
    "merchant": ("shops_entered", "sale_offers", "prices_identified", "items_sold"),
    "worshipper": ("altars_found", "altar_drops", "buc_identified"),
}
#: the measure that says whether the skill does its job (higher is better for every one)
MAIN_MEASURE: dict[str, str] = {
    "discoverer": "cells_per_1000_steps",
    "descender": "levels_descended",
    "ascender": "levels_ascended",
    "merchant": "items_sold",
    "worshipper": "buc_identified",
}
assert set(SKILL_MEASURES) == set(SKILLS) and all(MAIN_MEASURE[s] in SKILL_MEASURES[s] for s in SKILLS)
#: the running count whose increase pays a skill under ``--skill_reward progress`` (a privileged diagnostic,
#: not the method): map cells revealed for the discoverer (its main measure is a rate; on levels it did not go
#: to itself, so a descent never pays it), the main measure otherwise (+1 per new deepest level, per level
#: ascended, per item sold, per item whose BUC an altar showed)
PROGRESS_MEASURE: dict[str, str] = {**MAIN_MEASURE, "discoverer": "cells_revealed"}

ALTAR_CHAR, ALTAR_COLOUR = ord("_"), 7
DOWN_STAIRS_CHAR, UP_STAIRS_CHAR, HERO_CHAR = ord(">"), ord("<"), ord("@")
_SHOP_GREETING = re.compile(r"Welcome(?: again)? to [^!]*?'s? [^!]*!")


def is_shop_greeting(msg: str) -> bool:
    """A shopkeeper greeting the hero at the shop door (NetHack's ``u_entered_shop``)."""
    return bool(_SHOP_GREETING.search(msg or ""))


def revealed_cells(chars: np.ndarray) -> int:
    """Map cells that are not blank (counted every step: a byte count is several times cheaper than
    ``np.count_nonzero(chars != SPACE)``)."""
    return chars.size - chars.tobytes().count(b" ")


def altar_in_view(chars: np.ndarray, colors: np.ndarray) -> bool:
    """An altar shown on the map (``_`` in colour 7; an iron chain is a cyan ``_``)."""
    if b"_" not in chars.tobytes():  # the usual case, checked every step: a byte search is cheapest
        return False
    return bool(np.any((chars == ALTAR_CHAR) & (colors == ALTAR_COLOUR)))


def _add_cells(cells: set, raw: bytes, char: bytes, width: int) -> None:
    """Adds the (row, col) of every ``char`` in the map's bytes ``raw`` (rows of ``width``): a byte search, about
    a tenth of ``np.argwhere`` on the map, every step."""
    at = raw.find(char)
    while at != -1:
        cells.add(divmod(at, width))
        at = raw.find(char, at + 1)


# the skills whose measures are read from messages (see SkillMeasures._read_message)
_MESSAGE_SKILLS = frozenset({"merchant", "worshipper"})


class SkillMeasures:
    """Per-episode measures of every skill, each counted while that skill is active.

        m = SkillMeasures()
        m.reset(info, obs["chars"], obs["colors"])
        m.update(info, obs["chars"], obs["colors"], "discoverer")   # after every step
        m.values["discoverer"]["cells_per_1000_steps"]
    """

    def __init__(self, skills: tuple[str, ...] = tuple(SKILLS)) -> None:
        self.skills = tuple(skills)
        self.reset(None, None, None)

    def reset(self, info: Optional[dict], chars: Optional[np.ndarray], colors: Optional[np.ndarray]) -> None:
        self.counts: dict[str, dict[str, float]] = {s: {m: 0.0 for m in SKILL_MEASURES[s]} for s in self.skills}
        self.steps = {s: 0 for s in self.skills}
        self.cells_revealed = {s: 0 for s in self.skills}
        self._first_descent: Optional[int] = None
        self._level_best: dict[tuple[int, int], int] = {}
        self._altar_levels: set[tuple[int, int]] = set()
        self._priced: set[str] = set()
        self._down_stairs: dict[tuple[int, int], set[tuple[int, int]]] = {}  # level -> (row, col) of '>'
        self._up_stairs: dict[tuple[int, int], set[tuple[int, int]]] = {}  # level -> (row, col) of '<'
        self._descender_steps_knowing = 0
        self._on_stairs = False
        # levels whose down staircase the descender has stood on (the first arrival of each level counts once:
        # the progress diagnostic's optional stairs reward, --progress_stairs_reward, cannot be farmed)
        self.stairs_levels_reached: set[tuple[int, int]] = set()
        self._level: Optional[tuple[int, int]] = None
        self._depth: Optional[int] = None
        self._deepest: dict[int, int] = {}  # dungeon number -> the deepest depth reached in it this episode
        self._discoverer_went_to: set[tuple[int, int]] = set()  # levels the discoverer took the hero to
        if info is not None and chars is not None:
            self._level = self._level_of(info)
            self._depth = int(info.get("depth", 1))
            self._deepest[self._level[0]] = self._depth
            self._level_best[self._level] = revealed_cells(chars)
            self._note_down_stairs(self._level, chars, chars.tobytes())
            if colors is not None and altar_in_view(chars, colors):
                self._altar_levels.add(self._level)

    @staticmethod
    def _level_of(info: dict) -> tuple[int, int]:
        return int(info.get("dungeon_number", 0)), int(info.get("dungeon_level", info.get("depth", 1)))

    def update(self, info: dict, chars: np.ndarray, colors: np.ndarray, skill: str) -> None:
        c = self.counts.get(skill)
        if c is None:
            return
        self.steps[skill] += 1
        depth = int(info.get("depth", self._depth or 1))
        if depth < 1:  # the last step of a game that ended (NLE's final blstats are zeros): no map
            if skill in _MESSAGE_SKILLS:
                for msg in step_messages(info):
                    self._read_message(msg, skill, c)
            return
        level = self._level_of(info)
        branch_deepest = self._deepest.get(level[0], 0)
        if self._depth is not None and depth != self._depth:
            if skill == "descender" and depth > self._depth:
                c["depth_increases"] += depth - self._depth
                new_depth = depth - max(self._depth, branch_deepest)
                if new_depth > 0:
                    c["levels_descended"] += new_depth
                    if self._first_descent is None:
                        self._first_descent = self.steps[skill]
            elif skill == "ascender" and depth < self._depth:
                c["levels_ascended"] += self._depth - depth
            if skill == "discoverer" and level != self._level:
                self._discoverer_went_to.add(level)
        if depth > branch_deepest:
            self._deepest[level[0]] = depth
        self._depth = depth
        raw = chars.tobytes()  # read once: the cell count and the altar search both scan it
        cells = len(raw) - raw.count(b" ")
        if level not in self._level_best:
            self._level_best[level] = cells  # the first view of a new level comes with arriving, not exploring
            if skill == "discoverer":
                c["new_levels"] += 1
        elif cells > self._level_best[level]:
            if not (skill == "discoverer" and level in self._discoverer_went_to):
                self.cells_revealed[skill] += cells - self._level_best[level]
            self._level_best[level] = cells
        if level not in self._altar_levels and b"_" in raw and altar_in_view(chars, colors):
            self._altar_levels.add(level)
            if skill == "worshipper":
                c["altars_found"] += 1
        stairs = self._note_down_stairs(level, chars, raw)
        if skill == "descender":
            on_stairs = False
            if stairs:
                self._descender_steps_knowing += 1
                width = chars.shape[1]
                on_stairs = any(raw[row * width + col] == HERO_CHAR for row, col in stairs)
            if on_stairs and not self._on_stairs:
                c["down_stairs_reached"] += 1
            if on_stairs:
                self.stairs_levels_reached.add(level)
            self._on_stairs = on_stairs
        else:
            self._on_stairs = False
        self._level = level
        if skill in _MESSAGE_SKILLS:
            for msg in step_messages(info):
                self._read_message(msg, skill, c)

    def _note_down_stairs(self, level: tuple[int, int], chars: np.ndarray, raw: bytes) -> set:
        """The '>' cells seen on ``level`` so far (the hero standing on one hides it: remembered); the '<'
        cells too (:meth:`stairs_under_hero`)."""
        width = chars.shape[1]
        if b"<" in raw:
            up = self._up_stairs.setdefault(level, set())
            _add_cells(up, raw, b"<", width)
        known = self._down_stairs.setdefault(level, set())
        if b">" in raw:
            _add_cells(known, raw, b">", width)
        return known

    def stairs_under_hero(self, x: int, y: int) -> tuple[bool, bool]:
        """Whether the hero, at column ``x`` and row ``y`` of the map, stands on a staircase down / up of the
        current level that was seen before it stepped on it (its own ``@`` hides it)."""
        if self._level is None:
            return False, False
        here = (int(y), int(x))
        return here in self._down_stairs.get(self._level, ()), here in self._up_stairs.get(self._level, ())

    def _read_message(self, msg: str, skill: str, c: dict[str, float]) -> None:
        if skill == "merchant":
            if is_shop_greeting(msg):
                c["shops_entered"] += 1
            offer = parse_sale_offer(msg)
            if offer is not None:
                c["sale_offers"] += 1
                key = identified_appearance(offer)
                if key is not None and key not in self._priced:
                    self._priced.add(key)
                    c["prices_identified"] += 1
            if is_sale_message(msg) > 0:
                c["items_sold"] += 1
        elif skill == "worshipper":
            if buc_from_altar_message(msg, require_unknown=False) is not None:
                c["altar_drops"] += 1
                if buc_from_altar_message(msg) is not None:
                    c["buc_identified"] += 1

    def progress(self, skill: str) -> float:
        """The skill's :data:`PROGRESS_MEASURE` so far this episode (0 for a skill not tracked)."""
        if skill == "discoverer":
            return float(self.cells_revealed.get(skill, 0))
        counts = self.counts.get(skill)
        return float(counts[PROGRESS_MEASURE[skill]]) if counts is not None else 0.0

    @property
    def values(self) -> dict[str, dict[str, float]]:
        """Each skill's measures for the episode so far (rates from the skill's active steps)."""
        out: dict[str, dict[str, float]] = {}
        for s in self.skills:
            v = dict(self.counts[s])
            if s == "discoverer":
                n = self.steps[s]
                v["cells_per_1000_steps"] = 1000.0 * self.cells_revealed[s] / n if n else 0.0
                v["cells_revealed"] = float(self.cells_revealed[s])
            if s == "descender":
                v["steps_to_first_descent"] = float(self._first_descent if self._first_descent is not None
                                                    else self.steps[s])
                n = self.steps[s]
                v["down_stairs_known_share"] = self._descender_steps_knowing / n if n else 0.0
            out[s] = v
        return out

    def summary(self) -> dict[str, float]:
        """``measures/{skill}/{measure}`` for the skills that were active this episode (tensorboard)."""
        vals = self.values
        return {f"measures/{s}/{m}": float(v) for s in self.skills if self.steps[s] > 0
                for m, v in vals[s].items()}


def measures_of(values: dict[str, dict[str, float]], skill: str) -> dict[str, Any]:
    """One skill's measures in the order of :data:`SKILL_MEASURES`."""
    return {m: values[skill][m] for m in SKILL_MEASURES[skill]}
