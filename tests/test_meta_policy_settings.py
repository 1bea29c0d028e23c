"""The shipped policies over skills use the release's settings for each evaluation task.

The authors' modules (their ``rl_baseline/meta_policies/{task}/seed42/execution.py``) set, in
``set_initial_values``, how many game turns the discoverer runs (50 on the navigation tasks gnomish,
minetown and delphi, 500 elsewhere), 20 times that for the merchant and the worshipper, and
``max_depth``, the deepest level their policy sends the descender to (it goes down only while the
depth is below it). The numbers are copied here as facts, so the test does not need the release.

The shipped modules are loaded as the run-time loads them (``code_generation.loader`` through
:func:`rl_baseline.skills.meta_policy.load`) and driven through the skill run-time
(:class:`rl_baseline.skills.runtime.SkillRuntime`) on a stand-in game reduced to a turn clock and
staircases, where each skill does its job at once: the descender goes one level down, the
ascender one level up, the other skills stay.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from common.nethack import blstats as B
from common.vocabulary import EVAL_TASKS
from rl_baseline.skills import meta_policy
from rl_baseline.skills.intrinsic_reward import IntrinsicReward
from rl_baseline.skills.runtime import SkillRuntime

#: task -> (discoverer's game turns, deepest level), read from the release's modules
RELEASE_SETTINGS: dict[str, tuple[int, int]] = {
    "gnomish": (50, 5),
    "minetown": (50, 5),
    "delphi": (50, 10),
    "buc": (500, 5),
    "price": (500, 5),
    "transactions": (500, 5),
    "levelupsell": (500, 5),
    "goldenexit": (500, 3),
    "discoveryhunger": (500, 10),
}


def test_every_evaluation_task_has_its_release_settings():
    assert set(RELEASE_SETTINGS) == set(EVAL_TASKS)


class StairsGame(gym.Env):
    """One game turn per step; action 1 goes one level down, 2 one level up, anything else stays.

    Always in the Dungeons of Doom (the Mines entrance is never found), no shopkeeper or altar in
    view, experience level 4 (levelupsell may leave level 1), no gold and no kills (goldenexit never
    leaves)."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.action_space = gym.spaces.Discrete(3)
        self.observation_space = gym.spaces.Dict({})
        self.turn = 0
        self.depth = 1

    def _obs(self) -> dict:
        blstats = np.zeros(27, dtype=np.int64)
        blstats[B.BL_X], blstats[B.BL_Y], blstats[B.BL_DEPTH] = 10, 6, self.depth
        inv_letters = np.zeros(55, dtype=np.uint8)
        inv_oclasses = np.full(55, 18, dtype=np.uint8)
        return dict(chars=np.full((21, 79), ord("."), dtype=np.uint8), colors=np.zeros((21, 79), dtype=np.uint8),
                    blstats=blstats, inv_letters=inv_letters, inv_oclasses=inv_oclasses,
                    message=np.zeros(256, dtype=np.uint8), glyphs=np.zeros((21, 79), dtype=np.int16))

    def _info(self) -> dict:
        return {"depth": self.depth, "dungeon_number": 0, "time": self.turn, "xp_level": 4, "gold": 0,
                "kills": 0, "hunger": 1, "just_eaten": False}

    def reset(self, *, seed=None, options=None):
        self.turn, self.depth = 0, 1
        return self._obs(), self._info()

    def step(self, action):
        self.turn += 1
        self.depth = max(1, self.depth + {1: 1, 2: -1}.get(int(action), 0))
        return self._obs(), 0.0, self.turn >= self.turns, False, self._info()


def _play(task: str, turns: int, config: meta_policy.MetaPolicyConfig | None = None) -> list[tuple[str, int]]:
    """(skill active during the turn, depth after it) for every turn of one stand-in game."""
    env = SkillRuntime(StairsGame(turns), lambda: meta_policy.load(task, 42, config=config),
                       IntrinsicReward([], [], llm_coef=0.0),
                       observation_fn=lambda obs, skill_id, n: {}, observation_space=gym.spaces.Dict({}))
    _, info = env.reset()
    trace, done = [], False
    while not done:
        skill = info["skill"]
        _, _, term, trunc, info = env.step({"descender": 1, "ascender": 2}.get(skill, 0))
        trace.append((skill, int(info["depth"])))
        done = term or trunc
    assert env.meta_policy.num_errors == 0
    return trace


