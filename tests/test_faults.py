"""Nothing lost, nothing silent: the faults of docs/reliability.md's table, driven through the scripts as a user
runs them, on one ``--preset ci`` run made for this file (``ci_run``), and the interrupts and kills of training.

The probes (``tests/fault_probes.py``) are commands with what each must do: its exit status, a phrase naming the
problem, a time, and no file of the run changed. The full exercise (over a hundred probes, every script) is
``python -m tests.fault_probes --run_dir RUN``; this file runs the probes of the defects it pins.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestration.phases import Phase
from orchestration.pipeline import run_plan
from tests.fault_probes import PROBES, REPO, run_probe

DEFECT_PROBES = [p for p in PROBES if p.defect]


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    """A finished ``scripts.pipeline --preset ci`` run (about 4 minutes on 2 cores), made once for this file."""
    out = tmp_path_factory.mktemp("faults") / "ci_run"
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "scripts.pipeline", "--preset", "ci", "--out_dir", str(out)],
                          cwd=out.parent, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return out


@pytest.fixture(scope="module")
def probed_run(ci_run, tmp_path_factory):
    """A copy of the run for the probes (which must change none of it)."""
    copy = tmp_path_factory.mktemp("probed") / "run"
    shutil.copytree(ci_run, copy, symlinks=True)
    return copy


@pytest.mark.parametrize("probe", DEFECT_PROBES, ids=[f"{p.script}-{p.what}" for p in DEFECT_PROBES])
def test_each_fault_is_refused_in_one_line_and_loses_no_file(probe, probed_run, tmp_path):
    outcome = run_probe(probe, probed_run, tmp_path / "scratch")
    assert outcome.ok, f"{outcome.why}\n{outcome.output[-3000:]}\nchanged: {outcome.lost[:10]}"


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")


def _evaluate(run: Path, *extra: str) -> subprocess.CompletedProcess:
    """The ci preset's own gnomish evaluation (the pipeline's command, from its marker), plus ``extra``."""
    command = shlex.split(json.loads((run / ".pipeline" / "eval__gnomish.json").read_text())["command"])
    return subprocess.run([sys.executable, *command[1:], *extra], cwd=run, env=_env(), capture_output=True, text=True,
                          timeout=300)


def test_an_evaluation_says_when_it_replaces_a_result_and_refuses_other_settings(ci_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(ci_run, run, symlinks=True)
    result = run / "skill_policy" / "ci" / "eval" / "gnomish_seed42.json"
    # the pipeline's markers name the run's own folder: point them at the copy
    for marker in (run / ".pipeline").glob("*.json"):
        marker.write_text(marker.read_text().replace(str(ci_run), str(run)))
    same = _evaluate(run)
    assert same.returncode == 0, same.stderr[-3000:]
    assert f"replaced the earlier result at {result} (made with the same settings)" in same.stdout
    before = result.read_bytes()
    other = _evaluate(run, "--eval_episodes", "2")
    assert other.returncode == 2 and "other settings: eval_episodes 1 there, 2 here" in other.stderr
    assert "Traceback" not in other.stderr and result.read_bytes() == before
    forced = _evaluate(run, "--eval_episodes", "2", "--eval_replace", "True")
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert "--eval_replace True; other settings: eval_episodes 1 there, 2 here" in forced.stdout
    assert json.loads(result.read_text())["settings"]["eval_episodes"] == 2


def test_a_diverged_reward_model_is_never_saved(ci_run, tmp_path):
    cmd = [sys.executable, "-m", "scripts.train_reward", "--skill", "descender", "--dataset_dir",
           str(ci_run / "og_dataset"), "--preference_dir", str(ci_run / "preference"), "--train_dir", str(tmp_path),
           "--reward_lr", "1e30", "--batch_size", "16", "--num_epochs", "2", "--embed_dim", "8", "--conv_channels",
           "16", "--hidden_dim", "16", "--no_progress"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "training diverged" in proc.stderr and "nothing saved" in proc.stderr, \
        proc.stderr[-2000:]
    assert not list(tmp_path.rglob("checkpoint_*.pth"))


# -- the pipeline's resume trusts no marker alone ------------------------------------------------------------------
def _stub_plan(tmp_path: Path) -> list[Phase]:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    return [Phase("first", "collect", "tests.phase_stub", [str(a)], outputs=[str(a)]),
            Phase("second", "reward", "tests.phase_stub", [str(b), str(tmp_path / "fail_b")], outputs=[str(b)])]


def _runs(path: Path) -> int:
    runs = path.with_name(path.name + ".runs")
    return int(runs.read_text()) if runs.exists() else 0


def test_a_resume_runs_again_a_phase_whose_output_is_gone_or_changed(tmp_path):
    out = tmp_path / "out"
    plan = _stub_plan(tmp_path)
    assert [r.status for r in run_plan(plan, out, echo=lambda s: None)] == ["ok", "ok"]
    said: list[str] = []
    assert [r.status for r in run_plan(plan, out, resume=True, echo=said.append)] == ["skipped", "skipped"]
    (tmp_path / "a.txt").unlink()  # the collection's dataset deleted by hand
    said.clear()
    results = run_plan(plan, out, resume=True, echo=said.append)
    assert [r.status for r in results] == ["ok", "ok"]  # and downstream of it, again
    assert any("a.txt is gone" in s for s in said) and _runs(tmp_path / "a.txt") == 2
    (tmp_path / "b.txt").write_text("cut")
    said.clear()
    assert [r.status for r in run_plan(plan, out, resume=True, echo=said.append)] == ["skipped", "ok"]
    assert any("b.txt changed since" in s for s in said)


def test_a_resume_never_skips_a_phase_that_failed(tmp_path):
    out = tmp_path / "out"
    plan = _stub_plan(tmp_path)
    run_plan(plan, out, echo=lambda s: None)
    (tmp_path / "a.txt").unlink()
    (tmp_path / "fail_b").write_text("")  # the second phase now fails when it runs again
    assert [r.status for r in run_plan(plan, out, resume=True, echo=lambda s: None)] == ["ok", "failed"]
    (tmp_path / "fail_b").unlink()
    said: list[str] = []
    results = run_plan(plan, out, resume=True, echo=said.append)
    # it ran again (its earlier marker had said "finished in an earlier run")
    assert [r.status for r in results] == ["skipped", "ok"], said


# -- training: one per folder, interrupts at any moment, no orphans ------------------------------------------------
TRAIN = ["--device", "cpu", "--num_workers", "1", "--num_envs_per_worker", "2", "--batch_size", "256", "--rollout",
         "16", "--encoder_arch", "project", "--skill_reward", "progress", "--max_episode_steps", "200",
         "--train_for_env_steps", "100000000"]


def _start_training(tmp_path: Path, experiment: str = "x") -> subprocess.Popen:
    def as_in_a_terminal() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # a test started in the background inherits it ignored

    return subprocess.Popen([sys.executable, "-m", "scripts.main", "--train_dir", str(tmp_path), "--experiment",
                             experiment, *TRAIN], cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=as_in_a_terminal, start_new_session=True)


def _kill_group(proc: subprocess.Popen) -> None:
    """A test that failed half-way leaves no training running (it would slow every test after it)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _descendants(pid: int) -> list[int]:
    import psutil  # lazy: sample-factory's dependency, for the process tree

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _alive(pids: list[int]) -> list[int]:
    import psutil  # lazy: sample-factory's dependency, for the process tree

    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _still_alive_after(pids: list[int], seconds: float) -> list[int]:
    """Those of ``pids`` still running ``seconds`` from now (or as soon as none is)."""
    deadline = time.monotonic() + seconds
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _alive(pids)


