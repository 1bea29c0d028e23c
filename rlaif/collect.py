"""Phase 0: observation datasets collected by playing the game.

A *sample* is one environment step seen through the annotator's eyes: the message
shown before and after the step plus the stats vector (:data:`rlaif.dataset.STAT_FIELDS`)
before and after it. :func:`collect_dataset` plays ``NetHackScoreMonk-v1`` with a mix
of behaviour policies and keeps a random subset of the steps:

* ``random``: uniform over the agent's action set;
* ``explorer``: a scripted agent (:class:`ExplorerPolicy`) that walks to unexplored
  floor, picks up items, fights adjacent monsters, eats when hungry and, after a
  random time on each level (or when nothing is left to explore), takes the stairs,
  so the data covers level changes, gold, shops and altars far better than random play;
* ``checkpoint``: a trained skill policy (a sample-factory checkpoint), see
  :class:`CheckpointPolicy`.

Every episode picks its policy from the mix and gets its own game seeds, and each
step is kept with a small probability, so the samples are spread over many episodes.
The samples are shuffled before saving, so consecutive samples (a pair) usually come
from different episodes.

Determinism: all randomness comes from ``numpy`` generators derived from
``(seed, worker id)``; NetHack runs with fixed core/disp seeds and without
reseeding. The same seed and the same number of workers give a byte-identical file.

The game modules are imported lazily, so importing :mod:`rlaif` stays free of NLE.
"""
from __future__ import annotations

import collections
import json
import logging
import os
import re
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
from tqdm import tqdm

from rlaif.dataset import MESSAGE_LEN, STAT_FIELDS, ObservationDataset, save_dataset
from rlaif.skills import SKILLS, skill_index

logger = logging.getLogger(__name__)

POLICIES: tuple[str, ...] = ("random", "explorer", "checkpoint")
DEFAULT_CHARACTER = "mon-hum-neu-mal"
ENV_NAME = "NetHackScoreMonk-v1"


class CollectError(ValueError):
    """Bad collection settings (unknown policy, bad mix, missing checkpoint, ...)."""


# ----------------------------------------------------------------------------- config


def parse_policy_mix(text: str) -> dict[str, float]:
    """``"explorer:0.8,random:0.2"`` -> normalised weights; a bare name means weight 1."""
    if not text or not text.strip():
        raise CollectError("empty policy mix; use e.g. 'explorer:0.8,random:0.2'")
    mix: dict[str, float] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, _, weight = part.partition(":")
        name = name.strip()
        if name not in POLICIES:
            raise CollectError(f"unknown policy {name!r} in mix {text!r}; valid: {', '.join(POLICIES)}")
        try:
            w = float(weight) if weight.strip() else 1.0
        except ValueError:
            raise CollectError(f"bad weight {weight!r} for policy {name!r} in mix {text!r}") from None
        if not np.isfinite(w) or w < 0:
            raise CollectError(f"weight of policy {name!r} must be a finite number >= 0, got {weight!r}")
        mix[name] = mix.get(name, 0.0) + w
    total = sum(mix.values())
    if total <= 0:
        raise CollectError(f"policy mix {text!r} has no positive weight")
    return {name: w / total for name, w in sorted(mix.items()) if w > 0}


@dataclass
class ExplorerConfig:
    """Knobs of the scripted explorer."""

    epsilon: float = 0.05  # share of uniformly random actions
    min_level_steps: int = 100  # time spent on a level before heading for the stairs ...
    max_level_steps: int = 700  # ... drawn uniformly from [min, max]
    descend_prob: float = 0.8  # when leaving a level: down (else up, where possible)
    search_turns: int = 15  # searches when nothing is left to explore and no stairs are known
    replan_every: int = 6  # steps a cached path is followed before planning again
    kick_locked_prob: float = 0.5  # kick a locked door open instead of giving up on it
    altar_drops: int = 3  # items dropped on each altar visited (their curse status shows)
    shop_drop_prob: float = 0.1  # per step in a shop: drop an item (the shopkeeper offers to buy it)
    shop_steps: int = 40  # steps after a shop greeting that count as "in a shop"
    sell_prob: float = 0.7  # answer a shopkeeper's offer with yes


@dataclass
class CollectConfig:
    """What :func:`collect_dataset` collects and how."""

    skill: str
    num_pairs: int
    policy_mix: dict[str, float] = field(default_factory=lambda: {"explorer": 0.8, "random": 0.2})
    seed: int = 0
    num_workers: int = 1
    checkpoint: Optional[str] = None  # train_dir/skill_policy/EXP for the checkpoint policy
    train_dir: Optional[str] = None  # defaults to the checkpoint's parent folder
    device: str = "cpu"  # where the checkpoint policy runs: cpu or cuda
    max_episode_steps: int = 5000
    sample_prob: float = 0.1  # chance that a step becomes a sample
    uninformative_keep_prob: float = 0.1  # ... times this when no message and only HP changed
    level_change_prob: float = 1.0  # chance that a step that changes the depth becomes a sample
    max_samples_per_episode: int = 200
    character: str = DEFAULT_CHARACTER
    explorer: ExplorerConfig = field(default_factory=ExplorerConfig)
    progress: bool = True

    def validate(self) -> None:
        skill_index(self.skill)  # raises with the list of valid skills
        if int(self.num_pairs) <= 0:
            raise CollectError(f"--num_pairs must be > 0, got {self.num_pairs}")
        if int(self.num_workers) <= 0:
            raise CollectError(f"--num_workers must be > 0, got {self.num_workers}")
        if not self.policy_mix or any(p not in POLICIES for p in self.policy_mix):
            raise CollectError(f"bad policy mix {self.policy_mix}; valid policies: {', '.join(POLICIES)}")
        if self.device not in ("cpu", "cuda"):
            raise CollectError(f"--device must be cpu or cuda, got {self.device!r}")
        if "checkpoint" in self.policy_mix and not self.checkpoint:
            raise CollectError("policy 'checkpoint' needs --checkpoint DIR (train_dir/skill_policy/EXPERIMENT)")
        for name in ("sample_prob", "uninformative_keep_prob", "level_change_prob"):
            value = float(getattr(self, name))
            if not 0.0 <= value <= 1.0:
                raise CollectError(f"--{name} must be in [0, 1], got {value}")
        if float(self.sample_prob) <= 0:
            raise CollectError("--sample_prob must be > 0")
        if int(self.max_episode_steps) <= 0 or int(self.max_samples_per_episode) <= 0:
            raise CollectError("--max_episode_steps and --max_samples_per_episode must be > 0")


