"""sample-factory's learner and runners, with this project's checkpoint handling.

Subclasses only (sample-factory itself is never modified):

* :class:`MaestroLearner` writes checkpoints that torch's safe loader reads (numbers as
  Python numbers; sample-factory stores the best-model score as ``numpy.float64``), and
  resumes through :func:`rl_baseline.sf.checkpoints.load_newest`: the newest readable
  checkpoint, a warning for each skipped file, an error (never a silent fresh start) when
  checkpoints exist but none can be read; it normalises the advantages as the release did,
  dividing by ``max(std, 1e-3)`` (:data:`ADVANTAGE_STD_FLOOR`) where sample-factory 2.1.1 divides by
  ``max(std, 1e-7)``: a minibatch of nearly equal advantages (nearly all-zero rewards) keeps its small
  advantages instead of having its noise scaled up to unit size;
* :class:`MaestroLearnerWorker` hosts that learner; :class:`MaestroParallelRunner` and
  :class:`MaestroSerialRunner` create that worker. They live at module level so that
  sample-factory's spawned learner process can unpickle them.
"""
from __future__ import annotations

import functools
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

import torch
from sample_factory.algo.learning.learner import Learner
from sample_factory.algo.learning.learner_worker import LearnerWorker
from sample_factory.algo.runners.runner_parallel import ParallelRunner
from sample_factory.algo.runners.runner_serial import SerialRunner
from sample_factory.utils.attr_dict import AttrDict
from sample_factory.utils.utils import log

from common.atomic_io import atomic_write
from common.interrupts import signals_deferred
from common.torch_files import plain_numbers
from rl_baseline.sf.checkpoints import list_checkpoints, load_newest

#: the release's floor on the advantages' standard deviation when it normalises them (its learner's
#: ``max(1e-3, adv_std)``); sample-factory 2.1.1 uses :data:`SF_ADVANTAGE_STD_FLOOR`
ADVANTAGE_STD_FLOOR = 1e-3
SF_ADVANTAGE_STD_FLOOR = 1e-7


def release_normalised_advantages(sf_normalised: torch.Tensor, adv_std: torch.Tensor) -> torch.Tensor:
    """sample-factory's normalised advantages, ``(adv - mean) / max(std, 1e-7)``, as the release's,
    ``(adv - mean) / max(std, 1e-3)``."""
    return sf_normalised * (torch.clamp_min(adv_std, SF_ADVANTAGE_STD_FLOOR) / torch.clamp_min(adv_std, ADVANTAGE_STD_FLOOR))


