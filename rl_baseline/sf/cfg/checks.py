"""3. validate: the command line's own flags (:func:`check_command_line`), flag values and combinations
(:func:`check_flags`), what a run needs of this machine (:func:`check_machine`) and the files it reads
(:func:`check_files`); each refusal a :class:`ConfigError` naming the flag or the file (exit status 2)."""
from __future__ import annotations

import argparse
import logging
import os
from typing import Any, Optional, Sequence

from code_generation.loader import module_path, refuse_instant_endings
from common.flag_checks import TRAINING_SIZES, FlagError, at_least, check_training_sizes, positive_finite, worker_count
from common.llm import BackendError
from common.nethack import game_clock
from common.precision import PrecisionError, resolve_precision
from common.vocabulary import ALL_TASKS, EVAL_TASKS, NUM_SKILLS, SKILLS
from rl_baseline.baselines.flags import check_baseline_flags, check_embedding_model, check_skill_policies
from rl_baseline.baselines.llm_policy.client import check_backend
from rl_baseline.flag_types import MOTIF_ENV, SKILL_ENV, ConfigError, parse_list_flag
from rl_baseline.sf.cfg.env_config import meta_llm_settings, meta_policy_task, uses_meta_policy
from rl_baseline.sf.cfg.flags import NO_TASK, ONLINE_REWARD_TYPES, ROOT_ENVS
from rl_baseline.skills.meta_policy import MetaPolicyConfig
from rl_baseline.skills.meta_policy import load as load_meta_policy

logger = logging.getLogger(__name__)

def check_eval_args(cfg: Any) -> None:
    """The evaluation flags; :class:`ConfigError` (exit status 2) naming the flag."""
    from rl_baseline.tasks.release_protocol import PROTOCOLS  # lazy: imports NLE

    protocol = getattr(cfg, "eval_protocol", "release")
    if protocol not in PROTOCOLS:
        raise ConfigError(f"--eval_protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    checks = (
        ("eval_env_steps", "a budget of env steps summed over the --eval_num_envs games"),
        ("eval_stats_avg", "the number of last finished episodes averaged"),
        ("eval_num_envs", "the number of games stepped together"),
        ("eval_episodes", "the number of episodes of --eval_protocol project"),
    )
    for name, what in checks:
        value = getattr(cfg, name, None)
        if value is None or int(value) < 1:
            raise ConfigError(f"--{name} must be at least 1 ({what}), got {value}")
    kind = getattr(cfg, "eval_policy", "trained") or "trained"
    if kind != "trained":
        if parse_list_flag(getattr(cfg, "skill_policy_dirs", "[]") or "[]", "--skill_policy_dirs"):
            raise ConfigError(f"--eval_policy {kind} with --skill_policy_dirs: the reference policies are one "
                              "network (or none); evaluate them without --skill_policy_dirs")
        if getattr(cfg, "meta_policy", "code") != "code":
            raise ConfigError(f"--eval_policy {kind} with --meta_policy {cfg.meta_policy}: the references run "
                              "under the task's generated policy over skills (--meta_policy code)")
        if getattr(cfg, "eval_skill", NO_TASK) not in (None, NO_TASK):
            raise ConfigError(f"--eval_policy {kind} with --eval_skill: the forced-skill evaluation runs all "
                              "three policies itself (python -m scripts.skill_report)")
    explicit = getattr(cfg, "cli_args", None) or {}
    if protocol == "release" and "eval_episodes" in explicit:
        raise ConfigError(
            "--eval_episodes counts the episodes of --eval_protocol project; the release protocol (the default) "
            "runs a budget of --eval_env_steps env steps and averages the last --eval_stats_avg finished "
            "episodes. Pass --eval_protocol project to evaluate a number of episodes."
        )


