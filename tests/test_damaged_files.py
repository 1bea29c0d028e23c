"""Damaged files: every file the project reads, damaged on purpose, read through the command that reads it.

For each reader (the table :data:`READERS`) a valid run directory is built with the project's own
writers, one file is damaged -- cut at several points, emptied, zeroed, overwritten with random bytes,
its arrays given the wrong dtype or shape, or replaced by a valid file of another kind -- and the
command that reads it is run. It must stop with a non-zero exit status naming the file (or take its
documented fallback, checked too), within a time limit, and leave every other file of the run
directory byte for byte as it was (hashed before and after; nothing deleted).
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
TIME_LIMIT_S = 120.0
PROJECT_TRACEBACK = re.compile(r'File "[^"]*/(common|rlaif|rl_baseline|code_generation|orchestration|scripts)/')
BYTE_DAMAGE = ("cut_at_1_percent", "cut_in_half", "cut_at_99_percent", "empty", "zeros", "random_bytes")


def damage_bytes(data: bytes, kind: str) -> bytes:
    rng = np.random.default_rng(len(data))
    n = len(data)
    if kind.startswith("cut_"):
        frac = {"cut_at_1_percent": 0.01, "cut_in_half": 0.5, "cut_at_99_percent": 0.99}[kind]
        return data[: max(1, int(n * frac))] if n > 1 else b""
    if kind == "empty":
        return b""
    if kind == "zeros":
        return bytes(n)
    if kind == "random_bytes":
        return rng.integers(0, 256, size=max(n, 64), dtype=np.uint8).tobytes()
    raise ValueError(kind)


def tree_hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@dataclass
class Outcome:
    code: int
    output: str


def run_in_process(main: Callable[[list[str]], int], argv: list[str], cwd: Path) -> Outcome:
    """A script's ``main(argv)`` in this process, in ``cwd``, with its output and logs captured."""
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    root = logging.getLogger()
    root.addHandler(handler)
    result: dict = {}

    def target() -> None:
        old = os.getcwd()
        os.chdir(cwd)
        try:
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                try:
                    code = main(argv)
                    result["code"] = code if isinstance(code, int) else 0  # some mains return their result
                except SystemExit as exc:
                    result["code"] = exc.code if isinstance(exc.code, int) else 1
                except Exception as exc:  # a raw traceback is exactly what must not happen
                    result["code"] = "raised"
                    buf.write(f"UNCAUGHT {type(exc).__name__}: {exc}")
        finally:
            os.chdir(old)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(TIME_LIMIT_S)
    root.removeHandler(handler)
    assert not thread.is_alive(), f"still running after {TIME_LIMIT_S} s"
    return Outcome(result.get("code", "raised"), buf.getvalue())


def run_subprocess(argv: list[str], cwd: Path) -> Outcome:
    try:
        out = subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True, timeout=TIME_LIMIT_S,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"still running after {TIME_LIMIT_S} s: {exc}")
    return Outcome(out.returncode, out.stdout + out.stderr)


@dataclass
class Reader:
    """One reader: which file of the run it reads, the command that reads it, how it may fail."""

    name: str
    target: str  # the file to damage, relative to the run directory
    run: Callable[[Path], Outcome]
    extra: dict[str, Callable[[Path, Path], None]] = field(default_factory=dict)  # other damage kinds
    # a documented fallback instead of an error: check(run_dir, outcome) -> None (asserts)
    fallback: Optional[Callable[[Path, Outcome], None]] = None
    # damage kinds that do not damage what this reader reads, with the reason
    unaffected: dict[str, str] = field(default_factory=dict)


