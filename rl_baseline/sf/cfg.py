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
3. **validate**: flag combinations, then the files (reward models, their quantiles, the
   meta-policy module), leaving ``cfg.reward_thresholds``.

The phases (:mod:`.train`, :mod:`.evaluate`, :mod:`.skill_eval`) take the finished configuration
(``cfg.resolved`` is True) and parse nothing themselves.

Defaults follow the paper (Table 2): APPO, 24 workers x 20 envs, batch 4096, reward
scale 0.1, obs scale 255, PPO clip 0.1, value clip 1.0, 1 epoch, max grad norm 4.0,
value loss coefficient 0.5, entropy loss, extrinsic 0.0, LLM 0.1, beta 3, thresholds
[0.95,0.85,0.85,0.85,0.85], 10,000 steps per episode, code seed 42, seed 2; and the
release's learner: GRU core, V-trace advantages, no return normalisation, message counts over
the 20 most recently seen messages (``--msg_max_keys``).

One module on purpose: the one home of the configuration of scripts.main, from the
command line to the finished configuration the phases receive.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from code_generation.loader import module_path
from common.cli import ScriptParser
from common.flag_checks import TRAINING_SIZES, FlagError, at_least, check_training_sizes
from common.llm import CODER_MODEL, BackendError
from common.nethack import game_clock
from common.precision import PRECISIONS, PrecisionChoice, PrecisionError, resolve_precision
from common.vocabulary import ALL_TASKS, EVAL_TASKS, NUM_SKILLS, SKILLS
from rl_baseline.baselines.flags import (
    add_baseline_args,
    add_llm_meta_policy_args,
    check_baseline_flags,
    check_embedding_model,
    check_skill_policies,
    derive_baseline_cfg,
    task_reward_task,
    training_skill,
)
from rl_baseline.baselines.llm_policy.client import LLMSettings, check_backend
from rl_baseline.baselines.oni.prompts import goal_text
from rl_baseline.flag_types import MOTIF_ENV, SKILL_ENV, ConfigError, parse_list_flag
from rl_baseline.skills import MSG_MAX_KEYS, REWARD_TIMINGS, SKILL_REWARDS
from rl_baseline.skills.meta_policy import load as load_meta_policy

logger = logging.getLogger(__name__)

ENV_ALIASES = {
    "nle_skill": SKILL_ENV,
    "skill": SKILL_ENV,
    "NetHackScoreMonk-v1": SKILL_ENV,
    "nle_fixed_eat_action": MOTIF_ENV,
    "motif": MOTIF_ENV,
}
#: Motif's root environments (the ids its rl_baseline/tasks_nle.py registers); the Continual ones
#: are its intrinsic-only variants, whose episodes end only when the hero dies (or at the step limit)
ROOT_ENVS = (
    "NetHackScore-v1",
    "NetHackStaircase-v1",
    "NetHackStaircaseLvl3-v1",
    "NetHackStaircaseLvl4-v1",
    "NetHackOracle-v1",
    "NetHackOracleSober-v1",
    "NetHackStaircaseContinual-v1",
    "NetHackStaircaseLvl3Continual-v1",
    "NetHackStaircaseLvl4Continual-v1",
)
#: episode limits: the skill environment's (the paper's 10,000) and Motif's (NLE's default, which its
#: environments kept)
SKILL_EPISODE_STEPS = 10_000
MOTIF_EPISODE_STEPS = 5_000
ONI_ENVS = (
    "NetHackScoreExtendedActions-v1",
    "NetHackOracleExtendedActions-v1",
    "NetHackStaircaseLvl3ExtendedActions-v1",
    "NetHackStaircaseLvl4ExtendedActions-v1",
)
ROOT_ENVS = ROOT_ENVS + ONI_ENVS
LLM_REWARD_TYPES = ("motif", "online_cls", "online_cls_reward_model", "online_motif", "cosine-bow", "embedding", "none")
ONLINE_REWARD_TYPES = ("online_cls", "online_cls_reward_model", "online_motif", "cosine-bow")
ONI_MODEL = "Meta-Llama-3.1-8B-Instruct"  # ONI's README model, under the name its server gives it
GOAL_KEYS = ("defaultgoal", "zeroknowledge", "combat", "gold", "stairs")
WANDB_SPELLINGS = {"--wandb": "--with_wandb", "--wandb_entity": "--wandb_user", "--wandb_proj": "--wandb_project"}
# (--with_wandb is sample-factory's flag; the run is started by rl_baseline.sf.wandb_run, not by sample-factory)
ONI_DIR = "oni"  # under {train_dir}/{experiment}: the online labels, networks and statistics
NO_TASK = "none"
SF1_REWARD_CLIP = 10.0  # sample-factory 1's --reward_clip, applied after --reward_scale by Motif's and ONI's actors
DEFAULT_QUANTILES = "[0.95,0.85,0.85,0.85,0.85]"  # paper: 95th for the discoverer, 85th for the others

