"""The sbatch jobs of the paper plan: rendered commands parse with each script's own parser,
array/requeue/dependency wiring, and the template filler's errors."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from common.vocabulary import ALL_TASKS, EVAL_TASKS, SKILLS
from orchestration.pipeline import PAPER_NUM_PAIRS, build_plan, make_config
from orchestration.slurm import SlurmError, SlurmSettings, fill_template, render_jobs, write_slurm

SHELL_VALUES = {"SLURM_ARRAY_TASK_ID": "0", "SLURM_PROCID": "0", "SERVER_HOST": "gpu-node-7"}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    cfg = make_config("paper", baselines=())  # MaestroMotif's own jobs; the baselines' have their tests
    out = tmp_path_factory.mktemp("jobs")
    workdir = out / "cluster_checkout"
    settings = SlurmSettings(workdir=str(workdir), sbatch_extra=("--partition=gpu",))
    write_slurm(build_plan(cfg), out, cfg, settings)
    return cfg, out, workdir


def commands_in(path: Path, env: dict[str, str] | None = None) -> list[list[str]]:
    """Every `python -m scripts.X` command of a job file as argv, expanded by bash itself."""
    text = path.read_text().replace("\\\n", " ")
    prelude = [line for line in text.splitlines() if line.startswith("EVAL_TARGETS=(")]
    cmds = [line.strip().rstrip("&").strip() for line in text.splitlines()
            if line.strip().startswith("python -m ")]
    values = dict(SHELL_VALUES, **(env or {}))
    out = []
    for cmd in cmds:
        script = "\n".join(["python() { printf '%s\\0' python \"$@\"; }"] + prelude + [cmd])
        proc = subprocess.run(["bash", "-c", script], env=dict(os.environ, **values), capture_output=True, text=True,
                              check=True)
        out.append(proc.stdout.split("\0")[:-1])
    return out


def parse(argv: list[str]):
    """Parses `python -m scripts.X ARGS` with that script's own parser."""
    assert argv[:2] == ["python", "-m"], argv
    module, args = argv[2], argv[3:]
    if module == "scripts.main":
        from rl_baseline.sf.cfg import parse_cfg

        return parse_cfg(args)
    import importlib

    parser = importlib.import_module(module).build_parser()
    return parser.parse_args(args)


def test_every_job_file_is_valid_bash_and_has_its_parts(jobs):
    _, out, workdir = jobs
    names = {p.name for p in out.iterdir()}
    expected = {"train_skills.sbatch", "evaluate.sbatch", "report.sbatch", "submit_all.sh"}
    for s in SKILLS:
        expected |= {f"collect_{s}.sbatch", f"annotate_{s}.sbatch", f"annotate_server_{s}.sbatch",
                     f"merge_{s}.sbatch", f"reward_{s}.sbatch"}
    expected |= {f"generate_{t}.sbatch" for t in ALL_TASKS}
    assert names == expected
    for path in out.iterdir():
        subprocess.run(["bash", "-n", str(path)], check=True)
        text = path.read_text()
        assert "{{" not in text, path.name
        if path.suffix == ".sbatch":
            assert f"cd {workdir}" in text and "#SBATCH --partition=gpu" in text
            assert f"#SBATCH --output={workdir}/slurm_logs/" in text


def test_annotation_array_runs_one_chunk_per_task_with_vllm_over_the_node(jobs):
    cfg, out, _ = jobs
    text = (out / "annotate_merchant.sbatch").read_text()
    assert f"#SBATCH --array=0-{cfg.annotate_chunks - 1}" in text
    assert f"#SBATCH --gpus-per-node={cfg.annotate_gpus}" in text
    assert "venv-vllm" in text
    for chunk in (0, cfg.annotate_chunks - 1):
        (argv,) = commands_in(out / "annotate_merchant.sbatch", {"SLURM_ARRAY_TASK_ID": str(chunk)})
        args = parse(argv)
        assert args.chunk_number == chunk and args.n_chunks == cfg.annotate_chunks
        assert args.backend == "vllm" and args.num_gpus == cfg.annotate_gpus and args.goal_key == "merchant"
        assert args.model == "meta-llama/Llama-3.1-70B-Instruct"
    (merge,) = commands_in(out / "merge_merchant.sbatch")
    margs = parse(merge)
    assert margs.merge and margs.n_chunks == cfg.annotate_chunks and margs.goal_key == "merchant"
    assert margs.preference_dir == args.preference_dir and margs.directory == args.directory