def check_refused(reader: Reader, run_dir: Path, kind: str) -> None:
    target = run_dir / reader.target
    before = tree_hashes(run_dir)
    outcome = reader.run(run_dir)
    after = tree_hashes(run_dir)
    assert outcome.code != "raised", f"{reader.name}/{kind}: uncaught exception:\n{outcome.output[-2000:]}"
    if reader.fallback is not None:
        reader.fallback(run_dir, outcome)
    else:
        assert outcome.code != 0, f"{reader.name}/{kind}: exit status 0 for a damaged {target.name}"
        assert target.name in outcome.output, (
            f"{reader.name}/{kind}: the message does not name {target.name}:\n{outcome.output[-2000:]}")
        # a traceback through the project's code (the sandbox's report of generated code is fine)
        assert not PROJECT_TRACEBACK.search(outcome.output), f"{reader.name}/{kind}: a traceback:\n{outcome.output[-3000:]}"
    changed = {k for k in before if before[k] != after.get(k)}
    assert not changed, f"{reader.name}/{kind}: files changed or deleted: {sorted(changed)}"


# ----------------------------------------------------------------------------- the valid run directory


def _pkl_dataset(npz: Path, out: Path) -> None:
    """The authors' release format (list of dicts), written from one of our datasets."""
    import pickle

    from rlaif.dataset import load_dataset

    ds = load_dataset(npz)
    records = [{"msg_strs": [ds.message_text(i, 0), ds.message_text(i, 1)],
                "stats_list": [ds.stats[i, 0].tolist(), ds.stats[i, 1].tolist()]} for i in range(len(ds))]
    out.write_bytes(pickle.dumps(records))


@pytest.fixture(scope="module")
def valid_run(tmp_path_factory) -> Path:
    """og_dataset/, preference/, skill_rewards/ (5 tiny reward models), an annotation run with its chunk
    state, the release's .pkl layout, Motif's layout, generated code and a replay transcript."""
    from bench.fixtures import build_tiny_reward_dirs
    from scripts import annotate_pairs, export_dataset, generate_code

    root = tmp_path_factory.mktemp("valid_run")
    build_tiny_reward_dirs(root)
    out = run_in_process(annotate_pairs.main, ["--goal_key", "discoverer", "--backend", "heuristic", "--directory",
                                                "og_dataset", "--preference_dir", "annotated", "--logdir",
                                                "annotation_logs", "--no_progress"], root)
    assert out.code == 0, out.output[-2000:]
    (root / "og_pkl").mkdir()
    _pkl_dataset(root / "og_dataset" / "discoverer.npz", root / "og_pkl" / "discoverer.pkl")
    out = run_in_process(export_dataset.main, ["--format", "motif", "--dataset_dir", "og_dataset", "--skill",
                                               "discoverer", "--preference_dir", "preference", "--out",
                                               "motif_dataset"], root)
    assert out.code == 0, out.output[-2000:]
    # results the report reads, written by their writers
    from common.atomic_io import atomic_write_json
    from rl_baseline.evaluation import EpisodeResult, summarize, write_results

    episodes = [EpisodeResult(success=i == 0, count=0.0, value=float(i == 0), length=100 + i,
                              skill_share={"discoverer": 1.0}) for i in range(4)]
    summary = summarize("gnomish", "success", episodes, ("discoverer",))
    summary.update(experiment="policy", code_seed=42)
    write_results(root / "policy" / "eval" / "gnomish_seed42", summary, ("discoverer",))
    atomic_write_json(root / "policy" / "skill_stats.json",
                      {"env_steps": 2048, "means": {"skills/discoverer_share": 1.0, "skills/max_depth": 1.0}})
    shutil.copy(REPO / "code_generation" / "replays" / "gnomish_seed42.jsonl", root / "replay.jsonl")
    out = run_in_process(generate_code.main, ["--task", "gnomish", "--seed", "42", "--backend", "replay",
                                              "--replay", "replay.jsonl", "--out_dir", "gen"], root)
    assert out.code == 0, out.output[-2000:]
    return root


