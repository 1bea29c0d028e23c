"""Probes of bad input and faults against every script, as a new user makes them on a ``--preset ci`` run.

Each :class:`Probe` is one command (``python -m scripts.X ...``) with what it must do: its exit status, a phrase its
output must hold, a time within which it ends, and that it changes no file of the run it is pointed at (every file's
size and modification time, before and after). :func:`run_probe` runs one in a fresh scratch folder; the suite
(``tests/test_faults.py``) runs the probes of the defects it pins, and the exercise runs them all and writes the
table of docs/reliability.md::

    python -m tests.fault_probes --run_dir RUN    # RUN: python -m scripts.pipeline --preset ci --out_dir RUN

Placeholders in a probe's arguments: ``{run}`` (the run, or the copy probed), ``{scratch}`` (a folder of the
probe's own), ``{file}`` (a plain file in it), ``{missing}`` (a path that does not exist).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parents[1]
SKILLS = ("discoverer", "descender", "ascender", "worshipper", "merchant")


def reward_dirs(base: Path, order: tuple[str, ...] = SKILLS) -> str:
    """``--reward_dir``: the reward models under ``base`` (a run's ``skill_rewards``), in ``order``, in the form the
    pipeline writes (a Python list)."""
    return str([str(base / f"llama3_{s}_default") for s in order])


# -- what a probe prepares in its scratch folder -----------------------------------------------------------------
def _diverged_rewards(run: Path, scratch: Path) -> None:
    """The run's five reward models, the descender's with NaN weights (what --reward_lr inf trained before)."""
    import torch  # lazy: only the probes that need a damaged checkpoint

    for s in SKILLS:
        shutil.copytree(run / "skill_rewards" / f"llama3_{s}_default", scratch / "rewards" / f"llama3_{s}_default")
    ckpt = sorted((scratch / "rewards" / "llama3_descender_default" / "checkpoint_p0").glob("*.pth"))[-1]
    state = torch.load(ckpt, weights_only=False)
    for value in state["model"].values():
        if value.is_floating_point():
            value.fill_(float("nan"))
    torch.save(state, ckpt)


def _earlier_export(run: Path, scratch: Path, extra: bool = False) -> None:
    cmd = [sys.executable, "-m", "scripts.export_dataset", "--skill", "descender", "--dataset_dir",
           str(run / "og_dataset"), "--preference_dir", str(run / "preference"), "--out", str(scratch / "export"),
           "--no_progress"]
    subprocess.run(cmd, cwd=scratch, env=_env(), check=True, capture_output=True)
    if extra:
        (scratch / "export" / "my_notes.txt").write_text("not the export's")


def _copy_reward(run: Path, scratch: Path) -> None:
    shutil.copytree(run / "skill_rewards" / "llama3_descender_default",
                    scratch / "rewards" / "llama3_descender_default")


def _attacker_module(run: Path, scratch: Path, text: str = "import os\nos.system('touch {scratch}/pwned')\n") -> None:
    source = (REPO / "rl_baseline" / "meta_policies" / "exploration" / "seed42" / "execution.py").read_text()
    folder = scratch / "modules" / "exploration" / "seed42"  # the training policy over skills
    folder.mkdir(parents=True)
    (folder / "execution.py").write_text(text.format(scratch=scratch) + source)


def _cookie_module(run: Path, scratch: Path) -> None:
    source = (REPO / "rl_baseline" / "meta_policies" / "exploration" / "seed42" / "execution.py").read_text()
    folder = scratch / "modules" / "exploration" / "seed42"
    folder.mkdir(parents=True)
    (folder / "execution.py").write_bytes(b"# -*- coding: utf-7 -*-\n" + source.encode())


def _cut_generated(run: Path, scratch: Path) -> None:
    src = run / "code_generation" / "gnomish" / "_seed42" / "execution.py"
    dst = scratch / "gen" / "gnomish" / "_seed42" / "execution.py"
    dst.parent.mkdir(parents=True)
    text = src.read_text()
    dst.write_text(text[: len(text) // 2])


def _empty_folder(run: Path, scratch: Path) -> None:
    (scratch / "empty").mkdir()


def _other_task_transcript(run: Path, scratch: Path) -> None:
    shutil.copy(REPO / "code_generation" / "replays" / "gnomish_seed42.jsonl", scratch / "gnomish.jsonl")


SETUPS: dict[str, Callable[[Path, Path], None]] = {
    "diverged_rewards": _diverged_rewards,
    "earlier_export": _earlier_export,
    "earlier_export_with_notes": lambda run, scratch: _earlier_export(run, scratch, extra=True),
    "copy_reward": _copy_reward,
    "attacker_module": _attacker_module,
    "numpy_patch_module": lambda run, scratch: _attacker_module(run, scratch, "import numpy as np\nnp.mean = len\n"),
    "cookie_module": _cookie_module,
    "cut_generated": _cut_generated,
    "empty_folder": _empty_folder,
    "other_task_transcript": _other_task_transcript,
}


@dataclass
class Probe:
    """One command and what it must do (see the module docstring)."""

    script: str
    args: list[str]
    what: str  # the fault, in a few words
    status: int = 2
    says: str = ""  # a phrase the output must hold (case-insensitive)
    setup: Optional[str] = None
    within_s: float = 30.0
    defect: str = ""  # the defect of issue 67 it pins, where it pins one
    writes: list[str] = field(default_factory=list)  # files of the run it may write (relative)


def _main(*args: str) -> list[str]:
    return ["--train_dir", "{run}/skill_policy", "--experiment", "ci", *args]


def _fresh_training(*args: str) -> list[str]:
    return ["--train_dir", "{scratch}", "--experiment", "x", "--device", "cpu", "--num_workers", "1",
            "--num_envs_per_worker", "2", "--batch_size", "256", "--rollout", "16", "--encoder_arch", "project",
            "--skill_reward", "progress", "--max_episode_steps", "200", "--train_for_env_steps", "1000", *args]


def _evaluation(*args: str) -> list[str]:
    return _main("--evaluation", "True", "--eval_target", "gnomish", "--eval_protocol", "project",
                 "--eval_episodes", "1", "--eval_num_envs", "1", "--max_episode_steps", "100", *args)


PROBES: list[Probe] = [
    # -- export_dataset: --overwrite deletes only what an export wrote
    Probe("export_dataset", ["--skill", "descender", "--dataset_dir", "{run}/og_dataset", "--preference_dir",
                             "{run}/preference", "--out", "{run}", "--overwrite"],
          "--overwrite into a run's folder", says="not an earlier export", defect="export deletes a run"),
    Probe("export_dataset", ["--skill", "descender", "--dataset_dir", "{run}/og_dataset", "--preference_dir",
                             "{run}/preference", "--out", "{run}/og_dataset", "--overwrite"],
          "--overwrite into the datasets it reads", says="not an earlier export", defect="export deletes a run"),
    Probe("export_dataset", ["--skill", "descender", "--dataset_dir", "{run}/og_dataset", "--preference_dir",
                             "{run}/preference", "--out", "{scratch}/export", "--overwrite", "--no_progress"],
          "--overwrite of an earlier export", status=0, setup="earlier_export"),
    Probe("export_dataset", ["--skill", "descender", "--dataset_dir", "{run}/og_dataset", "--preference_dir",
                             "{run}/preference", "--out", "{scratch}/export", "--overwrite"],
          "--overwrite of an export with a file of the user's", says="my_notes.txt",
          setup="earlier_export_with_notes", defect="export deletes a run"),
    Probe("export_dataset", ["--skill", "descender", "--dataset_dir", "{run}/og_dataset", "--preference_dir",
                             "{run}/preference", "--out", "{scratch}/export"],
          "an existing --out without --overwrite", says="exists", setup="earlier_export"),
    Probe("export_dataset", ["--skill", "descender", "--dataset_dir", "{run}/og_dataset", "--out", "{file}",
                             "--overwrite"], "--out is a file", says="{file}"),
    Probe("export_dataset", ["--skill", "bogus", "--out", "{scratch}/x"], "an unknown skill", says="--skill"),
    Probe("export_dataset", ["--skill", "descender", "--dataset", "{missing}", "--out", "{scratch}/x"],
          "a missing --dataset", says="{missing}"),
    Probe("export_dataset", ["--skill", "descender", "--dataset", "{run}/og_dataset", "--out", "{scratch}/x"],
          "--dataset is a folder", says="a folder, not a dataset file"),
    # -- scripts.main: training settings that cannot train, refused before any worker
    Probe("main", _fresh_training("--learning_rate", "nan"), "--learning_rate nan", says="--learning_rate",
          defect="settings that cannot train"),
    Probe("main", _fresh_training("--learning_rate", "inf"), "--learning_rate inf", says="--learning_rate",
          defect="settings that cannot train"),
    Probe("main", _fresh_training("--learning_rate", "-0.1"), "--learning_rate -0.1", says="--learning_rate"),
    Probe("main", _fresh_training("--learning_rate", "0"), "--learning_rate 0", says="--learning_rate"),
    Probe("main", _fresh_training("--num_workers", "100000"), "--num_workers 100000", says="at most",
          defect="settings that cannot train"),
    Probe("main", _fresh_training("--num_workers", "0"), "--num_workers 0", says="--num_workers"),
    Probe("main", _fresh_training("--device", "tpu"), "--device tpu", says="--device"),
    Probe("main", _fresh_training("--max_episode_steps", "0"), "--max_episode_steps 0",
          says="--max_episode_steps"),
    Probe("main", _fresh_training("--env", "bogus"), "an unknown --env", says="--env"),
    Probe("main", ["--train_dir", "{file}", "--experiment", "x", "--device", "cpu", "--skill_reward", "progress"],
          "--train_dir is a file", says="--train_dir"),
    Probe("main", _fresh_training("--skill_reward", "llm", "--reward_dir", "{reversed_rewards}"),
          "reward models in the wrong skill order", says="slot 1", defect="wrong skill order"),
    Probe("main", _fresh_training("--skill_reward", "llm", "--reward_dir", "{diverged_rewards}"),
          "a diverged reward model", says="diverged", setup="diverged_rewards", defect="non-finite reward model"),
    Probe("main", _fresh_training("--skill_reward", "llm", "--reward_dir", "{one_missing_reward}"),
          "a missing --reward_dir", says="no_such_thing"),
    Probe("main", _fresh_training("--code_seed", "999"),
          "a policy over skills that does not exist", says="no meta-policy module"),
    Probe("main", _fresh_training("--meta_policy_root", "{scratch}/modules"),
          "an attacker's policy over skills", says="refused by the code check", setup="attacker_module"),
    Probe("main", _fresh_training("--meta_policy_root", "{scratch}/modules"),
          "a policy over skills that patches numpy", says="assigning to or deleting numpy.mean",
          setup="numpy_patch_module"),
    Probe("main", _fresh_training("--meta_policy_root", "{scratch}/modules"),
          "a policy over skills with a coding cookie", says="coding cookie", setup="cookie_module"),
    Probe("main", _evaluation("--eval_episodes", "2"), "an evaluation with other settings over a result",
          says="other settings", defect="replaced evaluation"),
    Probe("main", _evaluation("--eval_target", "bogus"), "an unknown --eval_target", says="--eval_target"),
    Probe("main", _evaluation("--eval_skill", "bogus"), "an unknown --eval_skill", says="--eval_skill"),
    Probe("main", _main("--evaluation", "True", "--eval_target", "gnomish", "--experiment", "nothing_here"),
          "an evaluation of a run that does not exist", says="no saved experiment"),
    # -- train_reward
    Probe("train_reward", ["--skill", "descender", "--dataset_dir", "{run}/og_dataset", "--preference_dir",
                           "{run}/preference", "--train_dir", "{scratch}", "--reward_lr", "inf"],
          "--reward_lr inf", says="--reward_lr", defect="non-finite reward model"),
    Probe("train_reward", ["--skill", "descender", "--dataset_dir", "{run}/og_dataset", "--preference_dir",
                           "{run}/preference", "--train_dir", "{scratch}", "--reward_lr", "nan"],
          "--reward_lr nan", says="--reward_lr", defect="non-finite reward model"),
    Probe("train_reward", ["--skill", "descender", "--dataset_dir", "{run}/og_dataset", "--preference_dir",
                           "{run}/preference", "--train_dir", "{scratch}", "--reward_lr", "0"],
          "--reward_lr 0", says="--reward_lr"),
    Probe("train_reward", ["--skill", "descender", "--dataset_dir", "{run}/og_dataset", "--preference_dir",
                           "{run}/preference", "--train_dir", "{scratch}", "--batch_size", "0"],
          "--batch_size 0", says="batch"),
    Probe("train_reward", ["--skill", "descender", "--dataset", "{missing}", "--preference_dir",
                           "{run}/preference", "--train_dir", "{scratch}"], "a missing --dataset", says="{missing}"),
    Probe("train_reward", ["--experiment", "llama3_descender_default", "--dataset_dir", "{run}/og_dataset",
                           "--preference_dir", "{run}/preference", "--train_dir", "{scratch}/rewards",
                           "--embed_dim", "32", "--conv_channels", "16", "--hidden_dim", "16", "--batch_size", "16",
                           "--num_epochs", "5", "--reward_lr", "0.001", "--no_progress"],
          "a resume with another --embed_dim", says="embed_dim 8", setup="copy_reward",
          defect="resume with another --embed_dim"),
    Probe("train_reward", ["--skill", "descender", "--train_dir", "{file}"], "--train_dir is a file",
          says="--train_dir"),
    Probe("train_reward", ["--skill", "bogus"], "an unknown --skill", says="--skill"),
    Probe("train_reward", ["--skill", "descender", "--dataset_dir", "{run}/og_dataset", "--preference_dir",
                           "{missing}", "--train_dir", "{scratch}"], "a missing --preference_dir",
          says="{missing}"),
    Probe("train_reward", ["--skill", "descender", "--num_epochs", "0", "--dataset_dir", "{run}/og_dataset",
                           "--preference_dir", "{run}/preference", "--train_dir", "{scratch}"], "--num_epochs 0",
          says="epochs"),
    # -- pipeline
    Probe("pipeline", ["--preset", "ci", "--out_dir", "{scratch}/p", "--phase_timeout", "-1"],
          "--phase_timeout -1", says="--phase_timeout", within_s=10, defect="settings that cannot train"),
    Probe("pipeline", ["--preset", "ci", "--out_dir", "{scratch}/p", "--phase_timeout", "nan"],
          "--phase_timeout nan", says="--phase_timeout", within_s=10, defect="settings that cannot train"),
    Probe("pipeline", ["--preset", "ci", "--out_dir", "{scratch}/p", "--phase_timeout", "inf"],
          "--phase_timeout inf", says="--phase_timeout", within_s=10),
    Probe("pipeline", ["--preset", "ci", "--out_dir", "{scratch}/p", "--device", "tpu"], "--device tpu",
          says="--device", within_s=10, defect="settings that cannot train"),
    Probe("pipeline", ["--preset", "ci", "--out_dir", "{scratch}/p", "--device", "gpu"],
          "--device gpu on a machine without one", says="--device gpu", within_s=20),
    Probe("pipeline", ["--preset", "ci", "--out_dir", "{run}"], "--out_dir of an earlier run without --resume",
          says="--resume"),
    Probe("pipeline", ["--preset", "ci", "--out_dir", "{run}/og_dataset", "--clean"],
          "--clean of a folder it did not make", says="--clean"),
    Probe("pipeline", ["--preset", "bogus"], "an unknown --preset", says="--preset"),
    Probe("pipeline", ["--preset", "ci", "--out_dir", "{scratch}/p", "--num_pairs", "0"], "--num_pairs 0",
          says="num_pairs"),
    Probe("pipeline", ["--preset", "ci", "--out_dir", "{file}"], "--out_dir is a file", says="--out_dir"),
    # -- collect_dataset
    Probe("collect_dataset", ["--skill", "descender", "--num_pairs", "4", "--out", "{scratch}", "--num_workers",
                              "100000"], "--num_workers 100000", says="at most", within_s=15,
          defect="settings that cannot train"),
    Probe("collect_dataset", ["--skill", "descender", "--num_pairs", "4", "--out", "{scratch}", "--num_workers",
                              "0"], "--num_workers 0", says="--num_workers"),
    Probe("collect_dataset", ["--skill", "descender", "--num_pairs", "0", "--out", "{scratch}"], "--num_pairs 0",
          says="--num_pairs"),
    Probe("collect_dataset", ["--skill", "bogus", "--num_pairs", "4", "--out", "{scratch}"], "an unknown skill",
          says="skill"),
    Probe("collect_dataset", ["--skill", "descender", "--num_pairs", "4", "--out", "{run}/og_dataset"],
          "an existing dataset without --force", says="--force"),
    Probe("collect_dataset", ["--skill", "descender", "--num_pairs", "4", "--out", "{scratch}", "--policy_mix",
                              "bogus:1"], "an unknown policy in --policy_mix", says="bogus"),
    Probe("collect_dataset", ["--skill", "descender", "--num_pairs", "4", "--out", "{scratch}", "--sample_prob",
                              "2"], "--sample_prob 2", says="--sample_prob"),
    Probe("collect_dataset", ["--skill", "descender", "--num_pairs", "4", "--out", "{file}"], "--out is a file",
          says="--out"),
    # -- inspect_reward
    Probe("inspect_reward", ["--reward_dir", "{run}/skill_rewards/llama3_descender_default", "--dataset",
                             "{run}/og_dataset"], "--dataset is a folder", says="a folder, not a dataset file",
          defect="unclear messages"),
    Probe("inspect_reward", ["--reward_dir", "{run}/skill_rewards/llama3_descender_default", "--dataset",
                             "{missing}"], "a missing --dataset", says="{missing}"),
    Probe("inspect_reward", ["--reward_dir", "{missing}", "--dataset", "{run}/og_dataset/descender.npz"],
          "a missing --reward_dir", says="{missing}"),
    Probe("inspect_reward", ["--reward_dir", "{scratch}/rewards/llama3_descender_default", "--dataset",
                             "{run}/og_dataset/descender.npz"], "a diverged reward model", says="diverged",
          setup="diverged_rewards", defect="non-finite reward model"),
    Probe("inspect_reward", ["--reward_dir", "{run}/skill_rewards/llama3_descender_default", "--dataset",
                             "{run}/og_dataset/descender.npz", "--top", "-1"], "--top -1", says="--top"),
    # -- report
    Probe("report", ["--train_dir", "{file}"], "--train_dir is a file", says="a file, not a folder",
          defect="unclear messages"),
    Probe("report", ["--train_dir", "{missing}"], "a missing --train_dir", says="no such folder"),
    Probe("report", ["--train_dir", "{run}", "--out", "{file}"], "--out is a file", says="--out"),
    # -- training_window
    Probe("training_window", ["--policy_dir", "{run}/skill_policy/ci", "--compare", "{missing}"],
          "a missing --compare", says="no such folder", defect="unclear messages"),
    Probe("training_window", ["--policy_dir", "{missing}"], "a missing --policy_dir", says="no such folder"),
    Probe("training_window", ["--policy_dir", "{file}"], "--policy_dir is a file", says="a file, not a folder"),
    Probe("training_window", ["--policy_dir", "{run}/skill_policy/ci", "--plot", "{scratch}/curves.txt"],
          "--plot is not a .png", says="--plot"),
    Probe("training_window", ["--policy_dir", "{scratch}/empty"], "a folder without summaries",
          says="no tensorboard summaries", setup="empty_folder"),
    # -- baseline_cost
    Probe("baseline_cost", ["--out_dir", "{scratch}/empty", "--name", "motif", "--label", "x"],
          "an empty folder", says="no run", setup="empty_folder", defect="cost of nothing"),
    Probe("baseline_cost", ["--out_dir", "{missing}", "--name", "motif", "--label", "x"], "a missing --out_dir",
          says="{missing}", defect="cost of nothing"),
    Probe("baseline_cost", ["--out_dir", "{run}", "--name", "nothing_here", "--label", "x"],
          "a baseline that never ran", says="no run", defect="cost of nothing"),
    Probe("baseline_cost", ["--out_dir", "{scratch}/empty", "--name", "motif", "--label", "x", "--phase", "bogus"],
          "a malformed --phase", says="--phase", setup="empty_folder"),
    # -- reward_trace
    Probe("reward_trace", ["--reward_dir", "{reversed_rewards}", "--episodes", "1"],
          "reward models in the wrong skill order", says="slot 1", defect="wrong skill order"),
    Probe("reward_trace", ["--reward_dir", "{four_rewards}", "--episodes", "1"], "four reward models", says="5"),
    Probe("reward_trace", ["--reward_dir", "{diverged_rewards}", "--episodes", "1"], "a diverged reward model",
          says="diverged", setup="diverged_rewards", defect="non-finite reward model"),
    Probe("reward_trace", ["--reward_dir", "{rewards}", "--episodes", "0"], "--episodes 0", says="--episodes"),
    # -- combine
    Probe("combine", ["--task", "gnomish", "--seed", "42", "--gen_dir", "{scratch}/gen", "--out_root",
                      "{scratch}/out"], "a generated module cut short", says="execution.py", setup="cut_generated",
          defect="combine exit status"),
    Probe("combine", ["--task", "bogus"], "an unknown --task", says="--task"),
    Probe("combine", ["--task", "gnomish", "--seed", "7", "--gen_dir", "{missing}", "--out_root", "{scratch}"],
          "a missing --gen_dir", says="{missing}"),
    Probe("combine", ["--task", "gnomish", "--seed", "42", "--gen_dir", "{run}/code_generation", "--out_root",
                      "{file}"], "--out_root is a file", says="--out_root"),
    # -- generate_code
    Probe("generate_code", ["--task", "delphi", "--backend", "replay", "--replay", "{scratch}/gnomish.jsonl",
                            "--out_dir", "{scratch}/gen"], "another task's transcript", says="recorded for task gnomish",
          setup="other_task_transcript", defect="unclear messages"),
    Probe("generate_code", ["--task", "gnomish", "--backend", "replay", "--replay", "{missing}", "--out_dir",
                            "{scratch}/gen"], "a missing transcript", says="{missing}"),
    Probe("generate_code", ["--task", "gnomish", "--backend", "replay", "--replay", "{scratch}", "--out_dir",
                            "{scratch}/gen"], "a folder as transcript", says="a folder"),
    Probe("generate_code", ["--task", "gnomish", "--max_iters", "0", "--backend", "replay", "--replay",
                            "{scratch}/gnomish.jsonl"], "--max_iters 0", says="--max_iters",
          setup="other_task_transcript"),
    Probe("generate_code", ["--task", "gnomish", "--backend", "bogus"], "an unknown --backend", says="--backend"),
    # -- merge_evaluations
    Probe("merge_evaluations", ["--inputs", "{run}/skill_policy/ci/eval/gnomish_seed42.json", "--out",
                                "{run}/skill_policy/ci/eval/delphi_seed42.json"], "--out exists", says="exists"),
    Probe("merge_evaluations", ["--inputs", "{missing}", "--out", "{scratch}/m.json"], "a missing input",
          says="{missing}"),
    Probe("merge_evaluations", ["--inputs", "{run}/skill_policy/ci/eval/gnomish_seed42.json",
                                "{run}/skill_policy/ci/eval/delphi_seed42.json", "--out", "{scratch}/m.json"],
          "evaluations of two tasks", says="task"),
    # -- skill_report
    Probe("skill_report", ["--policy_dir", "{missing}"], "a missing --policy_dir", says="{missing}"),
    Probe("skill_report", ["--policy_dir", "{run}/skill_policy/ci", "--episodes", "0"], "--episodes 0",
          says="--episodes"),
    Probe("skill_report", ["--policy_dir", "{run}/skill_policy/ci", "--skill_names", "bogus"], "an unknown skill",
          says="bogus"),
    # -- annotation
    Probe("annotate_pairs", ["--goal_key", "descender", "--directory", "{run}/og_dataset", "--backend", "bogus"],
          "an unknown --backend", says="--backend"),
    Probe("annotate_pairs", ["--goal_key", "descender", "--directory", "{missing}", "--backend", "heuristic",
                             "--preference_dir", "{scratch}"], "a missing --directory", says="{missing}"),
    Probe("annotate_pairs", ["--goal_key", "bogus", "--directory", "{run}/og_dataset"], "an unknown --goal_key",
          says="--goal_key"),
    Probe("annotate_pairs_dataset", ["--directory", "{missing}", "--goal-key", "descender"],
          "a missing --directory", says="{missing}"),
    Probe("compare_labels", ["--labels_dir", "{missing}", "--against_dir", "{run}/preference", "--dataset_dir",
                             "{run}/og_dataset"], "a missing --labels_dir", says="{missing}"),
    # -- conversions and imports
    Probe("convert_release_policy", ["--checkpoint", "{missing}", "--train_dir", "{scratch}", "--experiment", "x"],
          "a missing checkpoint", says="{missing}"),
    Probe("convert_release_rewards", ["--checkpoint", "{missing}", "--skill", "descender", "--out_dir",
                                      "{scratch}"], "a missing checkpoint", says="{missing}"),
    Probe("convert_release_rewards", ["--checkpoint", "{missing}", "--skill", "descender", "--out_dir", "{file}"],
          "--out_dir is a file", says="--out_dir"),
    Probe("import_ttyrecs", ["--ttyrec_dir", "{missing}", "--skill", "descender", "--num_pairs", "4", "--out",
                             "{scratch}"], "a missing --ttyrec_dir", says="{missing}"),
    # -- the LLM side
    Probe("llm_policy", ["--eval_target", "bogus", "--out_dir", "{scratch}"], "an unknown --eval_target",
          says="--eval_target"),
    Probe("llm_policy", ["--eval_target", "gnomish", "--out_dir", "{file}"], "--out_dir is a file",
          says="--out_dir"),
    Probe("reward_agreement", ["--skill", "descender", "--policy_dir", "{missing}", "--backend", "heuristic"],
          "a missing --policy_dir", says="{missing}"),
    Probe("serve_local_llm", ["--port", "0"], "--port 0", says="--port"),
    Probe("serve_local_llm", ["--model", "{missing}"], "a missing model file", says="{missing}"),
    Probe("serve_stand_in_llm", ["--port", "70000"], "--port 70000", says="--port"),
    Probe("wait_llm_server", ["--port", "0", "--model", "x"], "--port 0", says="--port: must be at least 1"),
    Probe("wait_llm_server", ["--port", "1", "--model", "x", "--timeout_s", "1"], "no server listening",
          status=1, says=":1/v1", within_s=15),
    Probe("wait_llm_server", ["--port", "9001", "--model", "x", "--timeout_s", "-1"], "--timeout_s -1",
          says="--timeout_s"),
]


# -- running ------------------------------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: its size and modification time."""
    out = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = Path(root) / name
            try:
                st = path.stat()
            except OSError:
                continue
            out[str(path.relative_to(folder))] = (st.st_size, st.st_mtime_ns)
    return out


@dataclass
class Outcome:
    probe: Probe
    status: int
    seconds: float
    output: str
    lost: list[str]
    ok: bool
    why: str


def _fill(text: str, run: Path, scratch: Path) -> str:
    rewards = run / "skill_rewards"
    return text.format(run=run, scratch=scratch, file=scratch / "a_file.txt", missing=scratch / "no_such_thing",
                       rewards=reward_dirs(rewards), reversed_rewards=reward_dirs(rewards, SKILLS[::-1]),
                       four_rewards=reward_dirs(rewards, SKILLS[:4]), diverged_rewards=reward_dirs(scratch / "rewards"),
                       one_missing_reward=reward_dirs(rewards).replace("llama3_descender_default", "no_such_thing"))


def run_probe(probe: Probe, run: Path, scratch: Path) -> Outcome:
    """Runs ``probe`` against ``run`` with ``scratch`` as its own (new, empty) folder."""
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "a_file.txt").write_text("a plain file\n")
    if probe.setup:
        SETUPS[probe.setup](run, scratch)
    before = snapshot(run)
    args = [_fill(a, run, scratch) for a in probe.args]
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", f"scripts.{probe.script}", *args], cwd=scratch, env=_env(),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=max(60.0, probe.within_s * 4))
        status, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        status, output = -9, f"still running after {exc.timeout:g} s"
    seconds = time.monotonic() - start
    after = snapshot(run)
    lost = sorted(p for p, v in before.items() if after.get(p) != v and p not in probe.writes)
    says = _fill(probe.says, run, scratch)
    problems = []
    if status != probe.status:
        problems.append(f"exit {status}, not {probe.status}")
    if "Traceback (most recent call last)" in output:
        problems.append("a traceback")
    if says and says.lower() not in output.lower():
        problems.append(f"no {says!r} in its output")
    if seconds > probe.within_s:
        problems.append(f"{seconds:.0f} s, over {probe.within_s:g}")
    if lost:
        problems.append(f"{len(lost)} file(s) of the run changed or lost")
    return Outcome(probe, status, seconds, output, lost, not problems, "; ".join(problems))


