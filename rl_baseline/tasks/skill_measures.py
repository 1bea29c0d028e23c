"""What each skill achieves while it is active: one definition for training and evaluation.

Each skill's file (``skills/*.toml``, ``[measures]``) names its measures, the one that says whether it does its
job (:data:`MAIN_MEASURE`) and the one ``--skill_reward progress`` pays (:data:`PROGRESS_MEASURE`). Every measure
is counted per episode on the steps on which that skill was the active one. The measures this tracker computes
itself (``common.skill_files.BUILTIN_MEASURES``; the designed skills' in brackets):

======================== ==========================================================================
measure                  definition
======================== ==========================================================================
cells_per_1000_steps     map cells revealed (a cell of a level's map that was blank and no longer
                         is; each level's own best count, so a level seen again is not counted
                         twice) per 1000 active steps, on levels the skill did not go to itself (a
                         level it took the stairs to pays it nothing) [discoverer]
cells_revealed           the same cells, in all (a rate alone favours a policy that dies early: the
                         first room is most of what it sees) [discoverer]
new_levels               dungeon levels entered for the first time [discoverer]
levels_descended         new deepest levels: per dungeon branch, how much deeper than anything
                         reached before in the episode (by any skill) the skill took the hero; a
                         trip up and down again counts nothing [descender]
depth_increases          every depth increase, a trip up and down again included (the loop
                         levels_descended ignores: their difference shows it) [descender]
steps_to_first_descent   active steps before the first new deepest level; an episode without one
                         counts all its active steps (censored) [descender]
down_stairs_known_share  share of the active steps on which a staircase (or ladder) down of the
                         current level had been seen (``>`` on the map, by any skill) [descender]
down_stairs_reached      arrivals on a seen staircase down (the hero's ``@`` where the ``>`` was);
                         with the two above this tells "never finds the stairs" from "finds them
                         and does not go down" [descender]
levels_ascended          levels gone up above the shallowest depth reached since the skill last took
                         over: a trip down and up again in one turn of the skill counts nothing (a sum
                         of depth decreases paid every return trip, and the progress bound's ascender
                         learnt to go up and down the stairs for it) [ascender]
shops_entered            a shopkeeper's greeting ("Welcome [again] to X's store!") [merchant]
sale_offers              a shopkeeper's sell offer ("X offers N gold pieces for ...") [merchant]
prices_identified        offers that identify the item's type by its price (as the ``price`` task
                         counts them: once per appearance) [merchant]
items_sold               completed sales (as the ``transactions`` task counts them) [merchant]
altars_found             levels on which an altar (``_`` in colour 7, as the skill start checks
                         read it) was first seen [worshipper]
altar_drops              items landing on an altar (any message of it, status known before or not)
                         [worshipper]
buc_identified           items whose blessed/uncursed/cursed status the altar revealed (as the
                         ``buc`` task counts them) [worshipper]
======================== ==========================================================================

A skill may also name the message measures of :mod:`common.nethack.message_measures` (the sum of one function
over each of its active steps' messages) and their rates (per 1000 active steps).

Messages are read with the task detectors (:mod:`rl_baseline.tasks.detectors`): the skill
statistics of training (``measures/{skill}/{measure}`` in tensorboard) and the forced-skill
evaluation (``--eval_skill``) use this tracker, so they cannot disagree with the tasks.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Optional

import numpy as np

from common.nethack.message_measures import MESSAGE_MEASURES, RATE_MEASURES, MessageMeasure
from common.skill_files import BUILTIN_MEASURES, SkillSpec
from common.vocabulary import SKILL_SPECS, SKILLS
from rl_baseline.tasks.detectors import (
    buc_from_altar_message,
    identified_appearance,
    is_sale_message,
    parse_sale_offer,
    step_messages,
)

SKILL_MEASURES: dict[str, tuple[str, ...]] = {name: spec.measures for name, spec in SKILL_SPECS.items()}
#: the measure that says whether the skill does its job (higher is better for every one)
MAIN_MEASURE: dict[str, str] = {name: spec.main_measure for name, spec in SKILL_SPECS.items()}
#: the running count whose increase pays a skill under ``--skill_reward progress`` (a privileged diagnostic,
#: not the method; the designed skills: map cells revealed for the discoverer, whose main measure is a rate, on
#: levels it did not go to itself, so a descent never pays it; the main measure otherwise: +1 per new deepest
#: level, per level ascended, per item sold, per item whose BUC an altar showed)
PROGRESS_MEASURE: dict[str, str] = {name: spec.progress_measure for name, spec in SKILL_SPECS.items()}

#: the measures this tracker computes itself -> the part of :meth:`SkillMeasures.update` that counts them (a
#: skill runs a part when its file names one of the part's measures, and only then)
_PART: dict[str, str] = {
    "cells_per_1000_steps": "cells", "cells_revealed": "cells", "new_levels": "new_levels",
    "levels_descended": "descent", "depth_increases": "descent", "steps_to_first_descent": "descent",
    "down_stairs_known_share": "stairs", "down_stairs_reached": "stairs",
    "levels_ascended": "ascent",
    "shops_entered": "shop", "sale_offers": "shop", "prices_identified": "shop", "items_sold": "shop",
    "altars_found": "altars", "altar_drops": "altar_messages", "buc_identified": "altar_messages",
}
# a skill file may name exactly these (common.skill_files checks the files against them)
assert set(_PART) == set(BUILTIN_MEASURES), (
    f"SkillMeasures computes {sorted(set(_PART) ^ set(BUILTIN_MEASURES))} differently from "
    "common.skill_files.BUILTIN_MEASURES")
#: the running counts a part keeps (in its skill's ``counts``); the other measures are worked out from them
_COUNTS: dict[str, tuple[str, ...]] = {
    "cells": (), "new_levels": ("new_levels",), "descent": ("levels_descended", "depth_increases"),
    "stairs": ("down_stairs_reached",), "ascent": ("levels_ascended",),
    "shop": ("shops_entered", "sale_offers", "prices_identified", "items_sold"),
    "altars": ("altars_found",), "altar_messages": ("altar_drops", "buc_identified"),
}

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


def _read_shop(msg: str, t: "_Tracked") -> None:
    c = t.counts
    if is_shop_greeting(msg):
        c["shops_entered"] += 1
    offer = parse_sale_offer(msg)
    if offer is not None:
        c["sale_offers"] += 1
        key = identified_appearance(offer)
        if key is not None and key not in t.priced:
            t.priced.add(key)
            c["prices_identified"] += 1
    if is_sale_message(msg) > 0:
        c["items_sold"] += 1


def _read_altar(msg: str, t: "_Tracked") -> None:
    if buc_from_altar_message(msg, require_unknown=False) is not None:
        t.counts["altar_drops"] += 1
        if buc_from_altar_message(msg) is not None:
            t.counts["buc_identified"] += 1


def _read_registered(msg: str, t: "_Tracked") -> None:
    c = t.counts
    for name, fn in t.message_fns:
        c[name] += fn(msg)


def _per_1000(count: float, steps: int) -> float:
    return 1000.0 * count / steps if steps else 0.0


#: the computed measures that are not a running count, from the skill's counters
_DERIVED: dict[str, Callable[["_Tracked"], float]] = {
    "cells_per_1000_steps": lambda t: _per_1000(t.cells, t.steps),
    "cells_revealed": lambda t: float(t.cells),
    "steps_to_first_descent": lambda t: float(t.first_descent if t.first_descent is not None else t.steps),
    "down_stairs_known_share": lambda t: t.steps_knowing / t.steps if t.steps else 0.0,
}


class _Tracked:
    """One skill's counters for the episode, and the parts of :meth:`SkillMeasures.update` that run for it (fixed
    by the measures its file names: one attribute read on the hot step instead of a test of the skill's name)."""

    __slots__ = ("names", "progress_measure", "rates", "message_fns", "readers", "cells_part", "new_levels",
                 "descent", "ascent", "stairs", "altars", "_count_names",
                 "counts", "steps", "cells", "first_descent", "steps_knowing", "went_to", "priced", "top")

    def __init__(self, spec: SkillSpec, message_measures: Mapping[str, MessageMeasure],
                 rate_measures: Mapping[str, str]) -> None:
        names = spec.measures
        unknown = [m for m in names if m not in _PART and m not in message_measures and m not in rate_measures]
        unknown += [rate_measures[m] for m in names if m in rate_measures and rate_measures[m] not in message_measures]
        if unknown:
            raise ValueError(f"skill {spec.name!r}: no measure {', '.join(map(repr, unknown))} (neither computed "
                             "by SkillMeasures nor a registered message measure)")
        twice = [m for m in names if m in _PART and (m in message_measures or m in rate_measures)]
        if twice:  # it would be counted twice into one count
            raise ValueError(f"skill {spec.name!r}: the measure {twice[0]!r} is computed by SkillMeasures and also "
                             "registered as a message measure")
        self.names = names
        self.progress_measure = spec.progress_measure
        self.rates = {m: rate_measures[m] for m in names if m in rate_measures}
        # a rate's message measure is counted even when the file does not name it
        counted = dict.fromkeys([m for m in names if m in message_measures] + list(self.rates.values()))
        self.message_fns: tuple[tuple[str, MessageMeasure], ...] = tuple((m, message_measures[m]) for m in counted)
        parts = dict.fromkeys(_PART[m] for m in names if m in _PART)
        self.cells_part = "cells" in parts
        self.new_levels = "new_levels" in parts
        self.descent = "descent" in parts
        self.ascent = "ascent" in parts
        self.stairs = "stairs" in parts
        self.altars = "altars" in parts
        readers: list[Callable[[str, _Tracked], None]] = []
        if "shop" in parts:
            readers.append(_read_shop)
        if "altar_messages" in parts:
            readers.append(_read_altar)
        if self.message_fns:
            readers.append(_read_registered)
        self.readers = tuple(readers)
        self._count_names = tuple(k for p in parts for k in _COUNTS[p]) + tuple(counted)
        self.reset()

    def reset(self) -> None:
        self.counts: dict[str, float] = {k: 0.0 for k in self._count_names}
        self.steps = 0
        self.cells = 0  # map cells revealed while active, on levels the skill did not go to itself
        self.first_descent: Optional[int] = None
        self.steps_knowing = 0  # active steps with a staircase down of the level seen
        self.went_to: set[tuple[int, int]] = set()  # levels the skill took the hero to (no cells paid there)
        self.priced: set[str] = set()  # appearances whose offer identified them
        self.top: Optional[int] = None  # the shallowest depth since the skill last took over (the ascent part)

    def value(self, measure: str) -> float:
        derived = _DERIVED.get(measure)
        if derived is not None:
            return derived(self)
        base = self.rates.get(measure)
        if base is not None:
            return _per_1000(self.counts[base], self.steps)
        return self.counts[measure]