@pytest.fixture
def run_dir(valid_run, tmp_path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(valid_run, dst)
    return dst


# ----------------------------------------------------------------------------- readers


def _main(module: str) -> Callable[[list[str]], int]:
    import importlib

    return importlib.import_module(module).main


def _annotate(directory: str) -> Callable[[Path], Outcome]:
    return lambda d: run_in_process(_main("scripts.annotate_pairs"), [
        "--goal_key", "discoverer", "--backend", "heuristic", "--directory", directory, "--preference_dir",
        "fresh_preferences", "--logdir", "fresh_logs", "--no_progress"], d)


def _annotate_resume(d: Path) -> Outcome:
    return run_in_process(_main("scripts.annotate_pairs"), [
        "--goal_key", "discoverer", "--backend", "heuristic", "--directory", "og_dataset", "--preference_dir",
        "annotated", "--logdir", "annotation_logs", "--no_progress"], d)


def _train_reward(extra: list[str]) -> Callable[[Path], Outcome]:
    return lambda d: run_in_process(_main("scripts.train_reward"), [
        "--num_epochs", "1", "--batch_size", "32", "--num_workers", "0", "--device", "cpu", "--train_dir", "fresh_rewards",
        "--no_progress", *extra], d)


def _inspect(d: Path) -> Outcome:
    return run_in_process(_main("scripts.inspect_reward"), [
        "--reward_dir", "skill_rewards/llama3_discoverer_default", "--dataset", "og_dataset/discoverer.npz"], d)


def _combine(d: Path) -> Outcome:
    return run_in_process(_main("scripts.combine"), ["--task", "gnomish", "--seed", "42", "--gen_dir", "gen",
                                                     "--out_root", "fresh_meta"], d)


def _replay(d: Path) -> Outcome:
    return run_in_process(_main("scripts.generate_code"), ["--task", "gnomish", "--seed", "7", "--backend", "replay",
                                                           "--replay", "replay.jsonl", "--out_dir", "fresh_gen"], d)


def _replace_with(src: str) -> Callable[[Path, Path], None]:
    """Damage kind: a valid file of another kind under the target's name."""
    def damage(run: Path, target: Path) -> None:
        target.write_bytes((run / src).read_bytes())
    return damage


def _npz_with(**arrays: Callable[[np.ndarray], np.ndarray]) -> Callable[[Path, Path], None]:
    """Damage kind: the same .npz with some arrays changed (wrong dtype or shape)."""
    def damage(run: Path, target: Path) -> None:
        with np.load(target, allow_pickle=False) as data:
            content = {k: data[k] for k in data.files}
        for key, fn in arrays.items():
            content[key] = fn(content[key])
        with open(target, "wb") as fh:
            np.savez(fh, **content)
    return damage


def _npy_as(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[Path, Path], None]:
    def damage(run: Path, target: Path) -> None:
        changed = fn(np.load(target, allow_pickle=False))
        with open(target, "wb") as fh:
            np.save(fh, changed)
    return damage


def _text(content: str) -> Callable[[Path, Path], None]:
    def damage(run: Path, target: Path) -> None:
        target.write_text(content)
    return damage


def _report(d: Path) -> Outcome:
    return run_in_process(_main("scripts.report"), ["--train_dir", ".", "--out", "fresh_report", "--no_plots"], d)


def _skipped_in_the_report(run_dir: Path, outcome: Outcome, target: str) -> None:
    """The report's documented fallback: it is written, and it names the unreadable file it left out."""
    assert outcome.code == 0, outcome.output[-2000:]
    md = (run_dir / "fresh_report" / "results.md").read_text()
    assert "## Files skipped" in md and Path(target).name in md.split("## Files skipped", 1)[1], md[-1500:]


def _report_reader(name: str, target: str, **extra) -> Reader:
    return Reader(name, target, _report, extra,
                  fallback=lambda run, out: _skipped_in_the_report(run, out, target))


REWARD_CKPT = "skill_rewards/llama3_discoverer_default/checkpoint_p0"
READERS = [
    Reader("dataset .npz (annotation)", "og_dataset/discoverer.npz", _annotate("og_dataset"), {
        "messages_as_floats": _npz_with(messages=lambda a: a.astype(np.float32)),
        "messages_of_wrong_shape": _npz_with(messages=lambda a: a[:, 0]),
        "preference_file_instead": _replace_with("preference/llama3_discoverer_default.npy"),
    }),
    Reader("dataset .npz (reward training)", "og_dataset/discoverer.npz",
           _train_reward(["--dataset_dir", "og_dataset", "--experiment", "llama3_discoverer_default"]), {
               "stats_of_wrong_shape": _npz_with(stats=lambda a: a[:, :, :3]),
           }),
    Reader("released dataset .pkl", "og_pkl/discoverer.pkl", _annotate("og_pkl"), {
        "npz_file_instead": _replace_with("og_dataset/discoverer.npz"),
    }),
    Reader("preference .npy (reward training)", "preference/llama3_discoverer_default.npy",
           _train_reward(["--dataset_dir", "og_dataset", "--experiment", "llama3_discoverer_default"]), {
               "labels_as_floats": _npy_as(lambda a: a.astype(np.float32)),
               "labels_2d": _npy_as(lambda a: a.reshape(-1, 1)),
               "fewer_labels": _npy_as(lambda a: a[:-3]),
               "labels_out_of_range": _npy_as(lambda a: a + 7),
           }),
    Reader("annotation chunk .npy (resume)", "annotated/llama3_discoverer_default.chunk0of1.npy", _annotate_resume, {
        "fewer_labels": _npy_as(lambda a: a[:-3]),
    }),
    Reader("annotation chunk metadata .json (resume)", "annotated/llama3_discoverer_default.chunk0of1.json",
           _annotate_resume, {"another_json": _text('{"num_pairs": 3}'), "not_an_object": _text("[1, 2]")}),
    Reader("reward checkpoint .pth", f"{REWARD_CKPT}/checkpoint_000000004.pth", _inspect, {}),
    Reader("reward quantiles .csv", "skill_rewards/llama3_discoverer_default/reward_metrics/train_norm_quantiles.csv",
           _inspect, {"header_only": _text("0.05,0.10\n"), "not_numbers": _text("a,b\nc,d\n")}),
    Reader("Motif layout data/message.npy", "motif_dataset/data/message.npy",
           _train_reward(["--dataset_dir", "motif_dataset", "--annotator", "llama3_discoverer_default"]), {
               "wrong_dtype": _npy_as(lambda a: a.astype(np.float64)),
               "wrong_shape": _npy_as(lambda a: a[:, :1]),
           }),
    Reader("Motif layout preference .npy", "motif_dataset/preference/llama3_discoverer_default.npy",
           _train_reward(["--dataset_dir", "motif_dataset", "--annotator", "llama3_discoverer_default"]), {
               "fewer_labels": _npy_as(lambda a: a[:-2]),
           }),
    Reader("generated code execution.py (combine)", "gen/gnomish/_seed42/execution.py", _combine, {
        "python_of_another_kind": _text("def f():\n    return 1\n"),
    }, unaffected={"cut_at_99_percent": "the last 1% is the model's own unit test, which combine leaves out"}),
    _report_reader("evaluation result .json (report)", "policy/eval/gnomish_seed42.json",
                   not_an_evaluation=_text('{"steps": 5}'), a_list=_text("[1, 2, 3]")),
    _report_reader("reward metrics .csv (report)",
                   "skill_rewards/llama3_discoverer_default/reward_metrics/metrics.csv",
                   other_columns=_text("a,b\\n1,2\\n")),
    _report_reader("skill statistics .json (report)", "policy/skill_stats.json", a_list=_text("[1, 2]")),
    Reader("replay transcript .jsonl", "replay.jsonl", _replay, {
        "another_json": _text('{"role": "user", "content": "hello"}\n'),
    }),
]


@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
@pytest.mark.parametrize("kind", BYTE_DAMAGE)
def test_damaged_bytes_are_refused_by_name(run_dir, reader, kind):
    if kind in reader.unaffected:
        pytest.skip(reader.unaffected[kind])
    target = run_dir / reader.target
    target.write_bytes(damage_bytes(target.read_bytes(), kind))
    check_refused(reader, run_dir, kind)


EXTRA = [(r, k) for r in READERS for k in r.extra]


@pytest.mark.parametrize("reader,kind", EXTRA, ids=[f"{r.name}-{k}" for r, k in EXTRA])
def test_wrong_content_and_files_of_another_kind_are_refused_by_name(run_dir, reader, kind):
    reader.extra[kind](run_dir, run_dir / reader.target)
    check_refused(reader, run_dir, kind)


def test_a_damaged_annotation_chunk_says_to_delete_that_chunk_not_to_label_everything_again(run_dir):
    """The message suggested --ignore_existing, which asks for every pair of the run again; deleting the damaged
    chunk (and its metadata) asks for that chunk's pairs only, as the table above says."""
    chunk = run_dir / "annotated" / "llama3_discoverer_default.chunk0of1.npy"
    chunk.write_bytes(damage_bytes(chunk.read_bytes(), BYTE_DAMAGE[0]))
    outcome = _annotate_resume(run_dir)
    assert outcome.code == 2, outcome.output[-2000:]
    assert "delete annotated/llama3_discoverer_default.chunk0of1.npy and " in outcome.output, outcome.output[-2000:]
    assert "pass --ignore_existing to start over" not in outcome.output


# ----------------------------------------------------------------------------- documented fallbacks


@pytest.mark.parametrize("kind", BYTE_DAMAGE)
def test_reward_training_resumes_from_the_newest_readable_checkpoint_and_keeps_the_damaged_one(run_dir, kind):
    """A reward run whose newest checkpoint is damaged continues from the one before, warns naming the
    damaged file, and leaves it in place (rotation never removes it)."""
    ckpt_dir = run_dir / REWARD_CKPT
    older, newest = sorted(ckpt_dir.glob("checkpoint_*.pth"))[-2:]
    newest.write_bytes(damage_bytes(newest.read_bytes(), kind))
    damaged = newest.read_bytes()
    before = tree_hashes(run_dir / "og_dataset")
    out = run_in_process(_main("scripts.train_reward"), [
        "--dataset_dir", "og_dataset", "--preference_dir", "preference", "--experiment", "llama3_discoverer_default",
        "--train_dir", "skill_rewards", "--num_epochs", "4", "--batch_size", "64", "--num_workers", "0",
        "--device", "cpu", "--no_progress", "--reward_arch", "small", "--keep_checkpoints", "1"], run_dir)
    assert out.code == 0, out.output[-3000:]
    assert newest.name in out.output and "skipping unreadable checkpoint" in out.output
    assert f"resuming from {older}" in out.output or older.name in out.output
    # left in place, or kept aside once the resumed run saved a complete checkpoint of that iteration
    kept = newest.with_name(newest.name + ".unreadable")
    assert (newest.exists() and newest.read_bytes() == damaged) or (kept.exists() and kept.read_bytes() == damaged)
    assert tree_hashes(run_dir / "og_dataset") == before


def test_reward_training_with_no_readable_checkpoint_stops_naming_them_all(run_dir):
    ckpts = sorted((run_dir / REWARD_CKPT).glob("checkpoint_*.pth"))
    for path in ckpts:
        path.write_bytes(b"")
    before = tree_hashes(run_dir)
    out = run_in_process(_main("scripts.train_reward"), [
        "--dataset_dir", "og_dataset", "--experiment", "llama3_discoverer_default", "--train_dir", "skill_rewards",
        "--num_epochs", "4", "--batch_size", "64", "--num_workers", "0", "--device", "cpu", "--no_progress",
        "--reward_arch", "small"], run_dir)
    assert out.code == 2 and all(p.name in out.output for p in ckpts), out.output[-2000:]
    assert tree_hashes(run_dir) == before


# ----------------------------------------------------------------------------- the skill policy's files (slow)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    """A valid run with a trained skill policy (relative paths, so a copy of the folder is a run too)."""
    from bench.fixtures import build_tiny_reward_dirs

    root = tmp_path_factory.mktemp("policy_run")
    build_tiny_reward_dirs(root)
    shutil.copytree(REPO / "rl_baseline" / "meta_policies", root / "meta_policies")
    out = run_subprocess(["-m", "scripts.main", *_policy_flags(), "--train_for_env_steps", "1500"], root)
    assert out.code == 0, out.output[-3000:]
    return root


def _policy_flags() -> list[str]:
    from common.vocabulary import SKILLS

    dirs = [f"skill_rewards/llama3_{s}_default" for s in SKILLS]
    return ["--num_workers", "1", "--num_envs_per_worker", "2", "--batch_size", "256", "--rollout", "16",
            "--max_episode_steps", "100", "--device", "cpu", "--train_dir", "skill_policy", "--experiment", "e2e",
            "--reward_dir", repr(dirs), "--eps_threshold_quantile", "0.5", "--meta_policy_root", "meta_policies",
            "--code_seed", "42", "--seed", "2"]


def _evaluate(d: Path) -> Outcome:
    return run_subprocess(["-m", "scripts.main", "--train_dir", "skill_policy", "--experiment", "e2e", "--device", "cpu",
                           "--evaluation", "True", "--eval_target", "gnomish", "--eval_protocol", "project",
                           "--eval_episodes", "1", "--eval_num_envs", "1", "--meta_policy_root", "meta_policies"], d)


def _train_more(d: Path) -> Outcome:
    # a budget past the trained one: a module that were accepted would train briefly, and be caught
    return run_subprocess(["-m", "scripts.main", *_policy_flags(), "--train_for_env_steps", "3000"], d)


def _newest_policy_checkpoint(run: Path) -> str:
    return str(sorted((run / "skill_policy" / "e2e" / "checkpoint_p0").glob("checkpoint_*.pth"))[-1].relative_to(run))


def _other_network(run: Path, target: Path) -> None:
    """Damage kind: a checkpoint of another network (the policy's first layer cut to a third)."""
    import torch

    state = torch.load(target, weights_only=False)
    name = next(k for k, v in state["model"].items() if v.ndim == 2)
    state["model"][name] = state["model"][name][: max(1, state["model"][name].shape[0] // 3)]
    torch.save(state, target)


POLICY_READERS = [
    ("skill-policy checkpoint (evaluation)", _newest_policy_checkpoint, _evaluate, {
        "reward_checkpoint_instead": _replace_with(f"{REWARD_CKPT}/checkpoint_000000004.pth"),
        "checkpoint_of_another_network": _other_network,
    }),
    ("experiment config.json (evaluation)", lambda run: "skill_policy/e2e/config.json", _evaluate, {
        "not_an_object": _text("[1, 2, 3]"),
    }),
    ("policy-over-skills module execution.py (training)", lambda run: "meta_policies/exploration/seed42/execution.py",
     _train_more, {"python_without_the_class": _text("x = 1\n")}),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,target,run,extra", POLICY_READERS, ids=[r[0] for r in POLICY_READERS])
def test_the_skill_policys_files_damaged_are_refused_by_name(trained_run, tmp_path, name, target, run, extra):
    from concurrent.futures import ThreadPoolExecutor

    checks = []
    for kind in BYTE_DAMAGE + tuple(extra):
        run_dir = tmp_path / kind
        shutil.copytree(trained_run, run_dir)
        reader = Reader(name, target(run_dir), run)
        path = run_dir / reader.target
        if kind in extra:
            extra[kind](run_dir, path)
        else:
            path.write_bytes(damage_bytes(path.read_bytes(), kind))
        checks.append((reader, run_dir, kind))
    # each damaged copy is its own run folder and its reader a process mostly importing: two at a time
    with ThreadPoolExecutor(max_workers=2) as pool:
        for done in [pool.submit(check_refused, *check) for check in checks]:
            done.result()


# ------------------------------------------------------------------ permissions


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_files_written_whole_get_the_umasks_permissions(tmp_path, mask, mode) -> None:
    """As a plain open() would: under umask 022 a preference file is 0644, readable by a lab group (it was
    mkstemp's 0600 whatever the umask)."""
    import stat

    from common.atomic_io import atomic_write_json, current_umask
    from rlaif.preferences import save_preferences

    old = os.umask(mask)
    try:
        assert current_umask() == mask
        path = tmp_path / "preference" / "llama3_descender_default.npy"
        save_preferences(path, np.zeros(4, np.int32))
        written_json = atomic_write_json(tmp_path / "meta.json", {"a": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert stat.S_IMODE(written_json.stat().st_mode) == mode
