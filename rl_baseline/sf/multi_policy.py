"""Evaluation with one network per skill (the isolated-skills ablation; ``--skill_policy_dirs``).

The ablation trains each skill alone (``--train_skill S``: that skill active for the whole of every
training episode, one network per skill, the total budget split equally). At evaluation the task's
policy over skills still picks the active skill every step, exactly as for the one-network agent; the
observation carries the active skill (``skill_id``), and :class:`SkillDispatchPolicy` hands each game's
step to the network trained for that skill.

Recurrent state: each network keeps one state per game. When a game switches to a skill, that skill's
network starts from a zero state, as it did at the start of every one of its training episodes (a skill
call begins afresh); while a skill stays active its network carries its state from step to step. The
networks of inactive skills are not stepped.

A baseline's part that stays in ``sf`` rather than in the wing (:mod:`rl_baseline.baselines`): it loads
sample-factory checkpoints through :mod:`rl_baseline.sf.policy`, and the wing sits below ``sf``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from rl_baseline.sf.cfg import resolve_experiment_cfg
from rl_baseline.sf.policy import load_policy

logger = logging.getLogger(__name__)


class SkillDispatchPolicy:
    """``act(obs_list)`` with one acting policy per skill (module docstring)."""

    def __init__(self, policies: Sequence[Any], n_envs: int) -> None:
        self.policies = list(policies)
        self.active = np.full(int(n_envs), -1, dtype=np.int64)  # the skill whose network acted last, per game
        self.steps_per_skill = np.zeros(len(self.policies), dtype=np.int64)

    @staticmethod
    def _skill_of(o: dict) -> int:
        return int(np.asarray(o["skill_id"]).reshape(-1)[0])

    def act(self, obs: list[dict]) -> np.ndarray:
        skills = np.array([self._skill_of(o) for o in obs], dtype=np.int64)
        actions = np.zeros(len(obs), dtype=np.int64)
        for s in np.unique(skills):
            if not 0 <= s < len(self.policies):
                raise ValueError(f"the environment's active skill {s} has no network ({len(self.policies)} given)")
            rows = np.flatnonzero(skills == s)
            policy = self.policies[s]
            for i in rows:
                if self.active[i] != s:  # the skill starts in this game: its network starts afresh
                    policy.episode_ended(int(i))
            actions[rows] = policy.act([obs[i] for i in rows], rows=rows)
            self.active[rows] = s
            self.steps_per_skill[s] += len(rows)
        return actions

    def episode_ended(self, i: int) -> None:
        for policy in self.policies:
            policy.episode_ended(i)
        self.active[i] = -1


@dataclass
class LoadedSkillPolicies:
    """The networks of ``--skill_policy_dirs``, loaded, and where their weights came from."""

    loaded: list[Any]  # rl_baseline.sf.policy.LoadedPolicy, one per skill
    dirs: list[str]

    @property
    def checkpoints(self) -> list[Optional[Path]]:
        return [lp.checkpoint for lp in self.loaded]

    @property
    def env_steps(self) -> int:
        """Env steps of all the networks' training together (the ablation's total budget)."""
        return int(sum(lp.env_steps for lp in self.loaded))

    def acting(self, n_envs: int, deterministic: bool = False) -> SkillDispatchPolicy:
        return SkillDispatchPolicy([lp.acting(n_envs, deterministic) for lp in self.loaded], n_envs)


def load_skill_policies(cfg: Any, observation_space: Any, action_space: Any) -> LoadedSkillPolicies:
    """Each folder of ``cfg.skill_policy_list`` (in skill order) loaded with its own saved configuration, on
    this command's device and ``--load_checkpoint_kind``."""
    loaded = []
    for d in cfg.skill_policy_list:
        sub = resolve_experiment_cfg(d, ["--eval_target", cfg.eval_target, "--device", cfg.device,
                                         "--load_checkpoint_kind", cfg.load_checkpoint_kind], files=False)
        lp = load_policy(sub, observation_space, action_space)
        logger.info("skill network %s: %s (env steps %d)", d, lp.checkpoint, lp.env_steps)
        loaded.append(lp)
    return LoadedSkillPolicies(loaded, list(cfg.skill_policy_list))
