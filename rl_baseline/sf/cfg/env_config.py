"""What a finished configuration means for the environments and the evaluation: :class:`SkillEnvConfig`, what an
environment process needs to build one skill environment, and the questions it is built from (a forced skill, the
meta-policy's task, the LLM policy's settings, where an evaluation writes)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

from common.llm import CODER_MODEL
from common.vocabulary import EVAL_TASKS, NUM_SKILLS, SKILL_SPECS, SKILLS
from rl_baseline.baselines.flags import task_reward_task, training_skill
from rl_baseline.baselines.llm_policy.client import LLMSettings
from rl_baseline.baselines.oni.prompts import goal_text
from rl_baseline.flag_types import MOTIF_ENV, SKILL_ENV
from rl_baseline.sf.cfg.flags import ASCENDER_START_DEPTH, NO_TASK, SF1_REWARD_CLIP, SKILL_EPISODE_STEPS
from rl_baseline.skills import MSG_MAX_KEYS


def forced_skill(cfg: Any) -> Optional[str]:
    """The skill held by a forced-skill evaluation (``--evaluation True --eval_skill S``), else None."""
    skill = getattr(cfg, "eval_skill", NO_TASK) or NO_TASK
    return skill if cfg.evaluation and skill != NO_TASK else None


def eval_start_depth(cfg: Any) -> int:
    """The dungeon level forced-skill episodes start on (1 outside a forced-skill evaluation)."""
    skill = forced_skill(cfg)
    if skill is None:
        return 1
    depth = int(getattr(cfg, "eval_start_depth", -1))
    if depth < 0:
        # a skill that ends by going up (the ascender) needs levels above it to climb
        return ASCENDER_START_DEPTH if SKILL_SPECS[skill].end == "depth_decrease" else 1
    return depth


def evaluates_root_env(cfg: Any) -> bool:
    """``--evaluation True`` of a Motif run (``--env nle_fixed_eat_action``) without a MaestroMotif task or a
    forced skill: the success of its ``--root_env`` task (:func:`rl_baseline.sf.evaluate.evaluate_root_env`)."""

    return bool(cfg.evaluation) and cfg.env == MOTIF_ENV and cfg.eval_target not in EVAL_TASKS and \
        forced_skill(cfg) is None


def uses_meta_policy(cfg: Any) -> bool:
    return (cfg.env == SKILL_ENV and cfg.num_skills > 1 and cfg.eval_target != NO_TASK and cfg.code_seed >= 0
            and forced_skill(cfg) is None and training_skill(cfg) is None)


def meta_policy_task(cfg: Any) -> str:
    """Training runs the exploration policy; evaluation the target task's policy."""
    return cfg.eval_target if cfg.evaluation else "exploration"