PAPER_DEFAULTS: dict[str, Any] = dict(
    algo="APPO",
    num_workers=24,
    num_envs_per_worker=20,
    batch_size=4096,
    reward_scale=0.1,
    obs_scale=255.0,
    ppo_clip_ratio=0.1,
    ppo_clip_value=1.0,
    num_epochs=1,
    max_grad_norm=4.0,
    value_loss_coeff=0.5,
    exploration_loss="entropy",
    use_rnn=True,
    rnn_type="gru",  # the release's core (sample-factory 1's default); --rnn_type lstm still works
    # the release's learner: V-trace advantages (rho = c = 1), no return normalisation (sample-factory 2
    # refuses the two together, and the release had none)
    with_vtrace=True,
    normalize_returns=False,
    seed=2,
    train_dir="train_dir/skill_policy",
    experiment="default",
    restart_behavior="resume",
    # One env step of NetHack is cheap next to a forward pass of the network: keep
    # the decorrelation short so small runs do not idle at start-up.
    decorrelate_experience_max_seconds=0,
    # the CDGPT5 encoder reads integer inputs (characters, bytes, skill flags) and scales them itself
    normalize_input=False,
    obs_subtract_mean=0.0,
)


def add_maestro_args(p: argparse.ArgumentParser) -> None:
    """Flags of the release's ``scripts.main`` that sample-factory does not have."""
    from sample_factory.utils.utils import str2bool  # lazy: sample-factory; --help stays light without it

    g = p.add_argument_group("MaestroMotif")
    g.add_argument("--reward_dir", type=str, default="[]",
                   help="reward model directories, one per skill in skill order, as a list literal "
                        "(\"['train_dir/skill_rewards/llama3_discoverer_default', ...]\") or a single directory")
    g.add_argument("--extrinsic_reward", "--extrinsic_reward_coeff", dest="extrinsic_reward", type=float, default=0.0,
                   help="coefficient of the game (or task) reward in the training reward")
    g.add_argument("--llm_reward", "--llm_reward_coeff", dest="llm_reward", type=float, default=0.1,
                   help="coefficient of the intrinsic reward from the skills' reward models")
    g.add_argument("--beta_count_exponent", type=float, default=3.0,
                   help="intrinsic reward is divided by count(message in episode) ** beta")
    g.add_argument("--msg_max_keys", type=int, default=MSG_MAX_KEYS,
                   help="message counts of the count-based division are kept for this many most recently seen "
                        f"distinct messages (the release's default {MSG_MAX_KEYS}); a message pushed out starts again "
                        "at count 1; -1 counts over the whole episode")
    g.add_argument("--skill_reward", type=str, default="llm", choices=SKILL_REWARDS,
                   help="what pays the skills: llm (the method: each skill's reward model from --reward_dir) or "
                        "progress (a privileged diagnostic and upper bound, not the method: each skill's own "
                        "progress measure, map cells newly revealed for the discoverer, +1 per level descended "
                        "for the descender, per level ascended for the ascender, per item whose curse status "
                        "an altar showed for the worshipper, per item sold for the merchant; times --llm_reward; "
                        "no reward model needed)")
    g.add_argument("--progress_scale", type=str, default="1.0",
                   help="--skill_reward progress only: each skill's progress reward multiplied by this (list in "
                        "the order of the skills, or one value for every skill), before --llm_reward; e.g. "
                        "\"[1, 50, 50, 1, 1]\" pays a level descended or ascended as much as 50 cells revealed")
    g.add_argument("--progress_stairs_reward", type=float, default=0.0,
                   help="--skill_reward progress only: the descender is also paid this much (in levels, before "
                        "--progress_scale) for its first arrival on each level's down staircase, the step before "
                        "the descent a language model's label would already prefer (\"There is a staircase down "
                        "here.\"); 0 pays descents only")
    g.add_argument("--skill_reward_timing", type=str, default="release", choices=REWARD_TIMINGS,
                   help="which observation a step's skill reward scores: release (as the authors' learner: the "
                        "observation the action was chosen on, by the model of the skill it carries, so an "
                        "arrival message after a switch is scored by the new skill) or after_action (the "
                        "observation the action led to, by the skill that acted)")
    g.add_argument("--eps_threshold_quantile", type=str, default=DEFAULT_QUANTILES,
                   help="per-skill quantile of the normalised reward below which the intrinsic reward is 0 "
                        "(list, or one value for every skill)")
    g.add_argument("--num_skills", type=int, default=None,
                   help=f"number of skills (first N of {', '.join(SKILLS)}); default {NUM_SKILLS} for the "
                        f"skill env, 1 for {MOTIF_ENV}")
    g.add_argument("--max_episode_steps", type=int, default=None,
                   help=f"episode step limit (default {SKILL_EPISODE_STEPS} for the skill env, {MOTIF_EPISODE_STEPS} "
                        f"-- NLE's default, as in Motif -- for {MOTIF_ENV})")
    g.add_argument("--code_seed", type=int, default=42,
                   help="meta-policy variant: rl_baseline/meta_policies/{task}/seed{code_seed}; -1 means none")
    g.add_argument("--discoverer_turns", type=int, default=None,
                   help="training only: the training policy's discoverer budget in game turns, set after its "
                        "set_initial_values (default: the policy's own, 500 in the release's). A named deviation "
                        "for CPU-scale lives, which end near 500 steps (docs/results.md); ignored with "
                        "--evaluation True, where the task's own policy keeps its budgets")
    g.add_argument("--meta_policy_root", type=str, default=None,
                   help="directory holding {task}/seed{N}/execution.py (default: rl_baseline/meta_policies)")
    g.add_argument("--root_env", type=str, default="NetHackScore-v1",
                   help=f"task of the {MOTIF_ENV} environment: one of {', '.join(ROOT_ENVS)} (Motif uses "
                        "--extrinsic_reward 0.1 for the score and 10.0 for the others; the Continual variants are its "
                        "intrinsic-only runs, --extrinsic_reward 0.0)")
    g.add_argument("--reward_encoder", type=str, default=None,
                   help="Motif's flag naming the reward network: nle_torchbeast_encoder (Motif's message encoder, our "
                        "'motif' architecture), or release / small / motif; every --reward_dir model must be of it "
                        "(default: whatever each checkpoint holds)")
    g.add_argument("--evaluation", type=str2bool, default=False,
                   help="evaluate the latest checkpoint on --eval_target instead of training")
    g.add_argument("--eval_target", type=str, default="exploration",
                   help="task whose meta-policy composes the skills: exploration (training), an evaluation "
                        "task (gnomish, delphi, ..., goldenexit) or none")
    g.add_argument("--eval_protocol", type=str, default="release", choices=("release", "project"),
                   help="evaluation protocol: release (the authors': --eval_env_steps env steps over --eval_num_envs "
                        "games, episodes end when the release's rule says the task is reached, the result is the "
                        "mean over the last --eval_stats_avg finished episodes) or project (--eval_episodes "
                        "episodes ended by this project's task definitions); both rule sets are reported")
    g.add_argument("--eval_env_steps", type=int, default=3_000_000,
                   help="release protocol: env steps to run, summed over all evaluation games (the release stops "
                        "after 3,000,000); episodes still running then are not counted")
    g.add_argument("--eval_stats_avg", type=int, default=1000,
                   help="release protocol: the result averages the last this many finished episodes (the "
                        "release's --stats_avg 1000)")
    g.add_argument("--eval_episodes", type=int, default=100,
                   help="project protocol: episodes to evaluate (not used by --eval_protocol release)")
    g.add_argument("--eval_num_envs", type=int, default=480,
                   help="games stepped together in this process during evaluation (default 480 = the release's "
                        "24 workers x 20 envs, about 1.6 GB of NetHack state; the project protocol uses at most "
                        "--eval_episodes)")
    g.add_argument("--eval_deterministic_actions", type=str2bool, default=False,
                   help="take the most likely action instead of sampling during evaluation")
    g.add_argument("--eval_policy", choices=EVAL_POLICIES, default="trained",
                   help="what acts in a task evaluation: trained (the experiment's newest checkpoint), untrained "
                        "(the same network with its initial weights, seeded by --seed) or random (uniformly "
                        "random actions); the references go to {train_dir}/{experiment}/eval_{untrained,random} "
                        "unless --eval_dir says otherwise, and their JSON names the policy")
    g.add_argument("--eval_skill", type=str, default=NO_TASK,
                   help="forced-skill evaluation: hold the policy on this skill for --eval_episodes episodes (no "
                        f"meta-policy) and report its measures; one of {', '.join(SKILLS)}, or none")
    g.add_argument("--eval_start_depth", type=int, default=-1,
                   help="forced-skill evaluation: dungeon level each episode starts on, reached by wizard-mode "
                        "level teleport after reset (-1: 3 for the ascender, 1 for the other skills)")
    g.add_argument("--game_clock", type=str, default=game_clock.REAL,
                   help=game_clock.FLAG_HELP + f". Evaluation only (training keeps the machine's clock); default "
                        f"{game_clock.REAL}, the release's; for comparable evaluations pin one, for example "
                        f"'{game_clock.DEFAULT_PINNED}' (scripts.skill_report's default)")
    g.add_argument("--save_video", type=str2bool, default=False,
                   help="during evaluation, save a GIF of the first episode rendered from the tty screen")
    g.add_argument("--save_every_steps", type=int, default=0,
                   help="also save a checkpoint every this many env steps (0: only sample-factory's "
                        "--save_every_sec timer)")
    # online intrinsic rewards (ONI)
    o = p.add_argument_group("online intrinsic rewards (ONI)")
    o.add_argument("--llm_reward_type", type=str, default=None, choices=LLM_REWARD_TYPES,
                   help="where the intrinsic reward comes from: motif (offline reward models, --reward_dir), "
                        "online_cls (ONI-Retrieval: an LLM server labels each new message), online_cls_reward_model "
                        "(ONI-Classification: a classifier trained online on those labels), online_motif (ONI-Ranking: "
                        "a Bradley-Terry model trained online on LLM preferences between messages), cosine-bow "
                        "(ELLM-BoW: word overlap with LLM-proposed goals), embedding (the embedding-similarity "
                        "baseline: sentence-embedding cosine similarity with --embedding_task's description) or none "
                        "(game reward only); default: motif when --reward_dir is given")
    o.add_argument("--llm_model", type=str, default=ONI_MODEL, help="the served model's name (as /v1/models lists it)")
    o.add_argument("--llm_server_addr", type=str, default=None,
                   help="host of the OpenAI-compatible LLM server (or a URL); needed by the online reward types")
    o.add_argument("--llm_server_port", type=int, default=9001, help="its port (9001, as ONI's launcher)")
    o.add_argument("--llm_server_wait_s", type=float, default=600.0,
                   help="seconds training waits at start for the server to serve --llm_model, then exits (status 2)")
    o.add_argument("--llm_batch_size", type=int, default=100, help="messages (or pairs) per round of requests")
    o.add_argument("--llm_max_tokens", type=int, default=4096,
                   help="reply length cap per request (ONI's 4096; a small local model rambles to it, so 256 is plenty "
                        "there)")
    o.add_argument("--llm_concurrency", type=int, default=16,
                   help="requests in flight at once (a one-slot server such as llama.cpp's answers them in turn)")
    o.add_argument("--goal_key", type=str, default="defaultgoal", choices=GOAL_KEYS,
                   help="the goal the LLM judges progress against (the skill environment uses each skill's description)")
    o.add_argument("--classification_threshold", type=float, default=0.5,
                   help="online_cls_reward_model: reward 1 when p(progress) exceeds this")
    o.add_argument("--reward_model_lr", type=float, default=1e-4, help="online reward network: Adam learning rate")
    o.add_argument("--reward_model_batch_size", type=int, default=256, help="online reward network: batch size")
    g.add_argument("--eval_dir", type=str, default=None,
                   help="folder for the evaluation's results (default {train_dir}/{experiment}/eval)")
    add_llm_meta_policy_args(p)
    add_baseline_args(p)
    # model
    g.add_argument("--encoder_arch", type=str, default="release", choices=("project", "release"),
                   help="policy encoder layout: release (the default: the release's nle_rgbcrop_encoder layer for "
                        "layer, which also runs its converted weights, see scripts/convert_release_policy.py) or "
                        "project (this repository's smaller CDGPT5 encoder); a saved experiment keeps its own, "
                        "and one saved without this flag is project")
    g.add_argument("--precision", type=str, default="fp32", choices=PRECISIONS,
                   help="arithmetic of the policy network's encoder and recurrent core in the learner and the "
                        "inference workers: fp32 (the default, the release's), bf16 (torch.autocast to bfloat16; "
                        "weights, optimizer state, heads, losses, V-trace and value targets stay float32; on a "
                        "processor without avx512_bf16/amx_bf16, or a GPU without bfloat16, training exits with "
                        "status 2 naming this flag, an evaluation falls back to fp32 with a note) or auto (bf16 on "
                        "a CPU run whose processor has bfloat16 instructions, else fp32 with a one-line note; GPU "
                        "runs keep fp32). The choice is logged when training starts and saved in config.json as "
                        "compute_precision")


