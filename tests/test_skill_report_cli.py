"""scripts.skill_report's output folder: --out, and a note when a report already there is replaced (the
evaluation itself is tested on a trained policy in tests/test_training.py)."""
from __future__ import annotations

import json
from pathlib import Path

import orchestration.skill_report as skill_report_lib
from scripts import skill_report

#: the machine's clock: a pinned one (the default) runs the command again in a new process, without the fake build
REAL_CLOCK = ("--game_clock", "real")


def _policy_dir(root):
    """What check_policy_dir asks of a trained experiment: its config.json and a checkpoint file."""
    policy_dir = root / "skill_policy" / "exp"
    (policy_dir / "checkpoint_p0").mkdir(parents=True)
    (policy_dir / "config.json").write_text("{}")
    (policy_dir / "checkpoint_p0" / "checkpoint_000000010_2560.pth").write_bytes(b"")
    return policy_dir


def _fake_build(config):
    """Writes the three files where the real report goes, without playing a game."""
    out = Path(config.out_dir or config.policy_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / skill_report_lib.REPORT_MD).write_text(f"report of {config.skills}\n")
    (out / skill_report_lib.REPORT_JSON).write_text(json.dumps({"skills": list(config.skills)}))
    (out / skill_report_lib.REPORT_PNG).write_bytes(b"png")


def test_out_writes_elsewhere_and_replacing_a_report_is_said(tmp_path, capsys, monkeypatch) -> None:
    """It overwrote the pipeline's report in the policy folder without a word, and had no --out."""
    monkeypatch.setattr(skill_report_lib, "build_skill_report", _fake_build)
    policy_dir = _policy_dir(tmp_path)
    assert skill_report.main(["--policy_dir", str(policy_dir), *REAL_CLOCK, "--skill_names", "discoverer"]) == 0
    assert "note:" not in capsys.readouterr().out  # nothing there yet
    pipeline_report = (policy_dir / "skill_report.md").read_text()
    assert skill_report.main(["--policy_dir", str(policy_dir), *REAL_CLOCK, "--skill_names", "descender",
                              "--out", str(tmp_path / "mine")]) == 0
    out = capsys.readouterr().out
    assert "note:" not in out and "report of ('descender',)" in out
    assert (policy_dir / "skill_report.md").read_text() == pipeline_report
    assert (tmp_path / "mine" / "skill_report.json").exists()
    assert skill_report.main(["--policy_dir", str(policy_dir), *REAL_CLOCK, "--skill_names", "descender"]) == 0
    assert (f"note: {policy_dir} already holds a skill report (skill_report.md, skill_report.json, "
            "skill_report.png); this run replaces it (--out DIR writes it elsewhere)") in capsys.readouterr().out
    (tmp_path / "afile").write_text("")
    assert skill_report.main(["--policy_dir", str(policy_dir), *REAL_CLOCK, "--out", str(tmp_path / "afile")]) == 2
    assert capsys.readouterr().err.startswith(f"error: --out {tmp_path / 'afile'}: a file, not a folder")
