"""Reading NetHack's dungeon overview (Ctrl-O / ``#overview``) without spending game time.

NetHack 3.6 (the version inside NLE 1.0.0) lists, per dungeon, the levels that have
something worth remembering:

    The Dungeons of Doom: levels 1 to 6
       Level 1:
          A fountain.
       Level 3:
          Stairs down to The Gnomish Mines.
       Level 6: <- You are here.
          Oracle of Delphi.
    The Gnomish Mines: levels 4 to 7
       Level 7:
          Some shops, a temple, some fountains.

Facts this module relies on (checked against NLE 1.0.0 and NetHack 3.6 ``dungeon.c``):

* The overview command is allowed in normal play (not only in wizard mode) and takes no
  game time: the turn counter does not move.
* A dungeon header reads ``NAME:`` while only its entry level has been reached, otherwise
  ``NAME: levels A to B`` where B is the deepest level reached in that dungeon.
* Levels without anything remembered are omitted, except the current one.
* The Oracle level is annotated ``Oracle of Delphi.`` once the hero has been inside the
  Oracle's centre room. NetHack never names Minetown in normal play; it shows the town's
  features (shops, a temple, fountains, an altar), which no other level of the Gnomish Mines
  has, so a Mines level with such a feature line is Minetown. Wizard mode adds the level's
  internal name in brackets (``[oracle]``, ``[minetn]``), which is also understood.
* The branch into the Mines appears as ``Stairs down to The Gnomish Mines.`` under the
  Dungeons of Doom level that holds it, once that staircase has been seen.

The text is read from the terminal (``tty_chars``) page by page and the window is then
dismissed, so the game is left exactly where it was. The agent must not see this screen:
callers copy the observation before calling :func:`read_overview`.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

CTRL_O = 0x0F  # nle.nethack.Command.OVERVIEW
ESC = 27
NEXT_PAGE = ord(">")

DUNGEONS_OF_DOOM = "The Dungeons of Doom"
GNOMISH_MINES = "The Gnomish Mines"

_PAGE_MARK = re.compile(r"\((\d+) of (\d+)\)")
_HEADER = re.compile(r"^(?P<name>\S[^:]*):(?: levels (?P<first>-?\d+)(?: up)? to (?P<last>-?\d+))?")
_LEVEL = re.compile(r"^\s+Level (?P<depth>-?\d+):(?P<rest>.*)$")
_WIZ_TAG = re.compile(r"\[(?P<tag>[^\]]+)\]")
_BRANCH = re.compile(r"(?:Stairs|One way stairs) (?:up|down) to (?P<dest>[^,.]+)")
# Words of a feature line that, inside the Gnomish Mines, only Minetown produces.
_TOWN_FEATURES = re.compile(
    r"\b(shops?|general store|armor shop|scroll shop|potion shop|weapon shop|delicatessen|"
    r"jewelers|wand shop|bookstore|health food store|lighting shop|temples?|altars?|fountains?)\b",
    re.IGNORECASE,
)
_ORACLE_LINE = "Oracle of Delphi"


@dataclass
class LevelEntry:
    """One ``Level N:`` block of the overview."""

    dungeon: str
    depth: int
    current: bool = False
    tag: str | None = None  # wizard-mode internal level name, e.g. "oracle", "minetn"
    notes: list[str] = field(default_factory=list)  # the indented lines below the level


@dataclass
class Overview:
    """What the dungeon overview says about the game so far."""

    levels: list[LevelEntry] = field(default_factory=list)
    # dungeon name -> (first depth, deepest reached depth); None when only the entry level
    # was reached (header without a range).
    dungeon_ranges: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    current_dungeon: str | None = None
    current_depth: int | None = None
    oracle_seen: bool = False
    minetown_seen: bool = False
    mines_branch_depth: int | None = None  # Dungeons of Doom level with the Mines staircase

    @property
    def mines_visited(self) -> bool:
        """The hero has been inside the Gnomish Mines (the dungeon is listed)."""
        return GNOMISH_MINES in self.dungeon_ranges

    def levels_seen(self, dungeon: str = DUNGEONS_OF_DOOM) -> set[int]:
        """Depths listed for ``dungeon``: remembered levels plus the current one."""
        return {lv.depth for lv in self.levels if lv.dungeon == dungeon}

    def deepest(self, dungeon: str = DUNGEONS_OF_DOOM) -> int | None:
        """Deepest level reached in ``dungeon`` according to its header (or its listing)."""
        if dungeon not in self.dungeon_ranges:
            return None
        rng = self.dungeon_ranges[dungeon]
        if rng is not None:
            return rng[1]
        seen = self.levels_seen(dungeon)
        return max(seen) if seen else None


def parse_overview(text: str) -> Overview:
    """Parse the overview text as returned by :func:`read_overview` (or NetHack's dump)."""
    ov = Overview()
    dungeon: str | None = None
    entry: LevelEntry | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        m = _LEVEL.match(line)
        if m and dungeon is not None:
            rest = m.group("rest")
            tag = _WIZ_TAG.search(rest)
            entry = LevelEntry(
                dungeon=dungeon,
                depth=int(m.group("depth")),
                current="<- You are here" in rest,
                tag=tag.group("tag") if tag else None,
            )
            ov.levels.append(entry)
            if entry.current:
                ov.current_dungeon, ov.current_depth = dungeon, entry.depth
            continue
        if not line[0].isspace():
            h = _HEADER.match(line)
            if h:
                dungeon = h.group("name").strip()
                if h.group("first") is not None:
                    ov.dungeon_ranges[dungeon] = (int(h.group("first")), int(h.group("last")))
                else:
                    ov.dungeon_ranges[dungeon] = None
                entry = None
            continue
        if entry is not None:
            entry.notes.append(line.strip())

    for lv in ov.levels:
        notes = " ".join(lv.notes)
        if _ORACLE_LINE in notes or lv.tag == "oracle":
            ov.oracle_seen = True
        if lv.dungeon == GNOMISH_MINES and (lv.tag == "minetn" or _TOWN_FEATURES.search(notes)):
            ov.minetown_seen = True
        if lv.dungeon == DUNGEONS_OF_DOOM:
            for note in lv.notes:
                b = _BRANCH.search(note)
                if b and b.group("dest").strip() == GNOMISH_MINES:
                    ov.mines_branch_depth = lv.depth
    if ov.mines_branch_depth is None and GNOMISH_MINES in ov.dungeon_ranges:
        rng = ov.dungeon_ranges[GNOMISH_MINES]
        mines = ov.levels_seen(GNOMISH_MINES)
        first = rng[0] if rng is not None else (min(mines) if mines else None)
        if first is not None:
            ov.mines_branch_depth = first - 1
    return ov


_TARGET_ALIASES = {
    "oracle": "oracle",
    "delphi": "oracle",
    "minetown": "minetown",
    "gnomish mines": "gnomish mines",
    "mines": "gnomish mines",
    "gnomish": "gnomish mines",
}


def overview_mentions(overview_text: str, target: str) -> bool:
    """Whether the overview shows ``target``: "oracle", "minetown" or "gnomish mines".

    "gnomish mines" is true once the hero has been inside the Mines (the dungeon is listed)
    or has seen the staircase into them.
    """
    key = _TARGET_ALIASES.get(target.strip().lower())
    if key is None:
        raise ValueError(
            f"unknown overview target {target!r}; use one of: oracle, minetown, gnomish mines"
        )
    if not overview_text:
        return False
    ov = parse_overview(overview_text)
    if key == "oracle":
        return ov.oracle_seen
    if key == "minetown":
        return ov.minetown_seen
    return ov.mines_visited or ov.mines_branch_depth is not None


def overview_has_text(overview_text: str, needle: str) -> bool:
    """Whether ``needle`` occurs inside one line of the overview text.

    This is the plain-text test the authors' release applied to the terminal rows while the
    overview window was open (a substring of one screen row, case-sensitive), e.g.
    ``"Level 7"`` or ``"The Gnomish Mines: levels 3 to 5"``; see
    :mod:`rl_baseline.tasks.release_protocol`.
    """
    if not overview_text or not needle:
        return False
    return any(needle in line for line in overview_text.splitlines())


# --------------------------------------------------------------------------- reading


def _screen_lines(tty_chars: np.ndarray) -> list[str]:
    return [bytes(row).decode("latin-1") for row in np.asarray(tty_chars, dtype=np.uint8)]


def _page_text(lines: list[str]) -> tuple[str, bool, bool]:
    """Extract one page of a tty menu window.

    Returns (text, found, more_pages). The window's prompt line (``--More--`` or
    ``(n of m)``) marks both its last row and its left column.
    """
    for row in range(len(lines) - 1, -1, -1):
        line = lines[row]
        col = line.find("--More--")
        page = _PAGE_MARK.search(line)
        if col < 0 and page is None:
            continue
        more_pages = False
        if page is not None:
            col = page.start() if col < 0 else min(col, page.start())
            more_pages = int(page.group(1)) < int(page.group(2))
        body = [ln[col:].rstrip() for ln in lines[:row]]
        return "\n".join(body).strip("\n"), True, more_pages
    return "", False, False


def _in_prompt(buffers: dict[str, np.ndarray]) -> bool:
    internal = buffers.get("internal")
    if internal is not None:
        # NLE internal: [1] yn question, [2] text line prompt, [3] waiting for --More--
        if bool(internal[1]) or bool(internal[2]) or bool(internal[3]):
            return True
    state = buffers.get("program_state")
    if state is not None and bool(state[0]):  # game over
        return True
    return False


def read_overview(nethack: Any, max_pages: int = 20, command_keys: tuple[int, ...] | None = None) -> str:
    """Show the dungeon overview, read it from the terminal and dismiss it.

    ``nethack`` is an ``nle.nethack.Nethack`` (``env.nethack`` / ``env.unwrapped.nethack``)
    whose observation buffers include ``tty_chars`` (and ideally ``internal``). No game
    time passes. ``command_keys`` replaces the Ctrl-O key (in wizard mode Ctrl-O is a
    debugging command, and the overview is reached as ``#overview``). Returns "" when the game is waiting for an answer (a question, a text
    prompt or ``--More--``) or is over: pressing keys then would change the game.

    NLE reuses its observation arrays, so the caller must copy the observation it
    hands to the agent *before* calling this.
    """
    buffers: dict[str, np.ndarray] = nethack._obs_buffers
    if "tty_chars" not in buffers:
        raise ValueError("read_overview needs the 'tty_chars' observation key")
    if _in_prompt(buffers):
        log.debug("read_overview: game is waiting for input; overview not read")
        return ""
    pages: list[str] = []
    done = False
    for key in command_keys or (CTRL_O,):
        _, done = nethack.step(key)
    for _ in range(max_pages):
        if done:
            break
        text, found, more = _page_text(_screen_lines(buffers["tty_chars"]))
        if not found:
            # Nothing to page through (should not happen: the overview always lists the
            # current level); make sure no window is left open.
            break
        pages.append(text)
        if more:
            _, done = nethack.step(NEXT_PAGE)
        else:
            _, done = nethack.step(ESC)
            break
    else:  # pragma: no cover - pathological length
        log.warning("read_overview: more than %d pages; truncated", max_pages)
        nethack.step(ESC)
    # Make sure we did not leave a --More-- (or a menu) behind.
    for _ in range(3):
        internal = buffers.get("internal")
        _, found, _ = _page_text(_screen_lines(buffers["tty_chars"]))
        waiting = internal is not None and bool(internal[3])
        if not (found or waiting) or done:
            break
        _, done = nethack.step(ESC)
    return "\n".join(pages)