# ----------------------------------------------------------------------------- game tables


@dataclass(frozen=True)
class _Tables:
    """NLE facts the policies need, built once per process (lazily: NLE is imported here)."""

    actions: tuple[int, ...]
    move_index: dict[tuple[int, int], int]  # (dy, dx) -> action index
    up: int
    down: int
    search: int
    kick: int
    eat: int
    pray: int
    more: int
    drop: int
    answer_no: int  # the key 'n' (south-east) answers a yes/no question with no
    answer_yes: int  # the key 'y' (north-west) answers yes
    cmap_off: int
    num_cmap: int
    mon_off: int
    pet_off: int
    invis_off: int
    obj_off: int
    boulder_glyph: int
    luts: dict  # per-glyph boolean lookup tables used by read_map


_TABLES: Optional[_Tables] = None

# NetHack 3.6 map symbols (defsym order), by index into the cmap glyph range.
S_STONE = 0
S_VWALL, S_HWALL = 1, 2
S_NDOOR, S_VODOOR, S_HODOOR, S_VCDOOR, S_HCDOOR = 12, 13, 14, 15, 16
S_ROOM, S_DARKROOM, S_CORR, S_LITCORR = 19, 20, 21, 22
S_UPSTAIR, S_DNSTAIR, S_UPLADDER, S_DNLADDER = 23, 24, 25, 26
S_ALTAR, S_GRAVE, S_THRONE, S_SINK, S_FOUNTAIN = 27, 28, 29, 30, 31
S_ICE = 33
S_VODBRIDGE, S_HODBRIDGE = 35, 36
WALKABLE_CMAP = frozenset(
    {S_NDOOR, S_VODOOR, S_HODOOR, S_VCDOOR, S_HCDOOR, S_ROOM, S_DARKROOM, S_CORR, S_LITCORR,
     S_UPSTAIR, S_DNSTAIR, S_UPLADDER, S_DNLADDER, S_ALTAR, S_GRAVE, S_THRONE, S_SINK, S_FOUNTAIN,
     S_ICE, S_VODBRIDGE, S_HODBRIDGE}
)
DOOR_CMAP = frozenset({S_VODOOR, S_HODOOR, S_VCDOOR, S_HCDOOR})  # no diagonal moves through these


def game_tables() -> _Tables:
    """Action indices and glyph ranges (imports NLE and the project's action set)."""
    global _TABLES
    if _TABLES is None:
        from nle import nethack

        from rl_baseline.nethack.actions import ACTIONS

        actions = tuple(int(a) for a in ACTIONS)
        deltas = {
            nethack.CompassDirection.N: (-1, 0), nethack.CompassDirection.S: (1, 0),
            nethack.CompassDirection.E: (0, 1), nethack.CompassDirection.W: (0, -1),
            nethack.CompassDirection.NE: (-1, 1), nethack.CompassDirection.NW: (-1, -1),
            nethack.CompassDirection.SE: (1, 1), nethack.CompassDirection.SW: (1, -1),
        }
        move_index = {d: actions.index(int(key)) for key, d in deltas.items()}
        boulder = -1
        for i in range(nethack.NUM_OBJECTS):
            if nethack.OBJ_NAME(nethack.objclass(i)) == "boulder":
                boulder = nethack.GLYPH_OBJ_OFF + i
                break
        g = np.arange(nethack.MAX_GLYPH)
        cmap = np.where((g >= nethack.GLYPH_CMAP_OFF) & (g < nethack.GLYPH_CMAP_OFF + nethack.MAXPCHARS),
                        g - nethack.GLYPH_CMAP_OFF, -1)
        monster = (g >= nethack.GLYPH_MON_OFF) & (g < nethack.GLYPH_PET_OFF)
        pet = (g >= nethack.GLYPH_PET_OFF) & (g < nethack.GLYPH_INVIS_OFF)
        invisible = g == nethack.GLYPH_INVIS_OFF
        obj = (g >= nethack.GLYPH_OBJ_OFF) & (g < nethack.GLYPH_OBJ_OFF + nethack.NUM_OBJECTS) & (g != boulder)
        luts = {
            "passable": np.isin(cmap, sorted(WALKABLE_CMAP)) | monster | pet | invisible | obj,
            "nodiag": np.isin(cmap, sorted(DOOR_CMAP)),
            "unexplored": cmap == S_STONE,
            "hostile": monster | invisible,
            "items": obj,
            "down_stairs": np.isin(cmap, [S_DNSTAIR, S_DNLADDER]),
            "up_stairs": np.isin(cmap, [S_UPSTAIR, S_UPLADDER]),
            "altars": cmap == S_ALTAR,
        }
        _TABLES = _Tables(
            luts=luts,
            actions=actions,
            move_index=move_index,
            up=actions.index(int(nethack.MiscDirection.UP)),
            down=actions.index(int(nethack.MiscDirection.DOWN)),
            search=actions.index(int(nethack.Command.SEARCH)),
            kick=actions.index(int(nethack.Command.KICK)),
            eat=actions.index(int(nethack.Command.EAT)),
            pray=actions.index(int(nethack.Command.PRAY)),
            more=actions.index(int(nethack.MiscAction.MORE)),
            drop=actions.index(int(nethack.Command.DROP)),
            answer_no=actions.index(int(nethack.CompassDirection.SE)),
            answer_yes=actions.index(int(nethack.CompassDirection.NW)),
            cmap_off=nethack.GLYPH_CMAP_OFF,
            num_cmap=nethack.MAXPCHARS,
            mon_off=nethack.GLYPH_MON_OFF,
            pet_off=nethack.GLYPH_PET_OFF,
            invis_off=nethack.GLYPH_INVIS_OFF,
            obj_off=nethack.GLYPH_OBJ_OFF,
            boulder_glyph=boulder,
        )
    return _TABLES


