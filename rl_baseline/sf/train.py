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
* with an online reward type (ONI), an annotator process labels the agent's messages with an
  LLM server during training (:func:`start_online_annotation`, :mod:`rl_baseline.baselines.oni`) and
  :class:`OnlineStatsObserver` logs its statistics under ``oni/...``;
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
import signal
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
from sample_factory.algo.runners.runner import AlgoObserver
from sample_factory.algo.utils.misc import ExperimentStatus
from sample_factory.envs.create_env import create_env
from sample_factory.utils.utils import experiment_dir
from signal_slot.signal_slot import EventLoopObject, Timer

from common.atomic_io import atomic_write_json
from common.cli import FAILED
from common.interrupts import received_status, release_signals, signals_deferred
from rl_baseline.baselines.oni.annotator import AnnotatorConfig
from rl_baseline.baselines.oni.service import AnnotatorProcess, ServerError, server_url, wait_for_server
from rl_baseline.baselines.oni.store import read_stats
from rl_baseline.sf.cfg import ConfigError, online_goals, require_resolved
from rl_baseline.sf.checkpoints import CheckpointError, checkpoint_dir, list_checkpoints, load_newest
from rl_baseline.sf.env import register_envs
from rl_baseline.sf.learner import MaestroParallelRunner, MaestroSerialRunner
from rl_baseline.sf.wandb_run import finish_wandb, remember_run, start_wandb

logger = logging.getLogger(__name__)

SKILL_STATS_FILE = "skill_stats.json"
STAT_PREFIXES = ("skills/", "intrinsic/", "measures/")


class StepCheckpointer(AlgoObserver):
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


class SkillStatsObserver(AlgoObserver):
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


class OnlineStatsObserver(AlgoObserver):
    """The online annotator's statistics (``oni/stats.json``) as tensorboard scalars ``oni/...``."""

    KEYS = ("labels", "labels_per_s", "queue_length", "latency_s", "outages", "outage_seconds", "malformed",
            "given_up", "dropped", "requests", "failed_requests", "model_updates", "model_loss", "model_accuracy")

    def __init__(self, store_dir: str, annotator: Any = None) -> None:
        self.store_dir = store_dir
        self.annotator = annotator
        self.warned_dead = False

    def extra_summaries(self, runner: Any, policy_id: int, writer: Any, env_steps: Any) -> None:
        if isinstance(writer, (int, np.integer)):
            writer, env_steps = env_steps, writer
        if policy_id != 0:
            return
        if self.annotator is not None and not self.annotator.alive() and not self.warned_dead:
            self.warned_dead = True
            logger.error("the online annotator process exited (code %s): no new labels; training goes on",
                         self.annotator.process.exitcode)
        stats = read_stats(self.store_dir)
        if not stats:
            return
        for key in self.KEYS:
            value = stats.get(key)
            if isinstance(value, (int, float)) and math.isfinite(float(value)):
                writer.add_scalar(f"oni/{key}", float(value), env_steps)
        writer.add_scalar("oni/server_up", float(bool(stats.get("server_up", True))), env_steps)
        shares = stats.get("label_shares")
        for label, share in (shares.items() if isinstance(shares, dict) else ()):
            if isinstance(share, (int, float)) and math.isfinite(float(share)):
                writer.add_scalar(f"oni/label_share_{label}", float(share), env_steps)


def log_online_summary(store_dir: str) -> None:
    """The annotator's final statistics, in one line of the training log."""
    stats = read_stats(store_dir) or {}
    logger.info("online annotation: %s labels (%s this run), %s outage(s) over %s s, %s malformed answer(s), "
                "%s item(s) given up, %s waiting", stats.get("labels", 0), stats.get("labels_this_run", 0),
                stats.get("outages", 0), stats.get("outage_seconds", 0), stats.get("malformed", 0),
                stats.get("given_up", 0), stats.get("queue_length", 0))


def start_online_annotation(cfg: Any) -> Any:
    """Waits for the LLM server (:class:`ConfigError` when it does not come), then starts the
    annotator process of ``--llm_reward_type`` (:mod:`rl_baseline.baselines.oni`)."""
    url = server_url(cfg.llm_server_addr, cfg.llm_server_port)
    try:
        wait_for_server(url, cfg.llm_model, float(cfg.llm_server_wait_s))
    except ServerError as exc:
        raise ConfigError(str(exc)) from exc
    config = AnnotatorConfig(
        store_dir=cfg.online_store_dir, reward_type=cfg.llm_reward_type, server_url=url, model=cfg.llm_model,
        goals=online_goals(cfg), batch_size=int(cfg.llm_batch_size), max_tokens=int(cfg.llm_max_tokens),
        concurrency=int(cfg.llm_concurrency), reward_model_lr=float(cfg.reward_model_lr),
        reward_model_batch_size=int(cfg.reward_model_batch_size), seed=int(cfg.seed or 0))
    return AnnotatorProcess(config).start()


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


#: seconds the components left running get to stop after a worker died, before the event loop is stopped directly
WORKER_FAILURE_GRACE_S = 30.0


