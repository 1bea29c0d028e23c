"""The scripted explorer of phase 0: walks to unexplored floor, picks up items, fights adjacent
monsters, eats when hungry, drops items on altars and in shops, and after a random time on
each level (or when nothing is left to explore) takes the stairs, so the data covers level
changes, gold, shops and altars far better than random play."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from common.nethack import blstats as B
from common.nethack.glyphs import game_tables
from rl_baseline.collect.config import ExplorerConfig
from rl_baseline.collect.pathing import STEPS, MapView, dilate, read_map, shortest_path
from rl_baseline.collect.policies import Policy

# a yes/no question still waiting for its answer ("... [yn] (n)" with nothing typed after it)
_OPEN_QUESTION = re.compile(rb"\[[ynaq#]+\] \([ynaq]\)\s*$")


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
        for dy, dx in STEPS:
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
        frontier = view.passable & dilate(view.unexplored) & ~view.hostile
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
        for dy, dx in STEPS:
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
