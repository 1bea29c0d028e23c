"""2. derive: the values computed from the flags (the reward lists, the skill count, the reward and pixel scales in
sample-factory's terms, the precision this machine runs), idempotent on a saved configuration."""
from __future__ import annotations

import argparse
import math
import os
from typing import Any

from common.precision import PrecisionChoice, PrecisionError, resolve_precision
from common.vocabulary import NUM_SKILLS, SKILL_SET
from rl_baseline.baselines.flags import derive_baseline_cfg
from rl_baseline.flag_types import MOTIF_ENV, SKILL_ENV, ConfigError, parse_list_flag
from rl_baseline.sf.cfg.arguments import parse_progress_scales, parse_quantiles, parse_reward_dirs
from rl_baseline.sf.cfg.flags import (
    DEFAULT_QUANTILES,
    MOTIF_EPISODE_STEPS,
    NO_TASK,
    ONI_DIR,
    ONI_ENVS,
    ONLINE_REWARD_TYPES,
    SKILL_EPISODE_STEPS,
)


def derive_cfg(cfg: argparse.Namespace) -> argparse.Namespace:
    """Values computed from flags; running it again on its own output changes nothing."""
    explicit = getattr(cfg, "cli_args", None) or {}
    if (cfg.env == MOTIF_ENV and cfg.root_env in ONI_ENVS and "reward_scale" not in explicit
            and getattr(cfg, "game_reward_scale", None) is None):
        cfg.reward_scale = 1.0  # ONI's default (the paper default 0.1 is MaestroMotif's and Motif's)
    if float(cfg.reward_scale) != 1.0:
        # the release's --reward_scale scales the game reward only; the skill reward enters unscaled
        # (sample-factory 2 would scale the env's whole reward, making --llm_reward 0.1 an effective 0.01)
        cfg.game_reward_scale = float(cfg.reward_scale)
        cfg.reward_scale = 1.0
    elif getattr(cfg, "game_reward_scale", None) is None:
        cfg.game_reward_scale = 1.0
    if float(cfg.obs_scale) != 1.0:
        # the release's --obs_scale 255 is the encoder's pixel scale (see :mod:`rl_baseline.sf.cfg`)
        cfg.encoder_obs_scale = float(cfg.obs_scale)
        cfg.obs_scale = 1.0
    if cfg.num_skills is None:
        cfg.num_skills = NUM_SKILLS if cfg.env == SKILL_ENV else 1
    if not getattr(cfg, "skill_set", None):
        # the run's record of its skill set (names, indexes, files' sha256), saved in config.json with the rest;
        # a saved run keeps the set it was made with (with_saved_experiment refused another)
        cfg.skill_set = SKILL_SET.record()
    oni_env = cfg.env == MOTIF_ENV and cfg.root_env in ONI_ENVS
    if getattr(cfg, "max_episode_steps", None) is None:
        cfg.max_episode_steps = MOTIF_EPISODE_STEPS if cfg.env == MOTIF_ENV else SKILL_EPISODE_STEPS
    cfg.eval_skill = getattr(cfg, "eval_skill", NO_TASK) or NO_TASK
    choice = precision_choice(cfg)
    cfg.compute_precision, cfg.precision_reason = choice.precision, choice.reason
    reward_type = getattr(cfg, "llm_reward_type", None)
    if reward_type in ONLINE_REWARD_TYPES:
        cfg.online_store_dir = os.path.join(cfg.train_dir, cfg.experiment, ONI_DIR)
        if oni_env and "msg_max_keys" not in explicit:
            cfg.msg_max_keys = -1  # ONI counts a message over the whole episode
        # ELLM-BoW's similarity threshold is ONI's --eps_threshold_quantile (-0.5 by default)
        cfg.bow_threshold = (float(parse_list_flag(cfg.eps_threshold_quantile, "--eps_threshold_quantile")[0])
                             if "eps_threshold_quantile" in explicit else -0.5)
    else:
        cfg.online_store_dir = None
    derive_baseline_cfg(cfg)
    cfg.progress_scales = parse_progress_scales(getattr(cfg, "progress_scale", "1.0"), cfg.num_skills)
    if getattr(cfg, "skill_reward", "llm") != "progress" and any(v != 1.0 for v in cfg.progress_scales):
        raise ConfigError("--progress_scale weighs the privileged diagnostic's measures: it needs "
                          "--skill_reward progress")
    stairs = float(getattr(cfg, "progress_stairs_reward", 0.0))
    if not math.isfinite(stairs) or stairs < 0:
        raise ConfigError(f"--progress_stairs_reward {stairs}: a non-negative number of levels")
    if stairs and getattr(cfg, "skill_reward", "llm") != "progress":
        raise ConfigError("--progress_stairs_reward pays the privileged diagnostic's descender: it needs "
                          "--skill_reward progress")
    if (reward_type in ONLINE_REWARD_TYPES or reward_type in ("none", "embedding")
            or getattr(cfg, "skill_reward", "llm") == "progress"):
        cfg.reward_dirs, cfg.threshold_quantiles = [], []  # progress: the skills' own measures, no model
        return cfg
    cfg.reward_dirs = parse_reward_dirs(cfg.reward_dir)
    cfg.threshold_quantiles = parse_quantiles(cfg.eps_threshold_quantile, cfg.num_skills)
    if cfg.eps_threshold_quantile == DEFAULT_QUANTILES:
        cfg.threshold_quantiles = cfg.threshold_quantiles[: cfg.num_skills]
    if cfg.llm_reward == 0.0 and not cfg.reward_dirs:
        cfg.threshold_quantiles = []
    return cfg


def precision_choice(cfg: Any) -> PrecisionChoice:
    """The precision this machine runs ``--precision`` with (:func:`common.precision.resolve_precision`); a
    ``bf16`` it cannot run is fp32 here, with the reason (:func:`rl_baseline.sf.cfg.checks.check_machine` refuses it for training)."""
    requested = getattr(cfg, "precision", "fp32") or "fp32"
    try:
        return resolve_precision(requested, getattr(cfg, "device", "cpu"))
    except PrecisionError as exc:
        return PrecisionChoice("fp32", f"fp32 instead of {requested}: {exc}")

