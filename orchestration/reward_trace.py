"""What the skills are paid on a seeded trace, under each reward timing (``--skill_reward_timing``).

The same games (episode ``k`` plays the game of seed ``seed * 100003 + k``) and the same actions
(those of the dataset collection's explorer, which walks to known staircases and takes them, or
uniformly random ones without prayer, so that an angry god does not end every episode within a few
hundred steps) are played through the skill environment of training once per timing: the
exploration policy over skills picks the skills (its per-episode draws of the deepest level and of
the Mines come from Python's ``random``, seeded per episode), the reward models of ``reward_dirs`` pay them.
The timing changes no observation and no skill choice, only which observation a step's reward
scores and with which skill's model, so the two runs differ in the rewards alone.

Reported per timing: each skill's return per episode (the sum of its intrinsic rewards, before
``--llm_reward``), the reward paid for the observations that arrived on a deeper level by the
stairs, the share of steps whose message is empty or a wall message, and what pays each skill: the
messages its model scored above its threshold, with how often and how much (:meth:`TraceResult.top_paid`).
"""
from __future__ import annotations

import dataclasses
import logging
import random
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
from tqdm import tqdm

from common.nethack.actions import ACTION_NAMES
from common.vocabulary import SKILLS
from rl_baseline.collect.config import ExplorerConfig
from rl_baseline.collect.explorer import ExplorerPolicy
from rl_baseline.envs.seeding import evaluation_game_seed
from rl_baseline.sf.cfg import SkillEnvConfig
from rl_baseline.sf.env import build_skill_env
from rl_baseline.skills import REWARD_TIMINGS

logger = logging.getLogger(__name__)

#: who acts in a trace
TRACE_POLICIES = ("explorer", "random")
#: the random policy's actions: every action but prayer
TRACE_ACTIONS = tuple(i for i, name in enumerate(ACTION_NAMES) if name != "pray")


@dataclass
class TraceResult:
    """Sums over a trace's episodes under one timing."""

    timing: str
    episodes: int = 0
    steps: int = 0
    returns: dict[str, float] = field(default_factory=lambda: {s: 0.0 for s in SKILLS})
    descents: int = 0
    descent_reward: float = 0.0
    empty_share: float = 0.0
    wall_share: float = 0.0
    # skill -> the message its model scored -> [steps it paid, reward paid]
    paid: dict[str, dict[bytes, list]] = field(default_factory=lambda: {s: {} for s in SKILLS})

    def note_paid(self, skill: str, message: bytes, reward: float) -> None:
        """One step whose reward, paid by ``skill``'s model for ``message``, was not 0."""
        entry = self.paid.setdefault(skill, {}).setdefault(message, [0, 0.0])
        entry[0] += 1
        entry[1] += reward

    def top_paid(self, skill: str, top: int) -> list[dict]:
        """The ``top`` messages that paid ``skill`` the most in all, with their share of its return."""
        total = sum(v for _, v in self.paid.get(skill, {}).values())
        rows = sorted(self.paid.get(skill, {}).items(), key=lambda kv: (-kv[1][1], kv[0]))[:max(top, 0)]
        return [{"message": m.decode("latin-1"), "steps": n, "reward": v, "share": v / total if total else 0.0}
                for m, (n, v) in rows]

    def as_dict(self, top: int = 10) -> dict:
        n = max(self.episodes, 1)
        return {
            "timing": self.timing, "episodes": self.episodes, "steps": self.steps,
            "return_per_episode": {s: v / n for s, v in self.returns.items()},
            "descents": self.descents,
            "reward_per_descent": self.descent_reward / self.descents if self.descents else None,
            "empty_message_share": self.empty_share / n, "wall_message_share": self.wall_share / n,
            "top_paid": {s: self.top_paid(s, top) for s in self.paid},
        }


def play_trace(config: SkillEnvConfig, episodes: int, seed: int, show_progress: bool = True,
               policy: str = "explorer") -> TraceResult:
    """Plays ``episodes`` seeded episodes with ``config``'s skill environment; ``policy``: the explorer's
    actions or random ones (:data:`TRACE_POLICIES`)."""

    if policy not in TRACE_POLICIES:
        raise ValueError(f"policy must be one of {TRACE_POLICIES}, got {policy!r}")
    env = build_skill_env(config)
    result = TraceResult(config.reward_timing)
    try:
        for k in tqdm(range(episodes), desc=f"trace ({config.reward_timing})", disable=not show_progress):
            rng = np.random.default_rng([seed, k])
            random.seed(evaluation_game_seed(seed, k))  # the training policy's per-episode draws (depth, Mines)
            explorer = ExplorerPolicy(rng, ExplorerConfig()) if policy == "explorer" else None
            env.reset(seed=evaluation_game_seed(seed, k))
            done, info = False, {}
            while not done:
                action = explorer.act(env.last_obs) if explorer is not None else rng.choice(TRACE_ACTIONS)
                _, _, terminated, truncated, info = env.step(int(action))
                done = terminated or truncated
                result.steps += 1
                if info["intrinsic_reward"] != 0.0:
                    result.note_paid(info["scored_skill"], info["scored_message"], info["intrinsic_reward"])
            stats = info["episode_extra_stats"]
            result.episodes += 1
            for s in env.skill_names:
                result.returns[s] += stats[f"intrinsic/{s}_return"]
            result.descents += int(stats["skills/descents"])
            result.descent_reward += stats.get("intrinsic/reward_per_descent", 0.0) * stats["skills/descents"]
            result.empty_share += stats["messages/empty_share"]
            result.wall_share += stats["messages/wall_share"]
    finally:
        env.close()
    return result


def compare_timings(config: SkillEnvConfig, episodes: int, seed: int, timings: Sequence[str] = REWARD_TIMINGS,
                    show_progress: bool = True, policy: str = "explorer") -> list[TraceResult]:
    """:func:`play_trace` once per timing, on the same games and actions."""
    return [play_trace(dataclasses.replace(config, reward_timing=t), episodes, seed, show_progress, policy)
            for t in timings]


def markdown_table(results: Sequence[TraceResult], skills: Optional[Sequence[str]] = None) -> str:
    skills = list(skills or SKILLS)
    rows = [r.as_dict() for r in results]
    head = "| timing | " + " | ".join(f"{s} return" for s in skills) + \
           " | descents | reward per descent | empty messages | wall messages |"
    lines = [head, "|" + "---|" * (len(skills) + 5)]
    for d in rows:
        per = d["reward_per_descent"]
        lines.append(f"| {d['timing']} | " + " | ".join(f"{d['return_per_episode'][s]:.3g}" for s in skills)
                     + f" | {d['descents']} | {'-' if per is None else f'{per:.3g}'} | "
                       f"{d['empty_message_share']:.1%} | {d['wall_message_share']:.1%} |")
    return "\n".join(lines)


def paid_messages_table(results: Sequence[TraceResult], top: int, skills: Optional[Sequence[str]] = None) -> str:
    """What pays each skill under each timing: its ``top`` messages by reward paid in all."""
    lines = ["| timing | skill | message | steps paid | reward in all | share of the skill's return |",
             "|---|---|---|---|---|---|"]
    for r in results:
        for s in skills or SKILLS:
            for row in r.top_paid(s, top):
                text = (row["message"] or "<empty message>").replace("|", "\\|")
                lines.append(f"| {r.timing} | {s} | {text} | {row['steps']} | {row['reward']:.3g} | {row['share']:.1%} |")
    return "\n".join(lines)