def check_command_line(cfg: argparse.Namespace) -> None:
    """What this command's own flags get wrong, reported before a saved experiment is read: names
    of skills, tasks and environments, and (evaluating) the evaluation flags."""

    if cfg.env not in (SKILL_ENV, MOTIF_ENV):
        raise ConfigError(f"--env {cfg.env!r}: use {SKILL_ENV} (skills) or {MOTIF_ENV} (Motif single reward)")
    if getattr(cfg, "discoverer_turns", None) is not None and cfg.discoverer_turns < 1:
        raise ConfigError(f"--discoverer_turns {cfg.discoverer_turns}: a budget of at least 1 game turn")
    for lever, what in (("travel_actions", "the travel actions extend the skill environment's action set"),
                        ("stairs_input", "the staircase input comes from the skill runtime's memory of the map")):
        if getattr(cfg, lever, False) and cfg.env != SKILL_ENV:
            raise ConfigError(f"--{lever} True: {what} ({SKILL_ENV}); --env {cfg.env} (root env {cfg.root_env}) "
                              "plays with its own")
    games = getattr(cfg, "games_per_env", 1)  # at least 1: check_flags' training sizes
    if games > 1 and cfg.env != SKILL_ENV:
        raise ConfigError(f"--games_per_env {games}: games step together so that their policy over skills decides "
                          f"in one request, which only {SKILL_ENV} has; --env {cfg.env} steps one game per "
                          "environment (give --num_envs_per_worker the games instead)")
    gamma = getattr(cfg, "gamma", None)
    if gamma is not None and not 0.0 < float(gamma) <= 1.0:
        raise ConfigError(f"--gamma {gamma}: a discount in (0, 1] (the release's 0.99; screened: 0.998)")
    if getattr(cfg, "policy_heads", "shared") == "per_skill":
        if cfg.env != SKILL_ENV:
            raise ConfigError(f"--policy_heads per_skill: a head per skill is picked by the active skill, which only "
                              f"{SKILL_ENV} has; --env {cfg.env} (root env {cfg.root_env}) trains one reward")
        if not getattr(cfg, "actor_critic_share_weights", True):
            raise ConfigError("--policy_heads per_skill is built on the shared-weights actor-critic: drop "
                              "--actor_critic_share_weights False")
    if cfg.eval_target != NO_TASK and cfg.eval_target not in ALL_TASKS:
        raise ConfigError(f"--eval_target {cfg.eval_target!r}: expected one of {', '.join(ALL_TASKS)} or none")
    if getattr(cfg, "reward_encoder", None) is not None:
        from rlaif.reward_arch import arch_of_reward_encoder  # lazy: imports torch

        try:
            arch_of_reward_encoder(cfg.reward_encoder)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
    eval_skill = getattr(cfg, "eval_skill", NO_TASK) or NO_TASK
    if eval_skill != NO_TASK and eval_skill not in SKILLS:
        raise ConfigError(f"--eval_skill {eval_skill!r}: expected one of {', '.join(SKILLS)} or none")
    check_meta_policy_flags(cfg)
    try:
        pinned = game_clock.parse_game_clock(getattr(cfg, "game_clock", game_clock.REAL) or game_clock.REAL)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if pinned is not None and not cfg.evaluation:
        raise ConfigError(f"--game_clock {cfg.game_clock!r} pins the clock of an evaluation (--evaluation True); "
                          f"training keeps the machine's clock, as the release does (--game_clock {game_clock.REAL})")
    if cfg.evaluation and eval_skill == NO_TASK:
        check_eval_args(cfg)
    elif cfg.evaluation:  # forced-skill evaluation: a number of episodes, whatever --eval_protocol says
        for name in ("eval_episodes", "eval_num_envs"):
            if int(getattr(cfg, name)) < 1:
                raise ConfigError(f"--{name} must be at least 1, got {getattr(cfg, name)}")


def check_meta_policy_flags(cfg: argparse.Namespace) -> None:
    """``--meta_policy llm`` (the hierarchical LLM policy): an evaluation of the skill environment on a task,
    with a backend that can work here (checked without loading a model); :class:`ConfigError` naming the flag."""

    if getattr(cfg, "meta_policy", "code") != "llm":
        return
    if not cfg.evaluation:
        raise ConfigError("--meta_policy llm is an evaluation of trained skills: pass --evaluation True")
    if (getattr(cfg, "eval_skill", NO_TASK) or NO_TASK) != NO_TASK:
        raise ConfigError("--meta_policy llm chooses skills; --eval_skill holds one: pass only one of them")
    if cfg.env != SKILL_ENV:
        raise ConfigError(f"--meta_policy llm needs the skill environment (--env {SKILL_ENV}), not {cfg.env}")
    if cfg.eval_target not in EVAL_TASKS:
        raise ConfigError(f"--meta_policy llm needs --eval_target set to an evaluation task ({', '.join(EVAL_TASKS)}), "
                          f"got {cfg.eval_target!r}")
    if not getattr(cfg, "meta_llm_backend", None):
        raise ConfigError("--meta_policy llm needs --meta_llm_backend: vllm, openai (with --meta_llm_base_url), hf, "
                          "transformers, replay (with --meta_llm_replay) or stand_in (a rule-based stand-in, no LLM)")

    try:
        check_backend(meta_llm_settings(cfg), flag_prefix="--meta_llm_")
    except BackendError as exc:
        raise ConfigError(str(exc)) from exc


