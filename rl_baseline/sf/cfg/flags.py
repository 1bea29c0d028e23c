"""The flags of ``scripts.main`` that sample-factory does not have (:func:`add_maestro_args`), the values they
take, and the paper's defaults for sample-factory's own (:data:`PAPER_DEFAULTS`); as sample-factory's
``cfg/cfg.py`` is to its parser."""
from __future__ import annotations

import argparse
from typing import Any

from common.nethack import game_clock
from common.precision import PRECISIONS
from common.skill_files import add_skills_flag
from common.vocabulary import NUM_SKILLS, SKILL_SPECS, SKILLS
from rl_baseline.baselines.flags import add_baseline_args, add_llm_meta_policy_args
from rl_baseline.flag_types import MOTIF_ENV, SKILL_ENV
from rl_baseline.skills import MSG_MAX_KEYS, REWARD_TIMINGS, SKILL_REWARDS

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
#: where the forced-skill evaluation starts a skill that ends when the depth decreases (the ascender): it needs
#: levels to climb
ASCENDER_START_DEPTH = 3
SF1_REWARD_CLIP = 10.0  # sample-factory 1's --reward_clip, applied after --reward_scale by Motif's and ONI's actors
#: each skill file's ``reward.quantile`` in skill order (the designed five: "[0.95,0.85,0.85,0.85,0.85]", the paper's
#: 95th for the discoverer, 85th for the others); derive_cfg recognises the default by this text
DEFAULT_QUANTILES = "[" + ",".join(f"{SKILL_SPECS[s].quantile:g}" for s in SKILLS) + "]"

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


#: what acts in an evaluation: the trained network, the same network untrained, or uniformly random actions
EVAL_POLICIES = ("trained", "untrained", "random")

#: evaluation flags that come from the evaluating command, not from the saved training one (but SAVED_EVAL_PROTOCOL)
EVAL_FLAGS = ("eval_protocol", "eval_env_steps", "eval_stats_avg", "eval_episodes", "eval_num_envs",
              "eval_deterministic_actions", "eval_policy", "game_clock", "save_video", "eval_skill", "eval_start_depth", "eval_dir",
              "eval_replace", "trust_generated_code",
              "meta_policy", "meta_llm_backend", "meta_llm_model", "meta_llm_base_url", "meta_llm_replay",
              "meta_llm_record", "meta_llm_cache_dir", "meta_llm_temperature", "meta_llm_max_tokens",
              "meta_llm_num_gpus", "meta_llm_server_gpus", "meta_llm_method")
#: the evaluation protocol a training command may choose for its run (a pipeline preset does): an evaluation that
#: does not give one of these flags takes the run's choice, not the release's default
SAVED_EVAL_PROTOCOL = ("eval_protocol", "eval_env_steps", "eval_stats_avg", "eval_episodes", "eval_num_envs")



def add_maestro_args(p: argparse.ArgumentParser) -> None:
    """Flags of the release's ``scripts.main`` that sample-factory does not have."""
    from sample_factory.utils.utils import str2bool  # lazy: sample-factory; --help stays light without it

    g = p.add_argument_group("MaestroMotif")
    # read before this parser by scripts/__init__.py (the vocabulary is the chosen set); parse_command_line drops
    # its value, and the run records the set itself (derive_cfg: skill_set)
    add_skills_flag(g)
    g.add_argument("--reward_dir", type=str, default="[]",
                   help="reward model directories, one per skill in skill order, as a list literal "
                        f"(\"['train_dir/skill_rewards/{SKILL_SPECS[SKILLS[0]].experiment}', ...]\") or a single "
                        "directory")
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
                        "progress measure, its file's measures.progress: "
                        + ", ".join(f"{s} {SKILL_SPECS[s].progress_measure}" for s in SKILLS)
                        + "; times --llm_reward; no reward model needed)")
    g.add_argument("--progress_scale", type=str, default="1.0",
                   help="--skill_reward progress only: each skill's progress reward multiplied by this (list in "
                        "the order of the skills, or one value for every skill), before --llm_reward; e.g. with "
                        "the five designed skills \"[1, 50, 50, 1, 1]\" pays a level descended or ascended as much "
                        "as 50 cells revealed")
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
    g.add_argument("--trust_generated_code", type=str2bool, default=False,
                   help="run the policy over skills (code a language model wrote) inside the rollout workers, "
                        "unconfined, at your own risk; off (default): in a bubblewrap sandbox per worker with no "
                        "network, no files of yours, an empty environment, 1 GiB and a wall-clock bound per call "
                        "(docs/reliability.md)")
    g.add_argument("--games_per_env", type=int, default=1,
                   help="games in one sample-factory environment, stepped together (sample-factory's multi-agent "
                        "API): their policy over skills decides in one request to the worker's sandbox instead of "
                        "one each, the same decisions. A rollout worker plays --num_envs_per_worker x "
                        "--games_per_env games; the game seeds are those of as many single-game envs (training "
                        "only: evaluations step their games alone)")
    g.add_argument("--discoverer_turns", type=int, default=None,
                   help="training only: the training policy's discoverer budget in game turns, set after its "
                        "set_initial_values (default: the policy's own, 500 in the release's). A named deviation "
                        "for CPU-scale lives, which end near 500 steps (docs/results.md); ignored with "
                        "--evaluation True, where the task's own policy keeps its budgets")
    lv = p.add_argument_group(
        "levers of the CPU screens (this project's, not the release's: off by default and in the paper preset; a "
        "preset that adopts one names it in docs/fidelity.md; --gamma and --policy_heads are the other two screened)")
    lv.add_argument("--travel_actions", type=str2bool, default=False,
                    help="two more actions after the release's 28: travel_down and travel_up, each NetHack's travel "
                         "command to a staircase down / up seen on the map (the keys _ then > or < then . as one "
                         "action); the network's action head grows to 30, so a run keeps the value it was trained "
                         "with (skill environment only)")
    lv.add_argument("--stairs_input", type=str2bool, default=False,
                    help="one more input of two flags: whether the hero stands on a staircase down / up seen on the "
                         "map before (on the stairs the hero's @ hides them); joined to the stats input before the "
                         "skill one-hot, so a run keeps the value it was trained with (skill environment only)")
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
                        f"level teleport after reset (-1: {ASCENDER_START_DEPTH} for a skill that ends when the "
                        "depth decreases, which needs levels to climb, 1 for the other skills)")
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
    g.add_argument("--eval_replace", type=str2bool, default=False,
                   help="replace an earlier result made with other settings (its settings are named when refused); "
                        "a result made with the same settings is replaced without it, and the run says so")
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