def stats_from_blstats(blstats: np.ndarray) -> np.ndarray:
    """The dataset's stats vector (depth, gold, hp, hpmax, xp level, hunger) from NLE's blstats."""
    from rl_baseline.nethack import blstats as B

    b = np.asarray(blstats)
    return np.array(
        [b[B.BL_DEPTH], b[B.BL_GOLD], b[B.BL_HP], b[B.BL_HPMAX], b[B.BL_XP_LEVEL], b[B.BL_HUNGER]],
        dtype=np.int32,
    )


# ----------------------------------------------------------------------------- policies


class Policy:
    """A behaviour policy: ``reset()`` at the start of an episode, ``act(obs)`` -> action index."""

    name = "policy"

    def reset(self) -> None:
        pass

    def act(self, obs: dict) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass


class RandomPolicy(Policy):
    """Uniform over the agent's action set."""

    name = "random"

    def __init__(self, rng: np.random.Generator, num_actions: Optional[int] = None) -> None:
        self.rng = rng
        self.num_actions = int(num_actions) if num_actions else len(game_tables().actions)

    def act(self, obs: dict) -> int:
        return int(self.rng.integers(self.num_actions))


@dataclass
class MapView:
    """What the explorer reads off one observation's glyphs (all boolean [rows, cols])."""

    passable: np.ndarray  # the hero can (try to) stand there
    nodiag: np.ndarray  # doors: no diagonal moves into or out of them
    unexplored: np.ndarray  # never seen (blank)
    hostile: np.ndarray  # a monster that is not the hero's pet
    items: np.ndarray  # an object lies there
    down_stairs: np.ndarray
    up_stairs: np.ndarray
    altars: np.ndarray


def read_map(glyphs: np.ndarray, tables: Optional[_Tables] = None) -> MapView:
    """Classifies every map square of ``glyphs`` (NLE's [21, 79] int16 array)."""
    t = tables or game_tables()
    g = np.asarray(glyphs)
    return MapView(**{name: lut[g] for name, lut in t.luts.items()})


# a yes/no question still waiting for its answer ("... [yn] (n)" with nothing typed after it)
_OPEN_QUESTION = re.compile(rb"\[[ynaq#]+\] \([ynaq]\)\s*$")

