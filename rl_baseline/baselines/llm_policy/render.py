"""The text a language model reads instead of the game's pixels: one NetHack observation as text.

:func:`render_observation` turns the Monk environment's observation (NLE's ``chars``, ``colors``,
``blstats``, ``message``, ``inv_letters`` / ``inv_strs``) into five short sections::

    Message: You see here a scroll labeled ELBIB YLOH.
    Status: depth 1 (The Dungeons of Doom, level 1), HP 14/14, ...
    Map (rows of the level seen so far; the hero is the @ marked below):
      ...
    Next to the hero: north '.', northeast '|', ...
    Seen on the map: down staircase '>' 4 east and 2 south; ...
    Inventory: a - a +2 pair of leather gloves (being worn); ...

The map keeps the rows and columns that hold something (an unexplored level is mostly blank), so a
fresh level costs a few hundred characters. The relative positions of staircases, altars, fountains,
items and creatures are spelled out because language models are poor at counting columns in ASCII
art; the compass words are the action names of :mod:`common.nethack.actions`, so a feature
"3 east" is reached with the action ``east``. Pure numpy; the stand-in rules
(:mod:`rl_baseline.baselines.llm_policy.stand_in`) read these lines back, so their wording is a contract
pinned by ``tests/test_llm_policy.py``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np

from common.nethack import blstats as B
from common.nethack.messages import decode_message

#: NetHack's dungeon numbers (``blstats[23]``), in the order of its dungeon description file
DUNGEON_NAMES: dict[int, str] = {
    0: "The Dungeons of Doom", 1: "Gehennom", 2: "The Gnomish Mines", 3: "The Quest", 4: "Sokoban",
    5: "Fort Ludios", 6: "Vlad's Tower", 7: "the Elemental Planes",
}
HUNGER_NAMES: dict[int, str] = {
    0: "satiated", 1: "not hungry", 2: "hungry", 3: "weak", 4: "fainting", 5: "fainted", 6: "starved",
}
#: compass words (the action names) for a step (dx, dy); y grows to the south
COMPASS: dict[tuple[int, int], str] = {
    (0, -1): "north", (1, -1): "northeast", (1, 0): "east", (1, 1): "southeast",
    (0, 1): "south", (-1, 1): "southwest", (-1, 0): "west", (-1, -1): "northwest",
}
#: what a map character shows, for the features worth naming (the map shows the rest)
FEATURES: dict[str, str] = {">": "down staircase", "<": "up staircase", "{": "fountain"}
ALTAR_CHAR = "_"
ALTAR_COLOR = 7  # gray, as the skill start window reads it (rl_baseline.skills.meta_policy.COLOR_MAP)
ITEM_CHARS = frozenset("$?!%)[=/\"*(")
CREATURE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ@&':;~")
SPACE = ord(" ")


@dataclass
class RenderConfig:
    """How much of an observation the text shows."""

    max_features: int = 12  # nearest named features listed under "Seen on the map"
    max_inventory: int = 26  # inventory lines
    show_map: bool = True


def relative(dx: int, dy: int) -> str:
    """``3 east and 2 south``; ``here`` for (0, 0)."""
    parts = []
    if dy:
        parts.append(f"{abs(dy)} {'south' if dy > 0 else 'north'}")
    if dx:
        parts.append(f"{abs(dx)} {'east' if dx > 0 else 'west'}")
    if not parts:
        return "here"
    return " and ".join(reversed(parts)) if len(parts) == 2 else parts[0]


def _rows(chars: np.ndarray) -> list[str]:
    return [bytes(row).decode("latin-1") for row in np.asarray(chars, dtype=np.uint8)]


def message_text(obs: Mapping[str, np.ndarray], step_messages: Optional[Sequence[str]] = None) -> str:
    """Every message of the step (messages dismissed with --More-- included) or the one on screen."""
    msgs = [m for m in (step_messages or ()) if m]
    if msgs:
        return " | ".join(msgs)
    return decode_message(np.asarray(obs["message"], dtype=np.uint8)) or "(none)"


def status_text(bl: np.ndarray) -> str:
    dnum, dlvl = int(bl[B.BL_DUNGEON_NUMBER]), int(bl[B.BL_DUNGEON_LEVEL])
    dungeon = DUNGEON_NAMES.get(dnum, f"dungeon {dnum}")
    return (f"depth {int(bl[B.BL_DEPTH])} ({dungeon}, level {dlvl}), HP {int(bl[B.BL_HP])}/{int(bl[B.BL_HPMAX])}, "
            f"gold {int(bl[B.BL_GOLD])}, experience level {int(bl[B.BL_XP_LEVEL])}, "
            f"hunger: {HUNGER_NAMES.get(int(bl[B.BL_HUNGER]), str(int(bl[B.BL_HUNGER])))}, "
            f"turn {int(bl[B.BL_TIME])}, armour class {int(bl[B.BL_AC])}, "
            f"power {int(bl[B.BL_ENERGY])}/{int(bl[B.BL_ENERGY_MAX])}")


def map_text(rows: list[str], x: int, y: int) -> str:
    """The rows and columns of the level that hold something, the hero's row marked at its end."""
    used_rows = [i for i, r in enumerate(rows) if r.strip()] or [y]
    cols = [j for r in rows for j, c in enumerate(r) if c != " "] or [x]
    left, right = max(min(cols) - 1, 0), min(max(cols) + 2, len(rows[0]))
    out = []
    for i in range(min(used_rows), max(used_rows) + 1):
        line = rows[i][left:right].rstrip()
        out.append("  " + line + (f"   <- the hero's row (the hero is the @ in column {x - left + 1})" if i == y else ""))
    return "\n".join(out)