def check_flags(cfg: argparse.Namespace) -> None:
    """Flag values and combinations that cannot work; :class:`ConfigError` naming the flag."""
    from rl_baseline.skills.intrinsic_reward import (  # lazy: numpy and the reward runtime; not for --help
        RewardConfigError,
        check_msg_max_keys,
    )

    if cfg.env not in (SKILL_ENV, MOTIF_ENV):
        raise ConfigError(f"--env {cfg.env!r}: use {SKILL_ENV} (skills) or {MOTIF_ENV} (Motif single reward)")
    if cfg.env == MOTIF_ENV and cfg.root_env not in ROOT_ENVS:
        raise ConfigError(f"--root_env {cfg.root_env!r}: expected one of {', '.join(ROOT_ENVS)}")
    if not 1 <= cfg.num_skills <= NUM_SKILLS:
        raise ConfigError(f"--num_skills {cfg.num_skills}: must be between 1 and {NUM_SKILLS}")
    if getattr(cfg, "skill_reward", "llm") == "progress" and (
            cfg.env != SKILL_ENV or getattr(cfg, "llm_reward_type", None) not in (None, "motif")):
        raise ConfigError(f"--skill_reward progress pays the skills of the skill environment ({SKILL_ENV}) their own "
                          "measures; it does not combine with --env "
                          f"{cfg.env} or --llm_reward_type {getattr(cfg, 'llm_reward_type', None)}")
    if cfg.eval_target != NO_TASK and cfg.eval_target not in ALL_TASKS:
        raise ConfigError(f"--eval_target {cfg.eval_target!r}: expected one of {', '.join(ALL_TASKS)} or none")
    eval_skill = cfg.eval_skill
    if eval_skill != NO_TASK and eval_skill not in SKILLS:
        raise ConfigError(f"--eval_skill {eval_skill!r}: expected one of {', '.join(SKILLS)} or none")
    if eval_skill != NO_TASK and SKILLS.index(eval_skill) >= int(cfg.num_skills):
        raise ConfigError(f"--eval_skill {eval_skill}: this policy was trained with {cfg.num_skills} skill(s) "
                          f"({', '.join(SKILLS[:int(cfg.num_skills)])}), not with {eval_skill}")
    if getattr(cfg, "eval_start_depth", -1) == 0 or getattr(cfg, "eval_start_depth", -1) > 50:
        raise ConfigError(f"--eval_start_depth {cfg.eval_start_depth}: a dungeon level from 1 to 50, or -1")
    if eval_skill != NO_TASK and not cfg.evaluation:
        raise ConfigError("--eval_skill holds the policy on one skill during evaluation: pass --evaluation True")
    if cfg.evaluation and eval_skill == NO_TASK and cfg.eval_target not in EVAL_TASKS and cfg.env != MOTIF_ENV:
        raise ConfigError(
            f"--evaluation True needs --eval_target set to an evaluation task ({', '.join(EVAL_TASKS)}), "
            f"got {cfg.eval_target!r}"
        )
    try:
        at_least("max_episode_steps", cfg.max_episode_steps, 1)
        # training only: an evaluation reads a saved run whose budget is spent
        check_training_sizes(cfg, None if not cfg.evaluation else
                             [n for n, _ in TRAINING_SIZES if n != "train_for_env_steps"])
        if not cfg.evaluation:
            positive_finite("learning_rate", getattr(cfg, "learning_rate", 1e-4), "the learner's step size")
    except FlagError as exc:
        raise ConfigError(str(exc)) from exc
    check_meta_policy_flags(cfg)  # again: the saved experiment may have changed --env
    try:
        check_msg_max_keys(cfg.msg_max_keys)
    except RewardConfigError as exc:
        raise ConfigError(str(exc)) from exc
    reward_type = getattr(cfg, "llm_reward_type", None)
    if reward_type == "none" and cfg.llm_reward != 0.0:
        raise ConfigError(f"--llm_reward_type none gives no intrinsic reward: pass --llm_reward_coeff 0, not {cfg.llm_reward}")
    if reward_type in ONLINE_REWARD_TYPES:
        if cfg.llm_reward == 0.0:
            raise ConfigError(f"--llm_reward_type {reward_type} with --llm_reward_coeff 0 gives no intrinsic reward; "
                              "use --llm_reward_type none for the game reward alone")
        if not cfg.evaluation and not getattr(cfg, "llm_server_addr", None):
            raise ConfigError(f"--llm_reward_type {reward_type} labels messages with an LLM server: pass "
                              "--llm_server_addr HOST (and --llm_server_port, default 9001); start one with "
                              "scripts/launch_llm_server.sh")
        try:
            for name in ("llm_batch_size", "reward_model_batch_size", "llm_max_tokens", "llm_concurrency"):
                at_least(name, getattr(cfg, name), 1)
        except FlagError as exc:
            raise ConfigError(str(exc)) from exc
        if not 0.0 <= float(cfg.classification_threshold) <= 1.0:
            raise ConfigError(f"--classification_threshold {cfg.classification_threshold}: a probability in [0, 1]")
    check_baseline_flags(cfg)


