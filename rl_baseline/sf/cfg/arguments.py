"""1. parse: the release's spellings translated (:func:`_translate_argv`), sample-factory's parser with this
project's flags (:func:`parse_command_line`), a saved experiment under this command line
(:func:`with_saved_experiment`), and the list flags' values; as sample-factory's ``cfg/arguments.py``."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any, Optional, Sequence

from common.cli import ScriptParser
from common.skill_files import SkillFileError, check_same_skill_set
from common.vocabulary import SKILL_SET
from rl_baseline.flag_types import MOTIF_ENV, SKILL_ENV, ConfigError, parse_list_flag
from rl_baseline.sf.cfg.flags import (
    ENV_ALIASES,
    EVAL_FLAGS,
    PAPER_DEFAULTS,
    SAVED_EVAL_PROTOCOL,
    WANDB_SPELLINGS,
    add_maestro_args,
)


def _translate_argv(argv: Sequence[str]) -> list[str]:
    """Rewrites the release's spellings into sample-factory's (see :mod:`rl_baseline.sf.cfg`)."""
    out: list[str] = []
    args = list(argv)
    i = 0
    has_env = False
    while i < len(args):
        a = args[i]
        key, eq, val = a.partition("=")
        if key == "--env":
            has_env = True
            if eq:
                out.append(f"--env={ENV_ALIASES.get(val, val)}")
            elif i + 1 < len(args):
                out += ["--env", ENV_ALIASES.get(args[i + 1], args[i + 1])]
                i += 1
            else:
                out.append(a)
        elif key in WANDB_SPELLINGS:  # ONI's names of sample-factory's Weights & Biases flags
            out.append(WANDB_SPELLINGS[key] + (eq + val if eq else ""))
        elif key == "--device":
            v = val if eq else (args[i + 1] if i + 1 < len(args) else "")
            v = {"cuda": "gpu", "gpu": "gpu", "cpu": "cpu"}.get(v.split(":")[0].lower(), v)
            out += ["--device", v]
            if not eq:
                i += 1
        else:
            out.append(a)
        i += 1
    if not has_env:
        # a single-task root environment (Motif, ONI) without --env: the single-reward environment
        has_root = any(a == "--root_env" or a.startswith("--root_env=") for a in args)
        out = ["--env", MOTIF_ENV if has_root else SKILL_ENV] + out
    return out


def _default_device() -> str:
    try:
        import torch  # lazy: torch only when a GPU device is asked for

        return "gpu" if torch.cuda.is_available() else "cpu"
    except Exception:  # pragma: no cover - torch is a hard dependency
        return "cpu"


def parse_reward_dirs(value: Any) -> list[str]:
    return [str(v) for v in parse_list_flag(value, "--reward_dir")]


def parse_progress_scales(value: Any, num_skills: int) -> list[float]:
    """``--progress_scale``: one non-negative factor per skill; a single value applies to every skill."""
    items = parse_list_flag(value, "--progress_scale")
    try:
        scales = [float(v) for v in items]
    except (TypeError, ValueError):
        raise ConfigError(f"--progress_scale: expected numbers, got {value!r}") from None
    if len(scales) == 1:
        scales = scales * num_skills
    if len(scales) != num_skills:
        raise ConfigError(f"--progress_scale lists {len(scales)} values for {num_skills} skills")
    if any(not math.isfinite(v) or v < 0 for v in scales):
        raise ConfigError(f"--progress_scale: {value!r} holds a negative or non-finite factor")
    return scales


def parse_quantiles(value: Any, num_skills: int) -> list[float]:
    """Quantile list; a single value applies to every skill."""
    items = parse_list_flag(value, "--eps_threshold_quantile")
    try:
        quantiles = [float(v) for v in items]
    except (TypeError, ValueError):
        raise ConfigError(f"--eps_threshold_quantile: expected numbers, got {value!r}") from None
    if len(quantiles) == 1 and num_skills > 1:
        quantiles = quantiles * num_skills
    for q in quantiles:
        if not 0.0 <= q <= 1.0:
            raise ConfigError(f"--eps_threshold_quantile: {q} is not in [0, 1]")
    return quantiles


def parse_command_line(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    from sample_factory.cfg import arguments as sf_arguments  # lazy: sample-factory; --help stays light

    raw = list(sys.argv[1:] if argv is None else argv)
    argv = _translate_argv(raw)
    # sample-factory's parse_sf_args, on a parser whose refusals are one `error:` line (common.cli) rather
    # than argparse's usage block under "main.py: error:"
    parser = ScriptParser(prog="python -m scripts.main", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                          add_help=False)
    for add in (sf_arguments.add_basic_cli_args, sf_arguments.add_rl_args, sf_arguments.add_model_args,
                sf_arguments.add_default_env_args, sf_arguments.add_wandb_args, sf_arguments.add_pbt_args):
        add(parser)
    add_maestro_args(parser)
    parser.set_defaults(**PAPER_DEFAULTS, device=_default_device())
    cfg = sf_arguments.parse_full_cfg(parser, argv)
    if not any(a == "--env" or a.startswith("--env=") for a in raw):
        # --env was filled in for sample-factory's parser, not given: a saved experiment's own
        # environment (resume, evaluation) must win over this default
        cfg.cli_args.pop("env", None)
    # --skills chose this process's skill set before the parser ran (scripts/__init__.py); the paths are not a
    # setting of the run: its config records the set itself (derive_cfg: skill_set), and an evaluation elsewhere
    # must not inherit the training machine's paths
    vars(cfg).pop("skills", None)
    cfg.cli_args.pop("skills", None)
    return cfg


def skill_policy_config_dir(cfg: argparse.Namespace) -> Optional[str]:
    """With ``--skill_policy_dirs`` (evaluation with one network per skill) the saved configuration is the
    first skill network's: ``{train_dir}/{experiment}`` then only names where the results go."""
    if not cfg.evaluation:
        return None
    dirs = parse_list_flag(getattr(cfg, "skill_policy_dirs", "[]"), "--skill_policy_dirs")
    return str(dirs[0]) if dirs else None