class MaestroLearner(Learner):
    # files found unreadable at resume: reported, and never removed by checkpoint rotation
    unreadable: tuple[Path, ...] = ()

    def load_from_checkpoint(self, policy_id: int, load_progress: bool = True) -> None:
        ckpt_dir = self.checkpoint_dir(self.cfg, policy_id)
        loaded = load_newest(ckpt_dir, self.cfg.load_checkpoint_kind, self.device, fallback=True)
        if loaded is None:
            log.info("no checkpoint in %s: starting from scratch", ckpt_dir)
            return
        self.unreadable = tuple(path for path, _ in loaded.skipped)
        log.info("loading %s", loaded.path)
        self._load_state(loaded.state, load_progress=load_progress)

    def _calculate_losses(self, mb: AttrDict, num_invalids: int) -> tuple:
        # sample-factory computes the advantages and the losses in one method; below the release's floor the
        # policy loss is computed again on the release's advantages (the other losses do not read them)
        dist, policy_loss, exploration_loss, kl_old, kl_loss, value_loss, summaries = super()._calculate_losses(
            mb, num_invalids)
        adv_std = summaries["adv_std"]
        if float(adv_std) < ADVANTAGE_STD_FLOOR:
            adv = release_normalised_advantages(summaries["adv"], adv_std)
            policy_loss = self._policy_loss(summaries["ratio"], adv, summaries["clip_ratio_low"],
                                            summaries["clip_ratio_high"], mb.valids, num_invalids)
            summaries["adv"] = adv
        return dist, policy_loss, exploration_loss, kl_old, kl_loss, value_loss, summaries

    def _record_summaries(self, train_loop_vars: Any) -> Any:
        # sample-factory 2.1.1 reads the GAE advantages of the minibatch for its adv_min/adv_max
        # summaries, which do not exist with --with_vtrace True (the release's estimator) and would
        # crash the learner; give it the V-trace advantages instead, un-normalized as GAE's are.
        mb = train_loop_vars.mb
        if "advantages" not in mb:
            patched = AttrDict(mb)
            adv = train_loop_vars.get("adv")
            if adv is None:
                patched.advantages = torch.zeros(1)
            else:
                scale = torch.clamp_min(train_loop_vars.adv_std, ADVANTAGE_STD_FLOOR)  # as _calculate_losses
                patched.advantages = adv.detach() * scale + train_loop_vars.adv_mean
            train_loop_vars.mb = patched
        return super()._record_summaries(train_loop_vars)

    def _get_checkpoint_dict(self) -> dict[str, Any]:
        return plain_numbers(super()._get_checkpoint_dict())

    def _save_impl(self, name_prefix: str, name_suffix: str, keep_checkpoints: int, verbose: bool = True) -> bool:
        """sample-factory's save, with a temporary name outside the checkpoint patterns and a
        rotation that only counts real checkpoints of this kind (its own counts ``checkpoint_temp``,
        left by a killed save, and can then delete the newest real checkpoint) and keeps the files
        reported unreadable at resume."""
        if not self.is_initialized:
            return False
        checkpoint = self._get_checkpoint_dict()
        ckpt_dir = Path(self.checkpoint_dir(self.cfg, self.policy_id))
        name = f"{name_prefix}_{self.train_step:09d}_{self.env_steps}{name_suffix}.pth"
        path = ckpt_dir / name
        if verbose:
            log.info("Saving %s...", path)
        atomic_write(path, lambda tmp: torch.save(checkpoint, tmp))
        kind = "best" if name_prefix == "best" else "latest"
        rotating = [p for p in list_checkpoints(ckpt_dir, kind) if p not in self.unreadable]
        for old in rotating[: max(0, len(rotating) - int(keep_checkpoints))]:
            if verbose:
                log.debug("Removing %s", old)
            old.unlink(missing_ok=True)
        return True

    def save_best(self, policy_id: int, metric: str, metric_value: float) -> bool:
        # the runner passes np.mean(...) (numpy.float64): keep the learner's copy a Python float
        return super().save_best(policy_id, metric, float(metric_value))


class MaestroLearnerWorker(LearnerWorker):
    def __init__(self, evt_loop: Any, cfg: Any, env_info: Any, buffer_mgr: Any, batcher: Any, policy_id: int):
        super().__init__(evt_loop, cfg, env_info, buffer_mgr, batcher, policy_id=policy_id)
        # the learner is only configured here; its model and optimizer are built in init()
        self.learner = MaestroLearner(cfg, env_info, buffer_mgr.policy_versions, policy_id, self.param_server)


def _make_maestro_learner(runner: Any, event_loop: Any, policy_id: int, batcher: Any) -> MaestroLearnerWorker:
    return MaestroLearnerWorker(event_loop, runner.cfg, runner.env_info, runner.buffer_mgr, batcher,
                                policy_id=policy_id)


def _exit_when_it_fails(target: Any) -> None:
    """A worker process's body: an exception ends the process at once after its traceback is printed.

    Without this, a worker whose event loop raised (a learner failing in its ``init``, say) printed its traceback
    and stayed alive, held by its non-daemon threads, so the runner waited for its first heartbeat for minutes
    ("Components not started: LearnerWorker_p0") and a slurm job burned its allocation. Once the process is gone,
    :class:`rl_baseline.sf.train.ProcessWatchdog` sees it and ends the run."""
    # SIGTERM (slurm's scancel and preemption reach every process of the job) is the main process's to handle:
    # it stops the workers in order and the learner saves a checkpoint on the way (sample-factory's workers
    # already ignore SIGINT for the same reason)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        target()
    except Exception:  # noqa: BLE001 - any error of the worker ends it
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


class MaestroParallelRunner(ParallelRunner):
    _make_learner = _make_maestro_learner

    def _on_start(self) -> None:
        for proc in list(self.processes) + list(getattr(self.sampler, "processes", [])):
            inner = proc._process  # the multiprocessing.Process an EventLoopProcess wraps; not started yet
            inner._target = functools.partial(_exit_when_it_fails, inner._target)
        # the workers are spawned here (from a thread pool): they start with SIGINT and SIGTERM ignored, so a
        # Ctrl-C to the process group meanwhile ends no worker half-way through its start (a traceback, a
        # semaphore gone); this process gets it after, and sample-factory's loop stops the workers in order
        with signals_deferred():
            super()._on_start()


class MaestroSerialRunner(SerialRunner):
    _make_learner = _make_maestro_learner