def check_machine(cfg: Any) -> None:
    """What the run needs of this machine, checked when it is about to run (a bare parse checks the command
    alone, so a command written for another machine still parses here): a training run's ``--precision bf16``
    needs bfloat16 on its processor or GPU; an evaluation runs what this machine has (:func:`rl_baseline.sf.cfg.derive.precision_choice`).
    :class:`ConfigError` naming the flag."""
    if cfg.evaluation:
        return
    try:
        worker_count("num_workers", cfg.num_workers, "rollout worker processes")
    except FlagError as exc:
        raise ConfigError(str(exc)) from exc
    try:
        resolve_precision(getattr(cfg, "precision", "fp32") or "fp32", cfg.device)
    except PrecisionError as exc:
        raise ConfigError(str(exc)) from exc


def reward_thresholds(reward_dirs: Sequence[str], quantiles: Sequence[float],
                      skills: Optional[Sequence[str]] = None) -> tuple[list[Any], list[float]]:
    """The reward models of ``reward_dirs`` and each one's threshold at its quantile (one quantile per
    directory); :class:`ConfigError` naming the directory or the quantile that is not there. With ``skills`` (the
    slots' skills, in order), a model whose checkpoint records another skill is refused, naming the slot."""
    from rl_baseline.skills.intrinsic_reward import RewardConfigError, load_reward_models  # lazy: loads torch models

    if len(quantiles) != len(reward_dirs):
        raise ConfigError(f"--eps_threshold_quantile lists {len(quantiles)} values for {len(reward_dirs)} reward "
                          "directories: give one per reward directory, or one for all")
    for d in reward_dirs:
        if not os.path.isdir(d):
            raise ConfigError(f"--reward_dir: reward directory not found: {d}")
    try:
        models = load_reward_models(list(reward_dirs))
    except RewardConfigError as exc:
        raise ConfigError(str(exc)) from exc
    for slot, (d, model, want) in enumerate(zip(reward_dirs, models, skills or ())):
        recorded = str(getattr(model, "skill", "") or "")
        if recorded and recorded != want:
            order = ", ".join(skills or ())
            raise ConfigError(f"--reward_dir slot {slot + 1} is the {want}'s, but {d} holds the {recorded}'s reward "
                              f"model (its checkpoint records it); give one directory per skill in skill order: "
                              f"{order}")
    thresholds: list[float] = []
    for d, model, q in zip(reward_dirs, models, quantiles):
        try:
            thresholds.append(float(model.threshold(q)))
        except ValueError as exc:
            raise ConfigError(f"--eps_threshold_quantile {q} for {d}: {exc}") from exc
        if thresholds[-1] <= 0.0:
            # (r >= threshold) * r then pays the messages scored between the threshold and 0 a
            # negative reward: staying alive costs, dying early is rewarded. It happens when most
            # annotator labels are ties (the scores bunch up); the authors' released thresholds are 0.9-1.3.
            logger.warning("%s: the reward threshold at quantile %.2f is %.4f (not above 0): the skill's messages "
                           "scored between it and 0 are rewarded negatively (check the annotator's label shares "
                           "and the skill's intrinsic/*_nonzero_frac)", d, q, thresholds[-1])
    return models, thresholds


