"""The task's success detector as a sparse reward on top of the game score (the paper's "RL with task
reward + score" baseline, ``scripts.main --task_reward T``).

:class:`TaskSuccessReward` wraps the single-task environment (``--env nle_fixed_eat_action --root_env
NetHackScore-v1``, whose reward is the in-game score increase) and follows the episode with the task's
tracker from :mod:`rl_baseline.tasks.detectors` -- the same definitions evaluation scores with
(``--eval_protocol project``). Each step the tracker's value grows, the game reward gets
``bonus`` times the growth:

* success tasks (gnomish, delphi, minetown, goldenexit, levelupsell, discoveryhunger): ``bonus`` once,
  and the episode ends there, as Motif's goal tasks end on success;
* count tasks (transactions, price, buc): ``bonus`` for every counted event (a sale, a price
  identification, an altar identification); the episode goes on.

The bonus then goes through the environment's usual weighting (``--extrinsic_reward`` x ``--reward_scale``,
and sample-factory 1's clip of the scaled game reward at 10 that Motif's runs keep). ``info["task_value"]``
holds the tracker's value every step and the episode's final value reaches the training statistics as
``task/value`` (``task/success`` for success tasks).
"""
from __future__ import annotations

import logging
from typing import Any

import gymnasium as gym

from rl_baseline.tasks.detectors import make_task_tracker

logger = logging.getLogger(__name__)


class TaskSuccessReward(gym.Wrapper):
    """Adds ``bonus`` x (increase of the task tracker's value) to the game reward (module docstring)."""

    def __init__(self, env: gym.Env, task: str, bonus: float) -> None:
        super().__init__(env)
        self.task = task
        self.bonus = float(bonus)
        self.tracker = make_task_tracker(task)  # raises for a task without a detector
        self.value = 0.0

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        self.tracker.reset(info)
        self.value = float(self.tracker.value)  # a reset never pays: only what happens during the episode
        return obs, info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.tracker.update(info, None)
        value = float(self.tracker.value)
        gained = value - self.value
        self.value = value
        task_reward = self.bonus * gained if gained > 0 else 0.0
        info["task_value"] = value
        info["task_reward"] = task_reward
        if self.tracker.measure == "success" and self.tracker.success and not terminated:
            terminated = True  # the task is done: its episode ends as Motif's goal tasks do
        if terminated or truncated:
            extra = dict(info.get("episode_extra_stats") or {})
            extra["task/value"] = value
            if self.tracker.measure == "success":
                extra["task/success"] = float(self.tracker.success)
            info["episode_extra_stats"] = extra
        return obs, float(reward) + task_reward, terminated, truncated, info
