"""The scripted explorer's view of the map and its path finding: every square classified from NLE's
glyphs (:class:`MapView`), breadth-first shortest paths under NetHack's door rule."""
from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.nethack.glyphs import GlyphTables, game_tables


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


def read_map(glyphs: np.ndarray, tables: Optional[GlyphTables] = None) -> MapView:
    """Classifies every map square of ``glyphs`` (NLE's [21, 79] int16 array)."""
    t = tables or game_tables()
    g = np.asarray(glyphs)
    return MapView(**{name: lut[g] for name, lut in t.luts.items()})



STEPS = ((-1, 0), (1, 0), (0, -1), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


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
        for dy, dx in STEPS:
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


def dilate(mask: np.ndarray) -> np.ndarray:
    """Squares with a ``mask`` square among their 8 neighbours."""
    out = np.zeros_like(mask)
    rows, cols = mask.shape
    for dy, dx in STEPS:
        src = mask[max(-dy, 0) : rows - max(dy, 0), max(-dx, 0) : cols - max(dx, 0)]
        out[max(dy, 0) : rows - max(-dy, 0), max(dx, 0) : cols - max(-dx, 0)] |= src
    return out
