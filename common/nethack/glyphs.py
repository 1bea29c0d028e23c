"""Glyph tables: what each NLE glyph shows (floor, door, stairs, altar, monster, item), as
boolean lookup tables, and the action indices of moves and commands, built once per process.

NetHack 3.6's map symbols are listed in ``defsym`` order (the index of a symbol inside the
cmap glyph range). Importing this module imports NLE.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from nle import nethack

from common.nethack.actions import ACTIONS


@dataclass(frozen=True)
class GlyphTables:
    """NLE facts the scripted policies need, built once per process by :func:`game_tables`."""

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


_TABLES: Optional[GlyphTables] = None

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


def game_tables() -> GlyphTables:
    """Action indices and glyph ranges (the project's action set)."""
    global _TABLES
    if _TABLES is None:
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
        _TABLES = GlyphTables(
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
