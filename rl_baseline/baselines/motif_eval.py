"""Evaluation of a Motif single-reward run on its root environment's task.

``python -m scripts.main --train_dir ... --experiment ... --evaluation True`` on an experiment trained
with ``--env nle_fixed_eat_action`` (and no ``--eval_target`` task of MaestroMotif) loads its newest
checkpoint and plays its ``--root_env`` (a later ``--root_env`` on the command line evaluates another
of Motif's tasks) in ``--eval_num_envs`` games stepped together in this process, without training.
Episodes end as in training: on the task's success (non-continual tasks), at death or at the step
limit. Two protocols (``--eval_protocol``), as for the MaestroMotif tasks:

* ``release`` (default): ``--eval_env_steps`` env steps in all, each game reset when its episode
  ends, episodes still running at the end dropped; the result is the mean over the last
  ``--eval_stats_avg`` finished episodes -- the statistic Motif reported, its training runs' average
  of the last ``--stats_avg`` episodes;
* ``project``: ``--eval_episodes`` episodes.

Per episode: ``success`` (the task was reached; the statistic of every task but the score),
``score`` (the in-game score at the end: the score task's statistic), the task reward
(``task_return``: 50 per success, the score's increase with NLE's time penalty for the score task),
the intrinsic reward, the length, the deepest level and what ended it (``success``, ``game``:
death, ``step_limit``).

Writes ``{train_dir}/{experiment}/eval/{root_env}.json``: the episode loop and the summary are here, the
entry point that loads the checkpoint and builds the environments is
:func:`rl_baseline.sf.evaluate.evaluate_root_env`.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np
from tqdm import tqdm

from common.nethack import blstats as B
from rl_baseline.envs.seeding import evaluation_game_seed


@dataclass
class RootEpisode:
    """One finished episode of a root environment."""

    success: bool
    score: int
    task_return: float
    intrinsic_return: float
    length: int
    max_depth: int
    ended_by: str  # success | game | step_limit


@dataclass
class RootRun:
    episodes: list[RootEpisode]
    env_steps_run: int
    unfinished: int


def run_root_episodes(envs: Sequence[Any], policy: Any, protocol: str = "release", episodes: int = 100,
                      env_steps: int = 3_000_000, seed: int = 0, progress: bool = True) -> RootRun:
    """Steps ``envs`` (Motif environments, :func:`rl_baseline.sf.env.build_skill_env`) with ``policy``
    (``act(obs_list)``, ``episode_ended(i)``): ``env_steps`` steps in all (release) or until ``episodes``
    episodes finished (project). Episode ``k`` plays the game of seed ``seed * 100_003 + k``."""
    if protocol not in ("release", "project"):
        raise ValueError(f"unknown protocol {protocol!r}")
    n = len(envs)
    budget = int(env_steps) if protocol == "release" else None
    target = int(episodes) if protocol == "project" else None
    obs: list[Any] = []
    depth = np.ones(n, dtype=np.int64)
    for i, env in enumerate(envs):
        o, info = env.reset(seed=evaluation_game_seed(seed, i))
        obs.append(o)
        depth[i] = int(info.get("depth", 1))
    lengths = np.zeros(n, dtype=np.int64)
    task_ret = np.zeros(n)
    intr_ret = np.zeros(n)
    reached = np.zeros(n, dtype=bool)  # continual tasks go on after the success step
    score = np.zeros(n, dtype=np.int64)
    active = np.ones(n, dtype=bool)
    started, steps = n, 0
    done: list[RootEpisode] = []
    bar = tqdm(total=budget if budget is not None else target, desc="eval root env", disable=None if progress else True)
    while active.any() and (budget is None or steps < budget) and (target is None or len(done) < target):
        actions = policy.act(obs)
        before = steps
        for i, env in enumerate(envs):
            if not active[i] or (budget is not None and steps >= budget):
                continue
            o, _, terminated, truncated, info = env.step(int(actions[i]))
            steps += 1
            lengths[i] += 1
            task_ret[i] += float(info.get("game_reward", 0.0))
            intr_ret[i] += float(info.get("intrinsic_reward", 0.0))
            depth[i] = max(depth[i], int(info.get("depth", depth[i])))
            reached[i] |= bool(info.get("task_success", False))
            raw = getattr(env, "last_obs", None) or {}
            if "blstats" in raw and int(raw["blstats"][B.BL_DEPTH]) > 0:  # a game's last screen may hold no stats
                score[i] = int(raw["blstats"][B.BL_SCORE])
            if terminated or truncated:
                if info.get("task_success") and terminated:
                    ended_by = "success"
                elif truncated or not _game_over(info):
                    ended_by = "step_limit"
                else:
                    ended_by = "game"
                done.append(RootEpisode(bool(reached[i]), int(score[i]), float(task_ret[i]), float(intr_ret[i]),
                                        int(lengths[i]), int(depth[i]), ended_by))
                if target is not None:
                    bar.update(1)
                policy.episode_ended(i)
                lengths[i], task_ret[i], intr_ret[i], reached[i], score[i] = 0, 0.0, 0.0, False, 0
                if target is None or started < target:
                    o, info = env.reset(seed=evaluation_game_seed(seed, started))
                    started += 1
                    depth[i] = int(info.get("depth", 1))
                else:
                    active[i] = False
            obs[i] = o
        if budget is not None:
            bar.update(steps - before)
    bar.close()
    unfinished = int(np.count_nonzero(active & (lengths > 0))) if budget is not None else 0
    return RootRun(done[:target] if target is not None else done, steps, unfinished)


def _game_over(info: dict) -> bool:
    """The game itself ended (NLE's end status: death or task success), not the step limit (aborted)."""
    status = info.get("end_status")
    return status is not None and int(status) >= 1


def _mean_stderr(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    arr = np.asarray(values, dtype=np.float64)
    return float(arr.mean()), float(arr.std(ddof=1) / math.sqrt(len(arr))) if len(arr) > 1 else 0.0


def summarize_root(root_env: str, run: RootRun, protocol: str, stats_avg: int) -> dict:
    """The JSON of a root-environment evaluation: the headline over the protocol's episodes."""
    measure = "score" if root_env.startswith("NetHackScore") else "success"
    counted = run.episodes[-int(stats_avg):] if protocol == "release" else run.episodes
    values = [float(e.score) if measure == "score" else float(e.success) for e in counted]
    mean, stderr = _mean_stderr(values)
    return {
        "root_env": root_env,
        "measure": measure,
        "protocol": protocol,
        "mean": mean,
        "stderr": stderr,
        "episodes": len(counted),
        "success_rate": float(np.mean([e.success for e in counted])) if counted else math.nan,
        "mean_score": float(np.mean([e.score for e in counted])) if counted else math.nan,
        "mean_task_return": float(np.mean([e.task_return for e in counted])) if counted else math.nan,
        "mean_length": float(np.mean([e.length for e in counted])) if counted else math.nan,
        "run": {"finished_episodes": len(run.episodes), "unfinished_dropped": run.unfinished,
                "env_steps_run": run.env_steps_run},
        "per_episode": [asdict(e) for e in run.episodes],
    }
