"""scripts.pipeline: the plans of every preset, the runner's failure/resume behaviour, and
the CI-sized run through every phase end to end."""
from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.vocabulary import ALL_TASKS, EVAL_TASKS, SKILLS
from orchestration.phases import DEFAULT_REPLAY, Phase, PipelineError, skill_training_args
from orchestration.pipeline import build_plan, make_config, run_plan
from scripts import pipeline as pipeline_cli

REPO = Path(__file__).resolve().parents[1]


def parse(phase: Phase):
    if phase.module == "scripts.main":
        from rl_baseline.sf.cfg import parse_cfg

        return parse_cfg(phase.args)
    return importlib.import_module(phase.module).build_parser().parse_args(phase.args)


def test_small_plan_covers_every_phase_inside_out_dir(tmp_path):
    out = tmp_path / "smoke"
    cfg = make_config("smoke", out_dir=str(out))
    plan = build_plan(cfg)
    stages = [p.stage for p in plan]
    assert stages == (["collect"] * 5 + ["annotate"] * 5 + ["reward"] * 5 + ["generate", "combine", "check", "train"]
                      + ["eval"] * (len(EVAL_TASKS) + 1) + ["report"])
    parsed = {p.name: parse(p) for p in plan}
    for skill in SKILLS:
        c, a, r = parsed[f"collect/{skill}"], parsed[f"annotate/{skill}"], parsed[f"reward/{skill}"]
        assert c.policy == "explorer" and c.skill == skill and Path(c.out) == out / "og_dataset"
        assert a.backend == "heuristic" and Path(a.directory) == out / "og_dataset"
        assert Path(a.preference_dir) == out / "preference" and a.goal_key == skill
        assert Path(r.preference_dir) == out / "preference" and r.experiment == f"llama3_{skill}_default"
    gen = parsed["generate/gnomish"]
    assert gen.backend == "replay" and Path(gen.replay).resolve() == (REPO / DEFAULT_REPLAY).resolve()
    assert Path(gen.out_dir) == out / "code_generation"
    assert Path(parsed["combine/gnomish"].out_root) == out / "meta_policies"
    train = parsed["train/skills"]
    assert train.train_for_env_steps == cfg.train_for_env_steps and train.device == "cpu"
    assert train.reward_dirs == [str(out / "skill_rewards" / f"llama3_{s}_default") for s in SKILLS]
    assert Path(train.train_dir) == out / "skill_policy"
    evals = [parsed[f"eval/{t}"] for t in EVAL_TASKS]
    assert [e.eval_target for e in evals] == list(EVAL_TASKS)
    assert all(e.evaluation and e.eval_episodes == cfg.eval_episodes and e.train_dir == train.train_dir
               for e in evals)
    assert [e.eval_target for e in evals if e.save_video] == [cfg.video_target] == ["goldenexit"]
    # the skill report holds every skill of the trained experiment, after the task evaluations
    report = parsed["skill_report"]
    assert Path(report.policy_dir) == out / "skill_policy" / cfg.experiment
    assert report.episodes == cfg.skill_report_episodes > 0 and plan[-2].name == "skill_report"
    assert make_config("learn").train_for_env_steps >= 10 * make_config("smoke").train_for_env_steps
    # every path a phase writes is inside out_dir: the repository's data folders stay untouched
    for phase in plan:
        for path in phase.outputs:
            assert Path(path).resolve().is_relative_to(out.resolve()), (phase.name, path)