@dataclass
class SkillEnvConfig:
    """What an environment process needs to build one skill environment."""

    env: str = SKILL_ENV
    root_env: str = "NetHackScore-v1"
    max_episode_steps: int = SKILL_EPISODE_STEPS
    num_skills: int = NUM_SKILLS
    task: Optional[str] = "exploration"
    code_seed: int = 42
    meta_policy_root: Optional[str] = None
    # --trust_generated_code: the policy over skills in-process, unconfined (off: its isolated child)
    trust_generated_code: bool = False
    # training only: the training policy's discoverer budget in game turns (None: the policy's own)
    discoverer_turns: Optional[int] = None
    reward_dirs: tuple[str, ...] = ()
    quantiles: tuple[float, ...] = ()
    beta: float = 3.0
    msg_max_keys: int = MSG_MAX_KEYS
    skill_reward: str = "llm"
    # --skill_reward progress: each skill's factor on its progress measure (empty: 1 for every skill)
    progress_scales: tuple[float, ...] = ()
    # --skill_reward progress: the descender's pay for its first arrival on a level's down staircase, in levels
    progress_stairs_reward: float = 0.0
    reward_timing: str = "release"
    llm_reward: float = 0.1
    extrinsic_reward: float = 0.0
    game_reward_scale: float = 1.0
    # forced-skill evaluation (--eval_skill): the skill held for the whole episode, no meta-policy,
    # and the dungeon level episodes start on (reached by wizard-mode level teleport when > 1)
    forced_skill: Optional[str] = None
    start_depth: int = 1
    # evaluation on goldenexit: level 1's "Still climb?" is left for the agent, as the release leaves it
    exit_question_to_agent: bool = False
    # levers of the CPU screens (--travel_actions, --stairs_input): two travel actions; the staircase input
    travel_actions: bool = False
    stairs_input: bool = False
    # online intrinsic rewards (ONI): the annotator's folder and what the environment reads from it
    online_reward_type: Optional[str] = None
    online_store_dir: Optional[str] = None
    online_goals: tuple[str, ...] = ()
    classification_threshold: float = 0.5
    bow_threshold: float = -0.5
    # Motif's and ONI's sample-factory 1 clipped the scaled game reward to [-10, 10] (its --reward_clip)
    # before the coefficient: the clip of the raw game reward is 10 / --reward_scale
    game_reward_clip: Optional[float] = None
    # the hierarchical LLM policy (--meta_policy llm): a language model picks the next skill; the model's
    # settings (rl_baseline.baselines.llm_policy.client.LLMSettings), None for the generated code
    meta_llm: Optional[Any] = None
    # the paper's baselines (rl_baseline.baselines.flags): the embedding-similarity reward of a task's
    # description, and a task's success detector as a sparse game reward
    embedding_task: Optional[str] = None
    embedding_model: str = "all-MiniLM-L6-v2"
    embedding_threshold: float = 0.0
    task_reward: Optional[str] = None
    task_reward_bonus: float = 50.0
    # training only (rl_baseline.sf.env.make_sf_env): the run's seed, mixed into sample-factory's
    # reset(seed=env index) so each run plays its own games (rl_baseline.envs.seeding.training_game_seed)
    training_seed: Optional[int] = None
    # training only (make_sf_env): NLE fills only the arrays training reads (rl_baseline.envs.TRAINING_OBSERVATION_KEYS;
    # the same games, a twentieth less time a key); evaluations keep every array (their GIFs draw tty_colors)
    training_observations: bool = False

    @classmethod
    def from_cfg(cls, cfg: Any) -> "SkillEnvConfig":
        return cls(
            env=cfg.env,
            root_env=cfg.root_env,
            max_episode_steps=int(cfg.max_episode_steps),
            num_skills=int(cfg.num_skills),
            task=meta_policy_task(cfg) if uses_meta_policy(cfg) else None,
            code_seed=int(cfg.code_seed),
            meta_policy_root=cfg.meta_policy_root,
            trust_generated_code=bool(getattr(cfg, "trust_generated_code", False)),
            discoverer_turns=(None if cfg.evaluation or getattr(cfg, "discoverer_turns", None) is None
                              else int(cfg.discoverer_turns)),
            reward_dirs=tuple(cfg.reward_dirs),
            quantiles=tuple(cfg.threshold_quantiles),
            beta=float(cfg.beta_count_exponent),
            msg_max_keys=int(cfg.msg_max_keys),
            skill_reward=str(getattr(cfg, "skill_reward", "llm")),
            progress_scales=tuple(getattr(cfg, "progress_scales", ())),
            progress_stairs_reward=float(getattr(cfg, "progress_stairs_reward", 0.0)),
            reward_timing=str(getattr(cfg, "skill_reward_timing", "release")),
            llm_reward=float(cfg.llm_reward),
            extrinsic_reward=float(cfg.extrinsic_reward),
            game_reward_scale=float(getattr(cfg, "game_reward_scale", 1.0)),
            forced_skill=forced_skill(cfg) or training_skill(cfg),
            start_depth=eval_start_depth(cfg),
            exit_question_to_agent=bool(cfg.evaluation) and getattr(cfg, "eval_target", None) == "goldenexit",
            travel_actions=bool(getattr(cfg, "travel_actions", False)),
            stairs_input=bool(getattr(cfg, "stairs_input", False)),
            online_reward_type=cfg.llm_reward_type if getattr(cfg, "online_store_dir", None) else None,
            online_store_dir=getattr(cfg, "online_store_dir", None),
            online_goals=online_goals(cfg),
            classification_threshold=float(getattr(cfg, "classification_threshold", 0.5)),
            bow_threshold=float(getattr(cfg, "bow_threshold", -0.5)),
            game_reward_clip=(SF1_REWARD_CLIP / float(getattr(cfg, "game_reward_scale", 1.0) or 1.0)
                              if cfg.env == MOTIF_ENV else None),
            meta_llm=(meta_llm_settings(cfg) if uses_meta_policy(cfg) and getattr(cfg, "meta_policy", "code") == "llm"
                      else None),
            embedding_task=cfg.embedding_task if getattr(cfg, "llm_reward_type", None) == "embedding" else None,
            embedding_model=str(getattr(cfg, "embedding_model", "all-MiniLM-L6-v2")),
            embedding_threshold=float(getattr(cfg, "embedding_threshold", 0.0)),
            task_reward=task_reward_task(cfg),
            task_reward_bonus=float(getattr(cfg, "task_reward_bonus", 50.0)),
        )


