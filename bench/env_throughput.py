"""Steps per second of raw NLE (``NetHackScore``, NLE's own options and actions) next to
``NetHackScoreMonk-v1`` (options file, macros, per-step info, overview reads), both with
uniformly random actions, measured in the same run.

    python -m bench.env_throughput --steps 20000
"""
from __future__ import annotations

import argparse
import time

import numpy as np


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20_000, help="random steps per environment")
    parser.add_argument("--max_episode_steps", type=int, default=10_000, help="episode step limit of both envs")
    parser.add_argument("--seed", type=int, default=0, help="seed of games and actions")
    args = parser.parse_args()

    from nle.env.tasks import NetHackScore

    from rl_baseline.envs import make_monk_env

    raw = NetHackScore(character="mon-hum-neu-mal", max_episode_steps=args.max_episode_steps)
    ours = make_monk_env(max_episode_steps=args.max_episode_steps)
    try:
        raw_rate = _measure(raw, args.steps, args.seed)
        ours_rate = _measure(ours, args.steps, args.seed)
    finally:
        raw.close()
        ours.close()
    print(f"raw NLE NetHackScore:      {raw_rate:9.0f} steps/s")
    print(f"NetHackScoreMonk-v1:       {ours_rate:9.0f} steps/s")
    print(f"ratio (ours / raw):        {ours_rate / raw_rate:9.2f}")


if __name__ == "__main__":
    main()
