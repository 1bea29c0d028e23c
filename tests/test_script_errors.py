"""Every entry point stops the same way (common.cli): one ``error: ...`` line on stderr naming the flag or
file, exit status 2 for bad input and missing optional packages, 1 for a run that failed."""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common.cli import FAILED, USAGE, ScriptParser, error, one_line_errors

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.stem for p in (REPO / "scripts").glob("*.py") if p.stem != "__init__")


def test_error_is_one_line_and_returns_the_status(capsys) -> None:
    assert error("--x 3: must be\n  at most 2") == USAGE == 2
    assert capsys.readouterr().err == "error: --x 3: must be at most 2\n"
    assert error("the server exited", FAILED, detail="--- log ---\nlast line") == FAILED == 1
    assert capsys.readouterr().err == "error: the server exited\n--- log ---\nlast line\n"


def test_parsers_refuse_in_one_line(capsys) -> None:
    p = ScriptParser(prog="python -m scripts.x")
    p.add_argument("--n", type=int, required=True)
    with pytest.raises(SystemExit) as exc:
        p.parse_args(["--n", "two"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err == "error: argument --n: invalid int value: 'two' (python -m scripts.x --help lists the flags)\n"
    other = one_line_errors(argparse.ArgumentParser(prog="elsewhere"))
    with pytest.raises(SystemExit):
        other.parse_args(["--what"])
    assert capsys.readouterr().err.startswith("error: unrecognized arguments: --what (elsewhere --help")


def test_every_script_refuses_an_unknown_flag_with_one_error_line() -> None:
    """They printed argparse's usage block (up to 140 lines for scripts.main) under "main.py: error:",
    "serve_local_llm.py: error:" or "python -m scripts.X: error:"; all run at once, as --help stays light."""
    procs = {name: subprocess.Popen([sys.executable, "-m", f"scripts.{name}", "--no_such_flag"], cwd=REPO,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in SCRIPTS}
    wrong = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        lines = err.strip().splitlines()
        if proc.returncode != 2 or len(lines) != 1 or not lines[0].startswith("error: ") \
                or f"python -m scripts.{name} --help" not in lines[0]:
            wrong[name] = (proc.returncode, err[-600:])
    assert not wrong, wrong
    assert len(procs) >= 24


# ----------------------------------------------------------------------------- output paths

#: scripts that write nothing of their own (they read, print or wait)
WRITE_NOTHING = {"inspect_reward", "wait_llm_server"}
UNWRITABLE = "/proc/maestromotif-out"  # nothing can be created below /proc, not even by root
TRAIN = ["--experiment", "x", "--device", "cpu", "--num_workers", "1", "--num_envs_per_worker", "2", "--batch_size",
         "256", "--rollout", "16", "--encoder_arch", "project", "--skill_reward", "progress", "--train_for_env_steps",
         "1000"]
REPLAY = str(REPO / "code_generation" / "replays" / "gnomish_seed42.jsonl")


def _policy_dir(d: Path) -> str:
    """A folder that passes for a trained experiment until its files are read."""
    (d / "policy" / "checkpoint_p0").mkdir(parents=True, exist_ok=True)
    (d / "policy" / "config.json").write_text("{}")
    (d / "policy" / "checkpoint_p0" / "checkpoint_000000001_100.pth").write_bytes(b"")
    return str(d / "policy")


def _results(d: Path) -> str:
    """A folder with something to report (a training run's skill measures)."""
    (d / "run" / "policy").mkdir(parents=True, exist_ok=True)
    (d / "run" / "policy" / "skill_stats.json").write_text(
        '{"env_steps": 2048, "means": {"skills/discoverer_share": 1.0, "skills/max_depth": 1.0}}')
    return str(d / "run")


def _gguf(d: Path) -> str:
    (d / "model.gguf").write_bytes(b"")
    return str(d / "model.gguf")


# (module, output flag, file name for a flag that names a file (None: a folder), argv(output, run folder))
OUTPUTS = [
    ("scripts.annotate_pairs", "--preference_dir", None, lambda o, d: [
        "--goal_key", "descender", "--backend", "heuristic", "--directory", "og_dataset", "--preference_dir", o]),
    ("scripts.annotate_pairs", "--logdir", None, lambda o, d: [
        "--goal_key", "descender", "--backend", "heuristic", "--directory", "og_dataset", "--logdir", o]),
    ("scripts.annotate_pairs_dataset", "--state-dir", None, lambda o, d: [
        "--backend", "heuristic", "--directory", "motif_dataset", "--state-dir", o]),
    ("scripts.annotate_pairs_dataset", "--directory", None, lambda o, d: [
        "--annotator-type", "score", "--directory", o]),
    ("scripts.baseline_cost", "--out_dir", None, lambda o, d: ["--out_dir", o, "--name", "n", "--label", "a label"]),
    ("scripts.collect_dataset", "--out", None, lambda o, d: [
        "--skill", "descender", "--num_pairs", "20", "--num_workers", "1", "--no_progress", "--out", o]),
    ("scripts.combine", "--out_root", None, lambda o, d: ["--task", "gnomish", "--reference", "--out_root", o]),
    ("scripts.compare_labels", "--out", "cmp.json", lambda o, d: [
        "--dataset_dir", str(d), "--labels_dir", str(d), "--against_dir", str(d), "--out", o]),
    ("scripts.convert_release_policy", "--train_dir", None, lambda o, d: [
        "--checkpoint", "release.pth", "--train_dir", o]),
    ("scripts.convert_release_rewards", "--out_dir", None, lambda o, d: ["--release_dir", str(d), "--out_dir", o]),
    ("scripts.export_dataset", "--out", None, lambda o, d: ["--skill", "descender", "--out", o]),
    ("scripts.generate_code", "--out_dir", None, lambda o, d: [
        "--task", "gnomish", "--backend", "replay", "--replay", REPLAY, "--out_dir", o]),
    ("scripts.import_ttyrecs", "--out", None, lambda o, d: [
        "--skill", "descender", "--num_pairs", "2", "--ttyrec_dir", str(d), "--out", o]),
    ("scripts.import_ttyrecs", "--db", "games.db", lambda o, d: [
        "--skill", "descender", "--num_pairs", "2", "--ttyrec_dir", str(d), "--db", o]),
    ("scripts.llm_policy", "--out_dir", None, lambda o, d: ["--eval_target", "gnomish", "--backend", "stand_in",
                                                            "--out_dir", o]),
    ("scripts.llm_policy", "--record", "transcript.jsonl", lambda o, d: [
        "--eval_target", "gnomish", "--backend", "stand_in", "--record", o]),
    ("scripts.main", "--train_dir", None, lambda o, d: ["--train_dir", o, *TRAIN]),
    ("scripts.merge_evaluations", "--out", "merged.json", lambda o, d: ["--inputs", "a.json", "b.json", "--out", o]),
    ("scripts.pipeline", "--out_dir", None, lambda o, d: ["--preset", "ci", "--out_dir", o]),
    ("scripts.pipeline", "--write_slurm", None, lambda o, d: ["--preset", "paper", "--write_slurm", o]),
    ("scripts.report", "--out", None, lambda o, d: ["--train_dir", _results(d), "--out", o]),
    ("scripts.reward_agreement", "--out_dir", None, lambda o, d: [
        "--skill", "descender", "--policy_dir", _policy_dir(d), "--backend", "heuristic", "--out_dir", o]),
    ("scripts.reward_trace", "--out", None, lambda o, d: ["--reward_dir", "[]", "--out", o]),
    ("scripts.serve_local_llm", "--log", "server.log", lambda o, d: ["--model", _gguf(d), "--log", o]),
    ("scripts.serve_stand_in_llm", "--log", "requests.jsonl", lambda o, d: ["--port", "0", "--log", o]),
    ("scripts.skill_report", "--out", None, lambda o, d: ["--policy_dir", _policy_dir(d), "--out", o]),
    ("scripts.results_tables", "--repo", None, lambda o, d: ["--write", "--repo", o]),
    ("scripts.train_reward", "--train_dir", None, lambda o, d: [
        "--train_dir", o, "--experiment", "llama3_descender_default"]),
    ("scripts.training_window", "--plot", "curves.png", lambda o, d: ["--policy_dir", str(d), "--plot", o]),
    ("bench.local_llm_annotation", "--out", "results.json", lambda o, d: ["--dataset_dir", str(d), "--out", o]),
]


def test_every_script_that_writes_has_its_output_checked() -> None:
    covered = {module.split(".")[1] for module, *_ in OUTPUTS if module.startswith("scripts.")}
    assert covered | WRITE_NOTHING == set(SCRIPTS), "a script without a case in OUTPUTS (or WRITE_NOTHING)"


@pytest.mark.parametrize("place", ["unwritable", "below_a_file"])
@pytest.mark.parametrize("module, flag, name, argv", OUTPUTS, ids=[f"{m.split('.')[-1]}{f}" for m, f, _, _ in OUTPUTS])
def test_an_output_that_cannot_be_written_is_refused_before_the_work(tmp_path, module, flag, name, argv,
                                                                    place) -> None:
    """A folder that cannot be written, or a file where a folder is expected: exit 2 and one line naming the flag
    and the path, at once and with nothing written (collect_dataset raised FileExistsError or PermissionError
    after the whole collection, report and annotate_pairs a raw OSError)."""
    import importlib

    from tests.test_damaged_files import run_in_process

    blocker = tmp_path / "a_file"
    blocker.write_bytes(b"data")
    folder = UNWRITABLE if place == "unwritable" else str(blocker)  # where a folder is expected
    output = f"{folder}/{name}" if name else folder
    args = argv(output, tmp_path)
    before = sorted(tmp_path.rglob("*"))
    started = time.monotonic()
    out = run_in_process(importlib.import_module(module).main, args, tmp_path)
    elapsed = time.monotonic() - started
    errors = [line for line in out.output.splitlines() if line.startswith("error:")]
    assert out.code == 2, out.output[-2000:]
    assert len(errors) == 1 and flag in errors[0] and output in errors[0], out.output[-2000:]
    assert "Traceback" not in out.output and "UNCAUGHT" not in out.output
    assert elapsed < 30, f"refused after {elapsed:.0f} s: found after the work, not before it"
    assert blocker.read_bytes() == b"data" and sorted(tmp_path.rglob("*")) == before, "something was written"
