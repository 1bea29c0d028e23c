"""Steps per second of raw NLE next to this project's environments, measured in one run.

1. raw NLE: ``NetHackScore-v0`` as gymnasium makes it (NLE's own options, observation keys
   and 23 actions);
2. ``NetHackScoreMonk-v1``: the Monk env (options file, macros, per-step info, overview reads);
3. the full skill environment of training: the Monk env under the skill runtime with the
   exploration policy over skills, one reward model per skill (tiny ones, trained first on synthetic
   messages; the release architecture), the skill bookkeeping and the policy observation;
   the policy over skills runs in its isolated child (bubblewrap), as in training;
4. the same with the policy over skills in-process (``--trust_generated_code``): the difference
   is what the isolation costs per step (one round trip to the child per step).

The reward models run on one torch thread, as in sample-factory's rollout workers (which call
``torch.set_num_threads(1)``); torch's default of one thread per core costs the skill env
about 12% here, waiting in the thread pool on every reward-model call. The process is pinned to one core, as
sample-factory pins a rollout worker where the workers fill the cores (``--set_workers_cpu_affinity``, its default;
the long runs' 2 workers on 2 cores): the isolated child then shares its caller's core without a system call per
request (``--no_pin`` leaves the process free to move, as an evaluation is).

Every env takes uniformly random actions from its own action set, resets included, for
``--steps`` steps; the three are measured in turn ``--repeats`` times and the medians are
reported (the machine's load moves single measurements by 10-30%). Ends with one JSON line
(``skill_env_vs_raw_nle``, ``monk_env_vs_raw_nle`` and the rates).

    python -m bench.env_throughput --steps 20000
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.fixtures import build_tiny_reward_dirs, machine_description
from common.vocabulary import SKILL_SPECS, SKILLS
from rl_baseline.sf.cfg import SkillEnvConfig


def _measure(env, steps: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    n_actions = env.action_space.n
    env.reset(seed=seed)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(int(rng.integers(n_actions)))
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def _skill_env(reward_root: Path, max_episode_steps: int, trust_generated_code: bool = False):
    from rl_baseline.sf.env import build_skill_env  # lazy: pulls in NLE and torch; --help stays light

    dirs = build_tiny_reward_dirs(reward_root)
    cfg = SkillEnvConfig(max_episode_steps=max_episode_steps, reward_dirs=tuple(dirs),
                         quantiles=tuple(SKILL_SPECS[s].quantile for s in SKILLS),
                         trust_generated_code=trust_generated_code)
    return build_skill_env(cfg)


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script (the docs' commands are checked against it)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20_000, help="random steps per environment and repeat")
    parser.add_argument("--repeats", type=int, default=3, help="measurements of each env, interleaved")
    parser.add_argument("--max_episode_steps", type=int, default=10_000, help="episode step limit of our envs")
    parser.add_argument("--seed", type=int, default=0, help="seed of games and actions")
    parser.add_argument("--no_pin", action="store_true",
                        help="leave the process free to move between cores (default: pinned to one, as a rollout "
                             "worker of a training run is)")
    return parser


def main() -> None:
    parser = build_parser()
    args = parser.parse_args()
    if args.steps < 100 or args.repeats < 1:
        parser.error("--steps must be >= 100 and --repeats >= 1")

    import gymnasium as gym  # lazy: only for a run; --help stays light
    import nle  # noqa: F401  # lazy: only for a run; imported to register NetHackScore-v0
    import torch  # lazy: only for a run; --help stays light

    torch.set_num_threads(1)  # as sample-factory's rollout workers, where the skill env runs
    pinned = None
    if not args.no_pin and hasattr(os, "sched_setaffinity"):
        # the last core: on the 2-core machine raw NLE ran at 16,000 steps/s on core 0, 22,000 on core 1 (one run each)
        pinned = max(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {pinned})  # before the envs: their isolated children start on this core

    from rl_baseline.envs import make_monk_env  # lazy: pulls in NLE

    with tempfile.TemporaryDirectory(prefix="bench_env_") as tmp:
        envs = {
            "raw NLE NetHackScore-v0": gym.make("NetHackScore-v0"),
            "NetHackScoreMonk-v1": make_monk_env(max_episode_steps=args.max_episode_steps),
            "skill environment": _skill_env(Path(tmp), args.max_episode_steps),
            "skill environment, generated code in-process": _skill_env(Path(tmp), args.max_episode_steps,
                                                                        trust_generated_code=True),
        }
        rates: dict[str, list[float]] = {name: [] for name in envs}
        try:
            for rep in range(args.repeats):
                for name, env in envs.items():
                    rates[name].append(_measure(env, args.steps, args.seed + rep))
        finally:
            for env in envs.values():
                env.close()
    raw, monk, skill, trusted = (float(np.median(v)) for v in rates.values())
    machine = machine_description()
    where = f"pinned to core {pinned}" if pinned is not None else "not pinned"
    print(f"machine: {machine}; {args.steps} random steps x {args.repeats} repeats (medians); {where}")
    print(f"raw NLE NetHackScore-v0:   {raw:9.0f} steps/s")
    print(f"NetHackScoreMonk-v1:       {monk:9.0f} steps/s   ({monk / raw:.2f} x raw)")
    print(f"skill environment:         {skill:9.0f} steps/s   ({skill / raw:.2f} x raw; generated code isolated)")
    print(f"  generated code in-process: {trusted:7.0f} steps/s   ({trusted / raw:.2f} x raw; "
          f"the isolation costs {1e6 / skill - 1e6 / trusted:.0f} us a step)")
    print(json.dumps({"machine": machine, "pinned_core": pinned, "raw_nle": round(raw, 1),
                      "monk_env": round(monk, 1), "skill_env": round(skill, 1),
                      "skill_env_in_process": round(trusted, 1), "monk_env_vs_raw_nle": round(monk / raw, 3),
                      "skill_env_vs_raw_nle": round(skill / raw, 3),
                      "skill_env_in_process_vs_raw_nle": round(trusted / raw, 3),
                      "isolation_us_per_step": round(1e6 / skill - 1e6 / trusted, 1)}))


if __name__ == "__main__":
    main()