def _runs(trace: list[tuple[str, int]], skill: str) -> list[int]:
    """Lengths (turns) of the runs of ``skill`` in the trace, the last one (cut by the game's end) left out."""
    runs, current, length = [], None, 0
    for s, _ in trace:
        if s == current:
            length += 1
            continue
        if current == skill:
            runs.append(length)
        current, length = s, 1
    return runs


@pytest.mark.parametrize("task", sorted(RELEASE_SETTINGS))
def test_shipped_policy_runs_the_discoverer_for_the_releases_turns_and_descends_to_its_depth(task):
    steps, deepest = RELEASE_SETTINGS[task]
    # long enough to explore every level down to the deepest and come back up at least once
    trace = _play(task, turns=(2 * deepest + 2) * (steps + 2))
    runs = _runs(trace, "discoverer")
    assert runs and set(runs) == {steps}, f"{task}: discoverer runs of {sorted(set(runs))} turns, release {steps}"
    depths = [d for _, d in trace]
    assert max(depths) == deepest, f"{task}: went down to {max(depths)}, release {deepest}"
    # the descender is chosen on the levels above the deepest one, never on it
    assert all(d < deepest for (s, _), d in zip(trace, [1] + depths[:-1]) if s == "descender")


@pytest.mark.parametrize("task", sorted(RELEASE_SETTINGS))
def test_shipped_policy_gives_merchant_and_worshipper_twenty_times_the_discoverers_turns(task):
    steps, _ = RELEASE_SETTINGS[task]
    policy = meta_policy.load(task, 42)
    none = [False, False]
    for skill in ("merchant", "worshipper"):
        assert policy.should_terminate(skill, 20 * steps - 1, 2, 2, none) is False, (task, skill)
        assert policy.should_terminate(skill, 20 * steps, 2, 2, none) is True, (task, skill)
    assert policy.should_terminate("discoverer", steps - 1, 2, 2, none) is False
    assert policy.should_terminate("discoverer", steps, 2, 2, none) is True
    assert policy.num_errors == 0


def test_discoverer_turns_override_sets_the_training_policys_budget_and_nothing_else():
    """``--discoverer_turns`` (a named deviation for CPU-scale lives): the discoverer runs for the given game
    turns, the merchant and worshipper keep the module's budgets, and the module's own 500 stays the default."""

    def play(discoverer_turns):
        config = meta_policy.MetaPolicyConfig(discoverer_turns=discoverer_turns)
        return meta_policy.load("exploration", 42, config=config), _runs(_play("exploration", 3000, config), "discoverer")

    policy, runs = play(None)
    assert runs and set(runs) == {500}
    policy, runs = play(100)
    assert len(runs) >= 5 and set(runs) == {100}
    none = [False, False]
    assert policy.should_terminate("merchant", 10_000 - 1, 2, 2, none) is False
    assert policy.should_terminate("merchant", 10_000, 2, 2, none) is True


def test_discoverer_turns_is_for_training_only():
    from rl_baseline.sf.cfg import ConfigError, SkillEnvConfig, parse_cfg

    assert SkillEnvConfig.from_cfg(parse_cfg([])).discoverer_turns is None
    assert SkillEnvConfig.from_cfg(parse_cfg(["--discoverer_turns", "100"])).discoverer_turns == 100
    # an evaluation loads the trained run's config.json: the task's own policy keeps its budgets
    evaluation = parse_cfg(["--discoverer_turns", "100", "--evaluation", "True", "--eval_target", "gnomish"])
    assert SkillEnvConfig.from_cfg(evaluation).discoverer_turns is None
    with pytest.raises(ConfigError, match="--discoverer_turns 0"):
        parse_cfg(["--discoverer_turns", "0"])
