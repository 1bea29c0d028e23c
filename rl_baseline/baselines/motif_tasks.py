"""Motif's task rewards: the task reward, termination and success statistic of Motif's root environments.

``--env nle_fixed_eat_action`` (Motif single-reward runs, :mod:`rl_baseline.sf.env`) wraps the Monk
environment in :class:`MotifTaskReward` for its ``--root_env``. The root environments, as Motif's
``rl_baseline/tasks_nle.py`` defines them:

* ``NetHackScore-v1``: the in-game score increase plus NLE's time penalty, -0.01 on a step on which game
  time stands still (Motif's ``NetHackScore``, ``penalty_mode="constant"``; the Monk env itself pays the score
  difference only, as the MaestroMotif release's does, so the penalty is added here);
* ``NetHackStaircase-v1``: reward 50 and success when a step shows "You descend the stairs." and
  the hero arrives on level 2 of its dungeon (NLE's dungeon level, ``blstats[24]``); no time penalty;
* ``NetHackStaircaseLvl3-v1`` / ``Lvl4``: the same for level 3 / 4;
* ``NetHackOracle-v1``: reward 50 and success when the Oracle is on a square next to the hero;
* ``NetHackOracleSober-v1``: as Oracle, but not while the hero hallucinates (a hallucinating hero
  sees random monsters, which Motif's agents learned to exploit to fake meeting the Oracle);
* ``NetHackStaircaseContinual-v1``, ``...Lvl3Continual-v1``, ``...Lvl4Continual-v1`` (Motif's
  intrinsic-only runs): success pays its reward once and the episode goes on until the hero dies
  (or the step limit).

Success episodes end there (the non-continual tasks), and every step's ``info["true_objective"]``
is 1.0 once the task was reached (Score: the in-game score), which sample-factory logs per episode
as ``true_objective``: Motif's success statistic. As Motif's environment does, a "You descend the
stairs." shown during a step (behind a --More--) stays in that step's observed message, so the
reward model reads it: the Monk environment keeps it
(:data:`common.nethack.messages.KEPT_OVER_MORE`).
"""
from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np

from common.nethack import blstats as B


@functools.lru_cache(maxsize=1)
def _oracle_glyph() -> int:
    from nle import nethack  # lazy: NLE's C extension, only when an Oracle task first looks for the Oracle

    for glyph in range(nethack.GLYPH_MON_OFF, nethack.GLYPH_PET_OFF):
        if nethack.permonst(nethack.glyph_to_mon(glyph)).mname == "Oracle":
            return glyph
    raise RuntimeError("NLE has no Oracle monster glyph")


#: NetHack 3.6's message for an ordinary walk down a staircase (what Motif's staircase tasks look for)
DESCEND_MESSAGE = "You descend the stairs."
#: reward of reaching a task's goal (Motif's tasks pay 50; ``--extrinsic_reward`` weighs it)
TASK_REWARD = 50.0
#: Motif's score task: reward of a step on which game time stands still (NLE's ``penalty_step``)
TIME_PENALTY = -0.01
#: dungeon level of each staircase task's goal
STAIRCASE_LEVELS = {"Staircase": 2, "StaircaseLvl3": 3, "StaircaseLvl4": 4}
MOTIF_TASKS = ("Score", "Staircase", "StaircaseLvl3", "StaircaseLvl4", "Oracle", "OracleSober")


class MotifTaskReward(gym.Wrapper):
    """Task reward, termination and success statistic of Motif's root environments (module docstring)."""

    def __init__(self, env: gym.Env, root_env: str) -> None:
        super().__init__(env)
        name = root_env.replace("NetHack", "").replace("-v1", "")
        self.continual = name.endswith("Continual")
        self.task = name[: -len("Continual")] if self.continual else name
        if self.task not in MOTIF_TASKS or (self.continual and self.task not in STAIRCASE_LEVELS):
            raise ValueError(f"unknown root env {root_env!r}")
        self.achieved = False
        self._time: int | None = None  # game time of the last observation (the score task's penalty)

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        self.achieved = False
        self._time = int(obs["blstats"][B.BL_TIME])
        return obs, info

    @staticmethod
    def _descended(info: dict) -> bool:
        messages = info.get("messages")
        if messages is None:  # an env without the Monk env's info (tests): the step's message
            messages = [info.get("message", "")]
        return any(DESCEND_MESSAGE in m for m in messages)

    def _success(self, obs: dict, info: dict) -> bool:
        if self.task in STAIRCASE_LEVELS:
            level = int(obs["blstats"][B.BL_DUNGEON_LEVEL])
            return level == STAIRCASE_LEVELS[self.task] and self._descended(info)
        x, y = int(obs["blstats"][B.BL_X]), int(obs["blstats"][B.BL_Y])
        near = obs["glyphs"][max(y - 1, 0) : y + 2, max(x - 1, 0) : x + 2]
        if not np.any(near == _oracle_glyph()):
            return False
        if self.task == "OracleSober":
            from nle import nethack  # lazy: NLE only for the Oracle tasks, as in _oracle_glyph

            return not (int(obs["blstats"][B.BL_CONDITION]) & nethack.BL_MASK_HALLU)
        return True

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.task == "Score":
            info["true_objective"] = float(obs["blstats"][B.BL_SCORE])
            before, self._time = self._time, int(obs["blstats"][B.BL_TIME])
            # NLE's time penalty, as Motif's score task; not on the last view of a game that ended (the Monk
            # env pays nothing there)
            if not terminated and before == self._time:
                reward += TIME_PENALTY
            return obs, reward, terminated, truncated, info
        task_reward = 0.0
        if not self.achieved and not terminated and self._success(obs, info):
            self.achieved = True
            task_reward = TASK_REWARD
            info["task_success"] = True
            if not self.continual:
                terminated = True
        info["true_objective"] = float(self.achieved)
        return obs, task_reward, terminated, truncated, info