def test_server_variant_is_a_heterogeneous_job_with_openai_clients(jobs):
    cfg, out, _ = jobs
    text = (out / "annotate_server_descender.sbatch").read_text()
    assert "#SBATCH hetjob" in text and "vllm serve meta-llama/Llama-3.1-70B-Instruct" in text
    assert f"--tensor-parallel-size {cfg.annotate_gpus}" in text
    assert f"#SBATCH --nodes=1 --ntasks={cfg.annotate_chunks}" in text
    (argv,) = commands_in(out / "annotate_server_descender.sbatch", {"SLURM_PROCID": "5"})
    args = parse(argv)
    assert args.backend == "openai" and args.base_url == "http://gpu-node-7:8000/v1"
    assert args.chunk_number == 5 and args.n_chunks == cfg.annotate_chunks and args.goal_key == "descender"


def test_reward_generate_train_eval_commands_parse_with_paper_settings(jobs):
    cfg, out, _ = jobs
    for skill in SKILLS:
        (argv,) = commands_in(out / f"reward_{skill}.sbatch")
        args = parse(argv)
        assert (args.batch_size, args.reward_lr, args.num_epochs, args.seed) == (1000, 1e-5, 20, 777)
        assert args.experiment == f"llama3_{skill}_default"
        (collect,) = commands_in(out / f"collect_{skill}.sbatch")
        assert parse(collect).num_pairs == PAPER_NUM_PAIRS[skill]
    for task in ALL_TASKS:
        gen, comb = commands_in(out / f"generate_{task}.sbatch")
        g, c = parse(gen), parse(comb)
        assert g.task == c.task == task and g.seed == c.seed == 42
        assert g.model == "meta-llama/Llama-3.1-405B-Instruct"
        assert c.gen_dir == g.out_dir
    (train,) = commands_in(out / "train_skills.sbatch")
    t = parse(train)
    assert (t.num_workers, t.num_envs_per_worker, t.batch_size, t.train_for_env_steps) == (24, 20, 4096, 4_000_000_000)
    assert t.game_reward_scale == 0.1 and t.reward_scale == 1.0 and t.encoder_obs_scale == 255.0 and t.llm_reward == 0.1 and t.extrinsic_reward == 0.0
    assert t.threshold_quantiles == [0.95, 0.85, 0.85, 0.85, 0.85] and t.restart_behavior == "resume"
    assert t.reward_dirs == [f"train_dir/skill_rewards/llama3_{s}_default" for s in SKILLS]
    assert not t.evaluation
    seen = []
    for i in range(len(EVAL_TASKS)):
        (ev,) = commands_in(out / "evaluate.sbatch", {"SLURM_ARRAY_TASK_ID": str(i)})
        e = parse(ev)
        assert e.evaluation and e.train_dir == t.train_dir and e.experiment == t.experiment
        seen.append(e.eval_target)
    assert seen == list(EVAL_TASKS)
    assert f"#SBATCH --array=0-{len(EVAL_TASKS) - 1}" in (out / "evaluate.sbatch").read_text()
    (rep,) = commands_in(out / "report.sbatch")
    assert parse(rep).train_dir == [cfg.out_dir]


def test_skill_training_requeues_and_resumes(jobs):
    _, out, _ = jobs
    text = (out / "train_skills.sbatch").read_text()
    assert "#SBATCH --requeue" in text and re.search(r"#SBATCH --signal=B:USR1@\d+", text)
    assert "trap requeue USR1" in text and 'scontrol requeue "$SLURM_JOB_ID"' in text
    assert 'kill -INT "$TRAIN_PID"' in text  # sample-factory saves a checkpoint when interrupted


