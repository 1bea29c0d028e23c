"""Configuration of skill training/evaluation on top of sample-factory 2's own parser.

One place translates the release's command line into sample-factory 2 terms:

============================  =====================================================
release flag                  here
============================  =====================================================
``--env`` (absent)            defaults to ``nle_skill`` (the skill environment)
``--save_every_steps N``      extra checkpoint every N env steps (an observer asks
                              the learner to save); ``--save_every_sec`` still works
``--keep_checkpoints``        sample-factory's ``--keep_checkpoints`` (same meaning)
``--reward_scale 0.1``        scales the game reward only (as the release's actor did);
                              sample-factory's own ``reward_scale``, which would scale
                              the skill reward too, is set to 1
``--obs_scale 255``           the paper's pixel scale, applied inside the CDGPT5
                              encoder; sample-factory's own ``obs_scale`` (which
                              only touches a key named ``obs``) is set to 1
``--device cuda``             sample-factory's ``--device gpu`` (also ``cpu``)
``--evaluation True``         string booleans, as sample-factory's ``str2bool``
``--reward_dir "[...]"``      Python/JSON list literal, may span several lines
``--eps_threshold_quantile``  list or single value (applied to every skill)
``--eval_target none``        no meta-policy: one skill for the whole episode
``--code_seed -1``            same as ``--eval_target none`` for the meta-policy
``5_000_000_000``             integer flags accept Python's digit separators
``--reward_encoder``          Motif's name of the reward network
                              (``nle_torchbeast_encoder``: our ``motif`` architecture);
                              checked against each reward model's checkpoint
``--wandb True``              ONI's spelling of ``--with_wandb`` (``--wandb_entity``:
                              ``--wandb_user``, ``--wandb_proj``: ``--wandb_project``); the
                              run is started by :mod:`rl_baseline.sf.wandb_run`
============================  =====================================================

Motif's single-reward runs (``--env nle_fixed_eat_action``) take Motif's ``--root_env`` tasks
(:data:`ROOT_ENVS`) and its episode limit, NLE's default of 5,000 steps, unless
``--max_episode_steps`` says otherwise; ``--evaluation True`` on such a run evaluates the
root environment's task (:func:`rl_baseline.sf.evaluate.evaluate_root_env`) unless ``--eval_target`` names a
MaestroMotif task.

Resolution, once per entry point (:func:`resolve_cfg`, :func:`resolve_experiment_cfg`):

1. **parse**: sample-factory's parser with our flags, the release's spellings translated;
   a saved experiment's ``config.json`` under this command line (evaluation needs one and its
   evaluation flags come from this command; training resumes one when it exists);
2. **derive**: values computed from flags (the reward lists, the skill count, the reward and
   pixel scales in sample-factory's terms), idempotent on a saved configuration;
3. **validate**: flag combinations; for a run, what it needs of this machine (``--precision bf16``), then
   the files (reward models, their quantiles, the meta-policy module), leaving ``cfg.reward_thresholds``.

The phases (:mod:`.train`, :mod:`.evaluate`, :mod:`.skill_eval`) take the finished configuration
(``cfg.resolved`` is True) and parse nothing themselves.

Defaults follow the paper (Table 2): APPO, 24 workers x 20 envs, batch 4096, reward
scale 0.1, obs scale 255, PPO clip 0.1, value clip 1.0, 1 epoch, max grad norm 4.0,
value loss coefficient 0.5, entropy loss, extrinsic 0.0, LLM 0.1, beta 3, thresholds
[0.95,0.85,0.85,0.85,0.85], 10,000 steps per episode, code seed 42, seed 2; and the
release's learner: GRU core, V-trace advantages, no return normalisation, message counts over
the 20 most recently seen messages (``--msg_max_keys``).

One package, the one home of the configuration of scripts.main from the command line to the finished
configuration the phases receive, split by responsibility as sample-factory's own ``cfg`` is:

* :mod:`.flags` -- the flags sample-factory does not have, their values and the paper's defaults;
* :mod:`.arguments` -- 1. parse: the release's spellings, sample-factory's parser, a saved experiment, list flags;
* :mod:`.derive` -- 2. derive;
* :mod:`.checks` -- 3. validate: the command line, flag combinations, this machine, the files;
* :mod:`.env_config` -- what a finished configuration means for the environments and the evaluation
  (:class:`SkillEnvConfig`, :func:`forced_skill`, :func:`uses_meta_policy`, :func:`eval_dir_of`, ...);
* :mod:`.resolve` -- the entry points (:func:`resolve_cfg`, :func:`parse_cfg`, :func:`resolve_experiment_cfg`).

Every public name is imported from here, ``rl_baseline.sf.cfg``.
"""
from __future__ import annotations

