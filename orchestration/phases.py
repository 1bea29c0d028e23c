"""The pipeline's parts, below both the runner (:mod:`orchestration.pipeline`) and the baselines' phase
providers (:mod:`orchestration.baselines_llm`, :mod:`orchestration.baselines_rl`): its configuration
(:class:`PipelineConfig`), its commands (:class:`Phase`), its error, and the flags and paths the phases
of MaestroMotif and of the baselines share. Pure Python: imports neither NLE nor sample-factory.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from common.llm import ANNOTATOR_MODEL, ANNOTATOR_MODELS_BY_SIZE, CODER_MODEL
from common.skill_files import DEFAULT_SKILLS_DIR, FLAG, active_paths
from common.vocabulary import EVAL_TASKS, SKILL_SPECS, SKILLS

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REPLAY = "code_generation/replays/gnomish_seed42.jsonl"
#: a slurm array task's index, as the paper plan's commands hold it
ARRAY_ID = "$SLURM_ARRAY_TASK_ID"


class PipelineError(RuntimeError):
    """A bad pipeline configuration or a failed phase."""


def active_skill_files() -> tuple[str, ...]:
    """This process's ``--skills`` paths, absolute, for the phases' commands; none for the designed set
    (``skills/``, every phase's default), so that the default plan's commands are the ones they always were."""
    paths = tuple(str(Path(p).resolve()) for p in active_paths())
    return () if paths == (str(DEFAULT_SKILLS_DIR.resolve()),) else paths


@dataclass
class PipelineConfig:
    """Sizes and locations of one pipeline run (see :data:`orchestration.pipeline.PRESETS`)."""

    preset: str = "smoke"
    out_dir: str = "train_dir/pipeline_smoke"
    skills: tuple[str, ...] = SKILLS
    # the skill files and folders every phase runs with (--skills, absolute paths); empty: the designed skills/
    skill_files: tuple[str, ...] = field(default_factory=active_skill_files)
    eval_targets: tuple[str, ...] = EVAL_TASKS
    # phase 0: data
    num_pairs: int = 300
    collect_policy: str = "explorer"
    collect_workers: int = 1
    data_seed: int = 0
    # phase 1a: annotation
    annotate_backend: str = "heuristic"
    annotate_model: str = ANNOTATOR_MODEL
    # the small presets' annotator (--annotator): "stand-in" (the heuristic), "smollm2" or "smollm2-free"
    # (SmolLM2-135M-Instruct, a real language model run by llama.cpp on the CPU: SMALL_PRESET_ANNOTATORS)
    annotator: str = "stand-in"
    # how the small presets' language model is asked (scripts.annotate_pairs --answer_mode), set by --annotator
    annotate_answer_mode: str = "release"
    annotate_gpus: int = 8
    annotate_chunks: int = 1
    # phase 1b: reward models
    reward_epochs: int = 5
    reward_batch_size: int = 64
    reward_lr: float = 1e-3
    reward_workers: int = 0
    reward_small_model: bool = True  # the "small" reward model with embed 8, one conv layer of 16, hidden 16
    # (False: the release's reward architecture, scripts.train_reward's default)
    # phase 2-3: code generation
    code_task: str = "gnomish"  # the task whose code generation is replayed (smoke) ...
    code_tasks: tuple[str, ...] = ()  # ... or generated for real (paper: every task)
    code_seed: int = 42
    replay: str = DEFAULT_REPLAY
    coder_model: str = CODER_MODEL
    # phase 4: skill training
    train_for_env_steps: int = 40_000
    num_workers: int = 2
    num_envs_per_worker: int = 4
    # sample-factory's --worker_num_splits: the groups each rollout worker's games are split into, each sending
    # its own inference request; 0 keeps sample-factory's default (2, the release's). The CPU presets' 1 sends a
    # worker's games in one request: larger inference batches (docs/performance.md)
    worker_num_splits: int = 0
    # scripts.main --games_per_env: games in one sample-factory environment, stepped together so that their policy
    # over skills decides in one request to the worker's sandbox; a worker plays num_envs_per_worker x games_per_env
    games_per_env: int = 1
    batch_size: int = 512
    rollout: int = 32
    max_episode_steps: int = 500
    experiment: str = "smoke"
    device: str = "cpu"
    # scripts.main --precision of the training runs (common.precision): fp32 (the release's, the paper preset's)
    # or auto (the CPU presets: bf16 autocast where the processor has bfloat16 instructions, else fp32)
    precision: str = "fp32"
    # scripts.main --discoverer_turns: the training policy's discoverer budget in game turns; 0 keeps the
    # policy's own (the release's 500). The learn preset's 100 is a named deviation for CPU-scale lives.
    discoverer_turns: int = 0
    seed: int = 2
    save_every_steps: int = 0
    # sample-factory's best-model save (its defaults: after 100k env steps, checked every 5 s).
    # The small presets cross it so that their evaluation reads checkpoints written after it.
    save_best_after: int = 100_000
    save_best_every_sec: int = 5
    # evaluation: "project" (eval_episodes episodes) or "release" (eval_env_steps env steps, the mean over the
    # last 1000 finished episodes)
    eval_protocol: str = "project"
    eval_episodes: int = 6
    eval_env_steps: int = 300_000
    eval_num_envs: int = 2
    # forced-skill episodes per skill and policy of the skill report (0: no skill report), and their step limit
    # (0: the training episodes' own)
    skill_report_episodes: int = 2
    skill_report_max_episode_steps: int = 0
    # the evaluation target whose first episode is also saved as a GIF ("" for none)
    video_target: str = "goldenexit"
    # the paper's baselines and ablations to run too (orchestration.baselines), after the skills' phases
    baselines: tuple[str, ...] = ()
    # the annotator by size (--annotator_size: common.llm.ANNOTATOR_MODELS_BY_SIZE); sets annotate_model unless
    # that is given too. The annotator-scale ablation runs annotation, reward models, training and evaluation
    # once per size of annotator_sizes.
    annotator_size: str = "70b"
    annotator_sizes: tuple[str, ...] = tuple(ANNOTATOR_MODELS_BY_SIZE)
    # the embedding-similarity baseline's sentence-transformers model (any id or folder)
    embedding_model: str = "all-MiniLM-L6-v2"
    # sample-factory's --serial_mode for the baselines' training runs (one process instead of a learner,
    # an inference and rollout workers: half the start-up time of a tiny run; the test suite uses it)
    baseline_serial_mode: bool = False

    @property
    def out(self) -> Path:
        return Path(self.out_dir)

    @property
    def standard_layout(self) -> bool:
        """The paper plan writes where the design of record puts things (og_dataset/, preference/,
        train_dir/skill_rewards, train_dir/skill_policy); small runs keep everything under out_dir."""
        return self.preset == "paper"

    @property
    def dataset_dir(self) -> str:
        return "og_dataset" if self.standard_layout else str(self.out / "og_dataset")

    @property
    def preference_dir(self) -> str:
        return "preference" if self.standard_layout else str(self.out / "preference")

    @property
    def reward_train_dir(self) -> str:
        return str(self.out / "skill_rewards")

    @property
    def policy_train_dir(self) -> str:
        return str(self.out / "skill_policy")

    @property
    def report_dir(self) -> str:
        return str(self.out / "report")

    def reward_dirs(self) -> list[str]:
        return [str(Path(self.reward_train_dir) / annotator(s)) for s in SKILLS]


def annotator(skill: str) -> str:
    """The annotator / reward experiment name of a skill (its file's ``reward.experiment``)."""
    return SKILL_SPECS[skill].experiment


@dataclass
class Phase:
    """One command of the pipeline.

    ``stage`` groups phases (collect, annotate, merge, reward, generate, combine, check,
    train, eval, report; baselines add theirs); ``array`` is a slurm array spec for the paper plan,
    where the command holds ``$SLURM_ARRAY_TASK_ID`` (or a bash array indexed by it, ``array_values``).
    ``after`` names the phases whose outputs this one reads (its slurm job waits for theirs), and
    ``slurm`` gives a phase its own job template and the values of that template's extra slots
    (``{"template": "baseline_llm.sbatch", "gpus": "8", ...}``; see :mod:`orchestration.slurm`).
    """

    name: str
    stage: str
    module: str
    args: list[str]
    outputs: list[str] = field(default_factory=list)
    array: Optional[str] = None
    array_values: tuple[str, ...] = ()
    note: str = ""
    # names of the phases this one reads the outputs of (slurm job dependencies of the baselines' phases;
    # a name absent from the plan is ignored)
    after: tuple[str, ...] = ()
    slurm: dict[str, str] = field(default_factory=dict)

    def argv(self, python: str = "python") -> list[str]:
        return [python, "-m", self.module, *self.args]

    def command(self, python: str = "python") -> str:
        return " ".join(shell_quote(a) for a in self.argv(python))


_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_")


def shell_quote(arg: str) -> str:
    """Quotes one argument for bash; shell variables (``$SLURM_ARRAY_TASK_ID``) stay expandable."""
    if arg and all(c in _SAFE for c in arg):
        return arg
    if "`" not in arg and "\\" not in arg and '"' not in arg and ("$" in arg or "'" in arg):
        return '"' + arg + '"'
    return shlex.quote(arg)



def skill_training_args(cfg: PipelineConfig) -> list[str]:
    """Flags shared by skill training and evaluation (evaluation reloads the saved config)."""
    args = [
        "--algo", "APPO",
        "--device", cfg.device,
        "--num_workers", str(cfg.num_workers),
        "--num_envs_per_worker", str(cfg.num_envs_per_worker),
        "--batch_size", str(cfg.batch_size),
    ]
    args += worker_split_args(cfg)
    if cfg.games_per_env > 1:
        args += ["--games_per_env", str(cfg.games_per_env)]
    if cfg.rollout:
        args += ["--rollout", str(cfg.rollout)]
    args += precision_args(cfg)
    if cfg.discoverer_turns:
        args += ["--discoverer_turns", str(cfg.discoverer_turns)]
    args += [
        "--reward_scale", "0.1", "--obs_scale", "255.0",
        "--max_episode_steps", str(cfg.max_episode_steps),
        "--seed", str(cfg.seed), "--code_seed", str(cfg.code_seed),
        "--reward_dir", repr(cfg.reward_dirs()),
        "--extrinsic_reward", "0.0", "--llm_reward", "0.1",
        "--train_dir", cfg.policy_train_dir, "--experiment", cfg.experiment,
        "--save_best_after", str(cfg.save_best_after), "--save_best_every_sec", str(cfg.save_best_every_sec),
    ]
    if cfg.preset == "paper":
        args += ["--keep_checkpoints", "5", "--stats_avg", "1000"]
    else:
        args += ["--stats_avg", "4", "--experiment_summaries_interval", "5"]
    return args


def skills_args(cfg: PipelineConfig) -> list[str]:
    """``--skills`` for every phase's command: the pipeline's skill set (none for the designed one)."""
    return [FLAG, *cfg.skill_files] if cfg.skill_files else []


def with_flag(args: Sequence[str], flag: str, value: str) -> list[str]:
    """``args`` with ``flag``'s value replaced (appended when absent)."""
    out = list(args)
    if flag in out:
        out[out.index(flag) + 1] = value
    else:
        out += [flag, value]
    return out


def eval_protocol_args(cfg: PipelineConfig) -> list[str]:
    """The preset's evaluation protocol as flags: a number of episodes (project) or an env-step budget (release), over
    a number of games. Its evaluations pass them, and the small presets' training too, so that the run's saved
    config.json holds them: ``scripts.main --evaluation True`` on its folder then evaluates as the preset did."""
    size = (["--eval_episodes", str(cfg.eval_episodes)] if cfg.eval_protocol == "project"
            else ["--eval_env_steps", str(cfg.eval_env_steps)])
    return ["--eval_protocol", cfg.eval_protocol, *size, "--eval_num_envs", str(cfg.eval_num_envs)]


def worker_split_args(cfg: PipelineConfig) -> list[str]:
    """``--worker_num_splits`` of a training run; none where the preset keeps sample-factory's default."""
    return ["--worker_num_splits", str(cfg.worker_num_splits)] if cfg.worker_num_splits else []


def precision_args(cfg: PipelineConfig) -> list[str]:
    """``--precision`` of a training run; none for fp32, scripts.main's default (the paper's commands stay the
    release's)."""
    return [] if cfg.precision == "fp32" else ["--precision", cfg.precision]


def display_path(path: str | Path) -> str:
    """A repository file as a path relative to the current directory when possible."""
    path = Path(path)
    if not path.is_absolute():
        path = REPO_ROOT / path
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def flag_value(phase: Phase, *flags: str) -> Optional[str]:
    """The value after the first of ``flags`` in the phase's arguments (``None`` when it has none of them)."""
    for flag in flags:
        if flag in phase.args:
            return phase.args[phase.args.index(flag) + 1]
    return None
