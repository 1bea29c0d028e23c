"""Skill training entry: sample-factory APPO with our environment, model and observers.

This is ``sample_factory.train.run_rl`` with two observers attached to the runner:

* :class:`StepCheckpointer` turns the release's ``--save_every_steps`` into a
  checkpoint request every N env steps (sample-factory 2 only has a timer,
  ``--save_every_sec``, which keeps working alongside);
* :class:`SkillStatsObserver` writes per-skill means of the episode statistics
  (``skills/...`` and ``intrinsic/...`` keys of ``episode_extra_stats``) to tensorboard
  as soon as there are any (sample-factory's own summaries wait for ``--stats_avg``
  episodes) and to ``{train_dir}/{experiment}/skill_stats.json``, and logs the
  intrinsic reward cache hit rate.
"""
from __future__ import annotations

import json
import logging
import math
import os
from typing import Any

import numpy as np

from rl_baseline.sf.cfg import finalize_cfg, validate_cfg

logger = logging.getLogger(__name__)

SKILL_STATS_FILE = "skill_stats.json"
STAT_PREFIXES = ("skills/", "intrinsic/")


def _observer_base() -> type:
    from sample_factory.algo.runners.runner import AlgoObserver

    return AlgoObserver


class StepCheckpointer(_observer_base()):  # type: ignore[misc]
    """Requests a checkpoint each time the env step count crosses a multiple of ``every``."""

    def __init__(self, every: int) -> None:
        self.every = int(every)
        self.next_save: int | None = None

    def on_training_step(self, runner: Any, training_iteration_since_resume: int) -> None:
        if self.every <= 0:
            return
        steps = int(sum(runner.env_steps.values()))
        if self.next_save is None:
            self.next_save = (steps // self.every + 1) * self.every
        if steps >= self.next_save:
            logger.info("%d env steps: saving a checkpoint (--save_every_steps %d)", steps, self.every)
            runner.save_periodic.emit()
            self.next_save = (steps // self.every + 1) * self.every


def skill_stat_means(runner: Any, policy_id: int = 0) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, per_policy in runner.policy_avg_stats.items():
        if key.startswith(STAT_PREFIXES) and len(per_policy[policy_id]) > 0:
            value = float(np.mean(per_policy[policy_id]))
            if math.isfinite(value):
                out[key] = value
    return out


class SkillStatsObserver(_observer_base()):  # type: ignore[misc]
    def __init__(self, experiment_path: str) -> None:
        self.path = os.path.join(experiment_path, SKILL_STATS_FILE)

    def _dump(self, runner: Any) -> dict[str, float]:
        means = skill_stat_means(runner)
        if not means:
            return means
        payload = {"env_steps": int(sum(runner.env_steps.values())), "means": means}
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(payload, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)
        return means

    def extra_summaries(self, runner: Any, policy_id: int, writer: Any, env_steps: Any) -> None:
        if isinstance(writer, (int, np.integer)):  # tolerate either argument order
            writer, env_steps = env_steps, writer
        if policy_id != 0:
            return
        means = self._dump(runner)
        for key, value in means.items():
            writer.add_scalar(f"{key}_mean", value, env_steps)
        if "intrinsic/cache_hit_rate" in means:
            logger.info("intrinsic reward cache hit rate %.3f", means["intrinsic/cache_hit_rate"])

    def on_stop(self, runner: Any) -> None:
        means = self._dump(runner)
        if "intrinsic/cache_hit_rate" in means:
            logger.info("intrinsic reward cache hit rate %.3f (final)", means["intrinsic/cache_hit_rate"])


def train(cfg: Any) -> int:
    """Validates, registers, and runs sample-factory training; returns its status code."""
    from sample_factory.algo.runners.runner_parallel import ParallelRunner
    from sample_factory.algo.runners.runner_serial import SerialRunner
    from sample_factory.algo.utils.misc import ExperimentStatus
    from sample_factory.cfg.arguments import maybe_load_from_checkpoint
    from sample_factory.utils.utils import experiment_dir

    from rl_baseline.sf.env import register_envs

    if cfg.restart_behavior == "resume":
        # saved config + command-line overrides, as sample-factory's make_runner does
        cfg = maybe_load_from_checkpoint(cfg)
        finalize_cfg(cfg)
    validate_cfg(cfg)
    register_envs()
    runner = (SerialRunner if cfg.serial_mode else ParallelRunner)(cfg)
    runner.register_observer(StepCheckpointer(cfg.save_every_steps))
    runner.register_observer(SkillStatsObserver(experiment_dir(cfg=cfg)))
    status = runner.init()
    if status == ExperimentStatus.SUCCESS:
        status = runner.run()
    return int(status)
