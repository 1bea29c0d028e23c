"""The suite's own set-up: under pytest-xdist the tests marked ``serial`` are left out and ``-m serial`` runs
them, and the README's whole-suite command is the one CI runs (tests/conftest.py, .ci/run)."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SERIAL_IN_FILE = {  # tests/test_interrupts.py: the annotation's label window, the pipeline's, the training's shutdown
    "test_annotation_interrupted_says_what_is_saved_and_resumes_exactly[2-130]",
    "test_annotation_interrupted_says_what_is_saved_and_resumes_exactly[15-143]",
    "test_the_pipeline_passes_the_signal_to_its_phase_and_says_how_to_resume[15-143]",
    "test_skill_training_interrupted_saves_a_checkpoint_and_resumes_from_it[2-130]",
    "test_skill_training_interrupted_saves_a_checkpoint_and_resumes_from_it[15-143]",
}


def _collected(*args: str) -> tuple[set[str], str]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", *args,
                           "tests/test_interrupts.py"], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    names = {line.split("::", 1)[1] for line in proc.stdout.splitlines() if line.startswith("tests/")}
    return names, proc.stdout


@pytest.mark.slow
def test_under_xdist_the_serial_tests_are_left_out_and_minus_m_serial_runs_them():
    parallel, out = _collected("-n", "2")
    assert parallel and not parallel & SERIAL_IN_FILE
    assert "run them after, one at a time, with: python -m pytest -m serial" in out
    serial, _ = _collected("-m", "serial")
    assert serial == SERIAL_IN_FILE
    everything, out = _collected()
    assert everything == parallel | serial and "run them after" not in out  # one at a time: nothing left out


def test_the_readmes_whole_suite_command_is_what_ci_runs():
    readme = (REPO / "README.md").read_text()
    line = next(line for line in readme.splitlines() if line.endswith("# the whole suite, as CI runs it"))
    runs = [shlex.split(part)[3:] for part in line.split("#")[0].split("&&")]
    assert all(shlex.split(part)[:3] == ["python", "-m", "pytest"] for part in line.split("#")[0].split("&&"))
    ci = (REPO / ".ci" / "run").read_text()
    loop = re.search(r'^for run in (.+); do$', ci, flags=re.M)
    assert loop, ".ci/run runs pytest in a loop over its arguments"
    assert [arg.split() for arg in shlex.split(loop.group(1))] == runs
    assert "python -m pytest -q $run" in ci
