"""Gym layer: the MaestroMotif NetHack environment, registered on import.

    import gymnasium as gym
    import rl_baseline.envs  # registers NetHackScoreMonk-v1
    env = gym.make("NetHackScoreMonk-v1", max_episode_steps=1000)

or, without gymnasium's wrappers, ``make_monk_env(...)``.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from rl_baseline.envs.monk_env import (
    DEFAULT_CHARACTER,
    DEFAULT_MAX_EPISODE_STEPS,
    OBSERVATION_KEYS,
    TRAINING_OBSERVATION_KEYS,
    UNKNOWN_BRANCH_DEPTH,
    EnvConfigError,
    NetHackScoreMonk,
    check_character,
)

ENV_ID = "NetHackScoreMonk-v1"

__all__ = [
    "ENV_ID",
    "DEFAULT_CHARACTER",
    "DEFAULT_MAX_EPISODE_STEPS",
    "OBSERVATION_KEYS",
    "TRAINING_OBSERVATION_KEYS",
    "UNKNOWN_BRANCH_DEPTH",
    "EnvConfigError",
    "NetHackScoreMonk",
    "check_character",
    "make_monk_env",
]


def make_monk_env(max_episode_steps: int = DEFAULT_MAX_EPISODE_STEPS, wizard: bool = False,
                  **nle_kwargs: Any) -> NetHackScoreMonk:
    """A ``NetHackScoreMonk`` with the paper's settings; extra kwargs go to NLE."""
    return NetHackScoreMonk(max_episode_steps=max_episode_steps, wizard=wizard, **nle_kwargs)


if ENV_ID not in gym.envs.registry:
    # NLE's own step limit is the one that counts; gymnasium's TimeLimit is not added.
    gym.register(id=ENV_ID, entry_point="rl_baseline.envs.monk_env:NetHackScoreMonk")