def test_learn_preset_trains_with_the_releases_episodes_and_evaluates_with_its_protocol(tmp_path):
    """The learn preset (the composition run on 2 cores): the release's 10,000-step training episodes, at least
    10M env steps, the nine tasks under the release's protocol (a step budget per task), and the skill report on
    episodes of at most 1,000 steps (the earlier reports' games)."""
    cfg = make_config("learn", out_dir=str(tmp_path / "learn"))
    parsed = {p.name: parse(p) for p in build_plan(cfg) if p.module in ("scripts.main", "scripts.skill_report")}
    train = parsed["train/skills"]
    assert train.max_episode_steps == 10_000 and train.train_for_env_steps >= 10_000_000
    # the named deviation: the training policy's discoverer runs 100 game turns, not the release's 500; the
    # paper preset and the small ones keep the policy's own
    assert train.discoverer_turns == 100
    for preset in ("paper", "smoke"):
        other = next(parse(p) for p in build_plan(make_config(preset)) if p.name == "train/skills")
        assert other.discoverer_turns is None, preset
    evals = [parsed[f"eval/{t}"] for t in EVAL_TASKS]
    assert all(e.eval_protocol == "release" and e.eval_env_steps == 300_000 and e.max_episode_steps == 10_000
               for e in evals)
    report = parsed["skill_report"]
    assert report.episodes == 40 and report.max_episode_steps == 1000
    # the small presets keep the project protocol; both are flags
    smoke = {p.name: parse(p) for p in build_plan(make_config("smoke")) if p.name == "eval/buc"}["eval/buc"]
    assert smoke.eval_protocol == "project"
    flipped = make_config("smoke", eval_protocol="release", eval_env_steps=5000)
    buc = next(parse(p) for p in build_plan(flipped) if p.name == "eval/buc")
    assert buc.eval_protocol == "release" and buc.eval_env_steps == 5000


def test_sizes_are_flags_and_bad_values_are_refused():
    cfg = make_config("ci", train_for_env_steps=1234, eval_targets=("gnomish", "buc"), eval_episodes=3)
    plan = build_plan(cfg)
    assert [p.name for p in plan if p.stage == "eval"] == ["eval/gnomish", "eval/buc", "skill_report"]
    assert "1234" in next(p for p in plan if p.stage == "train").args
    with pytest.raises(PipelineError, match="unknown eval target"):
        make_config("ci", eval_targets=("moon",))
    with pytest.raises(PipelineError, match="unknown preset"):
        make_config("huge")
    with pytest.raises(PipelineError, match="train_for_env_steps"):
        make_config("ci", train_for_env_steps=0)


def test_paper_plan_has_the_paper_settings(capsys):
    assert pipeline_cli.main(["--preset", "paper"]) == 0
    text = capsys.readouterr().out
    cfg = make_config("paper")
    plan = build_plan(cfg)
    assert {p.name.split("/")[1] for p in plan if p.stage == "generate"} == set(ALL_TASKS)
    train = parse(next(p for p in plan if p.stage == "train"))
    assert (train.num_workers, train.num_envs_per_worker, train.batch_size) == (24, 20, 4096)
    assert train.train_for_env_steps == 4_000_000_000 and train.max_episode_steps == 10_000
    assert train.seed == 2 and train.code_seed == 42 and train.save_every_steps == 50_000_000
    reward = parse(next(p for p in plan if p.stage == "reward"))
    assert (reward.batch_size, reward.reward_lr, reward.num_epochs, reward.seed) == (1000, 1e-5, 20, 777)
    assert reward.dataset_dir == "og_dataset" and reward.preference_dir == "preference"
    for phase in plan:
        assert phase.command() in text
    assert "heuristic" not in text and "replay" not in text


