"""``python -m bench.train_throughput --long_run_config``: the long runs' configuration timed beside the smoke
preset's settings, alternated in one run, with the CPU time of each env step split by part.

The two configurations are the pipeline's own training commands (:func:`orchestration.phases.skill_training_args`),
with this bench's five reward models (the release's reward network, written by :mod:`bench.fixtures`) in place of
the pipeline's and a temporary folder in place of its:

* **long**: the learn preset (16 games per rollout worker in one inference request, precision ``auto``, the
  discoverer's 100 turns) with the release's 10,000-step episodes and the long runs' three levers
  (``--gamma 0.998 --travel_actions True --policy_heads per_skill``), the release's reward timing;
* **smoke**: the smoke preset (the same games and requests, 500-step episodes, no levers).

Each run's CPU time is sampled per process every second and split into parts:

=====================  ==========================================================================================
part                   what it counts
=====================  ==========================================================================================
environment            the Monk env: NetHack and its Python (the rollout workers' ``env`` part)
reward models          the five reward models and their cache (``reward``)
skill runtime          the rest of the skill environment: the policy over skills' parent side, the skill
                       measures, the policy observation (``skill_env`` minus the two above)
generated code         the isolated children that run the policy over skills (bubblewrap)
sample-factory rollout the rollout workers' CPU outside the skill environment (sample-factory's stepping loop,
                       buffers, queues)
inference              the inference worker
learner                the learner worker
rest                   the runner process and anything else
=====================  ==========================================================================================

The rollout workers' parts come from :mod:`common.part_times` (enabled for these runs by its environment
variable); every other from the processes' own CPU times. The last line is JSON with ``long_fps``, ``smoke_fps``
and ``long_vs_smoke`` (the ratio of env steps/s), the CPU ms per env step of each and their parts.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from bench.fixtures import machine_description
from common import part_times
from orchestration.phases import skill_training_args
from orchestration.pipeline import make_config

#: the long runs' three levers (docs/results.md), on top of the learn preset's settings
LONG_RUN_LEVERS = ("--gamma", "0.998", "--travel_actions", "True", "--policy_heads", "per_skill")
PARTS = ("environment", "reward models", "skill runtime", "generated code", "sample-factory rollout", "inference",
         "learner", "rest")


def _with_flag(args: list[str], flag: str, value: str) -> list[str]:
    out = list(args)
    if flag in out:
        out[out.index(flag) + 1] = value
    else:
        out += [flag, value]
    return out


def config_args(name: str, reward_dirs: list[str], device: str) -> list[str]:
    """``scripts.main`` flags of the ``long`` or ``smoke`` configuration (``--train_dir``/``--experiment`` left to
    the caller)."""
    cfg = make_config("learn" if name == "long" else "smoke")
    cfg = replace(cfg, device=device)
    args = skill_training_args(cfg)
    args = _with_flag(args, "--reward_dir", repr(list(reward_dirs)))
    if name == "long":
        args += list(LONG_RUN_LEVERS)
    return args


def parts_of(run_cpu: dict[str, float], rollout_parts: dict[str, float]) -> dict[str, float]:
    """CPU seconds by part (:data:`PARTS`) from the processes' roles and the rollout workers' own split."""
    env = rollout_parts.get("env", 0.0)
    reward = rollout_parts.get("reward", 0.0)
    skill_env = rollout_parts.get("skill_env", 0.0)
    rollout = run_cpu.get("rollout", 0.0)
    return {
        "environment": env,
        "reward models": reward,
        "skill runtime": max(skill_env - env - reward, 0.0),
        "generated code": run_cpu.get("generated_code", 0.0),
        "sample-factory rollout": max(rollout - skill_env, 0.0),
        "inference": run_cpu.get("inference", 0.0),
        "learner": run_cpu.get("learner", 0.0),
        "rest": run_cpu.get("other", 0.0),
    }


def read_rollout_parts(folder: Path) -> dict[str, float]:
    """The rollout workers' CPU seconds per :mod:`common.part_times` part, summed over their files."""
    total: dict[str, float] = {}
    for path in sorted(folder.glob("parts_*.json")):
        try:
            seconds = json.loads(path.read_text())["seconds"]
        except (OSError, ValueError, KeyError):
            continue
        for part, value in seconds.items():
            total[part] = total.get(part, 0.0) + float(value)
    return total


def run(args: argparse.Namespace, train_run: Callable[..., Any], build_reward_dirs: Callable[..., list[str]],
        repo: Path) -> None:
    """Alternates the two configurations ``args.repeats`` times (see the module docstring); ``train_run`` and
    ``build_reward_dirs`` are :mod:`bench.train_throughput`'s."""
    results: dict[str, list] = {"long": [], "smoke": []}
    parts: dict[str, list[dict[str, float]]] = {"long": [], "smoke": []}
    with tempfile.TemporaryDirectory(prefix="bench_long_") as tmp:
        tmp_path = Path(tmp)
        dirs = build_reward_dirs(repo, tmp_path / "rewards")
        for rep in range(args.repeats):
            for name in ("long", "smoke"):  # alternated, so a change of machine load hits both
                folder = tmp_path / f"parts_{name}_{rep}"
                os.environ[part_times.ENV_VAR] = str(folder)
                try:
                    print(f"{name} configuration, repeat {rep + 1}: training {args.steps} env steps ...", flush=True)
                    result = train_run(name, repo, dirs, args, tmp_path / "runs",
                                       config=config_args(name, dirs, args.device))
                finally:
                    os.environ.pop(part_times.ENV_VAR, None)
                results[name].append(result)
                parts[name].append(parts_of(result.cpu_by_role, read_rollout_parts(folder)))
    report(args, results, parts)


def report(args: argparse.Namespace, results: dict[str, list], parts: dict[str, list[dict[str, float]]]) -> None:
    steps = args.steps
    machine = machine_description()
    print(f"\nmachine: {machine}; {args.repeats} run(s) of {steps} env steps per configuration, alternated "
          f"(medians); device {args.device}")
    for name in ("long", "smoke"):
        print(f"{name}: python -m scripts.main " + " ".join(config_args(name, ["<five reward models>"], args.device)))
    print("\n| configuration | env steps/s | CPU ms per env step | " + " | ".join(PARTS) + " |")
    print("|---|---|---|" + "---|" * len(PARTS))
    figures: dict[str, object] = {"machine": machine, "steps": steps, "repeats": args.repeats, "device": args.device}
    for name in ("long", "smoke"):
        fps = float(np.median([r.fps for r in results[name]]))
        cpu_ms = 1000 * float(np.median([r.cpu_s for r in results[name]])) / steps
        by_part = {p: round(1000 * float(np.median([d[p] for d in parts[name]])) / steps, 3) for p in PARTS}
        print(f"| {name} | {fps:,.0f} | {cpu_ms:.3f} | " + " | ".join(f"{by_part[p]:.3f}" for p in PARTS) + " |")
        figures[f"{name}_fps"] = round(fps, 1)
        figures[f"{name}_fps_runs"] = [round(r.fps, 1) for r in results[name]]
        figures[f"{name}_cpu_ms_per_step"] = round(cpu_ms, 3)
        figures[f"{name}_cpu_ms_per_step_by_part"] = by_part
    figures["long_vs_smoke"] = round(figures["long_fps"] / figures["smoke_fps"], 3)  # type: ignore[operator]
    print(f"\nlong / smoke env steps/s: x{figures['long_vs_smoke']:.2f}")
    print(json.dumps(figures))
    sys.stdout.flush()
