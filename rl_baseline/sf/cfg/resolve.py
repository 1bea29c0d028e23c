"""The entry points: :func:`resolve_cfg` (``scripts.main``), :func:`parse_cfg` (a command line alone) and
:func:`resolve_experiment_cfg` (a saved experiment), each parse, derive, validate once
(:mod:`rl_baseline.sf.cfg`); the phases take the finished configuration (:func:`require_resolved`)."""
from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Any, Optional, Sequence

from rl_baseline.flag_types import ConfigError
from rl_baseline.sf.cfg.arguments import parse_command_line, skill_policy_config_dir, with_saved_experiment
from rl_baseline.sf.cfg.checks import check_command_line, check_files, check_flags, check_machine
from rl_baseline.sf.cfg.derive import derive_cfg

logger = logging.getLogger(__name__)

def resolve_cfg(argv: Optional[Sequence[str]] = None, saved: bool = True, files: bool = True) -> argparse.Namespace:
    """The finished configuration of ``scripts.main``: parse, derive, validate (:mod:`rl_baseline.sf.cfg`).

    ``saved``: merge a saved experiment (evaluation requires one, training resumes one);
    ``files``: check the reward models and the meta-policy module; both: a run here, so also what it needs of
    this machine (:func:`check_machine`). Raises :class:`ConfigError`.
    """
    cfg = parse_command_line(argv)
    check_command_line(cfg)
    if saved and (cfg.evaluation or cfg.restart_behavior == "resume"):
        cfg = with_saved_experiment(cfg, required=bool(cfg.evaluation), config_dir=skill_policy_config_dir(cfg))
    derive_cfg(cfg)
    check_flags(cfg)
    if saved and files:  # a run on this machine
        check_machine(cfg)
    cfg.reward_thresholds = check_files(cfg) if files else None
    cfg.resolved = bool(saved and files)
    if cfg.resolved:  # a run's banner line (a bare parse, for a plan or a tool, stays quiet)
        fell_back = cfg.compute_precision != cfg.precision and cfg.precision != "auto"
        (logger.warning if fell_back else logger.info)("precision: %s", cfg.precision_reason)
    return cfg


def parse_cfg(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line alone, derived and checked (no saved experiment, no files, not this machine's
    processor): for checking commands (the pipeline's plan, the commands of README.md and docs/) and for tools
    that build on flags (:func:`check_machine` before running on this machine what they build)."""
    return resolve_cfg(argv, saved=False, files=False)


def resolve_experiment_cfg(policy_dir: str | os.PathLike, overrides: Sequence[str] = (), evaluation: bool = True,
                           files: bool = True) -> argparse.Namespace:
    """The finished configuration of the experiment saved in ``policy_dir`` (``{train_dir}/{experiment}``),
    ``overrides`` (e.g. ``["--eval_skill", "descender"]``) on top; ``evaluation`` False gives the
    training environment. :class:`ConfigError` names the folder when it holds no experiment."""

    policy_dir = Path(policy_dir)
    if not (policy_dir / "config.json").is_file():
        raise ConfigError(f"--policy_dir {policy_dir}: no config.json there; expected the folder of a trained "
                          "experiment, {train_dir}/{experiment}, as written by scripts.main")
    argv = ["--train_dir", str(policy_dir.parent), "--experiment", policy_dir.name,
            "--evaluation", str(bool(evaluation)), *overrides]
    cfg = parse_command_line(argv)
    check_command_line(cfg)
    cfg = with_saved_experiment(cfg, required=True)
    derive_cfg(cfg)
    check_flags(cfg)
    if files:  # a run on this machine
        check_machine(cfg)
    cfg.reward_thresholds = check_files(cfg) if files else None
    cfg.resolved = files
    return cfg


def require_resolved(cfg: Any, what: str) -> None:
    """Phases take a finished configuration; a half-built one is a programming error."""
    if not getattr(cfg, "resolved", False):
        raise ConfigError(f"{what} needs the configuration from rl_baseline.sf.cfg.resolve_cfg "
                          "(parsed, derived and validated once)")

