"""When the Gnomish Mines entrance becomes known, on live wizard-mode games, as in the release.

The release knows the branch depth once two down staircases are on the map of the level the hero is on
(the Dungeons of Doom level holding the Mines staircase is the only level with two), or once a descender
ends outside the Dungeons of Doom (then the depth it started from). NetHack's own overview lists the branch
only after the hero took it, so a policy reading the overview could not head for the entrance before the
first entry. Seed 1: the Mines staircase is on level 2, the first ``>`` the wizard's teleport prompt jumps to.
"""
from __future__ import annotations

import numpy as np
import pytest

from common.nethack.actions import action_index
from common.vocabulary import SKILLS
from rl_baseline.envs import make_monk_env
from rl_baseline.envs.monk_env import DOWN_STAIRCASE_GLYPH
from rl_baseline.skills import meta_policy
from rl_baseline.skills.intrinsic_reward import IntrinsicReward, ScoreCache
from rl_baseline.skills.runtime import SkillRuntime

MAGIC_MAPPING = b"\x06"  # wizard mode's Ctrl-F maps the level
TELEPORT_TO_FIRST_DOWN_STAIRS = b"\x14>."  # Ctrl-T, the cursor to a '>' on the map, pick it


class ZeroModel:
    def score(self, messages, depth_change):
        return np.zeros(len(messages), dtype=np.float32)

    def threshold(self, q):
        return 1.0


def _runtime(task: str) -> SkillRuntime:
    reward = IntrinsicReward([ZeroModel() for _ in SKILLS], [0.5] * len(SKILLS), beta=3.0, llm_coef=0.1,
                             extrinsic_coef=0.0, cache=ScoreCache())
    return SkillRuntime(make_monk_env(wizard=True, max_episode_steps=500), lambda: meta_policy.load(task, 42), reward)


@pytest.fixture
def game():
    env = make_monk_env(wizard=True, max_episode_steps=500)
    env.seed(1, 1001, reseed=False)
    env.reset()
    yield env
    env.close()


def _down_staircases(env) -> int:
    return int(np.count_nonzero(env.last_observation[env._glyph_index] == DOWN_STAIRCASE_GLYPH))


def test_two_down_staircases_on_the_map_tell_the_entrance_before_the_overview_does(game):
    """Before, the branch depth came from the overview, which names the Mines only once they were entered:
    with both staircases of level 2 in view the env still said -2."""
    info = game.wizard_level_teleport(2)
    assert _down_staircases(game) < 2 and info["branch_depth"] == -2  # nothing seen yet
    info = game.wizard_keys(MAGIC_MAPPING)
    assert _down_staircases(game) == 2
    assert info["branch_depth"] == 2
    assert "Gnomish Mines" not in info["overview"]  # NetHack's overview does not know it yet
    # the first '>' is the Mines staircase: going down enters the Mines; the entrance stays known
    game.wizard_keys(TELEPORT_TO_FIRST_DOWN_STAIRS)
    _, _, _, _, info = game.step(action_index("down"))
    assert (info["depth"], info["dungeon_number"]) == (3, 2)
    assert info["branch_depth"] == 2 and "Gnomish Mines" in info["overview"]


def test_one_down_staircase_in_view_tells_nothing(game):
    # mapped and teleported in one go: the hero stands on one '>', so the map shows the other only
    info = game.wizard_level_teleport(2)
    info = game.wizard_keys(MAGIC_MAPPING + TELEPORT_TO_FIRST_DOWN_STAIRS)
    assert _down_staircases(game) == 1
    assert info["branch_depth"] == -2


def test_gnomish_policy_heads_for_the_entrance_before_it_was_ever_entered():
    """The release's gnomish policy takes the descender on the entrance level; before, its entrance stayed
    unknown until the Mines were entered, so no policy reading branch_depth could head for it."""
    env = _runtime("gnomish")
    try:
        env.env.seed(1, 1001, reseed=False)
        env.reset()
        env.env.wizard_level_teleport(2)
        env.env.wizard_keys(MAGIC_MAPPING)
        _, _, _, _, info = env.step(action_index("search"))
        assert info["dungeon_number"] == 0
        assert env.meta_policy.player.branch_depth == 2
        assert env.meta_policy.next_skill("discoverer", 2, 0, False, False) == "descender"
        assert env.meta_policy.next_skill("descender", 3, 0, False, False) == "ascender"  # the main stairs: retry
    finally:
        env.close()


def test_a_descender_that_ends_in_the_mines_tells_the_entrance():
    env = _runtime("exploration")
    try:
        env.env.seed(1, 1001, reseed=False)
        env.reset()
        env.env.wizard_level_teleport(2)
        env.env.wizard_keys(MAGIC_MAPPING + TELEPORT_TO_FIRST_DOWN_STAIRS)
        assert env.meta_policy.player.branch_depth == -2
        # the descender runs from level 2 (set here: the wizard's teleports are not the skill's doing)
        env.skill_id, env.skill_start_depth = SKILLS.index("descender"), 2
        _, _, _, _, info = env.step(action_index("down"))
        assert (info["depth"], info["dungeon_number"], info["branch_depth"]) == (3, 2, -2)
        assert env.meta_policy.player.branch_depth == 2
    finally:
        env.close()