def test_submit_all_wires_dependencies(jobs, tmp_path):
    _, out, workdir = jobs
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "sbatch.log"
    (fake / "sbatch").write_text(
        "#!/bin/bash\n"
        f"n=$(( $(wc -l < {log} 2>/dev/null || echo 0) + 100 ))\n"
        f'echo "$n $*" >> {log}\n'
        'echo "$n"\n')
    (fake / "sbatch").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", SKIP_COLLECT="1")
    subprocess.run(["bash", str(out / "submit_all.sh")], env=env, check=True, capture_output=True, text=True,
                   cwd=tmp_path)
    assert (workdir / "slurm_logs").is_dir()  # sbatch does not create the --output folder
    ids: dict[str, str] = {}
    deps: dict[str, list[str]] = {}
    for line in log.read_text().splitlines():
        job_id, *args = line.split()
        name = Path(args[-1]).name
        ids[name] = job_id
        dep = [a for a in args if a.startswith("--dependency=")]
        deps[name] = dep[0].split(":", 1)[1].split(":") if dep else []
    assert not any(n.startswith("collect_") for n in ids)  # SKIP_COLLECT=1
    assert deps["annotate_merchant.sbatch"] == []
    assert deps["merge_merchant.sbatch"] == [ids["annotate_merchant.sbatch"]]
    assert deps["reward_merchant.sbatch"] == [ids["merge_merchant.sbatch"]]
    assert set(deps["train_skills.sbatch"]) == {ids[f"reward_{s}.sbatch"] for s in SKILLS} | {
        ids["generate_exploration.sbatch"]}
    assert ids["train_skills.sbatch"] in deps["evaluate.sbatch"]
    assert ids["generate_gnomish.sbatch"] in deps["evaluate.sbatch"]
    assert deps["generate_gnomish.sbatch"] == [ids["generate_exploration.sbatch"]]
    assert deps["report.sbatch"] == [ids["evaluate.sbatch"]]

    log.unlink()
    env.update(SKIP_COLLECT="0", ANNOTATION="server")
    subprocess.run(["bash", str(out / "submit_all.sh")], env=env, check=True, capture_output=True, cwd=tmp_path)
    submitted = [Path(line.split()[-1]).name for line in log.read_text().splitlines()]
    assert "annotate_server_worshipper.sbatch" in submitted and "annotate_worshipper.sbatch" not in submitted
    assert "collect_worshipper.sbatch" in submitted


def test_template_filler_and_writer_refuse_mistakes(jobs, tmp_path):
    assert fill_template("a {{x}} b", {"x": "1"}) == "a 1 b"
    with pytest.raises(SlurmError, match="no value for slot"):
        fill_template("a {{x}} {{y}}", {"x": "1"})
    with pytest.raises(SlurmError, match="does not have: z"):
        fill_template("a {{x}}", {"x": "1", "z": "2"})
    cfg, out, _ = jobs
    plan = build_plan(cfg)
    target = tmp_path / "jobs"
    write_slurm(plan, target, cfg, SlurmSettings(workdir="/a"))
    write_slurm(plan, target, cfg, SlurmSettings(workdir="/a"))  # identical: fine
    before = (target / "train_skills.sbatch").read_text()
    with pytest.raises(SlurmError, match="spaces"):
        render_jobs(plan, cfg, SlurmSettings(workdir="/my cluster"))
    with pytest.raises(SlurmError, match="already holds different"):
        write_slurm(plan, target, cfg, SlurmSettings(workdir="/b"))
    assert (target / "train_skills.sbatch").read_text() == before
    files = render_jobs(plan, cfg, SlurmSettings(workdir="/a"))
    assert files["train_skills.sbatch"] == before


def test_pipeline_cli_writes_the_same_jobs(tmp_path, capsys, monkeypatch):
    from scripts import pipeline

    monkeypatch.chdir(tmp_path)
    assert pipeline.main(["--preset", "paper", "--write_slurm", "jobs"]) == 0
    text = capsys.readouterr().out
    assert "wrote" in text and "python -m scripts.main" in text and "--train_for_env_steps 4000000000" in text
    cfg = make_config("paper")
    assert (tmp_path / "jobs" / "evaluate.sbatch").read_text() == render_jobs(
        build_plan(cfg), cfg, SlurmSettings(workdir=str(tmp_path)))["evaluate.sbatch"]