_STEPS = ((-1, 0), (1, 0), (0, -1), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def shortest_path(
    passable: np.ndarray, nodiag: np.ndarray, start: tuple[int, int], targets: np.ndarray,
    blocked: Optional[set] = None,
) -> Optional[list[tuple[int, int]]]:
    """Breadth-first path from ``start`` (row, col) to the nearest ``targets`` square.

    Returns the squares after ``start`` up to and including the target ([] if ``start``
    is itself a target), or ``None`` when no target can be reached. Diagonal steps into
    or out of a door are not allowed (NetHack's rule).
    """
    rows, cols = passable.shape
    if targets[start]:
        return []
    blocked = blocked or set()
    prev: dict[tuple[int, int], tuple[int, int]] = {start: start}
    queue = collections.deque([start])
    while queue:
        cur = queue.popleft()
        cy, cx = cur
        cur_door = nodiag[cy, cx]
        for dy, dx in _STEPS:
            ny, nx = cy + dy, cx + dx
            if not (0 <= ny < rows and 0 <= nx < cols):
                continue
            nxt = (ny, nx)
            if nxt in prev or not passable[ny, nx] or nxt in blocked:
                continue
            if dy and dx and (cur_door or nodiag[ny, nx]):
                continue
            prev[nxt] = cur
            if targets[ny, nx]:
                path = [nxt]
                while prev[path[-1]] != start:
                    path.append(prev[path[-1]])
                return path[::-1]
            queue.append(nxt)
    return None


def _dilate(mask: np.ndarray) -> np.ndarray:
    """Squares with a ``mask`` square among their 8 neighbours."""
    out = np.zeros_like(mask)
    rows, cols = mask.shape
    for dy, dx in _STEPS:
        src = mask[max(-dy, 0) : rows - max(dy, 0), max(-dx, 0) : cols - max(dx, 0)]
        out[max(dy, 0) : rows - max(-dy, 0), max(dx, 0) : cols - max(-dx, 0)] |= src
    return out


@dataclass
class _LevelMemory:
    budget: int
    steps: int = 0
    visited: set = field(default_factory=set)
    blocked: set = field(default_factory=set)
    down: set = field(default_factory=set)
    up: set = field(default_factory=set)
    searched: int = 0
    go_up: bool = False  # when leaving: take the up stairs (else down)
    doors: set = field(default_factory=set)  # remembered: the hero hides the door it stands in
    altars: set = field(default_factory=set)
    altar_drops: dict = field(default_factory=dict)


class ExplorerPolicy(Policy):
    """Scripted explorer: frontier-walking, fighting, eating, and taking stairs now and then.

    Decision order each step: answer an open yes/no question (yes to most of a shopkeeper's
    offers, no to the rest, e.g. attacking a peaceful); a random action with probability
    ``epsilon``; drop a few items on each altar it stands on, and now and then in a shop
    (after the shopkeeper's greeting); eat when hungry;
    pray when nearly dead (at most once per 1000 turns); attack an adjacent hostile
    monster; when the level's time budget is used up (or nothing is left to explore),
    walk to known stairs and take them; otherwise walk to the nearest unvisited item, altar
    or frontier square (a passable square next to unexplored blank space); with nothing to
    walk to, search, then wander.
    """

    name = "explorer"

    def __init__(self, rng: np.random.Generator, config: Optional[ExplorerConfig] = None) -> None:
        self.rng = rng
        self.config = config or ExplorerConfig()
        self.t = game_tables()
        self.reset()

    def reset(self) -> None:
        self.levels: dict[tuple[int, int], _LevelMemory] = {}
        self.current_level: Optional[tuple[int, int]] = None
        self.pending: list[int] = []
        self.path: list[tuple[int, int]] = []
        self.path_age = 0
        self.last_pos: Optional[tuple[int, int]] = None
        self.stuck = 0
        self.last_pray = -10_000
        self.peaceful_glyphs: set[int] = set()
        self.last_attack_glyph: Optional[int] = None
        self.shop_timer = 0

    # -- helpers
    def _level(self, key: tuple[int, int]) -> _LevelMemory:
        """The level's memory; every arrival on a level draws a new time budget and direction."""
        mem = self.levels.get(key)
        if mem is None:
            mem = self.levels[key] = _LevelMemory(budget=0)
        if key != self.current_level:
            c = self.config
            self.current_level = key
            self.path = []
            mem.steps = 0
            mem.searched = 0
            mem.budget = int(self.rng.integers(c.min_level_steps, c.max_level_steps + 1))
            mem.go_up = bool(self.rng.random() >= c.descend_prob)
        return mem

    def _move(self, pos: tuple[int, int], nxt: tuple[int, int]) -> int:
        return self.t.move_index[(int(np.sign(nxt[0] - pos[0])), int(np.sign(nxt[1] - pos[1])))]

    def _random_move(self) -> int:
        moves = list(self.t.move_index.values())
        return int(moves[int(self.rng.integers(len(moves)))])

    def choose(self, view: MapView, pos: tuple[int, int], mem: _LevelMemory, leaving: bool,
               top_level: bool = False) -> tuple[str, Optional[int]]:
        """The explorer's decision on a map (no game state): ``(reason, action index)``.

        Reasons: ``"attack"``, ``"down"``, ``"up"``, ``"to_stairs"``, ``"explore"``,
        ``"search"``, ``"wander"``. Kept separate from :meth:`act` so it can be tested on
        hand-made maps.
        """
        y, x = pos
        rows, cols = view.passable.shape
        # adjacent hostile monster: attack it by moving into it
        for dy, dx in _STEPS:
            ny, nx = y + dy, x + dx
            if 0 <= ny < rows and 0 <= nx < cols and view.hostile[ny, nx] and (ny, nx) not in mem.blocked:
                if dy and dx and (view.nodiag[y, x] or view.nodiag[ny, nx]):
                    continue
                return "attack", self.t.move_index[(dy, dx)]
        if leaving:
            # the up stairs of level 1 leave the dungeon; without known stairs, keep exploring
            stairs = mem.up if (mem.go_up and not top_level) else mem.down
            if stairs and pos in stairs:
                return ("down", self.t.down) if pos in mem.down else ("up", self.t.up)
            if stairs:
                targets = np.zeros_like(view.passable)
                for sy, sx in stairs:
                    targets[sy, sx] = True
                path = shortest_path(view.passable | targets, view.nodiag, pos, targets, mem.blocked)
                if path:
                    self.path = path
                    self.path_age = 0
                    return "to_stairs", self._move(pos, path[0])
        frontier = view.passable & _dilate(view.unexplored) & ~view.hostile
        targets = (frontier | view.items | view.altars) & view.passable
        for vy, vx in mem.visited:
            targets[vy, vx] = False
        for by, bx in mem.blocked:
            targets[by, bx] = False
        path = shortest_path(view.passable, view.nodiag, pos, targets, mem.blocked) if targets.any() else None
        if path:
            self.path = path
            self.path_age = 0
            return "explore", self._move(pos, path[0])
        # nothing to walk to: search a while (hidden doors and corridors), then wander a while
        mem.searched = (mem.searched + 1) % (2 * self.config.search_turns)
        if mem.searched < self.config.search_turns:
            return "search", self.t.search
        return "wander", self._wander(view, pos)

    def _wander(self, view: MapView, pos: tuple[int, int]) -> int:
        """A random move to a passable neighbour (any move when there is none)."""
        y, x = pos
        rows, cols = view.passable.shape
        options = []
        for dy, dx in _STEPS:
            ny, nx = y + dy, x + dx
            if 0 <= ny < rows and 0 <= nx < cols and view.passable[ny, nx]:
                if dy and dx and (view.nodiag[y, x] or view.nodiag[ny, nx]):
                    continue
                options.append(self.t.move_index[(dy, dx)])
        if not options:
            return self._random_move()
        return int(options[int(self.rng.integers(len(options)))])

    # -- the policy
    def act(self, obs: dict) -> int:
        from rl_baseline.nethack import blstats as B

        t = self.t
        if self.pending:
            return self.pending.pop(0)
        blstats = obs["blstats"]
        msg = bytes(np.asarray(obs["message"], dtype=np.uint8)).split(b"\0", 1)[0]
        if b"What do you want to eat" in msg or b"What do you want to drink" in msg:
            return t.answer_yes  # 'y' takes the first item offered (the env's rule)
        if _OPEN_QUESTION.search(msg):
            if b"Sell it" in msg and self.rng.random() < self.config.sell_prob:
                return t.answer_yes
            if b"attack" in msg and self.last_attack_glyph is not None:
                self.peaceful_glyphs.add(self.last_attack_glyph)
            return t.answer_no
        if b"direction?" in msg:
            return self._random_move()
        if self.rng.random() < self.config.epsilon:
            return int(self.rng.integers(len(t.actions)))

        pos = (int(blstats[B.BL_Y]), int(blstats[B.BL_X]))
        key = (int(blstats[B.BL_DUNGEON_NUMBER]), int(blstats[B.BL_DUNGEON_LEVEL]))
        mem = self._level(key)
        mem.steps += 1
        if pos == self.last_pos:
            self.stuck += 1
        else:
            self.stuck = 0
        self.last_pos = pos
        mem.visited.add(pos)

        glyphs = np.asarray(obs["glyphs"])
        view = read_map(glyphs, t)
        for glyph in self.peaceful_glyphs:
            view.hostile &= glyphs != glyph
        for sy, sx in zip(*np.nonzero(view.down_stairs)):
            mem.down.add((int(sy), int(sx)))
        for sy, sx in zip(*np.nonzero(view.up_stairs)):
            mem.up.add((int(sy), int(sx)))
        for sy, sx in zip(*np.nonzero(view.altars)):
            mem.altars.add((int(sy), int(sx)))
        for dy_, dx_ in zip(*np.nonzero(view.nodiag)):
            mem.doors.add((int(dy_), int(dx_)))
        # the hero hides the square it stands on; it stays passable (and a door stays a door)
        view.nodiag[pos] = pos in mem.doors
        view.passable[pos] = True
        view.hostile[pos] = False
        view.items[pos] = False

        if b"This door is locked" in msg and self.path:
            door = next((p for p in self.path if p != pos), None)
            if door is not None and max(abs(door[0] - pos[0]), abs(door[1] - pos[1])) == 1:
                if self.rng.random() < self.config.kick_locked_prob:
                    self.pending.append(self._move(pos, door))
                    return t.kick
                mem.blocked.add(door)
            self.path = []

        # altars and shops: drop items (curse status shows on an altar; a shopkeeper offers to buy)
        if pos in mem.altars and mem.altar_drops.get(pos, 0) < self.config.altar_drops:
            mem.altar_drops[pos] = mem.altar_drops.get(pos, 0) + 1
            return t.drop
        if b"Welcome to " in msg:
            self.shop_timer = self.config.shop_steps
        if self.shop_timer > 0:
            self.shop_timer -= 1
            if self.rng.random() < self.config.shop_drop_prob:
                return t.drop

        hunger = int(blstats[B.BL_HUNGER])
        if hunger >= 2 and self.rng.random() < 0.2:
            return t.eat
        hp, hpmax, turn = int(blstats[B.BL_HP]), int(blstats[B.BL_HPMAX]), int(blstats[B.BL_TIME])
        if hpmax > 0 and (hp < 6 or hp * 7 < hpmax) and turn - self.last_pray > 1000:
            self.last_pray = turn
            return t.pray

        if self.stuck >= 4:
            if self.path:
                mem.blocked.add(self.path[0])
            self.path = []
            self.stuck = 0
            return self._wander(view, pos)

        leaving = mem.steps > mem.budget
        # follow a cached path while it still makes sense
        if self.path and self.path_age < self.config.replan_every and not leaving:
            if self.path[0] == pos:
                self.path.pop(0)
            if self.path and max(abs(self.path[0][0] - pos[0]), abs(self.path[0][1] - pos[1])) == 1 \
                    and view.passable[self.path[0]] and not self._hostile_adjacent(view, pos):
                self.path_age += 1
                return self._move(pos, self.path[0])
        self.path = []
        top_level = int(blstats[B.BL_DEPTH]) <= 1
        reason, action = self.choose(view, pos, mem, leaving, top_level)
        if reason == "attack":
            ny_nx = [(pos[0] + d[0], pos[1] + d[1]) for d, a in t.move_index.items() if a == action][0]
            self.last_attack_glyph = int(glyphs[ny_nx])
        if reason in ("search", "wander") and not leaving and mem.down:
            mem.go_up = mem.go_up and bool(mem.up) and not top_level
            mem.steps = max(mem.steps, mem.budget)  # nothing left here: head for the stairs
        return int(action)

    @staticmethod
    def _hostile_adjacent(view: MapView, pos: tuple[int, int]) -> bool:
        y, x = pos
        return bool(view.hostile[max(y - 1, 0) : y + 2, max(x - 1, 0) : x + 2].any())


class CheckpointPolicy(Policy):
    """A trained skill policy from a sample-factory checkpoint (``train_dir/skill_policy/EXP``).

    The network sees the model observation of :mod:`rl_baseline.models.obs` with the
    collected skill's one-hot; its LSTM state is carried through the episode.
    """

    name = "checkpoint"

    def __init__(self, checkpoint_dir: str, skill: str, train_dir: Optional[str] = None,
                 rng: Optional[np.random.Generator] = None, device: str = "cpu") -> None:
        from rlaif.skills import NUM_SKILLS

        self.skill_id = skill_index(skill)
        self.num_skills = NUM_SKILLS
        self.rng = rng
        self.device_name = device
        self._load(checkpoint_dir, train_dir)
        self.reset()

    def _load(self, checkpoint_dir: str, train_dir: Optional[str]) -> None:
        path = Path(checkpoint_dir)
        if not path.is_dir():
            raise CollectError(f"--checkpoint {checkpoint_dir}: no such directory")
        if not (path / "config.json").exists():
            raise CollectError(f"--checkpoint {checkpoint_dir}: no config.json (not a sample-factory experiment)")
        try:
            import torch
            from sample_factory.cfg.arguments import load_from_checkpoint
            from sample_factory.model.actor_critic import create_actor_critic
            from sample_factory.model.model_utils import get_rnn_size

            from rl_baseline.models.obs import model_observation_space
            from rl_baseline.nethack.actions import ACTIONS
            from rl_baseline.sf.cfg import finalize_cfg, parse_cfg
            from rl_baseline.sf.checkpoints import CheckpointError, load_newest
            from rl_baseline.sf.env import register_envs
        except ImportError as exc:
            raise CollectError(
                f"policy 'checkpoint' is not available: the skill-policy code cannot be imported ({exc})"
            ) from exc
        import gymnasium as gym

        # the same steps as rl_baseline.sf.evaluate: saved config, then the latest checkpoint
        argv = ["--experiment", path.name, "--train_dir", str(train_dir or path.parent), "--device", "cpu"]
        cfg = load_from_checkpoint(parse_cfg(argv))
        cfg.device = "cpu"
        finalize_cfg(cfg)
        register_envs()
        self.num_skills = int(cfg.num_skills)
        if self.skill_id >= self.num_skills:
            raise CollectError(
                f"--checkpoint {checkpoint_dir}: the policy knows {self.num_skills} skill(s), "
                f"skill index {self.skill_id} is out of range"
            )
        self.torch = torch
        if self.device_name == "cuda" and not torch.cuda.is_available():
            raise CollectError("--device cuda: no CUDA device is available")
        self.device = torch.device(self.device_name)
        obs_space = model_observation_space(self.num_skills)
        self.actor_critic = create_actor_critic(cfg, obs_space, gym.spaces.Discrete(len(ACTIONS)))
        self.actor_critic.eval()
        try:
            loaded = load_newest(path / "checkpoint_p0", "latest", self.device, fallback=False)
        except CheckpointError as exc:
            raise CollectError(f"--checkpoint {checkpoint_dir}: {exc}") from exc
        if loaded is None:
            raise CollectError(f"--checkpoint {checkpoint_dir}: no checkpoint_*.pth under checkpoint_p0/")
        self.actor_critic.load_state_dict(loaded.state["model"])
        self.actor_critic.model_to_device(self.device)
        self.rnn_size = get_rnn_size(cfg)
        logger.info("checkpoint policy: %s", loaded.path)

    def reset(self) -> None:
        self.rnn = self.torch.zeros([1, self.rnn_size], dtype=self.torch.float32, device=self.device)
        if self.rng is not None:  # actions are sampled with torch's generator: seed it per episode
            self.torch.manual_seed(int(self.rng.integers(2**62)))

    def act(self, obs: dict) -> int:
        from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs

        from rl_baseline.models.obs import model_observation

        model_obs = model_observation(obs, self.skill_id, self.num_skills)
        torch = self.torch
        with torch.no_grad():
            batch = {k: torch.from_numpy(np.asarray(v)[None].copy()).to(self.device) for k, v in model_obs.items()}
            out = self.actor_critic(prepare_and_normalize_obs(self.actor_critic, batch), self.rnn)
            self.rnn = out["new_rnn_states"]
            return int(out["actions"].reshape(-1)[0].item())


def make_policy(name: str, rng: np.random.Generator, config: CollectConfig) -> Policy:
    if name == "random":
        return RandomPolicy(rng)
    if name == "explorer":
        return ExplorerPolicy(rng, config.explorer)
    if name == "checkpoint":
        if not config.checkpoint:
            raise CollectError("policy 'checkpoint' needs --checkpoint DIR")
        return CheckpointPolicy(config.checkpoint, config.skill, config.train_dir, rng, config.device)
    raise CollectError(f"unknown policy {name!r}; valid: {', '.join(POLICIES)}")


# ----------------------------------------------------------------------------- environment


def make_env(config: CollectConfig) -> Any:
    """``NetHackScoreMonk-v1`` (``rl_baseline.envs.make_monk_env``) with the collection step limit."""
    from rl_baseline.envs import make_monk_env

    return make_monk_env(max_episode_steps=int(config.max_episode_steps), character=config.character)


def _seed_env(env: Any, core: int, disp: int) -> None:
    env.unwrapped.seed(int(core), int(disp), False)


# ----------------------------------------------------------------------------- workers


@dataclass
class WorkerResult:
    messages: np.ndarray  # uint8 [n, 2, 256]
    stats: np.ndarray  # int32 [n, 2, 6]
    episodes: int
    steps: int
    policy_episodes: dict[str, int]
    policy_samples: dict[str, int]
    level_changes: int  # steps that changed the depth (sampled or not)


# stats whose change makes a message-less step worth a sample (HP regeneration alone does not)
_VISIBLE_STATS = [i for i, name in enumerate(STAT_FIELDS) if name not in ("hp", "hpmax")]


def keep_probability(
    msg_before: np.ndarray, msg_after: np.ndarray, stats_before: np.ndarray, stats_after: np.ndarray,
    sample_prob: float, uninformative_keep_prob: float, level_change_prob: float,
) -> float:
    """Chance that a step becomes a sample: ``level_change_prob`` when the depth changed,
    ``sample_prob * uninformative_keep_prob`` when there is no message before or after and
    only HP changed (if anything), else ``sample_prob``."""
    if stats_after[0] != stats_before[0]:
        return float(level_change_prob)
    if not np.any(msg_before) and not np.any(msg_after) and np.array_equal(
            np.asarray(stats_before)[_VISIBLE_STATS], np.asarray(stats_after)[_VISIBLE_STATS]):
        return float(sample_prob) * float(uninformative_keep_prob)
    return float(sample_prob)


def _message_row(obs: dict) -> np.ndarray:
    msg = np.zeros(MESSAGE_LEN, dtype=np.uint8)
    raw = np.asarray(obs["message"], dtype=np.uint8).reshape(-1)[:MESSAGE_LEN]
    msg[: len(raw)] = raw
    return msg


def worker_seed(seed: int, worker_id: int) -> np.random.SeedSequence:
    return np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(worker_id), 0x4E4C45])