def _translate_argv(argv: Sequence[str]) -> list[str]:
    """Rewrites the release's spellings into sample-factory's (see the module docstring)."""
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


#: what acts in an evaluation: the trained network, the same network untrained, or uniformly random actions
EVAL_POLICIES = ("trained", "untrained", "random")

#: evaluation flags that come from the evaluating command, not from the saved training one (but SAVED_EVAL_PROTOCOL)
EVAL_FLAGS = ("eval_protocol", "eval_env_steps", "eval_stats_avg", "eval_episodes", "eval_num_envs",
              "eval_deterministic_actions", "eval_policy", "game_clock", "save_video", "eval_skill", "eval_start_depth", "eval_dir",
              "meta_policy", "meta_llm_backend", "meta_llm_model", "meta_llm_base_url", "meta_llm_replay",
              "meta_llm_record", "meta_llm_cache_dir", "meta_llm_temperature", "meta_llm_max_tokens",
              "meta_llm_num_gpus", "meta_llm_server_gpus", "meta_llm_method")
#: the evaluation protocol a training command may choose for its run (a pipeline preset does): an evaluation that
#: does not give one of these flags takes the run's choice, not the release's default
SAVED_EVAL_PROTOCOL = ("eval_protocol", "eval_env_steps", "eval_stats_avg", "eval_episodes", "eval_num_envs")


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