def _first_line(output: str) -> str:
    for line in output.splitlines():
        if line.startswith("error:") or line.startswith("interrupted"):
            return line[:140]
    lines = [ln for ln in output.splitlines() if ln.strip()]
    return (lines[-1] if lines else "")[:140]


def table(outcomes: list[Outcome]) -> str:
    rows = ["| # | script | fault | expected | got | s | files of the run lost | verdict |",
            "|---|---|---|---|---|---|---|---|"]
    for i, o in enumerate(outcomes, 1):
        rows.append(f"| {i} | `{o.probe.script}` | {o.probe.what} | {o.probe.status} | {o.status} | "
                    f"{o.seconds:.1f} | {len(o.lost)} | {'ok' if o.ok else o.why} |")
    return "\n".join(rows)


def build_parser() -> argparse.ArgumentParser:
    """The exercise's command line (the docs' commands are checked against it)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run_dir", required=True, help="a finished scripts.pipeline --preset ci run (never changed: "
                                                    "the probes run against a copy)")
    p.add_argument("--work_dir", default=None, help="where the copy and the scratch folders go (default: a temp)")
    p.add_argument("--out", default=None, help="also write the table (markdown) and the outcomes (JSON) here")
    p.add_argument("--only", default=None, help="comma-separated probe numbers (1-based) to run alone")
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    import tempfile

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="fault_probes_"))
    run = work / "run"
    if not run.exists():
        shutil.copytree(args.run_dir, run, symlinks=True)
    outcomes = []
    only = {int(n) for n in args.only.split(",")} if args.only else None
    for i, probe in enumerate(PROBES, 1):
        if only is not None and i not in only:
            continue
        shutil.rmtree(work / f"probe{i:03d}", ignore_errors=True)
        outcome = run_probe(probe, run, work / f"probe{i:03d}")
        outcomes.append(outcome)
        print(f"[{i}/{len(PROBES)}] {probe.script}: {probe.what}: {'ok' if outcome.ok else outcome.why} "
              f"({outcome.seconds:.1f} s) {_first_line(outcome.output)}", flush=True)
    text = table(outcomes)
    lost = sum(len(o.lost) for o in outcomes)
    failed = [o for o in outcomes if not o.ok]
    summary = f"{len(outcomes)} probes over {len({o.probe.script for o in outcomes})} scripts: {len(outcomes) - len(failed)} ok, {len(failed)} not; {lost} file(s) of the run lost"
    print(text)
    print(summary)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "fault_probes.md").write_text(text + "\n\n" + summary + "\n")
        (Path(args.out) / "fault_probes.json").write_text(json.dumps(
            [{"script": o.probe.script, "fault": o.probe.what, "expected": o.probe.status, "got": o.status,
              "seconds": round(o.seconds, 2), "lost": o.lost, "ok": o.ok, "why": o.why,
              "said": _first_line(o.output)} for o in outcomes], indent=1))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
