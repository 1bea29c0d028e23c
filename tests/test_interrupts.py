"""Ctrl-C (SIGINT) and slurm's SIGTERM in the long phases, with real signals to real processes: no traceback,
one line saying what was saved and how to resume, exit 130 or 143, and the resume afterwards."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rlaif.annotate import TEST_DELAY_ENV, chunk_path, run_annotation
from rlaif.preferences import UNKNOWN, load_preferences
from rlaif.reward_model import list_checkpoints
from tests.test_annotation import cli, config, make_dataset, write_dataset
from tests.test_train_reward import EXPERIMENT, _script_args, write_inputs

REPO = Path(__file__).resolve().parents[1]
SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143)]


def _default_sigint() -> None:
    """In the child before it starts: SIGINT as in a terminal. A test run started in the background of a script
    inherits SIGINT ignored, and Python then never turns it into KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _spawn(args: list[str], cwd: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", *args], cwd=cwd, env=dict(os.environ, PYTHONPATH=str(REPO), **env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)


def _wait_for(condition, proc: subprocess.Popen, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"the run ended before {what}: {proc.communicate()[1][-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {what} within {timeout} s")
        time.sleep(0.05)


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from /proc: no extra package), children first."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _process_table(pids: list[int]) -> str:
    rows = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
        except OSError:
            continue
        rows.append(f"{pid} {state} {args}")
    return "\n".join(rows)


def _interrupt(proc: subprocess.Popen, signum: int, timeout: float = 60.0) -> tuple[int, str]:
    """The signal, then the process's end within ``timeout`` s. A process that does not end fails the test with
    what it was doing: every thread's stack of the main process (scripts.main dumps them on SIGUSR1), its live
    descendants and the end of its stderr; then the whole tree is killed."""
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        tree = _descendants(proc.pid)
        table = _process_table([proc.pid] + tree)
        if proc.poll() is None:
            proc.send_signal(signal.SIGUSR1)
            time.sleep(2.0)
        for pid in [proc.pid] + tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"still running {timeout:g} s after {signal.Signals(signum).name} (main process "
                    f"{'exited' if proc.returncode is not None and not table.startswith(str(proc.pid)) else 'alive'}):"
                    f"\n{table}\n--- stderr, end ---\n{(err or '')[-6000:]}")
    return proc.returncode, err


@pytest.mark.serial
@pytest.mark.parametrize("signum, status", SIGNALS)
def test_annotation_interrupted_says_what_is_saved_and_resumes_exactly(tmp_path, signum, status) -> None:
    num_pairs = 60
    write_dataset(tmp_path, "descender", make_dataset(num_pairs, seed=5))
    reference = run_annotation(config(tmp_path, custom_annotator_string="reference"))
    cpath = chunk_path(tmp_path / "preference", "llama3_descender_default", 0, 1)
    args = ["scripts.annotate_pairs", *cli(tmp_path, "--backend", "heuristic", "--batch_size", "4")]
    proc = _spawn(args, tmp_path, **{TEST_DELAY_ENV: "0.15"})
    _wait_for(lambda: cpath.exists() and 8 <= int((np.load(cpath) != UNKNOWN).sum()), proc, "8 labelled pairs")
    rc, err = _interrupt(proc, signum)
    assert rc == status
    assert "Traceback" not in err
    name = signal.Signals(signum).name
    assert f"interrupted by {name}: the labels of every finished batch are saved in {cpath}" in err
    assert "run the same command again to resume" in err
    done = int((np.load(cpath) != UNKNOWN).sum())
    assert 0 < done < num_pairs
    resumed = _spawn(args, tmp_path)
    out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, err
    assert f"{num_pairs - done} pairs annotated in this run" in out
    final = load_preferences(tmp_path / "preference" / "llama3_descender_default.npy", num_pairs)
    np.testing.assert_array_equal(final, reference)


@pytest.mark.parametrize("signum, status", SIGNALS[1:])  # one signal: the handling is the annotation's, tested with both
def test_collection_interrupted_writes_nothing_and_runs_again(tmp_path, signum, status) -> None:
    out_dir = tmp_path / "og"
    args = ["scripts.collect_dataset", "--skill", "descender", "--out", str(out_dir), "--policy", "explorer",
            "--no_progress"]
    proc = _spawn(args + ["--num_pairs", "100000", "--num_workers", "2"], tmp_path)
    time.sleep(4.0)  # the workers are playing
    assert proc.poll() is None
    rc, err = _interrupt(proc, signum)
    assert rc == status and "Traceback" not in err
    assert f"interrupted by {signal.Signals(signum).name}: nothing was written" in err
    assert not (out_dir / "descender.npz").exists()
    again = _spawn(args + ["--num_pairs", "20"], tmp_path)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert (out_dir / "descender.npz").exists()