# ----------------------------------------------------------------------------- 1. parse


def _parse_command_line(argv: Optional[Sequence[str]]) -> argparse.Namespace:
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
    return cfg


def _skill_policy_config_dir(cfg: argparse.Namespace) -> Optional[str]:
    """With ``--skill_policy_dirs`` (evaluation with one network per skill) the saved configuration is the
    first skill network's: ``{train_dir}/{experiment}`` then only names where the results go."""
    if not cfg.evaluation:
        return None
    dirs = parse_list_flag(getattr(cfg, "skill_policy_dirs", "[]"), "--skill_policy_dirs")
    return str(dirs[0]) if dirs else None


#: flags whose default changed, with what a saved ``config.json`` written before the flag existed meant
#: (sample-factory fills a key missing from the file with today's default; these keep the old meaning)
SAVED_BEFORE_FLAG: dict[str, Any] = {"encoder_arch": "project"}


def _keep_saved_meanings(merged: Any, path: str) -> None:
    """Sets the :data:`SAVED_BEFORE_FLAG` keys that the saved ``config.json`` at ``path`` does not hold."""

    with open(path, encoding="utf-8") as fh:
        saved = json.load(fh)
    for key, value in SAVED_BEFORE_FLAG.items():
        if key not in saved:
            merged[key] = value


