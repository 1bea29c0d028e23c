"""Skill start checks (preconditions) and the training policy, on live wizard-mode games.

The release looks for a shopkeeper / an altar in a 7x7 terminal window around the hero
(hero's colour hidden), counting an '@' only in the shopkeeper's colour and a '_' only in
the altar's colour, and counts as new items only those that are neither coins nor food.
"""
from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest

from common.nethack.actions import action_index
from common.vocabulary import SKILLS
from rl_baseline.envs import make_monk_env
from rl_baseline.skills import meta_policy
from rl_baseline.skills.intrinsic_reward import IntrinsicReward, ScoreCache
from rl_baseline.skills.runtime import WINDOW_HERO, SkillRuntime, initiation_window

CREATE_MONSTER = b"\x07"  # wizard mode's Ctrl-G


class ZeroModel:
    def score(self, messages, depth_change):
        return np.zeros(len(messages), dtype=np.float32)

    def threshold(self, q):
        return 1.0


@pytest.fixture
def runtime():
    reward = IntrinsicReward([ZeroModel() for _ in SKILLS], [0.5] * len(SKILLS), beta=3.0, llm_coef=0.1,
                             extrinsic_coef=0.0, cache=ScoreCache())
    env = SkillRuntime(make_monk_env(wizard=True, max_episode_steps=500), lambda: meta_policy.load("exploration", 42),
                       reward)
    yield env
    env.close()


def _game(env):
    """The NLE env under the skill runtime."""
    return env.env


def _reset(env, seed: int):
    """A reproducible game: NLE 1.0 seeds games through ``seed(core, disp)``, not reset's seed."""
    _game(env).seed(seed, seed + 1000, reseed=False)
    return env.reset()


def _hero(raw: dict) -> tuple[int, int]:
    return int(raw["blstats"][0]), int(raw["blstats"][1])


def _step_away(env, avoid: tuple[int, int] | None = None) -> tuple[int, int]:
    """Moves the hero one cell in a direction that works; returns the new position."""
    game = _game(env)
    start = _hero(game.current_observation())
    for name in ("east", "west", "north", "south", "northeast", "southwest", "northwest", "southeast"):
        env.step(action_index(name))
        here = _hero(game.current_observation())
        if here != start and here != avoid:
            return here
    pytest.fail("the hero could not move on this fixed seed's map: the test's setup no longer holds (pick a seed "
                "where it can)")


def _create(env, monster: str) -> None:
    # "force <monster>? [yn]" is asked for shopkeepers and priests outside their rooms
    _game(env).wizard_keys(CREATE_MONSTER + monster.encode() + b"\r")
    if _game(env).last_observation[_game(env)._internal_index][1]:
        _game(env).wizard_keys(b"y")


def _colours_of(raw: dict, glyph_name: str) -> list[int]:
    from nle import nethack

    out = []
    for (row, col) in zip(*np.nonzero(raw["chars"] == ord("@"))):
        glyph = int(raw["glyphs"][row, col])
        if nethack.glyph_is_monster(glyph) and nethack.permonst(nethack.glyph_to_mon(glyph)).mname == glyph_name:
            out.append(int(raw["colors"][row, col]))
    return out


def test_live_colours_match_the_colour_map():
    """The colours the meta-policies check, read off a live game."""
    env = make_monk_env(wizard=True, max_episode_steps=200)
    try:
        env.seed(1, 1001, reseed=False)
        env.reset()
        raw = env.current_observation()
        x, y = _hero(raw)
        assert raw["chars"][y, x] == ord("@")
        hero_colour = int(raw["colors"][y, x])
        env.wizard_wish("altar")
        for name in ("east", "west", "north", "south"):
            env.step(action_index(name))
            if _hero(env.current_observation()) != (x, y):
                break
        raw = env.current_observation()
        altars = raw["colors"][raw["chars"] == ord("_")]
        assert altars.tolist() == [meta_policy.COLOR_MAP["_"]]
        for monster in ("shopkeeper", "watchman"):
            env.wizard_keys(CREATE_MONSTER + monster.encode() + b"\r")
            if env.last_observation[env._internal_index][1]:
                env.wizard_keys(b"y")
        raw = env.current_observation()
        assert _colours_of(raw, "shopkeeper") == [meta_policy.COLOR_MAP["@"]]
        watchmen = _colours_of(raw, "watchman")
        assert watchmen and meta_policy.COLOR_MAP["@"] not in watchmen
        # the hero is an '@' in the shopkeeper's colour: why the window hides its colour
        assert hero_colour == meta_policy.COLOR_MAP["@"]
        window_chars, window_colours = initiation_window(raw["chars"], raw["colors"], *_hero(raw))
        assert window_chars[WINDOW_HERO] == ord("@") and window_colours[WINDOW_HERO] == 0
    finally:
        env.close()