from rl_baseline.flag_types import MOTIF_ENV, SKILL_ENV, ConfigError
from rl_baseline.sf.cfg.arguments import (
    SAVED_BEFORE_FLAG,
    check_run_skill_set,
    parse_progress_scales,
    parse_quantiles,
    parse_reward_dirs,
)
from rl_baseline.sf.cfg.checks import (
    check_command_line,
    check_eval_args,
    check_files,
    check_flags,
    check_machine,
    check_meta_policy_flags,
    reward_thresholds,
)
from rl_baseline.sf.cfg.derive import derive_cfg, precision_choice
from rl_baseline.sf.cfg.env_config import (
    SkillEnvConfig,
    eval_dir_of,
    eval_result_path,
    eval_start_depth,
    evaluates_root_env,
    evaluation_settings,
    forced_skill,
    meta_llm_settings,
    meta_policy_task,
    online_goals,
    uses_meta_policy,
)
from rl_baseline.sf.cfg.flags import (
    ASCENDER_START_DEPTH,
    DEFAULT_QUANTILES,
    ENV_ALIASES,
    EVAL_FLAGS,
    EVAL_POLICIES,
    GOAL_KEYS,
    LLM_REWARD_TYPES,
    MOTIF_EPISODE_STEPS,
    NO_TASK,
    ONI_DIR,
    ONI_ENVS,
    ONI_MODEL,
    ONLINE_REWARD_TYPES,
    PAPER_DEFAULTS,
    ROOT_ENVS,
    SF1_REWARD_CLIP,
    SKILL_EPISODE_STEPS,
    WANDB_SPELLINGS,
    add_maestro_args,
)
from rl_baseline.sf.cfg.resolve import parse_cfg, require_resolved, resolve_cfg, resolve_experiment_cfg

__all__ = [  # what the phases, the scripts and the tools import from rl_baseline.sf.cfg
    "ConfigError", "MOTIF_ENV", "SKILL_ENV", "DEFAULT_QUANTILES", "ENV_ALIASES", "EVAL_FLAGS", "EVAL_POLICIES",
    "GOAL_KEYS", "LLM_REWARD_TYPES", "MOTIF_EPISODE_STEPS", "NO_TASK", "ONI_DIR", "ONI_ENVS", "ONI_MODEL",
    "ONLINE_REWARD_TYPES", "PAPER_DEFAULTS", "ROOT_ENVS", "SF1_REWARD_CLIP", "SKILL_EPISODE_STEPS", "WANDB_SPELLINGS",
    "add_maestro_args", "SAVED_BEFORE_FLAG", "check_run_skill_set", "parse_progress_scales", "parse_quantiles",
    "parse_reward_dirs",
    "derive_cfg", "precision_choice",
    "check_command_line", "check_eval_args", "check_files", "check_flags", "check_machine", "check_meta_policy_flags",
    "reward_thresholds", "ASCENDER_START_DEPTH", "SkillEnvConfig", "eval_dir_of", "eval_result_path", "evaluation_settings",
    "eval_start_depth",
    "evaluates_root_env", "forced_skill", "meta_llm_settings", "meta_policy_task", "online_goals", "uses_meta_policy",
    "parse_cfg", "require_resolved", "resolve_cfg", "resolve_experiment_cfg",
]
