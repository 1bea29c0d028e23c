"""``python -m bench.train_throughput --long_run_config``: the long runs' configuration timed beside the smoke
preset's settings, alternated in one run, with the CPU time of each env step split by part.

The two configurations are the pipeline's own training commands (:func:`orchestration.phases.skill_training_args`),
with this bench's five reward models (the release's reward network, written by :mod:`bench.fixtures`) in place of
the pipeline's and a temporary folder in place of its:

* **long**: the learn preset (16 games per rollout worker in one inference request, precision ``auto``, the
  discoverer's 100 turns) with the release's 10,000-step episodes and the long runs' three levers
  (``--gamma 0.998 --travel_actions True --policy_heads per_skill``), the release's reward timing;
* **smoke**: the smoke preset (the same games and requests, 500-step episodes, no levers);
* **long_in_process** (with ``--long_run_in_process``): the long one with the policy over skills in-process
  (``--trust_generated_code True``): the difference is what its sandbox costs a training run;
* **long_games_apart** (with ``--long_run_games_apart``): the long one with each game its own sample-factory
  environment (``--num_envs_per_worker 16 --games_per_env 1``, the layout before ``--games_per_env``: one request
  to the sandbox a game and step): the difference is what stepping a worker's games together gives.

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
variable); every other from the processes' own CPU times. Both are read once a second, and a run's figures are
the differences over its steady window: from sample-factory's FPS report after ``--warmup_reports`` to its last
one, divided by the env steps collected in between (start-up and shutdown left out; runs of 200,000 env steps or
more give a window of a few minutes). Env steps/s is the mean of the window's 10-second reports. The compute
limit is the cores' CPU over the CPU an env step takes. The last line is JSON with ``long_fps``, ``smoke_fps``
and ``long_vs_smoke`` (the ratio of env steps/s), the CPU ms per env step of each and their parts.

    python -m bench.train_throughput --long_run_config --steps 300000 --repeats 2
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
from orchestration.phases import skill_training_args, with_flag
from orchestration.pipeline import make_config

#: the long runs' three levers (docs/results.md), on top of the learn preset's settings
LONG_RUN_LEVERS = ("--gamma", "0.998", "--travel_actions", "True", "--policy_heads", "per_skill")
PARTS = ("environment", "reward models", "skill runtime", "generated code", "sample-factory rollout", "inference",
         "learner", "rest")


def config_args(name: str, reward_dirs: list[str], device: str) -> list[str]:
    """``scripts.main`` flags of the ``long`` or ``smoke`` configuration (``--train_dir``/``--experiment`` left to
    the caller)."""
    cfg = make_config("smoke" if name == "smoke" else "learn")
    cfg = replace(cfg, device=device)
    args = skill_training_args(cfg)
    args = with_flag(args, "--reward_dir", repr(list(reward_dirs)))
    if name != "smoke":
        args += list(LONG_RUN_LEVERS)
    if name == "long_in_process":  # --long_run_in_process: what the sandbox of generated code costs a run
        args += ["--trust_generated_code", "True"]
    if name == "long_games_apart":  # --long_run_games_apart: a game per environment, as before --games_per_env
        games = cfg.num_envs_per_worker * cfg.games_per_env
        args = with_flag(with_flag(args, "--num_envs_per_worker", str(games)), "--games_per_env", "1")
    return args


def configurations(args: argparse.Namespace) -> tuple[str, ...]:
    return (("long", "smoke") + (("long_in_process",) if args.long_run_in_process else ())
            + (("long_games_apart",) if getattr(args, "long_run_games_apart", False) else ()))


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
    names = configurations(args)
    results: dict[str, list] = {name: [] for name in names}
    parts: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="bench_long_") as tmp:
        tmp_path = Path(tmp)
        dirs = build_reward_dirs(repo, tmp_path / "rewards")
        for rep in range(args.repeats):
            for name in names:  # alternated, so a change of machine load hits each
                folder = tmp_path / f"parts_{name}_{rep}"
                os.environ[part_times.ENV_VAR] = str(folder)
                try:
                    print(f"{name} configuration, repeat {rep + 1}: training {args.steps} env steps ...", flush=True)
                    result = train_run(name, repo, dirs, args, tmp_path / "runs",
                                       config=config_args(name, dirs, args.device), parts_folder=folder)
                finally:
                    os.environ.pop(part_times.ENV_VAR, None)
                if not result.steady_steps:
                    raise SystemExit(f"{name}: the run made fewer than --warmup_reports + 2 FPS reports, so it has no "
                                     f"steady window to split: use a larger --steps (200000 or more)")
                results[name].append(result)
                parts[name].append({part: seconds / result.steady_steps for part, seconds
                                    in parts_of(result.steady_cpu_by_role, result.steady_parts).items()})
    report(args, results, parts)


def report(args: argparse.Namespace, results: dict[str, list], parts: dict[str, list[dict[str, float]]]) -> None:
    steps = args.steps
    machine = machine_description()
    print(f"\nmachine: {machine}; {args.repeats} run(s) of {steps} env steps per configuration, alternated "
          f"(medians); device {args.device}")
    for name in results:
        shown = [a for a in config_args(name, ["<five reward models>"], args.device)]
        for flag in ("--train_dir", "--experiment"):  # the bench's own: a temporary folder
            shown[shown.index(flag) + 1] = "<temporary>"
        print(f"{name}: python -m scripts.main " + " ".join(shown))
    print("\nCPU ms per env step in each run's steady window (from the FPS report after the warm-up to the last one; "
          "medians), by part:")
    print("\n| configuration | env steps/s | CPU ms per env step | " + " | ".join(PARTS) + " |")
    print("|---|---|---|" + "---|" * len(PARTS))
    figures: dict[str, object] = {"machine": machine, "steps": steps, "repeats": args.repeats, "device": args.device}
    for name in results:
        fps = float(np.median([r.fps for r in results[name]]))
        by_part = {p: round(1000 * float(np.median([d[p] for d in parts[name]])), 3) for p in PARTS}
        cpu_ms = 1000 * float(np.median([sum(d.values()) for d in parts[name]]))
        print(f"| {name} | {fps:,.0f} | {cpu_ms:.3f} | " + " | ".join(f"{by_part[p]:.3f}" for p in PARTS) + " |")
        # the compute limit: the cores' CPU over the CPU an env step takes
        figures[f"{name}_cpu_limit_fps"] = round(len(os.sched_getaffinity(0)) * 1000 / cpu_ms, 1)
        figures[f"{name}_fps"] = round(fps, 1)
        figures[f"{name}_fps_runs"] = [round(r.fps, 1) for r in results[name]]
        figures[f"{name}_cpu_ms_per_step"] = round(cpu_ms, 3)
        figures[f"{name}_whole_run_cpu_ms_per_step"] = round(
            1000 * float(np.median([r.cpu_s for r in results[name]])) / steps, 3)  # start-up included
        figures[f"{name}_cpu_ms_per_step_by_part"] = by_part
    figures["long_vs_smoke"] = round(figures["long_fps"] / figures["smoke_fps"], 3)  # type: ignore[operator]
    if "long_in_process" in results:
        figures["sandbox_cost"] = round(1 - figures["long_fps"] / figures["long_in_process_fps"], 3)  # type: ignore
        print(f"\nthe sandbox of generated code costs the long runs' configuration {100 * figures['sandbox_cost']:.1f}% "
              f"of its env steps/s (against --trust_generated_code True)")
    if "long_games_apart" in results:
        figures["games_together_gain"] = round(figures["long_fps"] / figures["long_games_apart_fps"], 3)  # type: ignore
        print(f"\nstepping a worker's games together (one request to the sandbox a step): x"
              f"{figures['games_together_gain']:.2f} env steps/s against a game per environment")
    print(f"\nlong / smoke env steps/s: x{figures['long_vs_smoke']:.2f}; the compute limit (the cores' CPU over the "
          f"CPU of an env step): long {figures['long_cpu_limit_fps']:,.0f}, smoke {figures['smoke_cpu_limit_fps']:,.0f} "
          f"env steps/s")
    print(json.dumps(figures))
    sys.stdout.flush()