def test_altar_in_view_needs_an_item_that_is_not_gold_or_food(runtime):
    _reset(runtime, 3)
    game = _game(runtime)
    game.wizard_wish("altar")
    altar_at = _hero(game.current_observation())
    _step_away(runtime)
    _step_away(runtime, avoid=altar_at)
    raw = game.current_observation()
    x, y = _hero(raw)
    assert max(abs(x - altar_at[0]), abs(y - altar_at[1])) >= 1
    chars, colours = initiation_window(raw["chars"], raw["colors"], x, y)
    assert (chars == ord("_")).any(), "the altar should be in the 7x7 window"
    runtime.step(action_index("search"))
    assert runtime.preconds == (False, False)  # only the starting kit
    game.wizard_wish("100 gold pieces")
    runtime.step(action_index("search"))
    assert runtime.preconds == (False, False)  # gold is not an item to drop
    game.wizard_wish("food ration")
    runtime.step(action_index("search"))
    assert runtime.preconds == (False, False)  # nor is food
    game.wizard_wish("uncursed ring of adornment")
    _, _, _, _, info = runtime.step(action_index("search"))
    assert runtime.preconds == (True, False)
    # the training policy ends the running skill and starts the worshipper
    assert info["skill"] == "worshipper"
    assert runtime.stats.activations[SKILLS.index("worshipper")] == 1
    assert runtime.stats.with_item[SKILLS.index("worshipper")] == 1
    # still in view: the worshipper ends and starts again (a restart, not a new activation)
    _, _, _, _, info = runtime.step(action_index("search"))
    assert info["skill"] == "worshipper" and runtime.stats.restarts >= 1
    assert runtime.stats.activations[SKILLS.index("worshipper")] == 1


def test_shopkeeper_in_view_starts_the_merchant_a_watchman_does_not(runtime):
    _reset(runtime, 4)
    game = _game(runtime)
    game.wizard_wish("uncursed ring of adornment")
    _create(runtime, "watchman")
    _, _, _, _, info = runtime.step(action_index("search"))
    raw = game.current_observation()
    chars, colours = initiation_window(raw["chars"], raw["colors"], *_hero(raw))
    assert ((chars == ord("@")) & (colours != 0)).any(), "the watchman should be in view"
    assert runtime.preconds == (False, False)
    assert info["skill"] != "merchant"
    _create(runtime, "shopkeeper")
    _, _, _, _, info = runtime.step(action_index("search"))
    assert runtime.preconds[1] is True
    assert info["skill"] == "merchant"


def test_training_policy_draws_depth_and_mines_per_episode():
    draws = collections.Counter()
    mines = 0
    policy = meta_policy.load("exploration", 42)
    for _ in range(400):
        policy.reset()
        draws[policy.player.max_depth] += 1
        mines += bool(policy.player.mines)
    assert set(draws) == {2, 3, 4}
    assert all(60 < n < 200 for n in draws.values())
    assert 140 < mines < 260


def test_training_policy_heads_for_the_mines_or_leaves_them():
    policy = meta_policy.load("exploration", 42)
    policy.reset()
    player = policy.player
    player.branch_depth = 3
    player.max_depth = 4
    # a Mines episode: down on the entrance level, back up from the main dungeon below it
    player.mines = True
    assert policy.next_skill("descender", 3, 0, False, False) == "descender"
    assert policy.next_skill("descender", 4, 0, False, False) == "ascender"
    assert policy.next_skill("descender", 4, 2, False, False) == "discoverer"  # in the Mines: explore
    # any other episode: out of the Mines at once, down through the entrance level
    player.mines = False
    assert policy.next_skill("descender", 4, 2, False, False) == "ascender"
    assert policy.next_skill("ascender", 3, 0, False, False) == "descender"
    # shopkeepers and altars come first, and end whatever skill runs
    assert policy.next_skill("descender", 4, 0, True, False) == "merchant"
    for skill in SKILLS:
        assert policy.should_terminate(skill, 1, 1, 1, [False, True]) is True
        assert policy.should_terminate(skill, 1, 1, 1, [True, False]) is True
    # the descender ends only when it went down, the ascender only when it went up
    assert policy.should_terminate("descender", 1, 2, 1, [False, False]) is True
    assert policy.should_terminate("descender", 1, 1, 2, [False, False]) is False
    assert policy.should_terminate("ascender", 1, 1, 2, [False, False]) is True
    assert policy.should_terminate("ascender", 1, 2, 1, [False, False]) is False
    assert policy.num_errors == 0