def collect_worker(
    config: CollectConfig, worker_id: int, quota: int,
    progress: Optional[Callable[[int], None]] = None,
    env_factory: Optional[Callable[[CollectConfig], Any]] = None,
) -> WorkerResult:
    """Plays episodes until ``quota`` samples are kept; deterministic in (seed, worker_id)."""
    rng = np.random.default_rng(worker_seed(config.seed, worker_id))
    names = list(config.policy_mix)
    weights = np.array([config.policy_mix[n] for n in names], dtype=np.float64)
    weights /= weights.sum()
    messages = np.zeros((quota, 2, MESSAGE_LEN), dtype=np.uint8)
    stats = np.zeros((quota, 2, len(STAT_FIELDS)), dtype=np.int32)
    env = (env_factory or make_env)(config)
    policies: dict[str, Policy] = {}
    kept = episodes = steps = level_changes = 0
    pol_eps = {n: 0 for n in names}
    pol_samples = {n: 0 for n in names}
    pending_progress = 0
    try:
        while kept < quota:
            name = names[int(rng.choice(len(names), p=weights))]
            episode_rng = np.random.default_rng(rng.integers(2**63))
            core, disp = (int(s) for s in rng.integers(1, 2**62, size=2))
            if name not in policies:
                policies[name] = make_policy(name, episode_rng, config)
            policy = policies[name]
            policy.rng = episode_rng
            policy.reset()
            _seed_env(env, core, disp)
            obs, _ = env.reset()
            episodes += 1
            pol_eps[name] += 1
            msg_before, stats_before = _message_row(obs), stats_from_blstats(obs["blstats"])
            in_episode = 0
            done = False
            while not done and kept < quota:
                action = policy.act(obs)
                obs, _, terminated, truncated, _ = env.step(action)
                done = bool(terminated or truncated)
                steps += 1
                msg_after, stats_after = _message_row(obs), stats_from_blstats(obs["blstats"])
                u = rng.random()
                if done and stats_after[0] == 0:
                    break  # the game is over: the final observation has no status line
                level_changes += int(stats_after[0] != stats_before[0])
                keep = u < keep_probability(msg_before, msg_after, stats_before, stats_after, config.sample_prob,
                                            config.uninformative_keep_prob, config.level_change_prob)
                if keep and in_episode < config.max_samples_per_episode:
                    messages[kept, 0], messages[kept, 1] = msg_before, msg_after
                    stats[kept, 0], stats[kept, 1] = stats_before, stats_after
                    kept += 1
                    in_episode += 1
                    pol_samples[name] += 1
                    pending_progress += 1
                    if progress is not None and pending_progress >= 64:
                        progress(pending_progress)
                        pending_progress = 0
                msg_before, stats_before = msg_after, stats_after
    finally:
        for p in policies.values():
            p.close()
        env.close()
    if progress is not None and pending_progress:
        progress(pending_progress)
    return WorkerResult(messages, stats, episodes, steps, pol_eps, pol_samples, level_changes)


