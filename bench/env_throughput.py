"""Steps per second of raw NLE next to this project's environments, measured in one run.

1. raw NLE: ``NetHackScore-v0`` as gymnasium makes it (NLE's own options, observation keys
   and 23 actions);
2. ``NetHackScoreMonk-v1``: the Monk env (options file, macros, per-step info, overview reads);
3. the full skill environment of training: the Monk env under the skill runtime with the
   exploration policy over skills, one reward model per skill (tiny ones, trained first on synthetic
   messages; the release architecture), the skill bookkeeping and the policy observation;
   the policy over skills runs in its isolated child (bubblewrap), as in training;
4. the same with the policy over skills in-process (``--trust_generated_code``): the difference
   is what the isolation costs per step (one round trip to the child per step);
5. raw NLE and the skill environment as a rollout worker of training plays them: ``--games`` games (the presets'
   16) in turn, each stepped once before the next steps again. Raw NLE's games are stepped one after the other;
   the skill environment's step together (:class:`rl_baseline.skills.skill_games.SkillGames`, training's
   ``--games_per_env``): one request to the isolated child a step for all of them. Many games in turn run slower
   than one game stepped on and on, raw NLE included (each game's memory has left the caches by its next turn),
   so the skill environment's share is read against raw NLE's games in turn, like for like.

The reward models run on one torch thread, as in sample-factory's rollout workers (which call
``torch.set_num_threads(1)``); torch's default of one thread per core costs the skill env
about 12% here, waiting in the thread pool on every reward-model call. The process is pinned to one core, as
sample-factory pins a rollout worker where the workers fill the cores (``--set_workers_cpu_affinity``, its default;
the long runs' 2 workers on 2 cores): the isolated child then shares its caller's core without a system call per
request (``--no_pin`` leaves the process free to move, as an evaluation is).

Every env takes uniformly random actions from its own action set, resets included, for
``--steps`` steps (game steps, over all the games of a row of games in turn); all are measured in turn
``--repeats`` times and the medians are reported (the machine's load moves single measurements by 10-30%). Ends
with one JSON line (``skill_env_vs_raw_nle``, ``monk_env_vs_raw_nle``, ``skill_env_games_vs_raw_nle_games`` and
the rates).

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


def _measure_games(envs: list, steps: int, seed: int) -> float:
    """Game steps per second of ``envs`` (single games) stepped in turn, each once a round, resets included."""
    rng = np.random.default_rng(seed)
    n_actions = envs[0].action_space.n
    for i, env in enumerate(envs):
        env.reset(seed=seed * len(envs) + i)
    rounds = max(1, steps // len(envs))
    start = time.perf_counter()
    for _ in range(rounds):
        for env in envs:
            _, _, terminated, truncated, _ = env.step(int(rng.integers(n_actions)))
            if terminated or truncated:
                env.reset()
    return rounds * len(envs) / (time.perf_counter() - start)


def _measure_together(env, steps: int, seed: int) -> float:
    """Game steps per second of a :class:`SkillGames` (its games reset themselves)."""
    rng = np.random.default_rng(seed)
    n_actions = env.action_space.n
    env.reset(seed=seed)
    rounds = max(1, steps // env.num_agents)
    start = time.perf_counter()
    for _ in range(rounds):
        env.step([int(a) for a in rng.integers(n_actions, size=env.num_agents)])
    return rounds * env.num_agents / (time.perf_counter() - start)


def _skill_games(reward_root: Path, max_episode_steps: int, games: int, trust_generated_code: bool = False):
    from rl_baseline.skills.skill_games import SkillGames  # lazy: pulls in NLE and torch

    return SkillGames([_skill_env(reward_root, max_episode_steps, trust_generated_code) for _ in range(games)])


def _skill_env(reward_root: Path, max_episode_steps: int, trust_generated_code: bool = False):
    from rl_baseline.sf.env import build_skill_env  # lazy: pulls in NLE and torch; --help stays light

    dirs = build_tiny_reward_dirs(reward_root)
    cfg = SkillEnvConfig(max_episode_steps=max_episode_steps, reward_dirs=tuple(dirs),
                         quantiles=tuple(SKILL_SPECS[s].quantile for s in SKILLS),
                         trust_generated_code=trust_generated_code, training_observations=True)
    return build_skill_env(cfg)


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script (the docs' commands are checked against it)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20_000, help="random steps per environment and repeat")
    parser.add_argument("--repeats", type=int, default=3, help="measurements of each env, interleaved")
    parser.add_argument("--max_episode_steps", type=int, default=10_000, help="episode step limit of our envs")
    parser.add_argument("--seed", type=int, default=0, help="seed of games and actions")
    parser.add_argument("--games", type=int, default=16,
                        help="games a rollout worker plays in turn, for the rows of games in turn (the presets' 16); "
                             "0 leaves those rows out")
    parser.add_argument("--no_pin", action="store_true",
                        help="leave the process free to move between cores (default: pinned to one, as a rollout "
                             "worker of a training run is)")
    return parser


def main() -> None:
    parser = build_parser()
    args = parser.parse_args()
    if args.steps < 100 or args.repeats < 1:
        parser.error("--steps must be >= 100 and --repeats >= 1")
    if args.games < 0 or args.games == 1:
        parser.error("--games must be 0 (no rows of games in turn) or at least 2")

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
        together = {}
        if args.games:
            together = {
                "raw NLE, games in turn": [gym.make("NetHackScore-v0") for _ in range(args.games)],
                "skill environment, games together": _skill_games(Path(tmp), args.max_episode_steps, args.games),
                "skill environment, games together, in-process": _skill_games(
                    Path(tmp), args.max_episode_steps, args.games, trust_generated_code=True),
            }
        rates: dict[str, list[float]] = {name: [] for name in list(envs) + list(together)}
        try:
            for rep in range(args.repeats):
                for name, env in envs.items():
                    rates[name].append(_measure(env, args.steps, args.seed + rep))
                for name, env in together.items():
                    measure = _measure_games if isinstance(env, list) else _measure_together
                    rates[name].append(measure(env, args.steps, args.seed + rep))
        finally:
            for env in envs.values():
                env.close()
            for env in together.values():
                for one in (env if isinstance(env, list) else [env]):
                    one.close()
    median = {name: float(np.median(v)) for name, v in rates.items()}
    raw, monk = median["raw NLE NetHackScore-v0"], median["NetHackScoreMonk-v1"]
    skill, trusted = median["skill environment"], median["skill environment, generated code in-process"]
    machine = machine_description()
    where = f"pinned to core {pinned}" if pinned is not None else "not pinned"
    print(f"machine: {machine}; {args.steps} random steps x {args.repeats} repeats (medians); {where}")
    print(f"raw NLE NetHackScore-v0:   {raw:9.0f} steps/s")
    print(f"NetHackScoreMonk-v1:       {monk:9.0f} steps/s   ({monk / raw:.2f} x raw)")
    print(f"skill environment:         {skill:9.0f} steps/s   ({skill / raw:.2f} x raw; generated code isolated)")
    print(f"  generated code in-process: {trusted:7.0f} steps/s   ({trusted / raw:.2f} x raw; "
          f"the isolation costs {1e6 / skill - 1e6 / trusted:.0f} us a step)")
    record = {"machine": machine, "pinned_core": pinned, "raw_nle": round(raw, 1),
              "monk_env": round(monk, 1), "skill_env": round(skill, 1),
              "skill_env_in_process": round(trusted, 1), "monk_env_vs_raw_nle": round(monk / raw, 3),
              "skill_env_vs_raw_nle": round(skill / raw, 3),
              "skill_env_in_process_vs_raw_nle": round(trusted / raw, 3),
              "isolation_us_per_step": round(1e6 / skill - 1e6 / trusted, 1)}
    if together:
        raw_g = median["raw NLE, games in turn"]
        skill_g = median["skill environment, games together"]
        trusted_g = median["skill environment, games together, in-process"]
        print(f"{args.games} games in turn, as a rollout worker of the presets plays them (game steps/s):")
        print(f"raw NLE, games in turn:    {raw_g:9.0f} steps/s   ({raw_g / raw:.2f} x one raw NLE game)")
        print(f"skill environment, games stepped together: {skill_g:7.0f} steps/s   ({skill_g / raw_g:.2f} x raw "
              f"NLE's games in turn; generated code isolated, one request a step for the {args.games})")
        print(f"  generated code in-process: {trusted_g:7.0f} steps/s   ({trusted_g / raw_g:.2f} x raw NLE's games "
              f"in turn; the isolation costs {1e6 / skill_g - 1e6 / trusted_g:.0f} us a game step)")
        record.update({"games": args.games, "raw_nle_games": round(raw_g, 1), "skill_env_games": round(skill_g, 1),
                       "skill_env_games_in_process": round(trusted_g, 1),
                       "skill_env_games_vs_raw_nle_games": round(skill_g / raw_g, 3),
                       "skill_env_games_in_process_vs_raw_nle_games": round(trusted_g / raw_g, 3),
                       "isolation_us_per_game_step": round(1e6 / skill_g - 1e6 / trusted_g, 1)})
    print(json.dumps(record))


if __name__ == "__main__":
    main()
