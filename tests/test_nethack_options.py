"""NetHack runs with the authors' release's options, and the messages a level change brings reach the
observation: checked on live games (wizard mode sets the situations up)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from common.nethack.actions import ACTION_NAMES
from common.nethack.messages import decode_message
from rl_baseline.envs import make_monk_env
from rl_baseline.envs.options import read_options_file

MOVES = ("north", "south", "east", "west", "northeast", "northwest", "southeast", "southwest")
OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east", "northeast": "southwest",
            "southwest": "northeast", "northwest": "southeast", "southeast": "northwest"}
WALL_MESSAGES = ("It's a wall.", "It's solid stone.")


def _inventory(env) -> list[str]:
    obs = env.unwrapped.current_observation()
    return [bytes(s).rstrip(b"\0").decode() for s in obs["inv_strs"] if s[0]]


def _letter(env, text: str) -> str:
    obs = env.unwrapped.current_observation()
    for name, letter in zip(obs["inv_strs"], obs["inv_letters"]):
        if letter and text in bytes(name).rstrip(b"\0").decode():
            return chr(letter)
    raise AssertionError(f"no {text!r} in {_inventory(env)}")


def _step_off_and_back(env) -> list[str]:
    """Walks one square away and back onto the hero's square; the messages of the way back."""
    game = env.unwrapped
    start = tuple(int(v) for v in game.current_observation()["blstats"][:2])
    for move in MOVES:
        obs, *_ = env.step(ACTION_NAMES.index(move))
        if tuple(int(v) for v in obs["blstats"][:2]) != start:
            obs, _, _, _, info = env.step(ACTION_NAMES.index(OPPOSITE[move]))
            assert tuple(int(v) for v in obs["blstats"][:2]) == start
            return info["messages"]
    raise AssertionError("the hero could not move off its square")


def test_a_random_walk_never_mentions_walls():
    """NLE's default options include mention_walls; the release's options file replaces them, so bumping
    into a wall says nothing (here before: about 65% of a random walk's messages)."""
    env = make_monk_env(max_episode_steps=400)
    rng = np.random.default_rng(0)
    moves = [ACTION_NAMES.index(m) for m in MOVES]
    messages, bumps = [], 0
    try:
        env.reset(seed=5)
        for _ in range(400):
            before = env.unwrapped.current_observation()["blstats"][:2].copy()
            obs, _, terminated, truncated, info = env.step(int(rng.choice(moves)))
            bumps += int(np.array_equal(before, obs["blstats"][:2]))
            messages += info["messages"]
            if terminated or truncated:
                env.reset()
    finally:
        env.close()
    assert bumps > 50  # the walk did run into walls
    assert not [m for m in messages if m in WALL_MESSAGES]


@pytest.mark.game_calendar
def test_autopickup_follows_the_releases_exceptions_on_a_live_game():
    """The release's rules: a leather-gloves or robe name known in full ("an uncursed +2 pair of leather
    gloves") is always picked up, though armour is not among the pickup types; corpses and tins are left,
    except a lichen corpse; other weapons are left. (The rules here before never picked gloves or robes.)"""
    env = make_monk_env(max_episode_steps=300, wizard=True)
    try:
        env.reset(seed=3)
        game = env.unwrapped
        for wish in ("lichen corpse", "jackal corpse", "dagger", "tin"):
            game.wizard_wish(wish)
        # the Monk's own gloves and robe, taken off, carry their full names
        for worn in ("leather gloves (being worn)", "robe (being worn)"):
            game.wizard_keys("T" + _letter(env, worn))
            for _ in range(3):  # taking armour off takes a few turns
                env.step(ACTION_NAMES.index("search"))
        held = _inventory(env)
        assert "an uncursed +2 pair of leather gloves" in held and "an uncursed +1 robe" in held
        for name in ("an uncursed +2 pair of leather gloves", "an uncursed +1 robe", "a lichen corpse",
                     "a jackal corpse", "a dagger", "a tin"):
            game.wizard_keys("d" + _letter(env, name))
        _step_off_and_back(env)
        held = _inventory(env)
    finally:
        env.close()
    assert "an uncursed +2 pair of leather gloves" in held and "an uncursed +1 robe" in held
    assert "a lichen corpse" in held
    assert not [h for h in held if "jackal" in h or "dagger" in h or h.endswith("tin")]


def test_the_hide_rules_are_the_releases_with_the_space():
    """"You see .*" and "You hear .*" (NetHack matches a rule anywhere in the message): "You see here a
    dagger." is hidden, "You seem ..." is not (the rules here before, without the space, hid it)."""
    rules = [re.search(r'MSGTYPE=hide "(.*)"', line) for line in read_options_file()]
    patterns = [re.compile(m.group(1)) for m in rules if m]
    assert len(patterns) == 2
    hidden = lambda text: any(p.search(text) for p in patterns)  # noqa: E731
    assert hidden("You see here a dagger.") and hidden("You hear some noises in the distance.")
    assert not hidden("You seem to be out of luck.") and not hidden("You feel a strange vibration.")


def test_the_options_are_the_releases_and_nothing_else():
    options = set()
    for line in read_options_file():
        key, _, value = line.partition("=")
        if key == "OPTIONS":
            options.update(v.strip() for v in re.split(r",(?![^:]*\+)", value))
    assert options == {
        "color", "time", "showexp", "showscore", "autopickup", "pickup_types:$/%?!", "pickup_burden:unencumbered",
        "pettype:none", "nobones", "nolegacy", "nosparkle", "nocmdassist", "runmode:teleport",
        "paranoid_confirmation:none", "disclose:+i +a +v +g +c +o",
    }


