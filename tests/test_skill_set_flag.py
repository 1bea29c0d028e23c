"""``--skills`` through every phase: each entry point takes it (a bad skill file exits 2 with one line naming the
file and the field, before anything is written), the pipeline passes it to every phase it runs, prints or renders
as a slurm job (and adds nothing for the designed skills/), a training run records its skill set in config.json,
and resuming or evaluating a run with another set is refused naming both sets."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from common.skill_files import DEFAULT_SKILLS_DIR, SKILLS_ENV, load_skill_set
from common.vocabulary import ALL_TASKS, SKILL_SET, SKILLS

REPO = Path(__file__).resolve().parents[1]
SIXTH = "juggler"


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    env.pop(SKILLS_ENV, None)  # the set comes from the command line alone
    return env


def _sixth_skill(path: Path, index: int = 5) -> Path:
    """A skill file of its own name and ``index``: the merchant's file renamed."""
    text = (DEFAULT_SKILLS_DIR / "merchant.toml").read_text()
    text = text.replace('name = "merchant"', f'name = "{SIXTH}"').replace("index = 4", f"index = {index}")
    path.write_text(text.replace("llama3_merchant_default", f"llama3_{SIXTH}_default"))
    return path


@pytest.fixture
def six_skills(tmp_path: Path) -> Path:
    """The designed five (copies of skills/*.toml) and a sixth skill with index 5, in one folder."""
    folder = tmp_path / "six"
    folder.mkdir()
    for f in DEFAULT_SKILLS_DIR.glob("*.toml"):
        shutil.copy(f, folder / f.name)
    _sixth_skill(folder / f"{SIXTH}.toml")
    return folder


# ------------------------------------------------------------------ a bad skill set, at every entry point
def _bad_copy(tmp_path: Path, old: str, new: str) -> Path:
    """skills/merchant.toml with ``old`` replaced by ``new``."""
    text = (DEFAULT_SKILLS_DIR / "merchant.toml").read_text()
    assert old in text
    path = tmp_path / "bad" / "merchant.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text.replace(old, new, 1))
    return path


def _bad_missing(tmp_path: Path) -> tuple[list[str], str, str]:
    path = tmp_path / "nowhere.toml"
    return [str(path)], str(path), "no such skill file or folder"


def _bad_empty_folder(tmp_path: Path) -> tuple[list[str], str, str]:
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "notes.txt").write_text("no skill here")
    return [str(folder)], str(folder), "no *.toml"


def _bad_rule(tmp_path: Path) -> tuple[list[str], str, str]:
    path = _bad_copy(tmp_path, 'start = "shopkeeper_in_view"', 'start = "moon_in_view"')
    return [str(path)], str(path), "rules.start"


def _bad_duplicate_index(tmp_path: Path) -> tuple[list[str], str, str]:
    path = _sixth_skill(tmp_path / f"{SIXTH}.toml", index=4)  # the merchant's index
    return [str(DEFAULT_SKILLS_DIR), str(path)], f"{SIXTH}.toml", "index: 4"


def _bad_gap(tmp_path: Path) -> tuple[list[str], str, str]:
    path = _sixth_skill(tmp_path / f"{SIXTH}.toml", index=6)  # no skill has index 5
    return [str(DEFAULT_SKILLS_DIR), str(path)], str(path), "index: 6 leaves a gap"


def _bad_unknown_field(tmp_path: Path) -> tuple[list[str], str, str]:
    path = _bad_copy(tmp_path, "paper_pairs = 121000", "paper_pairs = 121000\nbonus = 2")
    return [str(path)], str(path), "reward.bonus: unknown field"


def _bad_measure(tmp_path: Path) -> tuple[list[str], str, str]:
    path = _bad_copy(tmp_path, '"shops_entered", ', '"gold_hoarded", ')
    return [str(path)], str(path), "measures.names: no measure 'gold_hoarded'"


BAD_SETS = {"missing": _bad_missing, "folder_without_toml": _bad_empty_folder, "rule_outside_menus": _bad_rule,
            "duplicate_index": _bad_duplicate_index, "index_gap": _bad_gap, "unknown_field": _bad_unknown_field,
            "unknown_measure": _bad_measure}


