"""Dungeon overview: reading it from a live game (wizard mode) and parsing its text."""
from __future__ import annotations

import re

import numpy as np
import pytest
from nle import nethack  # noqa: E402
from nle.env.tasks import NetHackScore  # noqa: E402

from rl_baseline.envs.overview import (
    DUNGEONS_OF_DOOM,
    GNOMISH_MINES,
    overview_mentions,
    parse_overview,
    read_overview,
)

# Wizard mode names the hero "wizard", so the character comes from options.
WIZ_OPTIONS = tuple(nethack.NETHACKOPTIONS) + (
    "role:monk", "race:human", "align:neutral", "gender:male", "!autopickup",
)
CTRL_F, CTRL_T, CTRL_V, CTRL_W = 6, 20, 22, 23
T_INDEX = nethack.NLE_BL_TIME


def make_wizard_env(seed: int = 1) -> NetHackScore:
    env = NetHackScore(character="mon-hum-neu-mal", wizard=True, options=WIZ_OPTIONS,
                       spawn_monsters=False)
    env.seed(seed, seed, reseed=False)
    env.reset()
    return env


def keys(nh, seq) -> None:
    for c in seq:
        nh.step(c if isinstance(c, int) else ord(c))


def message(nh) -> str:
    return bytes(nh._obs_buffers["message"]).rstrip(b"\0").decode("latin-1").strip()


def dismiss_more(nh, limit: int = 8) -> list[str]:
    """Press Return through --More-- prompts, returning the messages shown."""
    out = []
    for _ in range(limit):
        if not nh._obs_buffers["internal"][3]:
            break
        keys(nh, "\r")
        out.append(message(nh))
    return out


def level_teleport(nh, menu_keys: str) -> None:
    """Wizard level teleport through the special-level menu ('?' then the entry keys)."""
    keys(nh, [CTRL_V])
    keys(nh, "?\r" + menu_keys)
    dismiss_more(nh)