class ProcessWatchdog(AlgoObserver):
    """Fails the run fast when a worker process dies (see the module docstring).

    Every ``interval`` seconds (a timer on the runner's event loop) the child processes are
    polled; the first one found exited makes the runner stop with ``FAILURE``. If the
    remaining components have not stopped ``grace`` seconds later, the runner's event loop
    is stopped directly so that the main process can exit.
    """

    def __init__(self, interval: float = 2.0, grace: float = WORKER_FAILURE_GRACE_S) -> None:
        self.interval = float(interval)
        self.grace = float(grace)
        self.failed_at: Optional[float] = None
        self.dead: list[str] = []
        self._timer: Any = None
        self._poll: Any = None

    def on_start(self, runner: Any) -> None:
        if not _runner_processes(runner):
            return  # serial mode: errors surface in this process

        class _Poll(EventLoopObject):  # signal-slot connects signals to methods of loop objects only
            def poll(poll_self) -> None:
                self.check(runner)

        self._poll = _Poll(runner.event_loop, "maestro_process_watchdog")
        self._timer = Timer(runner.event_loop, self.interval)
        self._timer.timeout.connect(self._poll.poll)

    def check(self, runner: Any) -> None:
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
            if proc.is_alive():  # workers ignore SIGTERM (rl_baseline.sf.learner): kill
                logger.warning("stopping %s", proc.name)
                getattr(proc, "_process", proc).kill()
                proc.join(5.0)
        except (AssertionError, ValueError):  # never started / already closed
            continue


def probe_env(cfg: Any) -> None:
    """Builds and resets one environment in this process; raises :class:`ConfigError` if that fails.

    sample-factory probes the environment in a child process and waits for its answer
    without a timeout, so an environment that cannot be built would hang the run there.
    """
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
    if cfg.restart_behavior != "resume":
        return
    ckpt_dir = checkpoint_dir(cfg.train_dir, cfg.experiment)
    try:
        loaded = load_newest(ckpt_dir, cfg.load_checkpoint_kind, "cpu", fallback=True)
    except CheckpointError as exc:
        raise ConfigError(f"cannot resume: {exc}") from exc
    if loaded is not None:
        logger.info("resuming from %s at %d env steps", loaded.path, loaded.env_steps)


def _without_sf_wandb(cfg: Any) -> Any:
    """sample-factory's runner must not start wandb itself (see :mod:`rl_baseline.sf.wandb_run`)."""
    cfg.with_wandb = False
    return cfg


def train(cfg: Any) -> int:
    """Runs sample-factory training on a finished configuration (:func:`rl_baseline.sf.cfg.resolve_cfg`);
    returns the process's exit status (:func:`exit_status`)."""
    require_resolved(cfg, "training")
    check_resume(cfg)
    register_envs()
    probe_env(cfg)
    annotator = start_online_annotation(cfg) if getattr(cfg, "online_store_dir", None) else None
    wandb_run = start_wandb(cfg)  # before sample-factory's tensorboard writers exist, so they are mirrored
    runner = None
    try:
        release_signals()  # a signal held since the command started (scripts.main) arrives here, before any worker
        # every process sample-factory starts (the env-info probe in the runner's constructor, the workers in
        # init) starts with the signals held back; one that came meanwhile arrives when the block ends, and the
        # workers already started are stopped below
        with signals_deferred():
            runner = (MaestroSerialRunner if cfg.serial_mode else MaestroParallelRunner)(_without_sf_wandb(cfg))
            remember_run(cfg, wandb_run)
            runner.register_observer(StepCheckpointer(cfg.save_every_steps))
            runner.register_observer(SkillStatsObserver(experiment_dir(cfg=cfg)))
            if annotator is not None:
                runner.register_observer(OnlineStatsObserver(cfg.online_store_dir, annotator))
            watchdog = ProcessWatchdog(grace=WORKER_FAILURE_GRACE_S)  # read here, so a driver script can set it
            runner.register_observer(watchdog)
            status = runner.init()
        if status == ExperimentStatus.SUCCESS:
            status = runner.run()
    except KeyboardInterrupt:
        if runner is not None:
            _terminate_children(runner, timeout=5.0)
        raise
    finally:
        if annotator is not None:
            annotator.stop()
            log_online_summary(cfg.online_store_dir)
        finish_wandb(wandb_run)
    if watchdog.dead:
        status = ExperimentStatus.FAILURE
    if status != ExperimentStatus.SUCCESS:
        _terminate_children(runner)
        saved = list_checkpoints(Path(experiment_dir(cfg=cfg)) / "checkpoint_p0")
        logger.error("%s", ending_line(status, watchdog.dead, saved[-1] if saved else None))
    return exit_status(status)


def exit_status(status: int) -> int:
    """The process's exit status for sample-factory's ``ExperimentStatus``: 0, 1 (:data:`common.cli.FAILED`),
    or 128 + the signal that interrupted it (130 for Ctrl-C, 143 for SIGTERM; never sample-factory's own 2,
    which the scripts use for bad input)."""
    if status == ExperimentStatus.SUCCESS:
        return 0
    return FAILED if status == ExperimentStatus.FAILURE else received_status()


def ending_line(status: int, dead: Sequence[str], newest: Optional[Path]) -> str:
    """The line a run that did not succeed ends with: its exit status and why, and where it resumes from."""
    code = exit_status(status)
    why = "failure" if status == ExperimentStatus.FAILURE else f"interrupted by {signal.Signals(code - 128).name}"
    exited = f": {', '.join(dead)} exited" if dead else ""
    return (f"training ended with status {code} ({why}){exited}; newest checkpoint: {newest or 'none saved yet'}; "
            "the same command resumes from it")