def _with_saved_experiment(cfg: argparse.Namespace, required: bool,
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
    _keep_saved_meanings(merged, path)
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


# ----------------------------------------------------------------------------- 2. derive


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
        # the release's --obs_scale 255 is the encoder's pixel scale (see the module docstring)
        cfg.encoder_obs_scale = float(cfg.obs_scale)
        cfg.obs_scale = 1.0
    if cfg.num_skills is None:
        cfg.num_skills = NUM_SKILLS if cfg.env == SKILL_ENV else 1
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
    ``bf16`` it cannot run is fp32 here, with the reason (:func:`check_flags` refuses it for training)."""
    requested = getattr(cfg, "precision", "fp32") or "fp32"
    try:
        return resolve_precision(requested, getattr(cfg, "device", "cpu"))
    except PrecisionError as exc:
        return PrecisionChoice("fp32", f"fp32 instead of {requested}: {exc}")


# ----------------------------------------------------------------------------- 3. validate


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


def eval_dir_of(cfg: Any) -> str:
    """Where an evaluation writes its results: ``--eval_dir``, else ``{train_dir}/{experiment}/eval``
    (``eval_untrained`` / ``eval_random`` for the reference policies of ``--eval_policy``, so a reference
    never overwrites the trained policy's results nor lands in the report's table as the method)."""
    if getattr(cfg, "eval_dir", None):
        return cfg.eval_dir
    kind = getattr(cfg, "eval_policy", "trained") or "trained"
    return os.path.join(cfg.train_dir, cfg.experiment, "eval" if kind == "trained" else f"eval_{kind}")


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
    except FlagError as exc:
        raise ConfigError(str(exc)) from exc
    check_meta_policy_flags(cfg)  # again: the saved experiment may have changed --env
    if not cfg.evaluation:  # an evaluation runs the network with what this machine has (precision_choice)
        try:
            resolve_precision(getattr(cfg, "precision", "fp32") or "fp32", cfg.device)
        except PrecisionError as exc:
            raise ConfigError(str(exc)) from exc
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


def reward_thresholds(reward_dirs: Sequence[str], quantiles: Sequence[float]) -> tuple[list[Any], list[float]]:
    """The reward models of ``reward_dirs`` and each one's threshold at its quantile (one quantile per
    directory); :class:`ConfigError` naming the directory or the quantile that is not there."""
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
        models, thresholds = reward_thresholds(cfg.reward_dirs, cfg.threshold_quantiles)
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
            policy = load_meta_policy(task, cfg.code_seed, root=cfg.meta_policy_root)
            # a start as an episode's: a module that cannot even start (a file cut short that still
            # parses, say) is refused here rather than replaced by the fallback skill all run long
            policy.next_skill(policy.initial_skill, 1, 0, False, False)
        except Exception as exc:  # the loader reports missing files and bad generated code
            raise ConfigError(f"meta-policy for task {task!r}, --code_seed {cfg.code_seed}: {exc}") from exc
        if policy.num_errors:
            raise ConfigError(f"{module_path(task, cfg.code_seed, cfg.meta_policy_root)}: the policy over skills raised "
                              f"{policy.num_errors} exception(s) when an episode started (see the warnings above); "
                              "fix or regenerate it (python -m scripts.generate_code / scripts.combine)")
    return thresholds


# ----------------------------------------------------------------------------- entry points


def resolve_cfg(argv: Optional[Sequence[str]] = None, saved: bool = True, files: bool = True) -> argparse.Namespace:
    """The finished configuration of ``scripts.main``: parse, derive, validate (module docstring).

    ``saved``: merge a saved experiment (evaluation requires one, training resumes one);
    ``files``: check the reward models and the meta-policy module. Raises :class:`ConfigError`.
    """
    cfg = _parse_command_line(argv)
    check_command_line(cfg)
    if saved and (cfg.evaluation or cfg.restart_behavior == "resume"):
        cfg = _with_saved_experiment(cfg, required=bool(cfg.evaluation), config_dir=_skill_policy_config_dir(cfg))
    derive_cfg(cfg)
    check_flags(cfg)
    cfg.reward_thresholds = check_files(cfg) if files else None
    cfg.resolved = bool(saved and files)
    if cfg.resolved:  # a run's banner line (a bare parse, for a plan or a tool, stays quiet)
        fell_back = cfg.compute_precision != cfg.precision and cfg.precision != "auto"
        (logger.warning if fell_back else logger.info)("precision: %s", cfg.precision_reason)
    return cfg


def parse_cfg(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line alone, derived and checked (no saved experiment, no files): for checking
    commands (the pipeline's plan, the commands of README.md and docs/) and for tools that build on flags."""
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
    cfg = _parse_command_line(argv)
    check_command_line(cfg)
    cfg = _with_saved_experiment(cfg, required=True)
    derive_cfg(cfg)
    check_flags(cfg)
    cfg.reward_thresholds = check_files(cfg) if files else None
    cfg.resolved = files
    return cfg


def require_resolved(cfg: Any, what: str) -> None:
    """Phases take a finished configuration; a half-built one is a programming error."""
    if not getattr(cfg, "resolved", False):
        raise ConfigError(f"{what} needs the configuration from rl_baseline.sf.cfg.resolve_cfg "
                          "(parsed, derived and validated once)")


def forced_skill(cfg: Any) -> Optional[str]:
    """The skill held by a forced-skill evaluation (``--evaluation True --eval_skill S``), else None."""
    skill = getattr(cfg, "eval_skill", NO_TASK) or NO_TASK
    return skill if cfg.evaluation and skill != NO_TASK else None


#: where the forced-skill evaluation starts the ascender: it needs levels to climb
ASCENDER_START_DEPTH = 3


def eval_start_depth(cfg: Any) -> int:
    """The dungeon level forced-skill episodes start on (1 outside a forced-skill evaluation)."""
    skill = forced_skill(cfg)
    if skill is None:
        return 1
    depth = int(getattr(cfg, "eval_start_depth", -1))
    if depth < 0:
        return ASCENDER_START_DEPTH if skill == "ascender" else 1
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