def _on_the_staircase_down(env):
    """Starts the game of seed 3 in wizard mode, maps level 1 and teleports the hero onto its staircase down."""
    env.reset(seed=3)
    game = env.unwrapped
    game.wizard_keys([6])  # map the level
    game.wizard_keys([20, ord(">"), ord(",")])  # teleport onto the staircase down
    return game


@pytest.mark.game_calendar
def test_the_step_that_changes_level_shows_its_message():
    """Going down or up a staircase: the message NetHack showed before the --More-- is the step's observed
    message (as in the release), not the empty line left after it was dismissed."""
    env = make_monk_env(max_episode_steps=50, wizard=True)
    try:
        game = _on_the_staircase_down(env)
        obs, _, _, _, info = env.step(ACTION_NAMES.index("down"))
        assert info["depth"] == 2 and decode_message(obs["message"]) == "You descend the stairs."
        assert info["message"] == "You descend the stairs."
        game.wizard_keys([6])
        game.wizard_keys([20, ord("<"), ord(",")])
        obs, _, _, _, info = env.step(ACTION_NAMES.index("up"))
        assert info["depth"] == 1 and decode_message(obs["message"]).startswith("You climb up the stairs")
        # the next step shows its own message again
        obs, _, _, _, info = env.step(ACTION_NAMES.index("search"))
        assert "climb" not in decode_message(obs["message"])
    finally:
        env.close()


class _PaysTheDescent:
    """A reward model that pays ``value`` for a message saying the hero went down the stairs, -1 otherwise."""

    def __init__(self, value: float = 5.0) -> None:
        self.value = value

    def score(self, messages, depth_change):
        text = [bytes(np.asarray(m, dtype=np.uint8)).rstrip(b"\0") for m in np.atleast_2d(messages)]
        return np.array([self.value if b"You descend the stairs." in t else -1.0 for t in text], dtype=np.float32)


def _descend_live(models, meta_policy_factory, timing):
    """A live game in wizard mode: the hero teleports onto level 1's staircase down, goes down and searches once.
    Returns the skill environment (closed) and the infos of the descent step and of the step after it."""
    from rl_baseline.skills.intrinsic_reward import IntrinsicReward, ScoreCache
    from rl_baseline.skills.runtime import SkillRuntime

    reward = IntrinsicReward(models, [0.0] * len(models), beta=3.0, llm_coef=0.1, cache=ScoreCache())
    env = SkillRuntime(make_monk_env(max_episode_steps=50, wizard=True), meta_policy_factory, reward,
                       reward_timing=timing)
    try:
        _on_the_staircase_down(env)
        _, _, _, _, down = env.step(ACTION_NAMES.index("down"))
        _, _, _, _, after = env.step(ACTION_NAMES.index("search"))
    finally:
        env.close()
    return env, down, after


@pytest.mark.game_calendar
@pytest.mark.parametrize("timing", ["release", "after_action"])
def test_a_reward_model_that_pays_for_descending_pays_on_a_live_descent(timing):
    """The skill environment on a live game: the descent's observation carries "You descend the stairs.", so a
    reward model paying for it gives a non-zero intrinsic reward (release timing: on the next step, which scores
    the observation that step's action was chosen on; after_action: on the descent step itself). With the
    empty message the environment showed before, the reward was 0 whatever the model thought."""
    from common.vocabulary import SKILLS
    from rl_baseline.skills.runtime import SingleSkillPolicy

    env, down, after = _descend_live([_PaysTheDescent() for _ in SKILLS], lambda: SingleSkillPolicy("descender"),
                                     timing)
    assert down["depth"] == 2 and down["skill"] == "descender"
    paid = down["intrinsic_reward"] if timing == "after_action" else after["intrinsic_reward"]
    assert paid == pytest.approx(5.0)  # first sighting of the message: count 1
    # the episode statistics the training curves show: one descent, paid 5
    summary = env.stats.summary(env.skill_names, 0.0)
    assert summary["skills/descents"] == 1.0 and summary["intrinsic/reward_per_descent"] == pytest.approx(5.0)


class _DescendThenDiscover:
    """A policy over skills as the training policy's at a descent: the descender ends when it went down and the
    discoverer comes next."""

    initial_skill = "descender"

    def reset(self) -> None:
        pass

    def preconditions(self, chars, colors, num_items):
        return False, False

    def should_terminate(self, skill, skill_time, current_depth, previous_depth, preconditions):
        return skill == "descender" and current_depth > previous_depth

    def next_skill(self, current_skill, *args):
        return "discoverer"

    def update_state(self, info) -> None:
        pass


@pytest.mark.game_calendar
@pytest.mark.parametrize("timing, scorer, paid", [("release", "discoverer", 2.0), ("after_action", "descender", 5.0)])
def test_the_step_info_names_whose_model_scored_the_descent(timing, scorer, paid):
    """A live descent that ends the descender, the discoverer next (as the training policy over skills): under the
    release's timing the descent's message is scored on the next step by the discoverer's model, under
    after_action on the descent step by the descender's. ``info`` says which model scored which message, so a
    trace can tell what pays each skill (scripts.reward_trace --top_messages)."""
    from common.vocabulary import SKILLS

    models = [_PaysTheDescent({"descender": 5.0, "discoverer": 2.0}.get(s, 9.0)) for s in SKILLS]
    _, down, after = _descend_live(models, _DescendThenDiscover, timing)
    assert down["depth"] == 2 and down["skill"] == "discoverer"  # the descender ended with the descent
    scored = after if timing == "release" else down
    assert (scored["scored_skill"], scored["scored_message"]) == (scorer, b"You descend the stairs.")
    assert scored["intrinsic_reward"] == pytest.approx(paid)
    other = down if timing == "release" else after
    assert other["scored_message"] != b"You descend the stairs." and other["intrinsic_reward"] == 0.0
