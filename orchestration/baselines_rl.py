"""The paper's RL baselines and ablations as pipeline phases (registered in :mod:`orchestration.baseline_registry`).

=============================  ===========================================================================
name                           what runs (per evaluation task where it says "per task")
=============================  ===========================================================================
``motif_task``                 Motif task-specific: per task, annotation of Motif's dataset layout with the
                               task's description as the goal, one reward model, RL on that task
                               (Motif's single-reward agent plus the score), evaluation on it
``motif_equivalent``           the same, the prompt also holding the skills' descriptions, the task
                               description and the task's policy over skills (equivalent prompting)
``embedding_reward``           per task: RL with the cosine similarity of sentence embeddings of the task
                               description and the message as intrinsic reward (plus the score)
``task_reward_score``          per task: RL with the game score plus the task's success detector as a
                               sparse reward
``ablation_isolated_skills``   one network per skill, each trained with only its skill active (the
                               budget split equally), composed at evaluation by the task's policy over skills
``ablation_skill_heads``       the skill policy with one actor/critic head per skill on the shared network
``ablation_annotator_scale``   annotation, reward models, skill training and evaluation once per annotator
                               size (Llama 3.1 8B / 70B / 405B; ``--annotator_sizes``)
=============================  ===========================================================================

Everything a baseline writes goes under ``{out_dir}/baselines/{name}/``; its evaluations write the JSON of
``scripts.main --evaluation True --eval_target T`` to ``.../eval/{task}_seed{code_seed}.json``, and its last
phase writes ``cost.json`` (:mod:`orchestration.baseline_cost`). The small presets run every phase on CPU:
annotation with the heuristic stand-in (a rule-based stand-in for the LLM, said so in every label), the
shipped hand-written policies over skills, tiny budgets; ``--preset paper`` plans the paper's scale as slurm
jobs. What each baseline reads from MaestroMotif's own phases (the collected datasets, the skills' reward
models, the policies over skills) is named in each phase's ``after`` (slurm dependencies) and is not
recomputed. Pure Python: building the plan imports neither NLE nor sample-factory.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Sequence

from common.llm import ANNOTATOR_MODEL, ANNOTATOR_MODELS_BY_SIZE
from common.vocabulary import EVAL_TASKS, SKILLS
from orchestration.baseline_registry import BASELINES_DIR, baseline_gpus, register
from orchestration.phases import (
    ARRAY_ID,
    Phase,
    PipelineConfig,
    PipelineError,
    annotator,
    display_path,
    precision_args,
    skill_training_args,
    with_flag,
    worker_split_args,
)

#: the root environment of the single-task baselines: its reward is the in-game score (Motif's NetHackScore)
SCORE_ENV = "NetHackScore-v1"
#: Motif's reward-training and RL settings for a single reward model (Motif's README, docs/paper.md)
MOTIF_REWARD_PAPER = dict(batch_size=1024, num_epochs=10, reward_lr=1e-5, num_workers=40)
MOTIF_RL = ["--extrinsic_reward", "0.1", "--llm_reward", "0.1", "--beta_count_exponent", "3",
            "--eps_threshold_quantile", "0.5"]
#: Motif's released dataset (docs/motif.md): where the paper plan annotates
MOTIF_DATASET = "motif_dataset"
#: tensor-parallel GPUs of vLLM per annotator size (405B: a node of 8 GPUs holding FP8 weights, or more nodes)
ANNOTATOR_GPUS = {"8b": 1, "70b": 8, "405b": 8}
STAND_IN = "heuristic stand-in annotator (rules, not an LLM)"


# ----------------------------------------------------------------------------- shared pieces


def base_dir(cfg: PipelineConfig, name: str) -> Path:
    return cfg.out / BASELINES_DIR / name


def _paper(cfg: PipelineConfig) -> bool:
    return cfg.preset == "paper"


def _policy_code(cfg: PipelineConfig, task: str) -> str:
    """The task's policy over skills: at paper scale what its generate/combine phases wrote; in the small
    presets the shipped module (a hand-written reference policy, as MaestroMotif's own evaluation there uses)."""
    rel = f"rl_baseline/meta_policies/{task}/seed{cfg.code_seed}/execution.py"
    return rel if _paper(cfg) else display_path(rel)


def _steps(n: int) -> str:
    return f"{n:.0e}".replace("e+0", "e") if n >= 1_000_000_000 else f"{n:,}"


def _sf_args(cfg: PipelineConfig) -> list[str]:
    """sample-factory sizes and the paper's learner settings of a baseline's training run."""
    # a worker plays the method's number of games, each its own environment (--games_per_env is the skill
    # environment's: some baselines play Motif's)
    games = cfg.num_envs_per_worker * cfg.games_per_env
    args = ["--algo", "APPO", "--device", cfg.device, "--num_workers", str(cfg.num_workers),
            "--num_envs_per_worker", str(games), "--batch_size", str(cfg.batch_size)]
    args += worker_split_args(cfg)
    if cfg.rollout:
        args += ["--rollout", str(cfg.rollout)]
    args += precision_args(cfg)
    args += ["--reward_scale", "0.1", "--obs_scale", "255.0", "--max_episode_steps", str(cfg.max_episode_steps),
             "--seed", str(cfg.seed), "--code_seed", str(cfg.code_seed), "--save_best_after", str(cfg.save_best_after),
             "--save_best_every_sec", str(cfg.save_best_every_sec)]
    args += _run_args(cfg)
    return args


def _run_args(cfg: PipelineConfig) -> list[str]:
    if _paper(cfg):
        return ["--keep_checkpoints", "5", "--stats_avg", "1000", "--save_every_steps", str(cfg.save_every_steps)]
    args = ["--stats_avg", "4", "--experiment_summaries_interval", "5"]
    return args + (["--serial_mode", "True"] if cfg.baseline_serial_mode else [])


def _eval_args(cfg: PipelineConfig, train_dir: str | Path, experiment: str, task: str) -> list[str]:
    """Evaluation of a trained experiment on ``task``: its saved configuration, this preset's protocol."""
    args = ["--train_dir", str(train_dir), "--experiment", experiment, "--device", cfg.device,
            "--evaluation", "True", "--eval_target", task]
    if not _paper(cfg):  # a number of episodes at this scale; the JSON still scores them by the release's rules
        args += ["--eval_protocol", "project", "--eval_episodes", str(cfg.eval_episodes),
                 "--eval_num_envs", str(cfg.eval_num_envs)]
    return args


def _eval_json(train_dir: str | Path, experiment: str, task: str, cfg: PipelineConfig) -> str:
    return str(Path(train_dir) / experiment / "eval" / f"{task}_seed{cfg.code_seed}.json")


def _cost_phase(cfg: PipelineConfig, name: str, label: str, phases: Sequence[Phase], llm: str) -> Phase:
    """The baseline's last phase: ``cost.json`` from the phases that ran (see orchestration.baseline_cost). Each
    phase's device is what its slurm job asks for (:func:`orchestration.baseline_registry.baseline_gpus`), so the
    plan and the jobs agree on what a GPU hour is."""
    args = ["--out_dir", str(cfg.out), "--name", name, "--label", label, "--llm", llm]
    prefix = f"{BASELINES_DIR}/{name}/"
    for ph in phases:  # named within the baseline (the script puts the prefix back)
        gpus = baseline_gpus(ph)
        args += ["--phase", f"{ph.name[len(prefix):]}={'gpu:' + str(gpus) if gpus else 'cpu'}"]
    return Phase(f"{BASELINES_DIR}/{name}/cost", "baseline_cost", "scripts.baseline_cost", args,
                 outputs=[str(base_dir(cfg, name) / "cost.json")], after=tuple(p.name for p in phases),
                 note="wall time x device of the phases above, env steps from their checkpoints")


def _llm_mode(cfg: PipelineConfig) -> str:
    """How cost.json counts the annotator's tokens: a stand-in has none; an LLM's are read from its logs."""
    return "stand_in" if cfg.annotate_backend in ("heuristic", "random") else "logs"


def _tasks(cfg: PipelineConfig) -> tuple[str, ...]:
    return tuple(cfg.eval_targets)


def _annotator_label(cfg: PipelineConfig, model: str = ANNOTATOR_MODEL) -> str:
    if cfg.annotate_backend == "heuristic" and not _paper(cfg):
        return STAND_IN
    return f"{model.split('/')[-1]} annotator ({cfg.annotate_backend})"


def _scale_label(cfg: PipelineConfig, per: str = "") -> str:
    steps = _steps(cfg.train_for_env_steps)
    where = "paper scale" if _paper(cfg) else f"{cfg.preset} preset, NOT comparable to the paper"
    return f"{steps} env steps{' per ' + per if per else ''}, {where}"


#: the evaluation task of a paper-plan array task (the main plan's evaluation array does the same)
TASK_VAR = "${EVAL_TARGETS[$SLURM_ARRAY_TASK_ID]}"


@dataclass(frozen=True)
class TaskSlot:
    """Where a per-task phase puts its task: the task itself (small presets: one phase per task), or the
    array task's entry of ``EVAL_TARGETS`` (paper plan: one slurm array over the tasks per step)."""

    task: str  # a task name, or TASK_VAR
    label: str  # the last part of the phase's name: the task, or "tasks"
    array: Optional[str] = None
    values: tuple[str, ...] = ()

    def kw(self) -> dict:
        return {"array": self.array, "array_values": self.values}


def _task_slots(cfg: PipelineConfig) -> list[TaskSlot]:
    tasks = _tasks(cfg)
    if _paper(cfg):
        return [TaskSlot(TASK_VAR, "tasks", f"0-{len(tasks) - 1}", tasks)]
    return [TaskSlot(t, t) for t in tasks]


def _single_task_train(cfg: PipelineConfig, name: str, slot: TaskSlot, extra: Sequence[str],
                       after: Sequence[str]) -> Phase:
    base = base_dir(cfg, name)
    args = (["--env", "nle_fixed_eat_action", "--root_env", SCORE_ENV] + _sf_args(cfg) + list(extra)
            + ["--train_dir", str(base / "policy"), "--experiment", slot.task,
               "--train_for_env_steps", str(cfg.train_for_env_steps)])
    return Phase(f"{BASELINES_DIR}/{name}/train/{slot.label}", "baseline_train", "scripts.main", args,
                 outputs=[str(base / "policy" / slot.task / "checkpoint_p0")], after=tuple(after),
                 note="one array task per evaluation task; resumes from its latest checkpoint when run again"
                 if _paper(cfg) else "", **slot.kw())


def _eval_phase(cfg: PipelineConfig, name: str, label: str, train_dir: Path, experiment: str, slot: TaskSlot,
                extra: Sequence[str] = (), after: Sequence[str] = ()) -> Phase:
    note = ("one array task per evaluation target; the release's protocol (480 games, 3M env steps)"
            if _paper(cfg) else "")
    return Phase(f"{BASELINES_DIR}/{name}/eval/{label}", "baseline_eval", "scripts.main",
                 _eval_args(cfg, train_dir, experiment, slot.task) + list(extra),
                 outputs=[_eval_json(train_dir, experiment, slot.task, cfg)], after=tuple(after), note=note,
                 **slot.kw())


# ----------------------------------------------------------------------------- Motif task-specific (+ equivalent)


def _motif_phases(cfg: PipelineConfig, name: str, equivalent: bool) -> list[Phase]:
    base = base_dir(cfg, name)
    paper = _paper(cfg)
    phases: list[Phase] = []
    if paper:
        dataset = MOTIF_DATASET
        data_after: tuple[str, ...] = ()
    else:
        # the explorer's observations of MaestroMotif's own collection (the skill only names the file), in
        # Motif's layout
        dataset = str(base / "motif_dataset")
        source = cfg.skills[0]
        export = Phase(f"{BASELINES_DIR}/{name}/export", "baseline_data", "scripts.export_dataset",
                       ["--format", "motif", "--dataset_dir", cfg.dataset_dir, "--skill", source,
                        "--preference_dir", cfg.preference_dir, "--out", dataset, "--overwrite", "--no_progress"],
                       outputs=[str(Path(dataset) / "data" / "message.npy")], after=(f"collect/{source}",),
                       note=f"{source}'s explorer observations exported to Motif's dataset layout")
        phases.append(export)
        data_after = (export.name,)
    for slot in _task_slots(cfg):
        task = slot.task
        ann = f"llama70b_msg_{task}_default" + ("_equivalent" if equivalent else "")
        args = ["--directory", dataset, "--goal-key", task, "--prompt-version", "default",
                "--n-annotation-chunks", "1", "--chunk-number", "0", "--logdir", str(base / "annotation_logs"),
                "--no-progress", "--backend", cfg.annotate_backend]
        annotate_name = f"{BASELINES_DIR}/{name}/annotate/{slot.label}"
        if paper:
            args += ["--model", ANNOTATOR_MODEL, "--num-gpus", str(cfg.annotate_gpus)]
        after = list(data_after)
        if equivalent:
            args += ["--prompt-context", "equivalent", "--policy-code", _policy_code(cfg, task)]
            after += [f"generate/{t}" for t in (slot.values or (task,))]
        note = "heuristic backend: a rule-based stand-in for the LLM" if cfg.annotate_backend == "heuristic" else ""
        if equivalent and cfg.annotate_backend == "heuristic":
            note += " (it does not read the prompt's context: its labels equal motif_task's)"
        if paper:
            note = f"one array task per evaluation task; {ANNOTATOR_MODEL} through vLLM"
        phases.append(Phase(annotate_name, "baseline_annotate", "scripts.annotate_pairs_dataset", args,
                            outputs=[str(Path(dataset) / "preference" / f"{ann}.npy")], after=tuple(after),
                            note=note, **slot.kw()))
        reward_args = ["--dataset_dir", dataset, "--annotator", ann, "--experiment", ann,
                       "--train_dir", str(base / "rewards"), "--seed", "777"]
        if paper:
            for key, value in MOTIF_REWARD_PAPER.items():
                reward_args += [f"--{key}", str(value)]
        else:
            reward_args += ["--batch_size", str(cfg.reward_batch_size), "--num_epochs", str(cfg.reward_epochs),
                            "--reward_lr", str(cfg.reward_lr), "--num_workers", str(cfg.reward_workers),
                            "--device", "cpu", "--no_progress"]
            if cfg.reward_small_model:
                reward_args += ["--embed_dim", "8", "--conv_channels", "16", "--hidden_dim", "16"]
        reward = Phase(f"{BASELINES_DIR}/{name}/reward/{slot.label}", "baseline_reward", "scripts.train_reward",
                       reward_args, outputs=[str(base / "rewards" / ann / "reward_metrics" / "metrics.csv")],
                       after=(annotate_name,), **slot.kw())
        phases.append(reward)
        encoder = [] if cfg.reward_small_model and not paper else ["--reward_encoder", "nle_torchbeast_encoder"]
        train = _single_task_train(cfg, name, slot, ["--reward_dir", str(base / "rewards" / ann)] + MOTIF_RL + encoder,
                                   (reward.name,))
        phases.append(train)
        phases.append(_eval_phase(cfg, name, slot.label, base / "policy", task, slot, after=(train.name,)))
    what = "Motif (equivalent prompting)" if equivalent else "Motif task-specific"
    label = f"{what}, {_annotator_label(cfg)}, {_scale_label(cfg, 'task')}"
    if equivalent and not paper:
        label += "; shipped hand-written policies over skills in the prompt"
    phases.append(_cost_phase(cfg, name, label, phases, _llm_mode(cfg)))
    return phases


@register("motif_task", "Motif task-specific: per task, annotation with the task's description, one reward model, "
                        "RL on the task (same env-step budget per task)")
def motif_task(cfg: PipelineConfig) -> list[Phase]:
    return _motif_phases(cfg, "motif_task", equivalent=False)


@register("motif_equivalent", "Motif with equivalent prompting: motif_task whose prompt also holds the skill "
                              "descriptions, the task description and the task's policy-over-skills code")
def motif_equivalent(cfg: PipelineConfig) -> list[Phase]:
    return _motif_phases(cfg, "motif_equivalent", equivalent=True)


# ----------------------------------------------------------------------------- embedding similarity


@register("embedding_reward", "Embedding-similarity reward: per task, RL with the cosine similarity of sentence "
                              "embeddings of the task description and the message (plus the score)")
def embedding_reward(cfg: PipelineConfig) -> list[Phase]:
    name = "embedding_reward"
    base = base_dir(cfg, name)
    phases: list[Phase] = []
    for slot in _task_slots(cfg):
        train = _single_task_train(cfg, name, slot, [
            "--llm_reward_type", "embedding", "--embedding_task", slot.task, "--embedding_model", cfg.embedding_model,
            "--extrinsic_reward", "0.1", "--llm_reward", "0.1", "--beta_count_exponent", "3"], ())
        phases += [train, _eval_phase(cfg, name, slot.label, base / "policy", slot.task, slot, after=(train.name,))]
    label = (f"Embedding-similarity reward ({cfg.embedding_model} sentence embeddings of the task description vs "
             f"the message) plus the score, {_scale_label(cfg, 'task')}")
    phases.append(_cost_phase(cfg, name, label, phases, "none"))
    return phases


# ----------------------------------------------------------------------------- task reward + score


@register("task_reward_score", "RL with the task reward plus the score: per task, the game score as dense reward "
                               "and the task's success detector as a sparse one")
def task_reward_score(cfg: PipelineConfig) -> list[Phase]:
    name = "task_reward_score"
    base = base_dir(cfg, name)
    check_detectors(_tasks(cfg), name)  # a task without a detector: stop before anything is planned
    phases: list[Phase] = []
    for slot in _task_slots(cfg):
        train = _single_task_train(cfg, name, slot, ["--task_reward", slot.task, "--llm_reward", "0",
                                                     "--extrinsic_reward", "1.0"], ())
        phases += [train, _eval_phase(cfg, name, slot.label, base / "policy", slot.task, slot, after=(train.name,))]
    label = (f"Task reward (the task's success detector, +50 per success or counted event) plus the score, "
             f"{_scale_label(cfg, 'task')}")
    phases.append(_cost_phase(cfg, name, label, phases, "none"))
    return phases


# ----------------------------------------------------------------------------- ablations


def _skill_training(cfg: PipelineConfig, train_dir: Path, experiment: str) -> list[str]:
    """MaestroMotif's training command (its reward models, training policy over skills and sizes) into another
    folder: the ablations change one thing each on top of it."""
    args = with_flag(with_flag(skill_training_args(cfg), "--train_dir", str(train_dir)), "--experiment", experiment)
    if _paper(cfg):
        return args + ["--save_every_steps", str(cfg.save_every_steps)]
    return args + (["--serial_mode", "True"] if cfg.baseline_serial_mode else [])


def _upstream_of_training(cfg: PipelineConfig) -> tuple[str, ...]:
    """MaestroMotif's phases a skill-training run reads: the reward models and the training policy over skills."""
    return tuple(f"reward/{s}" for s in SKILLS) + ("generate/exploration",)


def _skill_eval_after(slot: TaskSlot, own: Sequence[str]) -> tuple[str, ...]:
    """A task's evaluation reads its trained networks and the task's policy over skills."""
    return tuple(own) + tuple(f"generate/{t}" for t in (slot.values or (slot.task,)))


@register("ablation_isolated_skills", "Skills trained in isolation: one network per skill with only that skill "
                                      "active (same total budget), composed by each task's policy over skills")
def ablation_isolated_skills(cfg: PipelineConfig) -> list[Phase]:
    name = "ablation_isolated_skills"
    base = base_dir(cfg, name)
    per_skill = max(1, cfg.train_for_env_steps // len(SKILLS))
    phases: list[Phase] = []
    for skill in SKILLS:
        args = _skill_training(cfg, base / "policy", skill) + ["--train_skill", skill,
                                                                "--train_for_env_steps", str(per_skill)]
        phase = Phase(f"{BASELINES_DIR}/{name}/train/{skill}", "baseline_train", "scripts.main", args,
                      outputs=[str(base / "policy" / skill / "checkpoint_p0")], after=_upstream_of_training(cfg),
                      note=f"{skill} alone for the whole of every episode, 1/{len(SKILLS)} of the budget")
        phases.append(phase)
    dirs = repr([str(base / "policy" / s) for s in SKILLS])
    trained = [p.name for p in phases]
    for slot in _task_slots(cfg):
        phases.append(_eval_phase(cfg, name, slot.label, base / "policy", "isolated", slot,
                                  ["--skill_policy_dirs", dirs], after=_skill_eval_after(slot, trained)))
    label = (f"Skills trained in isolation ({len(SKILLS)} networks, {_steps(per_skill)} env steps each, "
             f"{_steps(per_skill * len(SKILLS))} in all), composed by the task's policy over skills, "
             f"{'paper scale' if _paper(cfg) else cfg.preset + ' preset, NOT comparable to the paper'}")
    phases.append(_cost_phase(cfg, name, label, phases, "none"))
    return phases


@register("ablation_skill_heads", "Separate policy heads per skill: one actor/critic head per skill on the shared "
                                  "network, chosen by the skill one-hot (--policy_heads per_skill)")
def ablation_skill_heads(cfg: PipelineConfig) -> list[Phase]:
    name = "ablation_skill_heads"
    base = base_dir(cfg, name)
    experiment = "per_skill_heads"
    args = _skill_training(cfg, base / "policy", experiment) + [
        "--policy_heads", "per_skill", "--train_for_env_steps", str(cfg.train_for_env_steps)]
    train = Phase(f"{BASELINES_DIR}/{name}/train", "baseline_train", "scripts.main", args,
                  outputs=[str(base / "policy" / experiment / "checkpoint_p0")], after=_upstream_of_training(cfg))
    phases = [train]
    for slot in _task_slots(cfg):
        phases.append(_eval_phase(cfg, name, slot.label, base / "policy", experiment, slot,
                                  after=_skill_eval_after(slot, [train.name])))
    label = f"Separate policy heads per skill on one network, {_scale_label(cfg)}"
    phases.append(_cost_phase(cfg, name, label, phases, "none"))
    return phases


@register("ablation_annotator_scale", "Annotator scale: annotation, reward models, skill training and evaluation "
                                      "once per annotator size (Llama 3.1 8B/70B/405B, --annotator_sizes)")
def ablation_annotator_scale(cfg: PipelineConfig) -> list[Phase]:
    name = "ablation_annotator_scale"
    base = base_dir(cfg, name)
    paper = _paper(cfg)
    phases: list[Phase] = []
    for size in cfg.annotator_sizes:
        model = ANNOTATOR_MODELS_BY_SIZE[size]
        sub = replace(cfg, out_dir=str(base / size))  # its reward models and policy live under {size}/
        pref_dir = str(base / size / "preference")
        rewards: list[str] = []
        for skill in cfg.skills:
            args = ["--goal_key", skill, "--backend", cfg.annotate_backend, "--model", model,
                    "--directory", cfg.dataset_dir, "--preference_dir", pref_dir,
                    "--logdir", str(base / size / "annotation_logs"), "--no_progress"]
            after = (f"collect/{skill}",)
            if paper:
                n = max(1, int(cfg.annotate_chunks))
                gpus = ANNOTATOR_GPUS[size]
                args += ["--num_gpus", str(gpus), "--n_chunks", str(n), "--chunk_number", ARRAY_ID]
                ann = Phase(f"{BASELINES_DIR}/{name}/annotate/{size}/{skill}", "baseline_annotate",
                            "scripts.annotate_pairs", args, array=f"0-{n - 1}", after=after,
                            note=f"{model}: one array task per chunk, vLLM over {gpus} GPU(s)")
                merge = Phase(f"{BASELINES_DIR}/{name}/merge/{size}/{skill}", "baseline_annotate",
                              "scripts.annotate_pairs",
                              ["--goal_key", skill, "--directory", cfg.dataset_dir, "--preference_dir", pref_dir,
                               "--n_chunks", str(n), "--merge"],
                              outputs=[str(Path(pref_dir) / f"{annotator(skill)}.npy")], after=(ann.name,))
                phases += [ann, merge]
                reward_after = (merge.name,)
            else:
                ann = Phase(f"{BASELINES_DIR}/{name}/annotate/{size}/{skill}", "baseline_annotate",
                            "scripts.annotate_pairs", args,
                            outputs=[str(Path(pref_dir) / f"{annotator(skill)}.npy")], after=after,
                            note=f"heuristic backend: a rule-based stand-in for {model} (the same rules at every "
                                 "size)" if cfg.annotate_backend == "heuristic" else "")
                phases.append(ann)
                reward_after = (ann.name,)
            reward_args = ["--experiment", annotator(skill), "--dataset_dir", cfg.dataset_dir,
                           "--preference_dir", pref_dir, "--train_dir", sub.reward_train_dir,
                           "--batch_size", str(cfg.reward_batch_size), "--num_workers", str(cfg.reward_workers),
                           "--reward_lr", str(cfg.reward_lr), "--num_epochs", str(cfg.reward_epochs), "--seed", "777"]
            if not paper:
                reward_args += ["--device", "cpu", "--no_progress"]
                if cfg.reward_small_model:
                    reward_args += ["--embed_dim", "8", "--conv_channels", "16", "--hidden_dim", "16"]
            reward = Phase(f"{BASELINES_DIR}/{name}/reward/{size}/{skill}", "baseline_reward", "scripts.train_reward",
                           reward_args, outputs=[str(Path(sub.reward_train_dir) / annotator(skill) / "reward_metrics"
                                                     / "metrics.csv")], after=reward_after)
            phases.append(reward)
            rewards.append(reward.name)
        train_args = _skill_training(sub, Path(sub.policy_train_dir), cfg.experiment) + [
            "--train_for_env_steps", str(cfg.train_for_env_steps)]
        exp_dir = Path(sub.policy_train_dir) / cfg.experiment
        train = Phase(f"{BASELINES_DIR}/{name}/train/{size}", "baseline_train", "scripts.main", train_args,
                      outputs=[str(exp_dir / "checkpoint_p0")], after=tuple(rewards) + ("generate/exploration",))
        phases.append(train)
        for slot in _task_slots(cfg):
            phases.append(_eval_phase(cfg, name, f"{size}/{slot.label}", Path(sub.policy_train_dir), cfg.experiment,
                                      slot, after=_skill_eval_after(slot, [train.name])))
    sizes = ", ".join(cfg.annotator_sizes)
    if paper:
        label = f"Annotator scale (Llama 3.1 {sizes} annotators), {_scale_label(cfg, 'size')}"
    else:
        label = (f"Annotator scale ({sizes}): {STAND_IN} at every size, so the sizes are NOT distinguished at this "
                 f"scale; {_scale_label(cfg, 'size')}")
    phases.append(_cost_phase(cfg, name, label, phases, _llm_mode(cfg)))
    return phases


#: the tasks with a success detector: every evaluation task (rl_baseline/tasks/detectors.py asserts one tracker
#: per task of EVAL_TASKS; the plan is built without importing it, since that imports NLE)
DETECTED_TASKS: tuple[str, ...] = EVAL_TASKS


def check_detectors(tasks: Sequence[str], name: str) -> None:
    """The task-reward baseline needs a success detector per task: a task without one is a :class:`PipelineError`
    naming it, raised while the plan is built (nothing runs)."""
    missing = [t for t in tasks if t not in DETECTED_TASKS]
    if missing:
        raise PipelineError(f"baseline {name}: no success detector for task(s) {', '.join(missing)} (the task reward "
                            f"needs one; tasks with a detector: {', '.join(DETECTED_TASKS)})")