@pytest.mark.parametrize("signum, status", SIGNALS[:1])
def test_reward_training_interrupted_names_its_checkpoint_and_resumes(tmp_path, signum, status) -> None:
    write_inputs(tmp_path, 400)
    ckpt_dir = tmp_path / "skill_rewards" / EXPERIMENT / "checkpoint_p0"
    args = ["scripts.train_reward", *_script_args(tmp_path, "--save_every", "3")]
    args[args.index("--num_epochs") + 1] = "20"
    proc = _spawn(args, REPO)
    _wait_for(lambda: len(list_checkpoints(ckpt_dir)) >= 2, proc, "two checkpoints", timeout=120)
    rc, err = _interrupt(proc, signum)
    assert rc == status and "Traceback" not in err
    newest = list_checkpoints(ckpt_dir)[-1]
    assert f"interrupted by {signal.Signals(signum).name}: the newest checkpoint, {newest[1]}, is kept" in err
    resumed = _spawn(args, REPO)  # the same command resumes from that checkpoint and finishes
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    assert f"resuming from {newest[1]} at iteration {newest[0]} of" in err
    total = int(err.split(f"at iteration {newest[0]} of ")[1].split()[0])
    assert f"{EXPERIMENT}: {total} iterations" in out


PIPELINE_DRIVER = """
import sys
import scripts.pipeline as cli
from orchestration.phases import Phase

ROOT = sys.argv[1]
annotate = ["--goal_key", "descender", "--directory", ROOT + "/og_dataset", "--preference_dir", ROOT + "/preference",
            "--logdir", ROOT + "/logs", "--no_progress", "--backend", "heuristic", "--batch_size", "4"]
# two phases of the real kind: one that finishes, one that is running when the signal comes
cli.build_plan = lambda cfg: [
    Phase("check/gnomish", "check", "scripts.pipeline", ["--check_meta_policies", "--tasks", "gnomish"]),
    Phase("annotate/descender", "annotate", "scripts.annotate_pairs", annotate),
]
if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[2:]))
"""


