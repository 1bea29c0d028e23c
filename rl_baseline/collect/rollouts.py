"""Phase 0: observation datasets collected by playing the game (workers, sampling, output).

A *sample* is one environment step seen through the annotator's eyes: the message
shown before and after the step plus the stats vector (:data:`rlaif.dataset.STAT_FIELDS`)
before and after it. :func:`collect_dataset` plays ``NetHackScoreMonk-v1`` with a mix
of behaviour policies and keeps a random subset of the steps:

* ``random``: uniform over the agent's action set;
* ``explorer``: a scripted agent (:class:`rl_baseline.collect.explorer.ExplorerPolicy`) that walks to unexplored
  floor, picks up items, fights adjacent monsters, eats when hungry and, after a
  random time on each level (or when nothing is left to explore), takes the stairs,
  so the data covers level changes, gold, shops and altars far better than random play;
* ``checkpoint``: a trained skill policy (a sample-factory checkpoint), see
  :class:`rl_baseline.collect.checkpoint_policy.CheckpointPolicy`.

Every episode picks its policy from the mix and gets its own game seeds, and each
step is kept with a small probability, so the samples are spread over many episodes.
The samples are shuffled before saving, so consecutive samples (a pair) usually come
from different episodes.

Determinism: all randomness comes from ``numpy`` generators derived from
``(seed, worker id)``; NetHack runs with fixed core/disp seeds and without
reseeding. The same seed and the same number of workers give a byte-identical file.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
from tqdm import tqdm

from common.flag_checks import output_folder
from common.nethack import blstats as B
from common.nethack.messages import MESSAGE_LEN
from common.worker_exit import exit_with_parent, skip_final_collection_in_worker
from rl_baseline.collect.config import POLICIES, CollectConfig, CollectError
from rl_baseline.collect.explorer import ExplorerPolicy
from rl_baseline.collect.policies import Policy, RandomPolicy
from rl_baseline.envs import make_monk_env
from rlaif.dataset import STAT_FIELDS, ObservationDataset, save_dataset

logger = logging.getLogger(__name__)

ENV_NAME = "NetHackScoreMonk-v1"


def stats_from_blstats(blstats: np.ndarray) -> np.ndarray:
    """The dataset's stats vector (depth, gold, hp, hpmax, xp level, hunger) from NLE's blstats."""
    b = np.asarray(blstats)
    return np.array(
        [b[B.BL_DEPTH], b[B.BL_GOLD], b[B.BL_HP], b[B.BL_HPMAX], b[B.BL_XP_LEVEL], b[B.BL_HUNGER]],
        dtype=np.int32,
    )


def make_policy(name: str, rng: np.random.Generator, config: CollectConfig) -> Policy:
    if name == "random":
        return RandomPolicy(rng)
    if name == "explorer":
        return ExplorerPolicy(rng, config.explorer)
    if name == "checkpoint":
        from rl_baseline.collect.checkpoint_policy import CheckpointPolicy  # lazy: brings rl_baseline.sf; rarely used

        if not config.checkpoint:
            raise CollectError("policy 'checkpoint' needs --checkpoint DIR")
        return CheckpointPolicy(config.checkpoint, config.skill, config.train_dir, rng, config.device)
    raise CollectError(f"unknown policy {name!r}; valid: {', '.join(POLICIES)}")


# ----------------------------------------------------------------------------- environment


def make_env(config: CollectConfig) -> Any:
    """``NetHackScoreMonk-v1`` (``rl_baseline.envs.make_monk_env``) with the collection step limit."""
    return make_monk_env(max_episode_steps=int(config.max_episode_steps), character=config.character)


def _seed_env(env: Any, core: int, disp: int) -> None:
    env.unwrapped.seed(int(core), int(disp), False)


# ----------------------------------------------------------------------------- workers


@dataclass
class WorkerResult:
    messages: np.ndarray  # uint8 [n, 2, 256]
    stats: np.ndarray  # int32 [n, 2, 6]
    episodes: int
    steps: int
    policy_episodes: dict[str, int]
    policy_samples: dict[str, int]
    level_changes: int  # steps that changed the depth (sampled or not)


# stats whose change makes a message-less step worth a sample (HP regeneration alone does not)
_VISIBLE_STATS = [i for i, name in enumerate(STAT_FIELDS) if name not in ("hp", "hpmax")]


def keep_probability(
    msg_before: np.ndarray, msg_after: np.ndarray, stats_before: np.ndarray, stats_after: np.ndarray,
    sample_prob: float, uninformative_keep_prob: float, level_change_prob: float,
) -> float:
    """Chance that a step becomes a sample: ``level_change_prob`` when the depth changed,
    ``sample_prob * uninformative_keep_prob`` when there is no message before or after and
    only HP changed (if anything), else ``sample_prob``."""
    if stats_after[0] != stats_before[0]:
        return float(level_change_prob)
    if not np.any(msg_before) and not np.any(msg_after) and np.array_equal(
            np.asarray(stats_before)[_VISIBLE_STATS], np.asarray(stats_after)[_VISIBLE_STATS]):
        return float(sample_prob) * float(uninformative_keep_prob)
    return float(sample_prob)


def _message_row(obs: dict) -> np.ndarray:
    msg = np.zeros(MESSAGE_LEN, dtype=np.uint8)
    raw = np.asarray(obs["message"], dtype=np.uint8).reshape(-1)[:MESSAGE_LEN]
    msg[: len(raw)] = raw
    return msg


def worker_seed(seed: int, worker_id: int) -> np.random.SeedSequence:
    return np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(worker_id), 0x4E4C45])


def collect_worker(
    config: CollectConfig, worker_id: int, quota: int,
    progress: Optional[Callable[[int], None]] = None,
    env_factory: Optional[Callable[[CollectConfig], Any]] = None,
) -> WorkerResult:
    """Plays episodes until ``quota`` samples are kept; deterministic in (seed, worker_id)."""
    rng = np.random.default_rng(worker_seed(config.seed, worker_id))
    names = list(config.policy_mix)
    weights = np.array([config.policy_mix[n] for n in names], dtype=np.float64)
    weights /= weights.sum()
    messages = np.zeros((quota, 2, MESSAGE_LEN), dtype=np.uint8)
    stats = np.zeros((quota, 2, len(STAT_FIELDS)), dtype=np.int32)
    env = (env_factory or make_env)(config)
    policies: dict[str, Policy] = {}
    kept = episodes = steps = level_changes = 0
    pol_eps = {n: 0 for n in names}
    pol_samples = {n: 0 for n in names}
    pending_progress = 0
    try:
        while kept < quota:
            name = names[int(rng.choice(len(names), p=weights))]
            episode_rng = np.random.default_rng(rng.integers(2**63))
            core, disp = (int(s) for s in rng.integers(1, 2**62, size=2))
            if name not in policies:
                policies[name] = make_policy(name, episode_rng, config)
            policy = policies[name]
            policy.rng = episode_rng
            policy.reset()
            _seed_env(env, core, disp)
            obs, _ = env.reset()
            episodes += 1
            pol_eps[name] += 1
            msg_before, stats_before = _message_row(obs), stats_from_blstats(obs["blstats"])
            in_episode = 0
            done = False
            while not done and kept < quota:
                action = policy.act(obs)
                obs, _, terminated, truncated, _ = env.step(action)
                done = bool(terminated or truncated)
                steps += 1
                msg_after, stats_after = _message_row(obs), stats_from_blstats(obs["blstats"])
                u = rng.random()
                if done and stats_after[0] == 0:
                    break  # the game is over: the final observation has no status line
                level_changes += int(stats_after[0] != stats_before[0])
                keep = u < keep_probability(msg_before, msg_after, stats_before, stats_after, config.sample_prob,
                                            config.uninformative_keep_prob, config.level_change_prob)
                if keep and in_episode < config.max_samples_per_episode:
                    messages[kept, 0], messages[kept, 1] = msg_before, msg_after
                    stats[kept, 0], stats[kept, 1] = stats_before, stats_after
                    kept += 1
                    in_episode += 1
                    pol_samples[name] += 1
                    pending_progress += 1
                    if progress is not None and pending_progress >= 64:
                        progress(pending_progress)
                        pending_progress = 0
                msg_before, stats_before = msg_after, stats_after
    finally:
        for p in policies.values():
            p.close()
        env.close()
    if progress is not None and pending_progress:
        progress(pending_progress)
    return WorkerResult(messages, stats, episodes, steps, pol_eps, pol_samples, level_changes)


def _worker_main(config: CollectConfig, worker_id: int, quota: int, queue: Any) -> None:
    """Process entry point: progress messages, then the result (or the error text)."""
    logging.basicConfig(level=logging.WARNING)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent ends the workers
    skip_final_collection_in_worker()  # the result goes through the queue, flushed before the interpreter exits
    exit_with_parent()  # a killed trainer takes its workers with it
    try:
        result = collect_worker(config, worker_id, quota, progress=lambda n: queue.put(("progress", worker_id, n)))
        queue.put(("done", worker_id, result))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises
        queue.put(("error", worker_id, traceback.format_exc()))


def split_quota(total: int, num_workers: int) -> list[int]:
    base, extra = divmod(int(total), int(num_workers))
    return [base + (1 if i < extra else 0) for i in range(int(num_workers))]


def _run_workers(config: CollectConfig, quotas: Sequence[int], bar: tqdm) -> list[WorkerResult]:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = []
    for wid, quota in enumerate(quotas):
        p = ctx.Process(target=_worker_main, args=(config, wid, quota, queue), daemon=True)
        p.start()
        procs.append(p)
    results: dict[int, WorkerResult] = {}
    try:
        while len(results) < len(procs):
            try:
                kind, wid, payload = queue.get(timeout=5.0)
            except Exception:  # queue.Empty: check that nobody died silently
                dead = [i for i, p in enumerate(procs) if not p.is_alive() and i not in results]
                if dead:
                    raise RuntimeError(f"collection worker(s) {dead} exited without a result") from None
                continue
            if kind == "progress":
                bar.update(payload)
            elif kind == "done":
                results[wid] = payload
            else:
                raise RuntimeError(f"collection worker {wid} failed:\n{payload}")
    finally:
        for p in procs:
            if p.is_alive() and len(results) < len(procs):
                p.terminate()
            p.join(timeout=10)
    return [results[i] for i in range(len(procs))]


def collect_dataset(config: CollectConfig, env_factory: Optional[Callable[[CollectConfig], Any]] = None) -> ObservationDataset:
    """Plays the game with ``config``'s policy mix and returns ``2 * num_pairs`` samples.

    With one worker everything runs in this process (``env_factory`` may replace the
    environment there); with more, each worker is a spawned process.
    """
    config.validate()
    total = 2 * int(config.num_pairs)
    quotas = split_quota(total, config.num_workers)
    bar = tqdm(total=total, desc=f"collect {config.skill}", unit="sample", disable=not config.progress)
    try:
        if config.num_workers == 1:
            results = [collect_worker(config, 0, quotas[0], progress=bar.update, env_factory=env_factory)]
        else:
            if env_factory is not None:
                raise CollectError("env_factory is only supported with num_workers=1")
            results = _run_workers(config, quotas, bar)
    finally:
        bar.close()
    messages = np.concatenate([r.messages for r in results])
    stats = np.concatenate([r.stats for r in results])
    # shuffle so that a pair's two samples usually come from different episodes
    order = np.random.default_rng(np.random.SeedSequence([int(config.seed) & 0xFFFFFFFF, 0x5348])).permutation(total)
    messages, stats = messages[order], stats[order]
    policy_samples: dict[str, int] = {}
    policy_episodes: dict[str, int] = {}
    for r in results:
        for k, v in r.policy_samples.items():
            policy_samples[k] = policy_samples.get(k, 0) + v
        for k, v in r.policy_episodes.items():
            policy_episodes[k] = policy_episodes.get(k, 0) + v
    meta = {
        "source": "rollouts",
        "env": ENV_NAME,
        "skill": config.skill,
        "character": config.character,
        "policy": "+".join(sorted(config.policy_mix)),
        "policy_mix": config.policy_mix,
        "policy_samples": policy_samples,
        "policy_episodes": policy_episodes,
        "checkpoint": config.checkpoint,
        "seed": int(config.seed),
        # each worker's generator is SeedSequence(entropy); game seeds are drawn from it per episode
        "seeds": {"base": int(config.seed),
                  "worker_entropy": [list(map(int, worker_seed(config.seed, w).entropy)) for w in range(config.num_workers)]},
        "num_workers": int(config.num_workers),
        "episodes": int(sum(r.episodes for r in results)),
        "steps": int(sum(r.steps for r in results)),
        "level_changes": int(sum(r.level_changes for r in results)),
        "sampling": {
            "sample_prob": config.sample_prob,
            "uninformative_keep_prob": config.uninformative_keep_prob,
            "level_change_prob": config.level_change_prob,
            "max_samples_per_episode": config.max_samples_per_episode,
            "max_episode_steps": config.max_episode_steps,
        },
        "explorer": asdict(config.explorer),
        "num_pairs": int(config.num_pairs),
    }
    logger.info("collected %d samples from %d episodes (%d steps, %d level changes)",
                total, meta["episodes"], meta["steps"], meta["level_changes"])
    return ObservationDataset(messages, stats, json.loads(json.dumps(meta)))


def output_path(out_dir: str | os.PathLike, skill: str) -> Path:
    return Path(out_dir) / f"{skill}.npz"


def check_output(path: str | os.PathLike, force: bool) -> Path:
    """Refuses an existing output unless ``force``; a directory in the way is always refused, and so is a
    folder (``--out``) that is a file or cannot be written."""
    path = Path(path)
    output_folder("--out", path.parent, CollectError)
    if path.is_dir():
        raise CollectError(f"output {path} is a directory")
    if path.exists() and not force:
        raise CollectError(f"output {path} already exists; pass --force to replace it")
    return path


def write_dataset(path: str | os.PathLike, dataset: ObservationDataset, force: bool = False) -> Path:
    """Saves atomically (through :func:`rlaif.dataset.save_dataset`), never over a file without ``force``."""
    path = check_output(path, force)
    save_dataset(path, dataset)
    return path