def test_cpu_presets_send_each_workers_games_in_one_inference_request(capsys):
    """The smoke and learn presets train with 16 games per rollout worker in one inference request each, the 16 one
    environment stepped together (one request to the worker's sandbox; docs/performance.md); the paper and ci
    presets keep sample-factory's split (2, the release's) and a game per environment; a split that does not
    divide the environments is refused naming the flag; the baselines play as many games, each its own env."""
    from orchestration.baselines_rl import _sf_args

    for preset in ("smoke", "learn"):
        train = parse(next(p for p in build_plan(make_config(preset)) if p.stage == "train"))
        assert (train.num_envs_per_worker, train.games_per_env, train.worker_num_splits) == (1, 16, 1), preset
        args = _sf_args(make_config(preset))
        assert args[args.index("--num_envs_per_worker") + 1] == "16" and "--games_per_env" not in args
    for preset in ("paper", "ci"):
        train = next(p for p in build_plan(make_config(preset)) if p.stage == "train")
        assert "--worker_num_splits" not in train.args and parse(train).worker_num_splits == 2, preset
        assert "--games_per_env" not in train.args and parse(train).games_per_env == 1, preset
    with pytest.raises(PipelineError, match="--worker_num_splits 3 must divide --num_envs_per_worker 1"):
        make_config("smoke", worker_num_splits=3)
    assert pipeline_cli.main(["--preset", "smoke", "--worker_num_splits", "3", "--dry_run"]) == 2
    assert "--worker_num_splits 3" in capsys.readouterr().err
    apart = make_config("smoke", worker_num_splits=2, num_envs_per_worker=16, games_per_env=1)
    train = parse(next(p for p in build_plan(apart) if p.stage == "train"))
    assert (train.num_envs_per_worker, train.games_per_env, train.worker_num_splits) == (16, 1, 2)
    with pytest.raises(PipelineError, match="--games_per_env must be at least 1"):
        make_config("smoke", games_per_env=0)


def test_meta_policy_check_phase(capsys, tmp_path):
    assert pipeline_cli.main(["--check_meta_policies", "--tasks", "gnomish,buc"]) == 0
    assert "all 2 meta-policies passed" in capsys.readouterr().out
    bad = tmp_path / "meta" / "gnomish" / "seed42"
    bad.mkdir(parents=True)
    (bad / "execution.py").write_text("import os\n\nclass NetHackPlayer:\n    pass\n")
    assert pipeline_cli.main(["--check_meta_policies", "--tasks", "gnomish", "--meta_policy_root",
                              str(tmp_path / "meta")]) == 1
    captured = capsys.readouterr()
    assert "FAILED" in captured.out and "refused by the code check" in captured.out
    assert "failed for gnomish" in captured.err