def teleport_to(nh, x: int, y: int) -> None:
    """Wizard in-level teleport: move the cursor from the hero to (x, y) and confirm."""
    bl = nh._obs_buffers["blstats"]
    dx, dy = x - int(bl[0]), y - int(bl[1])
    seq = ("L" if dx > 0 else "H") * (abs(dx) // 8) + ("l" if dx > 0 else "h") * (abs(dx) % 8)
    seq += ("J" if dy > 0 else "K") * (abs(dy) // 8) + ("j" if dy > 0 else "k") * (abs(dy) % 8)
    keys(nh, [CTRL_T])
    keys(nh, seq + ".")


def find_chars(nh, ch: str) -> list[tuple[int, int]]:
    ys, xs = np.nonzero(nh._obs_buffers["chars"] == ord(ch))
    return list(zip(xs.tolist(), ys.tolist()))


def strip_wizard_tags(text: str) -> str:
    return re.sub(r" \[[^\]]+\]", "", text)


def screen_text(nh) -> str:
    return "\n".join(bytes(r).decode("latin-1") for r in nh._obs_buffers["tty_chars"])


@pytest.fixture(scope="module")
def env():
    e = make_wizard_env(seed=1)
    yield e
    e.close()


def test_read_overview_spends_no_time_and_leaves_game_playable(env):
    nh = env.nethack
    bl = nh._obs_buffers["blstats"]
    before_time = int(bl[T_INDEX])
    before_pos = (int(bl[0]), int(bl[1]))
    text = read_overview(nh)
    assert text.splitlines()[0] == "The Dungeons of Doom:"
    ov = parse_overview(text)
    assert ov.current_dungeon == DUNGEONS_OF_DOOM and ov.current_depth == 1
    assert int(bl[T_INDEX]) == before_time
    assert (int(bl[0]), int(bl[1])) == before_pos
    # the window is gone and the game waits for a normal command
    internal = nh._obs_buffers["internal"]
    assert not internal[1] and not internal[2] and not internal[3]
    assert "--More--" not in screen_text(nh)
    assert "Dungeons of Doom" not in screen_text(nh)
    # a following normal step works and spends time
    obs, reward, terminated, truncated, info = env.step(env.actions.index(nethack.Command.SEARCH))
    assert not terminated
    assert int(obs["blstats"][T_INDEX]) > before_time


def test_read_overview_refuses_while_a_question_is_pending(env):
    nh = env.nethack
    up = find_chars(nh, "<")
    if up:  # hero is not standing on the stairs
        teleport_to(nh, *up[0])
    keys(nh, "<")
    assert "Still climb?" in message(nh)
    assert read_overview(nh) == ""
    # the question is still open (the reader did not answer it)
    assert nh._obs_buffers["internal"][1]
    keys(nh, "n")
    assert not nh._obs_buffers["internal"][1]


def test_minetown_and_mines_from_live_overview(env):
    nh = env.nethack
    level_teleport(nh, ">w")  # menu page 2, "minetn"
    assert int(nh._obs_buffers["blstats"][nethack.NLE_BL_DNUM]) == 2
    keys(nh, [CTRL_F])  # map the level so the town's features are known
    dismiss_more(nh)
    text = read_overview(nh)
    plain = strip_wizard_tags(text)  # what a normal (non-wizard) game shows
    assert "[minetn]" in text and "[minetn]" not in plain
    ov = parse_overview(plain)
    assert ov.mines_visited and ov.current_dungeon == GNOMISH_MINES
    assert ov.minetown_seen
    assert overview_mentions(plain, "minetown") and overview_mentions(plain, "gnomish mines")
    assert not overview_mentions(plain, "oracle")
    rng = ov.dungeon_ranges[GNOMISH_MINES]
    assert rng is not None and rng[1] == ov.current_depth
    assert ov.mines_branch_depth == rng[0] - 1


def test_oracle_annotation_needs_the_centre_room(env):
    nh = env.nethack
    level_teleport(nh, "c")  # "oracle"
    text = strip_wizard_tags(read_overview(nh))
    assert not overview_mentions(text, "oracle")  # on the level, not yet at the Oracle
    assert overview_mentions(text, "minetown")  # remembered from the earlier visit
    keys(nh, [CTRL_F])
    dismiss_more(nh)
    fountains = find_chars(nh, "{")
    assert len(fountains) == 4
    teleport_to(nh, *fountains[0])
    greeting = " ".join([message(nh)] + dismiss_more(nh))
    assert "welcome to Delphi!" in greeting
    text = strip_wizard_tags(read_overview(nh))
    ov = parse_overview(text)
    assert ov.oracle_seen and overview_mentions(text, "delphi")
    here = [lv for lv in ov.levels if lv.current]
    assert len(here) == 1 and "Oracle of Delphi." in here[0].notes


SAMPLE = """The Dungeons of Doom: levels 1 to 5
   Level 1:
      A fountain.
   Level 3:
      Stairs down to The Gnomish Mines.
   Level 5: <- You are here.
      A general store, a temple to Huan Ti.
The Gnomish Mines: levels 4 to 6
   Level 6:
      Many fountains, an altar."""


def test_parse_overview_text():
    ov = parse_overview(SAMPLE)
    assert ov.dungeon_ranges == {DUNGEONS_OF_DOOM: (1, 5), GNOMISH_MINES: (4, 6)}
    assert ov.levels_seen() == {1, 3, 5}
    assert ov.deepest() == 5 and ov.deepest(GNOMISH_MINES) == 6
    assert ov.mines_branch_depth == 3
    assert ov.current_dungeon == DUNGEONS_OF_DOOM and ov.current_depth == 5
    # a temple in the main dungeon is not Minetown; the Mines level with an altar is
    assert ov.minetown_seen
    no_town = SAMPLE.replace("      Many fountains, an altar.", "")
    assert not parse_overview(no_town).minetown_seen
    assert overview_mentions(no_town, "gnomish mines")
    assert not overview_mentions("The Dungeons of Doom:\n   Level 1: <- You are here.", "gnomish mines")
    assert not parse_overview("").oracle_seen
    with pytest.raises(ValueError, match="oracle"):
        overview_mentions(SAMPLE, "castle")


def test_mines_branch_seen_before_entering():
    text = "The Dungeons of Doom: levels 1 to 4\n   Level 2:\n      Stairs down to The Gnomish Mines.\n   Level 4: <- You are here."
    ov = parse_overview(text)
    assert ov.mines_branch_depth == 2 and not ov.mines_visited
    assert overview_mentions(text, "gnomish mines")