def _worker_main(config: CollectConfig, worker_id: int, quota: int, queue: Any) -> None:
    """Process entry point: progress messages, then the result (or the error text)."""
    logging.basicConfig(level=logging.WARNING)
    try:
        result = collect_worker(config, worker_id, quota, progress=lambda n: queue.put(("progress", worker_id, n)))
        queue.put(("done", worker_id, result))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises
        queue.put(("error", worker_id, traceback.format_exc()))


def split_quota(total: int, num_workers: int) -> list[int]:
    base, extra = divmod(int(total), int(num_workers))
    return [base + (1 if i < extra else 0) for i in range(int(num_workers))]


def _run_workers(config: CollectConfig, quotas: Sequence[int], bar: tqdm) -> list[WorkerResult]:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = []
    for wid, quota in enumerate(quotas):
        p = ctx.Process(target=_worker_main, args=(config, wid, quota, queue), daemon=True)
        p.start()
        procs.append(p)
    results: dict[int, WorkerResult] = {}
    try:
        while len(results) < len(procs):
            try:
                kind, wid, payload = queue.get(timeout=5.0)
            except Exception:  # queue.Empty: check that nobody died silently
                dead = [i for i, p in enumerate(procs) if not p.is_alive() and i not in results]
                if dead:
                    raise RuntimeError(f"collection worker(s) {dead} exited without a result") from None
                continue
            if kind == "progress":
                bar.update(payload)
            elif kind == "done":
                results[wid] = payload
            else:
                raise RuntimeError(f"collection worker {wid} failed:\n{payload}")
    finally:
        for p in procs:
            if p.is_alive() and len(results) < len(procs):
                p.terminate()
            p.join(timeout=10)
    return [results[i] for i in range(len(procs))]