@pytest.mark.slow
def test_failure_names_the_phase_and_the_command_and_resume_skips_done_phases(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p").mkdir()
    ok = Phase("check/one", "check", "scripts.pipeline", ["--check_meta_policies", "--tasks", "gnomish"])
    bad = Phase("report/none", "report", "scripts.report", ["--train_dir", str(tmp_path / "nothing_here")])
    lines: list[str] = []
    results = run_plan([ok, bad], tmp_path / "out", echo=lines.append)
    assert [r.status for r in results] == ["ok", "failed"] and results[-1].returncode == 2
    text = "\n".join(lines)
    assert "phase 'report/none' failed. Re-run it alone with:" in text
    rerun = text.split("Re-run it alone with:\n")[1].splitlines()[0].strip()
    assert "-m scripts.report --train_dir" in rerun and "no such folder" in text  # the log tail is shown
    # the printed command is what ran: running it again fails the same way
    proc = subprocess.run(rerun, shell=True, capture_output=True, text=True)
    assert proc.returncode == 2 and "no such folder" in proc.stderr

    lines.clear()
    results = run_plan([ok, bad], tmp_path / "out", echo=lines.append, resume=True)
    assert [r.status for r in results] == ["skipped", "failed"]
    # resumed from another virtual environment (another python path): still done
    assert run_plan([ok], tmp_path / "out", python="/elsewhere/venv/bin/python", echo=lines.append,
                    resume=True)[0].status == "skipped"
    # a changed command is not taken for done
    changed = Phase("check/one", "check", "scripts.pipeline", ["--check_meta_policies", "--tasks", "buc"])
    assert run_plan([changed], tmp_path / "out", echo=lines.append, resume=True)[0].status == "ok"
    # a phase that ran makes the later stages run again; phases of its own stage stay done
    other = Phase("check/two", "check", "scripts.pipeline", ["--check_meta_policies", "--tasks", "price"])
    late = Phase("report/ok", "report", "scripts.pipeline", ["--check_meta_policies", "--tasks", "delphi"])
    assert [r.status for r in run_plan([changed, other, late], tmp_path / "out", echo=lines.append)] == ["ok"] * 3
    assert [r.status for r in run_plan([changed, other, late], tmp_path / "out", echo=lines.append,
                                       resume=True)] == ["skipped"] * 3
    rechecked = Phase("check/two", "check", "scripts.pipeline", ["--check_meta_policies", "--tasks", "minetown"])
    lines.clear()
    results = run_plan([changed, rechecked, late], tmp_path / "out", echo=lines.append, resume=True)
    assert [r.status for r in results] == ["skipped", "ok", "ok"]
    assert "[3/3] report/ok: running again (an earlier stage ran in this call)" in lines
    # a phase past its time limit is stopped and reported as failed
    slow = Phase("check/slow", "check", "scripts.pipeline", ["--check_meta_policies"])
    (result,) = run_plan([slow], tmp_path / "out", echo=lines.append, timeout_s=0.05)
    assert result.status == "failed" and "stopped after --phase_timeout" in result.log_path.read_text()


def test_cli_refuses_an_existing_out_dir_without_resume(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    assert pipeline_cli.main(["--preset", "ci", "--out_dir", str(out)]) == 2
    assert "did not write" in capsys.readouterr().err
    assert pipeline_cli.main(["--preset", "ci", "--out_dir", str(out), "--clean"]) == 2
    assert "holds no pipeline run" in capsys.readouterr().err
    assert (out / "precious.txt").read_text() == "keep me"


def _listing(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


@pytest.mark.slow
def test_ci_pipeline_runs_every_phase_end_to_end(tmp_path):
    """The CI-sized run (about 3 minutes on 2 cores): every phase for real, nothing written to the repo."""
    before = {d: _listing(REPO / d) for d in ("og_dataset", "preference", "train_dir")}
    out = tmp_path / "ci_run"
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "scripts.pipeline", "--preset", "ci", "--out_dir", str(out)]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-5000:]
    assert "RULE-BASED STAND-IN" in text and "NOT comparable" in text
    n = len(build_plan(make_config("ci", out_dir=str(out))))
    assert text.count(": done in ") == n
    for skill in SKILLS:
        assert (out / "og_dataset" / f"{skill}.npz").is_file()
        assert (out / "preference" / f"llama3_{skill}_default.npy").is_file()
        assert list((out / "skill_rewards" / f"llama3_{skill}_default" / "checkpoint_p0").glob("*.pth"))
    assert (out / "meta_policies" / "gnomish" / "seed42" / "execution.py").is_file()
    table = text.split("results (ci preset")[1]
    for task in EVAL_TASKS:
        assert (out / "skill_policy" / "ci" / "eval" / f"{task}_seed42.json").is_file()
        assert f"| {task} |" in table
    assert "MaestroMotif (paper, not comparable)" in table
    # training crossed sample-factory's best-model save before its last checkpoint, so the
    # evaluations above read a checkpoint written after it, with torch's default loader
    import torch

    ckpt_dir = out / "skill_policy" / "ci" / "checkpoint_p0"
    assert list(ckpt_dir.glob("best_*.pth")), "the ci run never saved a best model"
    last = sorted(ckpt_dir.glob("checkpoint_*.pth"))[-1]
    assert torch.load(last)["best_performance"] > -1e9
    gif = out / "skill_policy" / "ci" / "eval" / "goldenexit_seed42.gif"
    assert f"first goldenexit episode as a GIF: {gif}" in text
    from PIL import Image

    with Image.open(gif) as im:  # the whole terminal, readable: 24 x 80 cells of 12 pixels
        assert im.size == (80 * 12, 24 * 12) and im.n_frames >= 1
    assert (out / "report" / "results.md").is_file() and (out / "report" / "success.png").is_file()
    assert {d: _listing(REPO / d) for d in before} == before

    again = subprocess.run(cmd + ["--resume"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.count("skipped (finished in an earlier run)") == n


def test_training_flags_are_shared_by_training_and_evaluation():
    cfg = make_config("ci")
    plan = build_plan(cfg)
    shared = skill_training_args(cfg)
    for phase in plan:
        if phase.module == "scripts.main":
            assert phase.args[: len(shared)] == shared


def test_the_small_presets_can_annotate_with_smollm2_and_say_so(capsys):
    """--annotator smollm2: every annotation phase runs the real model through transformers (pairs without a usable
    answer stay unlabelled rather than stopping the run), and the plan and banner name it; the paper preset refuses."""
    from orchestration.pipeline import build_plan, make_config
    from scripts.pipeline import main

    cfg = make_config("smoke", annotator="smollm2", num_pairs=4)
    annotate = [ph for ph in build_plan(cfg) if ph.stage == "annotate"]
    assert len(annotate) == 5
    for ph in annotate:
        args = ph.args
        assert args[args.index("--backend") + 1] == "transformers" and args[args.index("--model") + 1] == "smollm2-135m"
        assert args[args.index("--max_unusable_share") + 1] == "1" and "real language model" in ph.note
        # asked for the answer line alone under constrained decoding, and the note says so
        assert args[args.index("--answer_mode") + 1] == "constrained" and "constrained answers" in ph.note
    free = [ph for ph in build_plan(make_config("smoke", annotator="smollm2-free")) if ph.stage == "annotate"]
    assert all(ph.args[ph.args.index("--answer_mode") + 1] == "release" and "answers" not in ph.note
               and ph.args[ph.args.index("--backend") + 1] == "llamacpp" for ph in free)
    stand_in = [ph for ph in build_plan(make_config("smoke")) if ph.stage == "annotate"]
    assert all("--model" not in ph.args and "stand-in" in ph.note for ph in stand_in)
    assert main(["--preset", "paper", "--annotator", "smollm2", "--dry_run"]) == 2
    assert "--annotator is for the small presets" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is not None, reason="llama-cpp-python is installed here")
def test_a_missing_annotator_package_stops_the_pipeline_before_its_first_phase(tmp_path, capsys):
    """--annotator smollm2-free collected every skill's dataset first and only then found llama.cpp missing."""
    out = tmp_path / "run"
    assert pipeline_cli.main(["--preset", "ci", "--annotator", "smollm2-free", "--out_dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --annotator smollm2-free: the llamacpp backend needs llama-cpp-python")
    assert "requirements-local-llm.txt" in err and not out.exists()


def test_cpu_presets_train_in_bf16_where_the_processor_can_and_the_paper_keeps_fp32(monkeypatch):
    """smoke, ci and learn pass --precision auto to every training run (skills, baselines, ablations): bf16 where
    the processor has bfloat16 instructions, fp32 with the reason otherwise, as the banner says; the paper
    preset's commands stay the release's (no --precision: fp32)."""
    from common import precision
    from orchestration.baselines import available

    for preset in ("smoke", "ci", "learn"):
        cfg = make_config(preset, baselines=tuple(available()) if preset == "ci" else None)
        trains = [p for p in build_plan(cfg) if p.module == "scripts.main" and "--evaluation" not in p.args]
        assert trains and all(p.args[p.args.index("--precision") + 1] == "auto" for p in trains), preset
    paper = build_plan(make_config("paper"))
    assert not any("--precision" in p.args for p in paper)
    assert parse(next(p for p in paper if p.stage == "train")).compute_precision == "fp32"

    monkeypatch.setattr(precision, "cpu_bf16_flags", lambda cpuinfo=precision.CPUINFO: ("amx_bf16",))
    assert pipeline_cli.precision_line("auto", "cpu").startswith("bf16 autocast on the CPU")
    assert "amx_bf16" in pipeline_cli.precision_line("auto", "cpu")
    assert pipeline_cli.precision_line("auto", "gpu").startswith("fp32")
    monkeypatch.setattr(precision, "cpu_bf16_flags", lambda cpuinfo=precision.CPUINFO: ())
    line = pipeline_cli.precision_line("auto", "cpu")
    assert line.startswith("fp32") and "no bfloat16 instructions" in line
    assert "cannot run" in pipeline_cli.precision_line("bf16", "cpu")
