"""The ci preset end to end with six skills: the designed five and the fighter, added by its file alone.

``python -m scripts.pipeline --preset ci --skills skills/ examples/skills/fighter.toml`` collects, labels (the
stand-in) and trains a reward model for the fighter as for the five, joins every task's policy over skills to the
six-skill functions, trains the six-skill policy, evaluates the nine tasks and holds every skill alone; the run
records its skill set and refuses to be resumed with the designed five.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIGHTER = REPO / "examples" / "skills" / "fighter.toml"
SIX = ["--skills", str(REPO / "skills"), str(FIGHTER)]


@pytest.fixture(scope="module")
def six_skill_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("six") / "run"
    proc = subprocess.run([sys.executable, "-m", "scripts.pipeline", "--preset", "ci", "--out_dir", str(out), *SIX],
                          cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.mark.slow
def test_the_ci_preset_runs_with_a_sixth_skill_added_by_its_file(six_skill_run):
    run = six_skill_run
    # phase 1 for the fighter, as for the five
    assert (run / "og_dataset" / "fighter.npz").is_file()
    assert (run / "preference" / "llama3_fighter_default.npy").is_file()
    assert list((run / "skill_rewards" / "llama3_fighter_default" / "checkpoint_p0").glob("*.pth"))
    # every task's policy over skills knows the fighter (the shipped ones know the five only)
    for task in ("exploration", "gnomish", "goldenexit", "buc"):
        module = (run / "meta_policies" / task / "seed42" / "execution.py").read_text(encoding="utf-8")
        assert 'if skill == "fighter":' in module
        assert "self.fighter_skill_steps" in module
    # the six-skill policy: its config records the set, its reward models are six
    config = json.loads((run / "skill_policy" / "ci" / "config.json").read_text(encoding="utf-8"))
    assert [s["name"] for s in config["skill_set"]] == ["discoverer", "descender", "ascender", "worshipper",
                                                         "merchant", "fighter"]
    assert "llama3_fighter_default" in config["reward_dir"]
    assert config["meta_policy_root"] == str(run / "meta_policies")
    # the skill report holds the fighter alone, on its own measures
    report = (run / "skill_policy" / "ci" / "skill_report.md").read_text(encoding="utf-8")
    assert "| fighter | **kills_per_1000_steps** |" in report
    assert "| fighter | monsters_killed |" in report
    # the nine tasks were evaluated
    assert len(list((run / "skill_policy" / "ci" / "eval").glob("*_seed42.json"))) == 9


@pytest.mark.slow
def test_a_six_skill_run_refuses_to_resume_with_the_designed_five(six_skill_run):
    run = six_skill_run
    config = json.loads((run / "skill_policy" / "ci" / "config.json").read_text(encoding="utf-8"))
    before = sorted(p.name for p in (run / "skill_policy" / "ci").iterdir())
    proc = subprocess.run(
        [sys.executable, "-m", "scripts.main", "--algo", "APPO", "--device", "cpu", "--train_dir",
         str(run / "skill_policy"), "--experiment", "ci", "--reward_dir", config["reward_dir"],
         "--train_for_env_steps", "5000"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert "fighter" in line and "discoverer, descender, ascender, worshipper, merchant" in line
    assert sorted(p.name for p in (run / "skill_policy" / "ci").iterdir()) == before


@pytest.mark.slow
def test_training_six_skills_with_the_five_skill_policies_is_refused_naming_the_sixth(six_skill_run, tmp_path):
    """The shipped modules' skill_termination has no fighter branch: the fighter would end at every step."""
    run = six_skill_run
    config = json.loads((run / "skill_policy" / "ci" / "config.json").read_text(encoding="utf-8"))
    proc = subprocess.run(
        [sys.executable, "-m", "scripts.main", "--algo", "APPO", "--device", "cpu", "--num_workers", "1",
         "--num_envs_per_worker", "2", "--train_dir", str(tmp_path), "--experiment", "five_policies",
         "--reward_dir", config["reward_dir"], "--train_for_env_steps", "1000", *SIX],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert "ends the skill fighter on its first turn" in line, line
    assert not (tmp_path / "five_policies" / "checkpoint_p0").exists()