def neighbours_text(rows: list[str], x: int, y: int) -> str:
    parts = []
    for (dx, dy), name in COMPASS.items():
        yy, xx = y + dy, x + dx
        ch = rows[yy][xx] if 0 <= yy < len(rows) and 0 <= xx < len(rows[yy]) else " "
        parts.append(f"{name} '{ch}'")
    return ", ".join(parts)


def features_text(rows: list[str], colors: np.ndarray, x: int, y: int, limit: int) -> str:
    found: list[tuple[int, str]] = []
    for i, row in enumerate(rows):
        for j, ch in enumerate(row):
            if ch == " " or (i == y and j == x):
                continue
            if ch in FEATURES:
                what = FEATURES[ch]
            elif ch == ALTAR_CHAR and int(colors[i, j]) == ALTAR_COLOR:
                what = "altar"
            elif ch in ITEM_CHARS:
                what = "gold" if ch == "$" else "item"
            elif ch in CREATURE_CHARS:
                what = "creature"
            else:
                continue
            dist = max(abs(j - x), abs(i - y))
            found.append((dist, f"{what} '{ch}' {relative(j - x, i - y)}"))
    if not found:
        return "nothing notable besides walls and floor"
    found.sort(key=lambda t: t[0])
    return "; ".join(text for _, text in found[:limit])


def inventory_text(obs: Mapping[str, np.ndarray], limit: int) -> str:
    letters = np.asarray(obs["inv_letters"], dtype=np.uint8)
    strs = np.asarray(obs["inv_strs"], dtype=np.uint8)
    items = []
    for letter, text in zip(letters, strs):
        if letter == 0:
            break
        name = bytes(text).split(b"\0", 1)[0].decode("latin-1").strip()
        items.append(f"{chr(int(letter))} - {name}")
    if not items:
        return "(empty)"
    more = f"; and {len(items) - limit} more" if len(items) > limit else ""
    return "; ".join(items[:limit]) + more


def render_observation(obs: Mapping[str, np.ndarray], step_messages: Optional[Sequence[str]] = None,
                       config: Optional[RenderConfig] = None) -> str:
    """The observation as text (module docstring)."""
    cfg = config or RenderConfig()
    bl = np.asarray(obs["blstats"])
    x, y = int(bl[B.BL_X]), int(bl[B.BL_Y])
    rows = _rows(obs["chars"])
    lines = [f"Message: {message_text(obs, step_messages)}", f"Status: {status_text(bl)}"]
    if cfg.show_map:
        lines += ["Map (the part of the level seen so far):", map_text(rows, x, y)]
    lines.append(f"Next to the hero: {neighbours_text(rows, x, y)}")
    lines.append(f"Seen on the map: {features_text(rows, np.asarray(obs['colors']), x, y, cfg.max_features)}")
    lines.append(f"Inventory: {inventory_text(obs, cfg.max_inventory)}")
    return "\n".join(lines)