def collect_dataset(config: CollectConfig, env_factory: Optional[Callable[[CollectConfig], Any]] = None) -> ObservationDataset:
    """Plays the game with ``config``'s policy mix and returns ``2 * num_pairs`` samples.

    With one worker everything runs in this process (``env_factory`` may replace the
    environment there); with more, each worker is a spawned process.
    """
    config.validate()
    total = 2 * int(config.num_pairs)
    quotas = split_quota(total, config.num_workers)
    bar = tqdm(total=total, desc=f"collect {config.skill}", unit="sample", disable=not config.progress)
    try:
        if config.num_workers == 1:
            results = [collect_worker(config, 0, quotas[0], progress=bar.update, env_factory=env_factory)]
        else:
            if env_factory is not None:
                raise CollectError("env_factory is only supported with num_workers=1")
            results = _run_workers(config, quotas, bar)
    finally:
        bar.close()
    messages = np.concatenate([r.messages for r in results])
    stats = np.concatenate([r.stats for r in results])
    # shuffle so that a pair's two samples usually come from different episodes
    order = np.random.default_rng(np.random.SeedSequence([int(config.seed) & 0xFFFFFFFF, 0x5348])).permutation(total)
    messages, stats = messages[order], stats[order]
    policy_samples: dict[str, int] = {}
    policy_episodes: dict[str, int] = {}
    for r in results:
        for k, v in r.policy_samples.items():
            policy_samples[k] = policy_samples.get(k, 0) + v
        for k, v in r.policy_episodes.items():
            policy_episodes[k] = policy_episodes.get(k, 0) + v
    meta = {
        "source": "rollouts",
        "env": ENV_NAME,
        "skill": config.skill,
        "character": config.character,
        "policy": "+".join(sorted(config.policy_mix)),
        "policy_mix": config.policy_mix,
        "policy_samples": policy_samples,
        "policy_episodes": policy_episodes,
        "checkpoint": config.checkpoint,
        "seed": int(config.seed),
        # each worker's generator is SeedSequence(entropy); game seeds are drawn from it per episode
        "seeds": {"base": int(config.seed),
                  "worker_entropy": [list(map(int, worker_seed(config.seed, w).entropy)) for w in range(config.num_workers)]},
        "num_workers": int(config.num_workers),
        "episodes": int(sum(r.episodes for r in results)),
        "steps": int(sum(r.steps for r in results)),
        "level_changes": int(sum(r.level_changes for r in results)),
        "sampling": {
            "sample_prob": config.sample_prob,
            "uninformative_keep_prob": config.uninformative_keep_prob,
            "level_change_prob": config.level_change_prob,
            "max_samples_per_episode": config.max_samples_per_episode,
            "max_episode_steps": config.max_episode_steps,
        },
        "explorer": asdict(config.explorer),
        "num_pairs": int(config.num_pairs),
    }
    logger.info("collected %d samples from %d episodes (%d steps, %d level changes)",
                total, meta["episodes"], meta["steps"], meta["level_changes"])
    return ObservationDataset(messages, stats, json.loads(json.dumps(meta)))


