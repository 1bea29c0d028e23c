"""Skill training entry: sample-factory APPO with our environment, model and observers.

This is ``sample_factory.train.run_rl`` with two observers attached to the runner:

* :class:`StepCheckpointer` turns the release's ``--save_every_steps`` into a
  checkpoint request every N env steps (sample-factory 2 only has a timer,
  ``--save_every_sec``, which keeps working alongside);
* :class:`ProcessWatchdog` ends the run with a failure status as soon as one of
  sample-factory's processes (rollout, inference or learner worker) has exited while
  training is still going: sample-factory itself would otherwise keep waiting for
  the dead worker's samples (or, at best, notice after ``--heartbeat_reporting_interval``);
* the learner is :class:`rl_baseline.sf.learner.MaestroLearner`: checkpoints readable by
  torch's safe loader, resume from the newest readable checkpoint (:func:`check_resume`
  says which before workers start, or stops with the files named);
* :class:`SkillStatsObserver` writes per-skill means of the episode statistics
  (``skills/...``, ``intrinsic/...`` and ``measures/...`` keys of ``episode_extra_stats``)
  to tensorboard as soon as there are any (sample-factory's own summaries wait for
  ``--stats_avg`` episodes) and to ``{train_dir}/{experiment}/skill_stats.json``, logs the
  intrinsic reward cache hit rate, and warns at the end when the meta-policy raised.
"""
from __future__ import annotations

import logging
import math
import os
import time
from typing import Any, Optional

import numpy as np

from common.atomic_io import atomic_write_json
from rl_baseline.sf.cfg import require_resolved

logger = logging.getLogger(__name__)

SKILL_STATS_FILE = "skill_stats.json"
STAT_PREFIXES = ("skills/", "intrinsic/", "measures/")


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
        atomic_write_json(self.path, payload, sort_keys=True)
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
        errors = means.get("skills/meta_policy_errors", 0.0)
        if errors > 0:
            # the guard keeps training going, but skills chosen after an error are the fallback's
            logger.warning("the meta-policy raised %.2f exceptions per episode (mean of the last episodes); "
                           "the first ones are in the rollout workers' log with their tracebacks", errors)


def _runner_processes(runner: Any) -> list:
    """Every child process of a parallel run (learners, then inference and rollout workers)."""
    procs = list(getattr(runner, "processes", []) or [])
    sampler = getattr(runner, "sampler", None)
    procs += list(getattr(sampler, "processes", []) or [])
    return procs


def _exitcode(proc: Any) -> Optional[int]:
    """Exit code of a sample-factory ``EventLoopProcess`` (None while running or not started)."""
    inner = getattr(proc, "_process", proc)
    return getattr(inner, "exitcode", None)


class ProcessWatchdog(_observer_base()):  # type: ignore[misc]
    """Fails the run fast when a worker process dies (see the module docstring).

    Every ``interval`` seconds (a timer on the runner's event loop) the child processes are
    polled; the first one found exited makes the runner stop with ``FAILURE``. If the
    remaining components have not stopped ``grace`` seconds later, the runner's event loop
    is stopped directly so that the main process can exit.
    """

    def __init__(self, interval: float = 2.0, grace: float = 30.0) -> None:
        self.interval = float(interval)
        self.grace = float(grace)
        self.failed_at: Optional[float] = None
        self.dead: list[str] = []
        self._timer: Any = None
        self._poll: Any = None

    def on_start(self, runner: Any) -> None:
        if not _runner_processes(runner):
            return  # serial mode: errors surface in this process
        from signal_slot.signal_slot import EventLoopObject, Timer

        class _Poll(EventLoopObject):  # signal-slot connects signals to methods of loop objects only
            def poll(poll_self) -> None:
                self.check(runner)

        self._poll = _Poll(runner.event_loop, "maestro_process_watchdog")
        self._timer = Timer(runner.event_loop, self.interval)
        self._timer.timeout.connect(self._poll.poll)

    def check(self, runner: Any) -> None:
        from sample_factory.algo.utils.misc import ExperimentStatus

        if self.failed_at is not None:
            if time.time() - self.failed_at > self.grace:
                logger.error("components did not stop within %.0f s of the worker failure; stopping now", self.grace)
                self._timer.stop()
                runner.event_loop.stop()
            return
        if getattr(runner, "stopped", False):
            return
        dead = [f"{p.name} (exit code {_exitcode(p)})" for p in _runner_processes(runner) if _exitcode(p) is not None]
        if not dead:
            return
        self.dead = dead
        self.failed_at = time.time()
        logger.error("worker process exited during training: %s; stopping the run (see its traceback above)",
                     ", ".join(dead))
        runner._stop_training(failed=True)
        runner.status = ExperimentStatus.FAILURE


