"""On-policy collection: :func:`collect_rollouts` plays episodes with the policy over skill
runtimes and records every step as the annotators see it (message and stats before and after)
with the skill active during the step and the depth change the runtime fed the reward model;
:func:`select_skill_steps` keeps the skill's steps (:class:`Rollouts`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from tqdm import tqdm

from common.nethack.messages import MESSAGE_LEN
from rlaif.dataset import STAT_FIELDS, STAT_INDEX, ObservationDataset


@dataclass
class Rollouts:
    """Every step played, as the annotators see it, with the skill active during the step."""

    messages: np.ndarray  # uint8 [N, 2, 256] message before / after the step
    stats: np.ndarray  # int32 [N, 2, 6] STAT_FIELDS before / after the step
    skill_ids: np.ndarray  # int64 [N] skill active during the step
    rl_depth_change: np.ndarray  # int64 [N] depth after the step minus depth when the skill started (clipped)
    episode: np.ndarray  # int64 [N] episode index
    episodes: int = 0
    episode_lengths: list[int] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return len(self.skill_ids)

    def subset(self, mask: np.ndarray) -> "Rollouts":
        return Rollouts(self.messages[mask], self.stats[mask], self.skill_ids[mask], self.rl_depth_change[mask],
                        self.episode[mask], self.episodes, list(self.episode_lengths))

    def dataset(self, order: np.ndarray, meta: dict) -> ObservationDataset:
        return ObservationDataset(self.messages[order], self.stats[order], meta)


def _message_row(raw: dict) -> np.ndarray:
    out = np.zeros(MESSAGE_LEN, dtype=np.uint8)
    msg = np.asarray(raw["message"], dtype=np.uint8).reshape(-1)[:MESSAGE_LEN]
    out[: len(msg)] = msg
    return out


def _stats_row(raw: dict) -> np.ndarray:
    from rl_baseline.collect.rollouts import stats_from_blstats  # lazy: pulls in NLE

    return stats_from_blstats(raw["blstats"])


def _seed_game(env: Any, seed: int, episode: int) -> None:
    """Fixed NetHack seeds for episode ``episode`` (the game's own generator, not gym's)."""
    core, disp = (int(s) for s in np.random.default_rng([int(seed) & 0xFFFFFFFF, int(episode)]).integers(1, 2**62, 2))
    game = getattr(env, "unwrapped", env)
    if hasattr(game, "seed"):
        try:
            game.seed(core, disp, False)
        except TypeError:  # an env without NLE's seed signature (tests)
            pass


def collect_rollouts(envs: Sequence[Any], policy: Any, episodes: int, seed: int = 0,
                     progress: bool = True) -> Rollouts:
    """Plays ``episodes`` episodes over ``envs`` (skill runtimes: ``skill_id``,
    ``skill_start_depth``, ``last_obs``) with ``policy`` (``act(obs_list)``,
    ``episode_ended(i)``) and records every step.

    A step is attributed to the skill active *during* it (the runtime may switch skills after
    the step). The final observation of a finished game (no status line, depth 0) is left
    out, as the offline collector does."""
    from rlaif.reward_model import clip_depth_change  # lazy: pulls in torch

    n = min(len(envs), int(episodes))
    rows_msg: list[np.ndarray] = []
    rows_stats: list[np.ndarray] = []
    skills: list[int] = []
    rl_depth: list[int] = []
    ep_index: list[int] = []
    obs: list[Any] = [None] * n  # each game's policy observation
    before: list[tuple[np.ndarray, np.ndarray]] = [(np.zeros(0), np.zeros(0))] * n  # message, stats before the step
    current = list(range(n))  # the episode each game is playing
    lengths = [0] * n
    finished: list[int] = []

    def start(i: int, episode: int) -> None:
        _seed_game(envs[i], seed, episode)
        o, _ = envs[i].reset()
        raw = envs[i].last_obs
        before[i] = (_message_row(raw), _stats_row(raw))
        obs[i] = o

    for i in range(n):
        start(i, i)
    started = n
    active = np.ones(n, dtype=bool)
    bar = tqdm(total=int(episodes), desc="on-policy episodes", unit="episode", disable=None if progress else True)
    try:
        while active.any():
            actions = policy.act(obs)
            for i, env in enumerate(envs[:n]):
                if not active[i]:
                    continue
                skill, start_depth = int(env.skill_id), int(env.skill_start_depth)
                o, _, terminated, truncated, info = env.step(int(actions[i]))
                raw = env.last_obs
                msg_after, stats_after = _message_row(raw), _stats_row(raw)
                lengths[i] += 1
                done = bool(terminated or truncated)
                depth = int(info["depth"]) if "depth" in info else int(stats_after[STAT_INDEX["depth"]])
                if not (done and stats_after[STAT_INDEX["depth"]] == 0):
                    msg_before, stats_before = before[i]
                    rows_msg.append(np.stack([msg_before, msg_after]))
                    rows_stats.append(np.stack([stats_before, stats_after]))
                    skills.append(skill)
                    rl_depth.append(int(clip_depth_change(depth - start_depth)))
                    ep_index.append(current[i])
                before[i] = (msg_after, stats_after)
                obs[i] = o
                if done:
                    finished.append(lengths[i])
                    lengths[i] = 0
                    policy.episode_ended(i)
                    bar.update(1)
                    if started < int(episodes):
                        current[i] = started
                        start(i, started)
                        started += 1
                    else:
                        active[i] = False
            bar.set_postfix(steps=len(skills), refresh=False)
    finally:
        bar.close()
    if rows_msg:
        messages = np.stack(rows_msg).astype(np.uint8)
        stats = np.stack(rows_stats).astype(np.int32)
    else:
        messages = np.zeros((0, 2, MESSAGE_LEN), dtype=np.uint8)
        stats = np.zeros((0, 2, len(STAT_FIELDS)), dtype=np.int32)
    return Rollouts(messages, stats, np.asarray(skills, dtype=np.int64), np.asarray(rl_depth, dtype=np.int64),
                    np.asarray(ep_index, dtype=np.int64), len(finished), finished)


def select_skill_steps(rollouts: Rollouts, skill_id: int, collect_mode: str) -> tuple[Rollouts, bool]:
    """The steps of skill ``skill_id``; in exploration mode all steps when the skill was never
    active (the second value says so)."""
    mask = rollouts.skill_ids == int(skill_id)
    if mask.any() or collect_mode != "exploration" or rollouts.steps == 0:
        return rollouts.subset(mask), False
    return rollouts, True