def output_path(out_dir: str | os.PathLike, skill: str) -> Path:
    return Path(out_dir) / f"{skill}.npz"


def check_output(path: str | os.PathLike, force: bool) -> Path:
    """Refuses an existing output unless ``force``; a directory in the way is always refused."""
    path = Path(path)
    if path.is_dir():
        raise CollectError(f"output {path} is a directory")
    if path.exists() and not force:
        raise CollectError(f"output {path} already exists; pass --force to replace it")
    return path


def write_dataset(path: str | os.PathLike, dataset: ObservationDataset, force: bool = False) -> Path:
    """Saves atomically (through :func:`rlaif.dataset.save_dataset`), never over a file without ``force``."""
    path = check_output(path, force)
    save_dataset(path, dataset)
    return path


def add_dataset_args(p: Any, defaults: Any, unit: str) -> None:
    """Flags shared by the dataset builders (``scripts.collect_dataset``, ``scripts.import_ttyrecs``):
    the skill and size, the output, and which steps become samples. ``defaults`` holds the
    sampling defaults; ``unit`` names where samples come from ("episode" or "game")."""
    p.add_argument("--skill", required=True,
                   help=f"skill the dataset is for; names the output file ({', '.join(SKILLS)})")
    p.add_argument("--num_pairs", type=int, required=True, help="pairs to build (2 samples each)")
    p.add_argument("--out", default="og_dataset",
                   help="output folder; the file is {out}/{skill}.npz (default: %(default)s)")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.add_argument("--sample_prob", type=float, default=defaults.sample_prob,
                   help="probability that a step becomes a sample (default: %(default)s)")
    p.add_argument("--uninformative_keep_prob", type=float, default=defaults.uninformative_keep_prob,
                   help="extra factor on --sample_prob for steps without any message whose depth, gold, "
                        "XP level and hunger did not change (default: %(default)s)")
    p.add_argument("--level_change_prob", type=float, default=defaults.level_change_prob,
                   help="probability that a step that changes the depth becomes a sample (default: %(default)s)")
    p.add_argument(f"--max_samples_per_{unit}", type=int, default=getattr(defaults, f"max_samples_per_{unit}"),
                   help=f"cap on samples from one {unit} (default: %(default)s)")


def check_dataset_args(skill: str, num_pairs: int) -> None:
    """Raises :class:`CollectError` for an unknown skill or a non-positive size."""
    if skill not in SKILLS:
        raise CollectError(f"--skill {skill!r}: unknown skill; valid skills: {', '.join(SKILLS)}")
    if num_pairs <= 0:
        raise CollectError(f"--num_pairs must be > 0, got {num_pairs}")