def check_files(cfg: Any) -> list[float]:
    """The files the run reads, before any worker starts: every reward model loads and has its
    quantile, the meta-policy module passes the code check. Returns the per-skill thresholds."""
    thresholds: list[float] = []
    check_skill_policies(cfg)
    if getattr(cfg, "llm_reward_type", None) == "embedding":
        check_embedding_model(cfg)
    if (getattr(cfg, "llm_reward_type", None) in ONLINE_REWARD_TYPES + ("none", "embedding")
            or getattr(cfg, "skill_reward", "llm") == "progress"):
        return thresholds  # no reward model on disk: the labels come online, there is no intrinsic reward, or
        # the reward is a sentence embedding's similarity
    if cfg.llm_reward != 0.0 or cfg.reward_dirs:
        if not cfg.reward_dirs:
            raise ConfigError(f"--llm_reward is {cfg.llm_reward} but --reward_dir lists no reward model")
        if len(cfg.reward_dirs) != cfg.num_skills:
            raise ConfigError(
                f"--reward_dir lists {len(cfg.reward_dirs)} reward directories but --num_skills is {cfg.num_skills}: "
                "give one reward directory per skill, in skill order"
            )
        if len(cfg.threshold_quantiles) != cfg.num_skills:
            raise ConfigError(f"--eps_threshold_quantile lists {len(cfg.threshold_quantiles)} values but "
                              f"--num_skills is {cfg.num_skills}")
    if cfg.reward_dirs:
        models, thresholds = reward_thresholds(cfg.reward_dirs, cfg.threshold_quantiles,
                                               SKILLS[:int(cfg.num_skills)] if cfg.env == SKILL_ENV else None)
        if getattr(cfg, "reward_encoder", None) is not None:
            from rlaif.reward_arch import arch_of_reward_encoder  # lazy: imports torch

            want = arch_of_reward_encoder(cfg.reward_encoder)
            for d, model in zip(cfg.reward_dirs, models):
                arch = getattr(model.model.config, "arch", None)
                if arch != want:
                    raise ConfigError(f"--reward_encoder {cfg.reward_encoder} is the {want} reward network, but {d} "
                                      f"holds a {arch} one ({model.checkpoint_path}); train it with "
                                      f"python -m scripts.train_reward --reward_encoder {cfg.reward_encoder}, or drop "
                                      "--reward_encoder")
    if uses_meta_policy(cfg):

        task = meta_policy_task(cfg)
        try:
            policy = load_meta_policy(task, cfg.code_seed, root=cfg.meta_policy_root, config=MetaPolicyConfig(
                trust_generated_code=bool(getattr(cfg, "trust_generated_code", False))))
            # a start as an episode's: a module that cannot even start (a file cut short that still
            # parses, say) is refused here rather than replaced by the fallback skill all run long
            policy.next_skill(policy.initial_skill, 1, 0, False, False)
            # a skill of the set that the module's skill_termination does not know would end at every step
            refuse_instant_endings(policy.host, module_path(task, cfg.code_seed, cfg.meta_policy_root))
        except Exception as exc:  # the loader reports missing files and bad generated code
            raise ConfigError(f"meta-policy for task {task!r}, --code_seed {cfg.code_seed}: {exc}") from exc
        if policy.num_errors:
            raise ConfigError(f"{module_path(task, cfg.code_seed, cfg.meta_policy_root)}: the policy over skills raised "
                              f"{policy.num_errors} exception(s) when an episode started (see the warnings above); "
                              "fix or regenerate it (python -m scripts.generate_code / scripts.combine)")
    return thresholds