def online_goals(cfg: Any) -> tuple[str, ...]:
    """The goal sentence per skill index the online annotator judges against: each skill's
    description in the skill environment, the goal key's sentence otherwise."""
    if not getattr(cfg, "online_store_dir", None):
        return ()

    if cfg.env == SKILL_ENV:
        return tuple(goal_text(skill=s) for s in SKILLS[: int(cfg.num_skills)])
    return (goal_text(goal_key=getattr(cfg, "goal_key", "defaultgoal")),)


def meta_llm_settings(cfg: Any) -> Any:
    """The :class:`rl_baseline.baselines.llm_policy.client.LLMSettings` of ``--meta_llm_*``."""

    cache = getattr(cfg, "meta_llm_cache_dir", None)
    if cache is None:
        cache = os.path.join(os.path.dirname(os.path.normpath(eval_dir_of(cfg))), "llm_cache")
    return LLMSettings(
        backend=cfg.meta_llm_backend, model=cfg.meta_llm_model or CODER_MODEL, base_url=cfg.meta_llm_base_url,
        replay=cfg.meta_llm_replay, temperature=float(cfg.meta_llm_temperature),
        max_tokens=int(cfg.meta_llm_max_tokens), num_gpus=int(cfg.meta_llm_num_gpus),
        cache_dir=None if str(cache).lower() == "none" else cache, record=cfg.meta_llm_record,
    )


def eval_result_path(cfg: Any) -> str:
    """The JSON an evaluation writes: ``{root_env}.json`` (a Motif run), ``skill_{skill}.json`` (a forced skill) or
    ``{task}_seed{code_seed}.json`` in :func:`eval_dir_of`."""
    skill = forced_skill(cfg)
    if evaluates_root_env(cfg):
        name = f"{cfg.root_env}.json"
    elif skill is not None:
        name = f"skill_{skill}.json"
    else:
        name = f"{cfg.eval_target}_seed{cfg.code_seed}.json"
    return os.path.join(eval_dir_of(cfg), name)


#: the flags that do not change what an evaluation measures (where it writes, whether it may replace, a GIF)
_NOT_SETTINGS = {"eval_dir", "eval_replace"}


def evaluation_settings(cfg: Any) -> dict[str, Any]:
    """What decides an evaluation's result besides the checkpoint: its ``--eval_*`` flags, the games' seed, the
    step limit, the policy over skills and the game clock. Saved in the result as ``settings``; a result made with
    other settings is not replaced without ``--eval_replace True``."""
    names = cfg.keys() if isinstance(cfg, dict) else vars(cfg)  # sample-factory's AttrDict, or a Namespace
    keys = sorted(k for k in names if (k.startswith("eval_") or k.startswith("meta_llm")) and k not in _NOT_SETTINGS)
    keys += ["seed", "max_episode_steps", "code_seed", "meta_policy_root", "game_clock", "travel_actions",
             "skill_policy_list"]
    out: dict[str, Any] = {}
    for key in keys:
        value = getattr(cfg, key, None)
        out[key] = value if value is None or isinstance(value, (bool, int, float, str)) else str(value)
    return out


def eval_dir_of(cfg: Any) -> str:
    """Where an evaluation writes its results: ``--eval_dir``, else ``{train_dir}/{experiment}/eval``
    (``eval_untrained`` / ``eval_random`` for the reference policies of ``--eval_policy``, so a reference
    never overwrites the trained policy's results nor lands in the report's table as the method)."""
    if getattr(cfg, "eval_dir", None):
        return cfg.eval_dir
    kind = getattr(cfg, "eval_policy", "trained") or "trained"
    return os.path.join(cfg.train_dir, cfg.experiment, "eval" if kind == "trained" else f"eval_{kind}")

