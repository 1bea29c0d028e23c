"""Several skill environments stepped together: one sample-factory environment of many agents.

sample-factory steps a rollout worker's environments one after the other and copies each one's observation before
the next steps, so each game's policy over skills would cost the worker one round trip to its sandbox a step
(:mod:`code_generation.isolation`). Here the games step together through sample-factory's multi-agent API
(``is_multiagent``, ``num_agents``): every game runs its step up to the policy over skills' calls
(:meth:`SkillRuntime.step_parts`), the calls of all of them travel in one request
(:func:`rl_baseline.skills.meta_policy.decide_together`), and each game finishes its step with its own decisions.
Each game decides, rewards and counts as it does alone; a game that ends is reset here (the multi-agent
contract), and the reset's observation stands in for the last one, as sample-factory's own wrapper does for one game.

A step runs in three rounds over the games: every game's NetHack move first, then every game's bookkeeping up to
its calls (reward, measures, the observation's view), then, after the one request, every game's decisions. A game's
NetHack turn empties the CPU caches of the Python that follows it; run back to back, the games' bookkeeping finds
its code and shared tables still there (the skill environment's step at 16 games: about 3% less time, paired,
docs/performance.md). Each game's own order of work is the same as alone.

Game seeds: ``reset(seed=s)`` gives game ``i`` the seed ``s * num_agents + i``: sample-factory seeds an
environment with its index over the workers, so a worker's games play the seeds of as many single-game environments.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import gymnasium as gym

from common import part_times
from rl_baseline.skills.meta_policy import decide_together
from rl_baseline.skills.runtime import SkillRuntime


class SkillGames(gym.Env):
    """``num_agents`` skill environments (:class:`SkillRuntime`) as one multi-agent environment."""

    is_multiagent = True

    def __init__(self, games: Sequence[SkillRuntime]) -> None:
        if not games:
            raise ValueError("SkillGames needs at least one game")
        self.games = list(games)
        self.num_agents = len(self.games)
        self.observation_space = self.games[0].observation_space
        self.action_space = self.games[0].action_space

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> tuple[list, list]:
        obs, infos = [], []
        for i, game in enumerate(self.games):
            o, info = game.reset(seed=None if seed is None else int(seed) * self.num_agents + i)
            obs.append(o)
            infos.append(info)
        return obs, infos

    def step(self, actions: Sequence[Any]) -> tuple[list, list, list, list, list]:
        times = part_times.PART_TIMES if part_times.PART_TIMES.enabled else None
        start = part_times.now() if times is not None else 0.0
        results: list[Any] = [None] * self.num_agents
        waiting, requests = [], []
        stepped = []
        for game, action in zip(self.games, actions):  # every game's NetHack move first (the module docstring)
            parts = game.step_parts(action, times, pause_after_game=True)
            next(parts)
            stepped.append(parts)
        for i, parts in enumerate(stepped):
            try:
                requests.append(next(parts))  # the game's calls into the policy over skills
                waiting.append((i, parts))
            except StopIteration as end:  # an episode's end, or a policy without generated code
                results[i] = end.value
        if waiting:
            for (i, parts), decided in zip(waiting, decide_together(requests)):
                try:
                    parts.send(decided)
                except StopIteration as end:
                    results[i] = end.value
        if times is not None:
            times.add("skill_env", part_times.now() - start)
            for _ in range(self.num_agents):
                times.tick()
        obs, rewards, terminated, truncated, infos = [], [], [], [], []
        for game, (o, reward, term, trunc, info) in zip(self.games, results):
            if term or trunc:  # the multi-agent contract: the environment starts a finished game's next episode
                o, info["reset_info"] = game.reset()
            obs.append(o)
            rewards.append(reward)
            terminated.append(term)
            truncated.append(trunc)
            infos.append(info)
        return obs, rewards, terminated, truncated, infos

    def render(self) -> Any:
        return self.games[0].render()

    def close(self) -> None:
        for game in self.games:
            game.close()