@pytest.mark.serial
@pytest.mark.parametrize("signum, status", SIGNALS[1:])
def test_the_pipeline_passes_the_signal_to_its_phase_and_says_how_to_resume(tmp_path, signum, status) -> None:
    write_dataset(tmp_path, "descender", make_dataset(60, seed=5))
    (tmp_path / "drive.py").write_text(PIPELINE_DRIVER)
    out = tmp_path / "run"
    cpath = chunk_path(tmp_path / "preference", "llama3_descender_default", 0, 1)
    args = [str(tmp_path / "drive.py"), str(tmp_path), "--preset", "ci", "--out_dir", str(out)]
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}", **{TEST_DELAY_ENV: "0.15"})
    proc = subprocess.Popen([sys.executable, *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    _wait_for(lambda: cpath.exists() and 8 <= int((np.load(cpath) != UNKNOWN).sum()), proc, "the annotation phase")
    rc, err = _interrupt(proc, signum)
    assert rc == status and "Traceback" not in err
    name = signal.Signals(signum).name
    assert f"interrupted by {name}: phase annotate/descender was stopped" in err
    resume = err.split("Resume with: ")[1].strip()
    assert resume.endswith(f"--preset ci --out_dir {out} --resume")
    # the phase saved what it had when the pipeline passed the signal on
    assert f"[interrupted by {name}]" in (out / "logs" / "annotate__descender.log").read_text()
    assert 0 < int((np.load(cpath) != UNKNOWN).sum()) < 60
    again = subprocess.run([sys.executable, *args, "--resume"], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "[1/2] check/gnomish: skipped (finished in an earlier run)" in again.stdout
    assert load_preferences(tmp_path / "preference" / "llama3_descender_default.npy", 60).shape == (60,)


@pytest.mark.parametrize("signum, status", SIGNALS)
def test_the_line_training_ends_with_gives_the_exit_status_of_the_signal(monkeypatch, signum, status) -> None:
    """It said "training ended with status 2 (interrupted)", sample-factory's own code, while the process exited
    130 (2 is the scripts' status for bad input)."""
    from sample_factory.algo.utils.misc import ExperimentStatus

    from common import interrupts
    from rl_baseline.sf.train import ending_line, exit_status

    monkeypatch.setattr(interrupts, "RECEIVED", [])
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (see _default_sigint)
    try:
        with pytest.raises(KeyboardInterrupt), interrupts.sigterm_raises(sigint=True):
            os.kill(os.getpid(), signum)  # recorded as sample-factory's event loop would see it, then caught
            time.sleep(5)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert exit_status(ExperimentStatus.INTERRUPTED) == status
    line = ending_line(ExperimentStatus.INTERRUPTED, [], Path("x/checkpoint_p0/checkpoint_000000002_512.pth"))
    assert line == (f"training ended with status {status} (interrupted by {signal.Signals(signum).name}); newest "
                    "checkpoint: x/checkpoint_p0/checkpoint_000000002_512.pth; the same command resumes from it")
    assert ending_line(ExperimentStatus.FAILURE, ["rollout worker 0"], None) == (
        "training ended with status 1 (failure): rollout worker 0 exited; newest checkpoint: none saved yet; the same "
        "command resumes from it")
    assert exit_status(ExperimentStatus.SUCCESS) == 0 and exit_status(ExperimentStatus.FAILURE) == 1


@pytest.mark.slow
@pytest.mark.serial  # its shutdown is timed: a neighbour's training on the same 2 cores once stretched it past 60 s
@pytest.mark.parametrize("signum, status", SIGNALS)
def test_skill_training_interrupted_saves_a_checkpoint_and_resumes_from_it(tmp_path, signum, status) -> None:
    """sample-factory's loop stops the workers in order and the learner saves; the exit status says which signal
    (it was 2 for both, and SIGTERM killed the main process and left the workers)."""
    args = ["scripts.main", "--train_dir", str(tmp_path), "--experiment", "x", "--device", "cpu", "--num_workers",
            "1", "--num_envs_per_worker", "2", "--batch_size", "256", "--rollout", "16", "--encoder_arch", "project",
            "--skill_reward", "progress", "--max_episode_steps", "200"]
    proc = _spawn(args + ["--train_for_env_steps", "100000000"], REPO)
    log = tmp_path / "x" / "sf_log.txt"
    _wait_for(lambda: log.exists() and "Fps is" in log.read_text(), proc, "training", timeout=120)
    rc, err = _interrupt(proc, signum)
    assert rc == status, err[-3000:]
    saved = sorted((tmp_path / "x" / "checkpoint_p0").glob("checkpoint_*.pth"))
    assert saved, "the learner saved nothing on the way out"
    assert (f"training ended with status {status} (interrupted by {signal.Signals(signum).name}); newest checkpoint: "
            f"{saved[-1]}; the same command resumes from it") in err
    steps = int(saved[-1].stem.split("_")[-1])
    again = _spawn(args + ["--train_for_env_steps", str(steps + 2000)], REPO)
    out, err = again.communicate(timeout=180)
    assert again.returncode == 0, err[-3000:]
    text = out + err
    assert f"loading {saved[-1]}" in text and f"self.env_steps={steps}" in text


@pytest.mark.slow
@pytest.mark.parametrize("signum, status", SIGNALS[:1])
def test_an_interrupted_evaluation_writes_nothing_and_says_so(tmp_path, signum, status) -> None:
    train = ["scripts.main", "--train_dir", str(tmp_path), "--experiment", "x", "--device", "cpu", "--num_workers",
             "1", "--num_envs_per_worker", "2", "--batch_size", "256", "--rollout", "16", "--encoder_arch", "project",
             "--skill_reward", "progress", "--max_episode_steps", "200", "--train_for_env_steps", "1000"]
    done = subprocess.run([sys.executable, "-m", *train], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr[-2000:]
    eval_dir = tmp_path / "eval"
    proc = _spawn(["scripts.main", "--train_dir", str(tmp_path), "--experiment", "x", "--evaluation", "True",
                   "--eval_target", "gnomish", "--eval_protocol", "project", "--eval_episodes", "1000",
                   "--eval_num_envs", "2", "--eval_dir", str(eval_dir)], REPO)
    time.sleep(8.0)  # playing
    assert proc.poll() is None
    rc, err = _interrupt(proc, signum)
    assert rc == status and "Traceback" not in err
    assert f"interrupted by {signal.Signals(signum).name}: an evaluation writes its results when it ends" in err
    assert not any(eval_dir.glob("*.json"))