def _release_training_choice(skill: str, depth: int, branch: int, branch_depth: int, max_depth: int, mines: bool,
                             merchant: bool, worshipper: bool, direction: str) -> tuple[str, str]:
    """The release's training policy (its exploration/seed42/execution.py, lines 18-71) written down as facts:
    (the skill it picks, the direction it keeps). branch_depth is -2 while the Mines entrance is unknown."""
    # 1. near the Mines entrance the way wins, before any shopkeeper or altar is looked at
    if mines and branch == 0 and depth == branch_depth:
        return "descender", direction  # on the entrance level: into the Mines
    if mines and branch == 0 and depth == branch_depth + 1:
        return "ascender", direction  # took the main staircase: back up
    if not mines and depth == branch_depth:
        return ("ascender" if branch == 2 else "descender"), direction
    if not mines and branch == 2 and depth == branch_depth + 1:
        return "ascender", direction  # first Mines level: out of the Mines
    # 2. then a shopkeeper, then an altar
    if merchant:
        return "merchant", direction
    if worshipper:
        return "worshipper", direction
    # 3. explore after every other skill; after exploring, go on down to max_depth, then up to level 1
    if skill != "discoverer":
        return "discoverer", direction
    if direction == "down":
        return ("descender", "down") if depth < max_depth else ("ascender", "up")
    return ("ascender", "up") if depth > 1 else ("descender", "down")


def test_training_policy_chooses_as_the_release_in_every_reachable_state():
    """Every current skill, depths 1-6 in the main dungeon or in the Mines below a known entrance, the entrance
    unknown or on level 2/3/4, deepest level 2-4, Mines and other episodes, each precondition on or off, both
    directions: 7,920 states, each as the release chooses (before: 1,080 differed, e.g. a shopkeeper in view on
    the entrance level sent the hero to the merchant where the release goes down)."""
    policy = meta_policy.load("exploration", 42)
    checked = 0
    for branch_depth in (-2, 2, 3, 4):
        for branch in (0, 2):
            for depth in range(1, 7):
                if branch == 2 and (branch_depth < 0 or depth <= branch_depth):
                    continue  # the Mines start below their entrance
                for skill, max_depth, mines, merchant, worshipper, direction in itertools.product(
                        SKILLS, (2, 3, 4), (False, True), (False, True), (False, True), ("down", "up")):
                    policy.reset()
                    player = policy.player
                    player.branch_depth, player.max_depth, player.mines = branch_depth, max_depth, mines
                    player.direction = direction
                    got = policy.next_skill(skill, depth, branch, merchant, worshipper), player.direction
                    expected = _release_training_choice(skill, depth, branch, branch_depth, max_depth, mines,
                                                        merchant, worshipper, direction)
                    assert got == expected, dict(skill=skill, depth=depth, branch=branch, branch_depth=branch_depth,
                                                 max_depth=max_depth, mines=mines, merchant=merchant,
                                                 worshipper=worshipper, direction=direction)
                    checked += 1
    assert checked == 7920
    assert policy.num_errors == 0


def test_runtime_gives_the_policy_the_monk_features_of_its_episode(runtime):
    from rl_baseline.models.obs import SPELL_KINDS, spell_kind

    obs, _ = _reset(runtime, 5)
    raw = _game(runtime).current_observation()
    kind = spell_kind(raw)
    assert 0 <= kind < len(SPELL_KINDS)  # a Monk starts with one of the three spellbooks
    classes = raw["inv_oclasses"]
    expected = [kind, np.count_nonzero(classes == 8), np.count_nonzero(classes == 7)]
    assert obs["monk_features"].tolist() == expected
    _game(runtime).wizard_wish("2 uncursed potions of water")
    obs, *_ = runtime.step(action_index("search"))
    assert obs["monk_features"][0] == kind
    assert obs["monk_features"][1] == expected[1] + 1  # one more potion slot