class SkillMeasures:
    """Per-episode measures of every skill, each counted while that skill is active.

        m = SkillMeasures()
        m.reset(info, obs["chars"], obs["colors"])
        m.update(info, obs["chars"], obs["colors"], "discoverer")   # after every step
        m.values["discoverer"]["cells_per_1000_steps"]

    ``specs`` says each skill's measures (the active skill set's files by default); ``message_measures`` and
    ``rate_measures`` are the registries of :mod:`common.nethack.message_measures` by default.
    """

    def __init__(self, skills: tuple[str, ...] = tuple(SKILLS), specs: Mapping[str, SkillSpec] = SKILL_SPECS,
                 message_measures: Mapping[str, MessageMeasure] = MESSAGE_MEASURES,
                 rate_measures: Mapping[str, str] = RATE_MEASURES) -> None:
        self.skills = tuple(skills)
        self._tracked = {s: _Tracked(specs[s], message_measures, rate_measures) for s in self.skills}
        self.reset(None, None, None)

    def reset(self, info: Optional[dict], chars: Optional[np.ndarray], colors: Optional[np.ndarray]) -> None:
        for t in self._tracked.values():
            t.reset()
        self._level_best: dict[tuple[int, int], int] = {}
        self._altar_levels: set[tuple[int, int]] = set()
        self._down_stairs: dict[tuple[int, int], set[tuple[int, int]]] = {}  # level -> (row, col) of '>'
        self._up_stairs: dict[tuple[int, int], set[tuple[int, int]]] = {}  # level -> (row, col) of '<'
        self._on_stairs_of: Optional[_Tracked] = None  # the skill that stood on a seen '>' at the last step
        # levels whose down staircase a skill with the staircase measures has stood on (the first arrival of each
        # level counts once: the progress diagnostic's optional stairs reward, --progress_stairs_reward, cannot be
        # farmed)
        self.stairs_levels_reached: set[tuple[int, int]] = set()
        self._level: Optional[tuple[int, int]] = None
        # the map bytes of the last update (or of the reset): an unchanged map is not scanned again
        self._last_map = b""
        self._depth: Optional[int] = None
        self._last_skill: Optional[str] = None  # the skill of the last update: the next one by another took over
        self._deepest: dict[int, int] = {}  # dungeon number -> the deepest depth reached in it this episode
        if info is not None and chars is not None:
            self._level = self._level_of(info)
            self._depth = int(info.get("depth", 1))
            self._deepest[self._level[0]] = self._depth
            self._level_best[self._level] = revealed_cells(chars)
            self._last_map = chars.tobytes()
            self._note_down_stairs(self._level, chars, self._last_map)
            if colors is not None and altar_in_view(chars, colors):
                self._altar_levels.add(self._level)

    @staticmethod
    def _level_of(info: dict) -> tuple[int, int]:
        return int(info.get("dungeon_number", 0)), int(info.get("dungeon_level", info.get("depth", 1)))

    def update(self, info: dict, chars: np.ndarray, colors: np.ndarray, skill: str) -> None:
        t = self._tracked.get(skill)
        took_over = skill != self._last_skill
        self._last_skill = skill
        if t is None:
            return
        t.steps += 1
        c = t.counts
        readers = t.readers
        depth = int(info.get("depth", self._depth or 1))
        if depth < 1:  # the last step of a game that ended (NLE's final blstats are zeros): no map
            if readers:
                for msg in step_messages(info):
                    for read in readers:
                        read(msg, t)
            return
        level = self._level_of(info)
        branch_deepest = self._deepest.get(level[0], 0)
        if self._depth is not None and depth != self._depth:
            if t.descent and depth > self._depth:
                c["depth_increases"] += depth - self._depth
                new_depth = depth - max(self._depth, branch_deepest)
                if new_depth > 0:
                    c["levels_descended"] += new_depth
                    if t.first_descent is None:
                        t.first_descent = t.steps
            if t.cells_part and level != self._level:
                t.went_to.add(level)
        if t.ascent:
            if took_over or t.top is None:
                t.top = self._depth if self._depth is not None else depth
            if depth < t.top:
                c["levels_ascended"] += t.top - depth
                t.top = depth
        if depth > branch_deepest:
            self._deepest[level[0]] = depth
        self._depth = depth
        raw = chars.tobytes()  # read once: the cell count and the altar search both scan it
        if raw == self._last_map and level == self._level:
            # the map of the last step, on the same level (most steps): its cells and staircases are counted already
            stairs = self._down_stairs[level]
        else:
            self._last_map = raw
            cells = len(raw) - raw.count(b" ")
            if level not in self._level_best:
                self._level_best[level] = cells  # the first view of a new level comes with arriving, not exploring
                if t.new_levels:
                    c["new_levels"] += 1
            elif cells > self._level_best[level]:
                if t.cells_part and level not in t.went_to:
                    t.cells += cells - self._level_best[level]
                self._level_best[level] = cells
            stairs = self._note_down_stairs(level, chars, raw)
        if level not in self._altar_levels and b"_" in raw and altar_in_view(chars, colors):  # colours may differ
            self._altar_levels.add(level)
            if t.altars:
                c["altars_found"] += 1
        if t.stairs:
            on_stairs = False
            if stairs:
                t.steps_knowing += 1
                width = chars.shape[1]
                on_stairs = any(raw[row * width + col] == HERO_CHAR for row, col in stairs)
            if on_stairs:
                if self._on_stairs_of is not t:  # an arrival: not on them at this skill's last step
                    c["down_stairs_reached"] += 1
                self.stairs_levels_reached.add(level)
            self._on_stairs_of = t if on_stairs else None
        else:
            self._on_stairs_of = None
        self._level = level
        if readers:
            for msg in step_messages(info):
                for read in readers:
                    read(msg, t)

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

    def progress(self, skill: str) -> float:
        """The skill's progress measure (its file's; :data:`PROGRESS_MEASURE`) so far this episode (0 for a skill
        not tracked)."""
        t = self._tracked.get(skill)
        return float(t.value(t.progress_measure)) if t is not None else 0.0

    @property
    def values(self) -> dict[str, dict[str, float]]:
        """Each skill's measures for the episode so far, in its file's order (rates from its active steps)."""
        return {s: {m: t.value(m) for m in t.names} for s, t in self._tracked.items()}

    def summary(self) -> dict[str, float]:
        """``measures/{skill}/{measure}`` for the skills that were active this episode (tensorboard)."""
        return {f"measures/{s}/{m}": float(t.value(m)) for s, t in self._tracked.items() if t.steps > 0
                for m in t.names}


def measures_of(values: dict[str, dict[str, float]], skill: str) -> dict[str, Any]:
    """One skill's measures in the order of :data:`SKILL_MEASURES`."""
    return {m: values[skill][m] for m in SKILL_MEASURES[skill]}
