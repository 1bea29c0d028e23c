"""Environment construction and registration with sample-factory.

``nle_skill``: the Monk environment wrapped by the skill runtime (meta-policy +
intrinsic reward + skill one-hot observation).

``nle_fixed_eat_action`` (Motif single-reward runs): the same Monk environment with a
task reward chosen by ``--root_env`` (:class:`rl_baseline.baselines.motif_tasks.MotifTaskReward`, where
the root environments are described), one skill, one reward model, no meta-policy; ONI's root
environments are ONI's own (:mod:`rl_baseline.baselines.oni.env`).

Here the method's environment and the baselines' rewards and environments are put together: the
skill runtime (:mod:`rl_baseline.skills`) and the Monk environment (:mod:`rl_baseline.envs`) come from
below, each baseline's part from the wing (:mod:`rl_baseline.baselines`), chosen by ``SkillEnvConfig``.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import random
from typing import Any, Optional

import gymnasium as gym

from common.worker_exit import exit_with_parent, skip_final_collection_in_worker
from rl_baseline.baselines.embedding_reward import EmbeddingReward, EmbeddingRewardConfig
from rl_baseline.baselines.llm_policy.meta import make_llm_meta_policy
from rl_baseline.baselines.motif_tasks import MotifTaskReward
from rl_baseline.baselines.oni.env import make_oni_env
from rl_baseline.baselines.oni.rewards import OnlineReward, OnlineRewardConfig
from rl_baseline.baselines.task_reward import TaskSuccessReward
from rl_baseline.envs import OBSERVATION_KEYS, TRAINING_OBSERVATION_KEYS, make_monk_env
from rl_baseline.sf.cfg import MOTIF_ENV, ONI_ENVS, SKILL_ENV, SkillEnvConfig
from rl_baseline.skills.intrinsic_reward import IntrinsicReward, build_intrinsic_reward
from rl_baseline.skills.meta_policy import MetaPolicyConfig, load
from rl_baseline.skills.runtime import SingleSkillPolicy, SkillRuntime
from rl_baseline.skills.skill_games import SkillGames

logger = logging.getLogger(__name__)


def make_base_env(max_episode_steps: int, **kwargs: Any) -> gym.Env:
    """The Monk environment of :mod:`rl_baseline.envs`."""
    return make_monk_env(max_episode_steps=max_episode_steps, **kwargs)


class StartDepth(gym.Wrapper):
    """Starts every episode on dungeon level ``depth`` by wizard-mode level teleport.

    Used by the forced-skill evaluation of the ascender, which needs levels to climb. The
    game runs in NetHack's wizard (debug) mode for this, which NetHack otherwise plays the
    same; the teleport takes no env step and the hero arrives at a random place of the level.
    """

    def __init__(self, env: gym.Env, depth: int) -> None:
        super().__init__(env)
        if not getattr(env.unwrapped, "wizard", False):
            raise ValueError("StartDepth needs an environment created in wizard mode")
        self.depth = int(depth)

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        if self.depth <= 1:
            return obs, info
        game = self.env.unwrapped
        arrived = game.wizard_level_teleport(self.depth)
        info = {**info, **arrived}
        if int(arrived.get("depth", 0)) != self.depth:
            logger.warning("level teleport to %d arrived on level %s", self.depth, arrived.get("depth"))
        return game.current_observation(), info


def _observation_keys(config: SkillEnvConfig) -> tuple[str, ...]:
    return TRAINING_OBSERVATION_KEYS if config.training_observations else OBSERVATION_KEYS


def build_skill_env(config: SkillEnvConfig, base_env: Optional[gym.Env] = None) -> SkillRuntime:
    """One skill environment (also used by evaluation and the benchmark, outside sample-factory)."""
    oni = config.env == MOTIF_ENV and config.root_env in ONI_ENVS
    if base_env is not None:
        env = base_env
    elif oni:
        env = make_oni_env(config.root_env, config.max_episode_steps)  # the task's reward is the env's own
    elif config.start_depth > 1:
        env = StartDepth(make_base_env(config.max_episode_steps, wizard=True, final_death=True,
                                       travel_actions=config.travel_actions,
                                       observation_keys=_observation_keys(config)), config.start_depth)
    else:
        env = make_base_env(config.max_episode_steps, exit_question_to_agent=config.exit_question_to_agent,
                            travel_actions=config.travel_actions, observation_keys=_observation_keys(config))
    if config.env == MOTIF_ENV and not oni:
        env = MotifTaskReward(env, config.root_env)
    if config.task_reward is not None:  # the task-reward-plus-score baseline
        env = TaskSuccessReward(env, config.task_reward, config.task_reward_bonus)
    reward: IntrinsicReward
    if config.embedding_task is not None:  # the embedding-similarity baseline
        reward = EmbeddingReward(
            EmbeddingRewardConfig(config.embedding_task, config.embedding_model, config.embedding_threshold),
            beta=config.beta, llm_coef=config.llm_reward,
            extrinsic_coef=config.extrinsic_reward * config.game_reward_scale, msg_max_keys=config.msg_max_keys,
        )
    elif config.online_reward_type is not None:
        reward = OnlineReward(
            OnlineRewardConfig(str(config.online_store_dir), config.online_reward_type, tuple(config.online_goals),
                               config.classification_threshold, config.bow_threshold),
            beta=config.beta, llm_coef=config.llm_reward,
            extrinsic_coef=config.extrinsic_reward * config.game_reward_scale, msg_max_keys=config.msg_max_keys,
        )
    elif config.skill_reward == "progress":
        # the diagnostic reward: no model; --llm_reward weighs each skill's progress measure (SkillRuntime)
        reward = IntrinsicReward([], [], config.beta, config.llm_reward,
                                 config.extrinsic_reward * config.game_reward_scale, msg_max_keys=config.msg_max_keys)
    else:
        reward = build_intrinsic_reward(
            config.reward_dirs, config.quantiles, config.beta, config.llm_reward,
            config.extrinsic_reward * config.game_reward_scale, msg_max_keys=config.msg_max_keys,
        )
    reward.game_reward_clip = config.game_reward_clip
    if config.forced_skill is not None:
        factory = functools.partial(SingleSkillPolicy, config.forced_skill)
    elif config.task is not None and config.meta_llm is not None:
        # the hierarchical LLM policy: a language model picks the next skill, the task's module the rest
        factory = functools.partial(make_llm_meta_policy, config.task, config.code_seed, config.meta_policy_root,
                                    config.meta_llm, MetaPolicyConfig(trust_generated_code=config.trust_generated_code))
    elif config.task is not None:
        factory = functools.partial(load, config.task, config.code_seed, config.meta_policy_root,
                                    MetaPolicyConfig(discoverer_turns=config.discoverer_turns,
                                                     trust_generated_code=config.trust_generated_code))
    else:
        factory = SingleSkillPolicy
    return SkillRuntime(env, factory, reward, num_skills=config.num_skills, training_seed=config.training_seed,
                        reward_timing=config.reward_timing, skill_reward=config.skill_reward,
                        progress_scales=config.progress_scales,
                        progress_stairs_reward=config.progress_stairs_reward, stairs_input=config.stairs_input)


def make_sf_env(full_env_name: str, cfg: Any, env_config: Any = None, render_mode: Optional[str] = None) -> gym.Env:
    """sample-factory's env factory signature: the environments of training."""
    skip_final_collection_in_worker()  # a rollout worker: its exit was seconds of garbage collection
    exit_with_parent()  # a killed trainer takes its workers with it
    # without --seed a run draws its own, so runs still differ (sample-factory's seeds are env indices)
    run_seed = cfg.seed if cfg.seed is not None else random.SystemRandom().randrange(1 << 31)
    config = dataclasses.replace(SkillEnvConfig.from_cfg(cfg), training_seed=int(run_seed), training_observations=True)
    games = int(getattr(cfg, "games_per_env", 1))
    if games > 1:  # one request to the worker's sandbox for all of them (the same games and decisions)
        return SkillGames([build_skill_env(config) for _ in range(games)])
    return build_skill_env(config)


def register_envs() -> None:
    """Registers both environment names and the CDGPT5 model with sample-factory."""
    from sample_factory.envs.env_utils import register_env  # lazy: sample-factory; evaluation builds envs without it

    register_env(SKILL_ENV, make_sf_env)
    register_env(MOTIF_ENV, make_sf_env)
    from rl_baseline.models.cdgpt5 import register_cdgpt5  # lazy: imports sample-factory, as register_env

    register_cdgpt5()