#: flags whose default changed, with what a saved ``config.json`` written before the flag existed meant
#: (sample-factory fills a key missing from the file with today's default; these keep the old meaning)
SAVED_BEFORE_FLAG: dict[str, Any] = {"encoder_arch": "project"}
#: flags that shape the network (its inputs or its action head), with their value in a ``config.json`` written
#: before the flag existed: a saved run's checkpoints load only with the value it was trained with
NETWORK_SHAPE_FLAGS: dict[str, Any] = {"travel_actions": False, "stairs_input": False, "policy_heads": "shared"}


def _keep_saved_meanings(merged: Any, path: str) -> dict[str, Any]:
    """Sets the :data:`SAVED_BEFORE_FLAG` keys that the saved ``config.json`` at ``path`` does not hold; returns
    the saved file's content."""

    with open(path, encoding="utf-8") as fh:
        saved = json.load(fh)
    for key, value in SAVED_BEFORE_FLAG.items():
        if key not in saved:
            merged[key] = value
    return saved


def _check_network_shape(saved: dict[str, Any], explicit: dict[str, Any], path: str) -> None:
    """A flag of :data:`NETWORK_SHAPE_FLAGS` given with another value than the saved run's: its checkpoints
    would not load (their inputs or action head differ); refused naming the flag."""
    for key, before in NETWORK_SHAPE_FLAGS.items():
        if key not in explicit:
            continue
        trained = saved.get(key, before)
        if isinstance(before, bool):
            if bool(explicit[key]) == bool(trained):
                continue
            shape = f"its network has {'these' if trained else 'no such'} inputs or actions"
        else:
            if str(explicit[key]) == str(trained):
                continue
            shape = "its network's heads are shaped by it"
        raise ConfigError(f"--{key} {explicit[key]}: the run at {os.path.dirname(path)} was trained with --{key} "
                          f"{trained}, and {shape}; drop --{key} (the saved value is used) or use another --experiment")