def _wait_for_log(tmp_path: Path, proc: subprocess.Popen, phrase: str, timeout: float = 120.0) -> None:
    log = tmp_path / "x" / "sf_log.txt"
    deadline = time.monotonic() + timeout
    while not (log.exists() and phrase in log.read_text()):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"no {phrase!r} in {log} within {timeout} s"
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.serial
def test_a_second_training_into_the_same_folder_is_refused_naming_the_first(tmp_path):
    first = _start_training(tmp_path)
    try:
        _wait_for_log(tmp_path, first, "Fps is")
        second = subprocess.run([sys.executable, "-m", "scripts.main", "--train_dir", str(tmp_path), "--experiment",
                                 "x", *TRAIN], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr[-3000:]
        assert f"another training is running in {tmp_path / 'x'}" in second.stderr
        assert f"pid {first.pid}" in second.stderr and "Traceback" not in second.stderr
        assert first.poll() is None  # the first goes on
    finally:
        os.killpg(first.pid, signal.SIGINT)
        try:
            first.communicate(timeout=120)
        finally:
            _kill_group(first)
    assert first.returncode == 130
    assert not (tmp_path / "x" / ".training.lock").exists()


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.parametrize("delay", [0.5, 2.0, 3.0, 4.0, 6.0])
def test_ctrl_c_at_any_moment_of_the_start_exits_130_in_one_line(tmp_path, delay):
    """Ctrl-C reaches the whole process group, workers being spawned included; in the first seconds it gave a
    KeyboardInterrupt traceback, or a worker's 'Interrupted: SIGINT' with a SemLock FileNotFoundError, and exit 1."""
    proc = _start_training(tmp_path)
    try:
        time.sleep(delay)
        tree = _descendants(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
        _, err = proc.communicate(timeout=120)
    finally:
        _kill_group(proc)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "FileNotFoundError" not in err, err[-3000:]
    assert "interrupted by SIGINT" in err or "(interrupted by SIGINT)" in err, err[-2000:]
    assert not _still_alive_after(tree, 10.0)


@pytest.mark.slow
@pytest.mark.serial
def test_a_trainer_killed_with_sigkill_takes_its_workers_with_it(tmp_path):
    proc = _start_training(tmp_path)
    try:
        _wait_for_log(tmp_path, proc, "Fps is")
        tree = _descendants(proc.pid)
        assert len(tree) >= 3  # the learner, the inference and the rollout worker (and their helpers)
        proc.kill()
        proc.communicate(timeout=30)
    except BaseException:
        _kill_group(proc)
        raise
    left = _still_alive_after(tree, 10.0)
    assert not left, f"still running 10 s after the trainer's SIGKILL: {left}"