def _entry_points(out: Path) -> dict[str, list[str]]:
    """Commands that would write under ``out`` if they ran."""
    return {
        "pipeline": [sys.executable, "-m", "scripts.pipeline", "--preset", "ci", "--out_dir", str(out)],
        "pipeline_dry_run": [sys.executable, "-m", "scripts.pipeline", "--preset", "ci", "--dry_run",
                             "--write_slurm", str(out)],
        "main": [sys.executable, "-m", "scripts.main", "--train_dir", str(out), "--experiment", "e",
                 "--skill_reward", "progress"],
        # ONI's spelling: the file run directly reads --skills itself (the scripts package is not imported)
        "main_as_file": [sys.executable, str(REPO / "scripts" / "main.py"), "--train_dir", str(out),
                         "--experiment", "e"],
        "slurm_render": [sys.executable, "-m", "slurm.render", "--out", str(out)],
    }


@pytest.mark.parametrize("entry", ["pipeline", "pipeline_dry_run", "main", "main_as_file", "slurm_render"])
@pytest.mark.parametrize("case", list(BAD_SETS))
def test_a_bad_skill_set_exits_2_with_one_line_naming_the_file_and_the_field(tmp_path, case, entry):
    paths, names_file, names_field = BAD_SETS[case](tmp_path)
    out = tmp_path / "out"
    proc = subprocess.run(_entry_points(out)[entry] + ["--skills", *paths], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert names_file in lines[0] and names_field in lines[0], lines[0]
    assert proc.stdout == ""
    assert not out.exists()  # refused before anything was written


def test_every_entry_point_lists_skills_in_its_help(capsys):
    from orchestration.slurm import build_parser as slurm_parser
    from rl_baseline.sf.cfg.arguments import parse_command_line

    modules = sorted(p.stem for p in (REPO / "scripts").glob("*.py") if p.stem != "__init__")
    for name in modules:
        module = __import__(f"scripts.{name}", fromlist=["main"])
        with pytest.raises(SystemExit) as exit_:
            module.main(["--help"])
        assert exit_.value.code == 0, name
        assert "--skills FILE_OR_FOLDER" in capsys.readouterr().out, f"scripts.{name} --help lacks --skills"
    assert "--skills FILE_OR_FOLDER" in slurm_parser().format_help()
    # scripts.main: in sample-factory's parser, in the project's flag group, with its help; its value is not a
    # setting of the run (the run records the set itself)
    cfg = parse_command_line(["--skills", str(DEFAULT_SKILLS_DIR), "--experiment", "x"])
    assert not hasattr(cfg, "skills") and "skills" not in cfg.cli_args


# ------------------------------------------------------------------ derived from the skill files
def test_the_default_quantiles_are_the_skill_files_in_the_papers_text():
    from rl_baseline.sf.cfg import DEFAULT_QUANTILES, parse_cfg

    assert DEFAULT_QUANTILES == "[0.95,0.85,0.85,0.85,0.85]"
    assert parse_cfg(["--experiment", "x"]).threshold_quantiles == [SKILL_SET[s].quantile for s in SKILLS]


@pytest.mark.slow
def test_the_flags_of_scripts_main_follow_the_skill_set(six_skills):
    """The defaults and help texts of scripts.main that name the skills come from the files (2-3 s: sample-factory
    is imported by a process of its own)."""
    proc = subprocess.run([sys.executable, "-m", "scripts.main", "--skills", str(six_skills), "--help"], cwd=REPO,
                          env=dict(_env(), COLUMNS="2000"), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "(default: [0.95,0.85,0.85,0.85,0.85,0.85])" in proc.stdout
    assert f"first N of {', '.join(SKILLS)}, {SIXTH}); default 6" in proc.stdout
    assert f"{SIXTH} items_sold" in proc.stdout


# ------------------------------------------------------------------ the pipeline passes the set to every phase
def _all_commands(preset: str, **overrides: object) -> list[list[str]]:
    from orchestration.pipeline import build_plan, make_config

    return [p.argv("python") for p in build_plan(make_config(preset, **overrides))]


def test_the_pipelines_commands_carry_the_skill_set_when_one_is_given(tmp_path, monkeypatch, six_skills):
    from orchestration.baselines import available
    from orchestration.pipeline import build_plan, make_config
    from orchestration.slurm import SlurmSettings, render_jobs

    every = tuple(available())  # the baselines' phases too (the paper's plan has them all by default)
    default = {p: _all_commands(p, baselines=every) for p in ("ci", "paper")}
    assert not any("--skills" in cmd for cmds in default.values() for cmd in cmds)
    # skills/ named on the command line is the default: the commands stay as they were
    monkeypatch.setenv(SKILLS_ENV, str(DEFAULT_SKILLS_DIR))
    assert {p: _all_commands(p, baselines=every) for p in default} == default
    # another set reaches every phase, the baselines' too, as it was given (absolute); this process's vocabulary
    # stays the designed five (the next test runs the pipeline with the set, its per-skill phases included)
    # -- and, the shipped policies over skills knowing the designed five only, every task's policy is joined to
    # this set's skill functions under the run's folder, which the check, the training and the evaluations use
    monkeypatch.setenv(SKILLS_ENV, str(six_skills))
    commands = _all_commands("ci", baselines=every)
    joined = [cmd for cmd in commands if "scripts.combine" in cmd and "--reference" in cmd]
    assert sorted(cmd[cmd.index("--task") + 1] for cmd in joined) == sorted(
        t for t in ALL_TASKS if t != make_config("ci").code_task)
    meta_root = str(make_config("ci").out / "meta_policies")
    assert all(cmd[cmd.index("--out_root") + 1] == meta_root for cmd in joined)

    def without_root(cmd: list[str]) -> list[str]:
        if "--meta_policy_root" not in cmd:
            return cmd
        i = cmd.index("--meta_policy_root")
        assert cmd[i + 1] == meta_root
        return cmd[:i] + cmd[i + 2:]

    rooted = [cmd for cmd in commands if "--meta_policy_root" in cmd]
    assert any("--check_meta_policies" in cmd for cmd in rooted) and any("--evaluation" in cmd for cmd in rooted)
    assert [without_root(cmd) for cmd in commands if cmd not in joined] == [
        cmd + ["--skills", str(six_skills)] for cmd in default["ci"]]
    # the paper's plan and its slurm jobs (five skills from another folder: the paper plan has the paper's five)
    five = tmp_path / "five"
    shutil.copytree(DEFAULT_SKILLS_DIR, five)
    monkeypatch.setenv(SKILLS_ENV, str(five))
    cfg = make_config("paper")
    plan = build_plan(cfg)
    assert all(p.args[-2:] == ["--skills", str(five)] for p in plan)
    jobs = render_jobs(plan, cfg, SlurmSettings(workdir=str(tmp_path / "checkout")))
    commands = [text for name, text in jobs.items() if name.endswith(".sbatch") and "python -m scripts." in text]
    assert commands and all(f"--skills {five}" in text for text in commands)


def test_the_pipelines_dry_run_prints_the_set_as_absolute_paths_and_each_skills_phases(tmp_path, six_skills):
    shutil.copytree(six_skills, tmp_path / "mine")
    base = [sys.executable, "-m", "scripts.pipeline", "--preset", "ci", "--dry_run", "--out_dir", str(tmp_path / "o")]
    proc = subprocess.run(base + ["--skills", "mine"], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    commands = [line for line in proc.stdout.splitlines() if line.startswith("python -m ")]
    assert commands and all(line.endswith(f" --skills {tmp_path / 'mine'}") for line in commands)
    for stage in ("collect", "annotate", "reward"):  # the per-skill phases iterate over the given set
        assert any(line.endswith(f"] {stage}/{SIXTH}") for line in proc.stdout.splitlines()), stage
    default = subprocess.run(base, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120)
    assert default.returncode == 0 and "--skills" not in default.stdout and SIXTH not in default.stdout


# ------------------------------------------------------------------ a run records its set, and keeps to it
def _saved_run(train_dir: Path, *flags: str) -> Path:
    """A run folder as scripts.main leaves it: the configuration of the command (default: a skill-environment run
    paid by the skills' progress, no reward model to find), written by sample-factory's own runner method (the
    one a training calls when it starts)."""
    from sample_factory.algo.runners.runner import Runner

    from rl_baseline.sf.cfg import parse_cfg

    cfg = parse_cfg(["--train_dir", str(train_dir), "--experiment", "e", *(flags or ("--skill_reward", "progress"))])
    Runner._save_cfg(SimpleNamespace(cfg=cfg))
    return train_dir / "e"


def _record(run: Path, skill_set: object) -> None:
    path = run / "config.json"
    saved = json.loads(path.read_text())
    if skill_set is None:
        saved.pop("skill_set")  # a run made before runs recorded their set
    else:
        saved["skill_set"] = skill_set
    path.write_text(json.dumps(saved))


def test_a_run_records_its_skill_set_in_its_config(tmp_path):
    from rl_baseline.sf.cfg import resolve_cfg

    run = _saved_run(tmp_path)
    saved = json.loads((run / "config.json").read_text())
    assert saved["skill_set"] == SKILL_SET.record() == [
        {"name": s.name, "index": s.index, "sha256": s.sha256} for s in SKILL_SET.specs]
    assert [r["name"] for r in saved["skill_set"]] == list(SKILLS)
    assert "skills" not in saved  # the paths are not the record: another machine evaluates with its own
    # a run made before runs recorded their set (the designed five) resumes, and records the set from then on
    _record(run, None)
    cfg = resolve_cfg(["--train_dir", str(tmp_path), "--experiment", "e"], files=False)
    assert cfg.skill_set == SKILL_SET.record()


def test_resuming_or_evaluating_with_another_skill_set_is_refused_naming_both(tmp_path, six_skills):
    from rl_baseline.sf.cfg import ConfigError, check_run_skill_set, resolve_cfg, resolve_experiment_cfg

    run = _saved_run(tmp_path)
    six = load_skill_set([six_skills])
    _record(run, six.record())  # made with six skills; this process has the designed five
    both = (f"{run}: made with the skills {', '.join(SKILLS)}, {SIXTH}; this run's skill set is "
            f"{', '.join(SKILLS)} (--skills chooses it)")
    commands = {
        "resume": ["--train_dir", str(tmp_path), "--experiment", "e"],
        "evaluation": ["--train_dir", str(tmp_path), "--experiment", "e", "--evaluation", "True",
                       "--eval_target", "gnomish"],
        "forced skill": ["--train_dir", str(tmp_path), "--experiment", "e", "--evaluation", "True",
                         "--eval_skill", "descender", "--eval_protocol", "project", "--eval_episodes", "1"],
    }
    for what, argv in commands.items():
        with pytest.raises(ConfigError) as refused:
            resolve_cfg(argv, files=False)
        assert str(refused.value) == both, what
    with pytest.raises(ConfigError, match="made with the skills"):  # skill_report, the collectors, multi_policy
        resolve_experiment_cfg(run, files=False)
    with pytest.raises(ConfigError, match="made with the skills"):  # scripts.skill_report, before its games
        check_run_skill_set(run)
    # the same set, or a run that records none (the designed five), passes; a Motif run has no skills to check
    _record(run, SKILL_SET.record())
    resolve_cfg(commands["evaluation"], files=False)
    _record(run, None)
    resolve_cfg(commands["evaluation"], files=False)
    motif = _saved_run(tmp_path / "motif", "--env", "nle_fixed_eat_action", "--root_env", "NetHackScore-v1",
                       "--llm_reward", "0", "--extrinsic_reward", "1")
    _record(motif, six.record())
    resolve_cfg(["--train_dir", str(tmp_path / "motif"), "--experiment", "e", "--evaluation", "True"], files=False)


@pytest.mark.slow
def test_the_entry_points_refuse_a_run_of_another_set_with_exit_2_and_write_nothing(tmp_path, six_skills):
    """The commands themselves (each 10-30 s: sample-factory and NLE are imported): a run made with the designed
    five, resumed, evaluated and reported with a six-skill set."""
    run = _saved_run(tmp_path / "td")
    (run / "checkpoint_p0").mkdir()
    (run / "checkpoint_p0" / "checkpoint_000000001_64.pth").write_bytes(b"never read")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    main = [sys.executable, "-m", "scripts.main", "--skills", str(six_skills), "--train_dir", str(tmp_path / "td"),
            "--experiment", "e"]
    commands = {
        "resume": main,
        "evaluation": main + ["--evaluation", "True", "--eval_target", "gnomish"],
        "skill_report": [sys.executable, "-m", "scripts.skill_report", "--skills", str(six_skills),
                         "--policy_dir", str(run), "--episodes", "1"],
    }
    for what, argv in commands.items():
        proc = subprocess.run(argv, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, (what, proc.stdout[-2000:] + proc.stderr[-2000:])
        errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("error:")]
        assert errors == [f"error: {run}: made with the skills {', '.join(SKILLS)}; this run's skill set is "
                          f"{', '.join(SKILLS)}, {SIXTH} (--skills chooses it)"], (what, errors)
        assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before, what