def check_saved_skill_set(saved: dict[str, Any], run_dir: str) -> None:
    """A skill-environment run resumed or evaluated with another skill set than it recorded (its one-hot, its
    reward models and its policies over skills are the set's): :class:`ConfigError` naming both sets. A run
    made before runs recorded their set was made with the designed five; a Motif single-reward run has no skills."""
    if saved.get("env", SKILL_ENV) != SKILL_ENV:
        return
    try:
        check_same_skill_set(saved.get("skill_set"), SKILL_SET, where=run_dir)
    except SkillFileError as exc:
        raise ConfigError(str(exc)) from None


def check_run_skill_set(run_dir: str | os.PathLike) -> None:
    """:func:`check_saved_skill_set` on the run saved in ``run_dir`` (its ``config.json``), for a tool that refuses
    before its own work; :class:`ConfigError` for a config.json that cannot be read too."""
    path = os.path.join(run_dir, "config.json")
    try:
        with open(path, encoding="utf-8") as fh:
            saved = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None
    check_saved_skill_set(saved if isinstance(saved, dict) else {}, str(run_dir))


def with_saved_experiment(cfg: argparse.Namespace, required: bool,
                           config_dir: Optional[str] = None) -> argparse.Namespace:
    """The saved ``{train_dir}/{experiment}/config.json`` (or ``{config_dir}/config.json``) with this command's
    flags on top (as sample-factory's own loaders do); an evaluation's flags (:data:`EVAL_FLAGS`) come from this
    command, except those of :data:`SAVED_EVAL_PROTOCOL` that it does not give and the training command chose
    (listed in ``eval_flags_from_saved``). Without a saved experiment: ``cfg`` itself, or :class:`ConfigError` if
    ``required``."""
    from sample_factory.cfg.arguments import load_from_checkpoint  # lazy: sample-factory; --help stays light

    # sample-factory's own cfg_file() creates the experiment folder: a mistyped command must not
    path = os.path.join(config_dir or os.path.join(cfg.train_dir, cfg.experiment), "config.json")
    if not os.path.isfile(path):
        if required:
            raise ConfigError(f"no saved experiment at {path}: --train_dir and --experiment must name a trained "
                              "run ({train_dir}/{experiment}/config.json, written by scripts.main)")
        return cfg
    explicit = dict(cfg.cli_args)
    evaluation = bool(cfg.evaluation)
    source = cfg
    if config_dir is not None:
        source = argparse.Namespace(**vars(cfg))
        source.train_dir, source.experiment = os.path.dirname(os.path.abspath(config_dir)), os.path.basename(
            os.path.abspath(config_dir))
    try:
        merged = load_from_checkpoint(source)
    except Exception as exc:  # sample-factory raises a bare Exception for an unreadable config.json
        raise ConfigError(f"{path}: cannot be read ({exc})") from exc
    saved = _keep_saved_meanings(merged, path)
    check_saved_skill_set(saved, os.path.dirname(path))
    _check_network_shape(saved, explicit, path)
    chosen = merged.get("cli_args") or {}  # the training command's own flags, as sample-factory saved them
    from_saved = [k for k in SAVED_EVAL_PROTOCOL if k in chosen and k not in explicit] if evaluation else []
    invocation = {k: getattr(cfg, k) for k in EVAL_FLAGS if evaluation and hasattr(cfg, k) and k not in from_saved}
    for key, value in {**invocation, **explicit}.items():
        merged[key] = value
    if config_dir is not None:  # the results go to this command's experiment, not to the skill network's
        merged.train_dir, merged.experiment = cfg.train_dir, cfg.experiment
    merged.evaluation = evaluation
    if evaluation:  # said in the evaluation's start line
        merged.eval_flags_from_saved = {k: merged[k] for k in from_saved}
    return merged