def _terminate_children(runner: Any, timeout: float = 10.0) -> None:
    """After a failed run: gives live children ``timeout`` seconds to finish, then terminates them."""
    deadline = time.time() + timeout
    for proc in _runner_processes(runner):
        try:
            proc.join(max(0.0, deadline - time.time()))
            if proc.is_alive():
                logger.warning("terminating %s", proc.name)
                proc.terminate()
                proc.join(5.0)
        except (AssertionError, ValueError):  # never started / already closed
            continue


def probe_env(cfg: Any) -> None:
    """Builds and resets one environment in this process; raises :class:`ConfigError` if that fails.

    sample-factory probes the environment in a child process and waits for its answer
    without a timeout, so an environment that cannot be built would hang the run there.
    """
    from sample_factory.envs.create_env import create_env

    from rl_baseline.sf.cfg import ConfigError

    try:
        env = create_env(cfg.env, cfg=cfg, env_config=None)
        try:
            env.reset()
        finally:
            env.close()
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"--env {cfg.env}: building the environment failed: {type(exc).__name__}: {exc}") from exc


def check_resume(cfg: Any) -> None:
    """Before any worker starts: the checkpoint a resumed run will continue from, or a clear error.

    Raises :class:`ConfigError` when the experiment holds checkpoints and none can be read
    (sample-factory would otherwise train from step 0 without a word); see
    :mod:`rl_baseline.sf.checkpoints`.
    """
    from rl_baseline.sf.cfg import ConfigError
    from rl_baseline.sf.checkpoints import CheckpointError, checkpoint_dir, load_newest

    if cfg.restart_behavior != "resume":
        return
    ckpt_dir = checkpoint_dir(cfg.train_dir, cfg.experiment)
    try:
        loaded = load_newest(ckpt_dir, cfg.load_checkpoint_kind, "cpu", fallback=True)
    except CheckpointError as exc:
        raise ConfigError(f"cannot resume: {exc}") from exc
    if loaded is not None:
        logger.info("resuming from %s at %d env steps", loaded.path, loaded.env_steps)


def train(cfg: Any) -> int:
    """Runs sample-factory training on a finished configuration (:func:`rl_baseline.sf.cfg.resolve_cfg`);
    returns its status code."""
    from sample_factory.algo.utils.misc import ExperimentStatus
    from sample_factory.utils.utils import experiment_dir

    from rl_baseline.sf.env import register_envs
    from rl_baseline.sf.learner import MaestroParallelRunner, MaestroSerialRunner

    require_resolved(cfg, "training")
    check_resume(cfg)
    register_envs()
    probe_env(cfg)
    runner = (MaestroSerialRunner if cfg.serial_mode else MaestroParallelRunner)(cfg)
    runner.register_observer(StepCheckpointer(cfg.save_every_steps))
    runner.register_observer(SkillStatsObserver(experiment_dir(cfg=cfg)))
    watchdog = ProcessWatchdog()
    runner.register_observer(watchdog)
    status = runner.init()
    if status == ExperimentStatus.SUCCESS:
        status = runner.run()
    if watchdog.dead:
        status = ExperimentStatus.FAILURE
    if status != ExperimentStatus.SUCCESS:
        _terminate_children(runner)
        logger.error("training ended with status %s (%s)", int(status),
                     "failure" if status == ExperimentStatus.FAILURE else "interrupted")
    return int(status)
