"""Forced-skill evaluation: hold the policy on one skill and measure what that skill does.

``python -m scripts.main --evaluation True --eval_skill descender --train_dir ... --experiment ...``
runs ``--eval_episodes`` episodes (``--eval_num_envs`` games stepped together, at most one
per episode) in which no meta-policy runs: the policy's skill input is the one skill for
the whole episode, and that skill's reward model rewards it (as in training). Each episode
is scored with the skill's measures of :mod:`rl_baseline.tasks.skill_measures` -- the
same tracker that logs the ``measures/...`` statistics during training. The ascender starts
on level 3 (``--eval_start_depth``), reached by wizard-mode level teleport (death stays
final).

Writes ``{train_dir}/{experiment}/eval/skill_{skill}.json`` (per-episode measures, mean and
95% interval of each: :func:`common.estimates.mean_interval95`, a bootstrap percentile interval).
:mod:`scripts.skill_report` runs this for every skill and three policies (trained, untrained, uniform random)
and tabulates the results.
"""
from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np
from tqdm import tqdm

from common.atomic_io import atomic_write_json
from common.estimates import format_mean_interval, interval_method, mean_interval95
from common.nethack.actions import action_names_for
from common.nethack.game_clock import active_game_clock
from rl_baseline.envs.seeding import evaluation_game_seed, seed_run
from rl_baseline.sf.cfg import (
    EVAL_POLICIES,
    ConfigError,
    SkillEnvConfig,
    evaluation_settings,
    forced_skill,
    require_resolved,
)
from rl_baseline.sf.evaluate import eval_dir
from rl_baseline.sf.policy import UniformRandomPolicy, load_policy
from rl_baseline.tasks.detectors import ending_of
from rl_baseline.tasks.skill_measures import MAIN_MEASURE, SKILL_MEASURES

logger = logging.getLogger(__name__)

_REGISTERED: list[bool] = []  # sample-factory's registry is per process: register once

#: the three policies of the skill report
POLICY_KINDS = EVAL_POLICIES

@dataclass
class SkillEpisode:
    """One forced-skill episode: the skill's measures and how the episode went."""

    measures: dict[str, float]
    length: int
    ended_by: str  # game (death or the game's end), step_limit
    start_depth: int
    max_depth: int
    intrinsic_return: float
    nonzero_fraction: float
    actions: dict[str, int] = field(default_factory=dict)  # action name -> times taken
    ending: str = ""  # ending_of(last messages)


@dataclass
class SkillEvalResult:
    skill: str
    policy: str  # trained | untrained | random
    episodes: list[SkillEpisode] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        measures = {}
        for m in SKILL_MEASURES[self.skill]:
            values = [e.measures[m] for e in self.episodes]
            mean, lo, hi = mean_interval95(values)  # non-negative measures: an interval that never goes below 0
            measures[m] = {"mean": mean, "ci95": [lo, hi], "ci_method": interval_method(False), "values": values}
        lengths = [e.length for e in self.episodes]
        actions: Counter = Counter()
        for e in self.episodes:
            actions.update(e.actions)
        taken = sum(actions.values())
        endings = Counter(e.ending for e in self.episodes if e.ending)
        return {
            "skill": self.skill,
            "policy": self.policy,
            "main_measure": MAIN_MEASURE[self.skill],
            "episodes": len(self.episodes),
            "measures": measures,
            "mean_length": float(np.mean(lengths)) if lengths else math.nan,
            "deaths": sum(e.ended_by == "game" for e in self.episodes),
            "median_length": float(np.median(lengths)) if lengths else math.nan,
            "action_shares": {a: n / taken for a, n in actions.most_common()} if taken else {},
            "endings": dict(endings.most_common()),
            "mean_intrinsic_return": float(np.mean([e.intrinsic_return for e in self.episodes]))
            if self.episodes else math.nan,
            "mean_nonzero_fraction": float(np.mean([e.nonzero_fraction for e in self.episodes]))
            if self.episodes else math.nan,
            "per_episode": [asdict(e) for e in self.episodes],
        }


def _finished(env: Any, skill: str, length: int, ended_by: str, start_depth: int, actions: Counter,
              last_messages: Sequence[str]) -> SkillEpisode:
    st = env.stats
    idx = env.skill_names.index(skill)
    steps = int(st.time[idx])
    return SkillEpisode(
        measures={m: float(v) for m, v in st.measures.values[skill].items()},
        length=length, ended_by=ended_by, start_depth=start_depth, max_depth=int(st.max_depth),
        intrinsic_return=float(st.intrinsic[idx]),
        nonzero_fraction=float(st.nonzero[idx]) / steps if steps else 0.0,
        actions=dict(actions), ending=ending_of(last_messages, ended_by),
    )


def _action_names(n: int) -> list[str]:
    return list(action_names_for(n))


def run_skill_episodes(envs: Sequence[Any], policy: Any, skill: str, episodes: int, policy_kind: str = "trained",
                       seed: int = 0, progress: bool = True) -> SkillEvalResult:
    """Steps ``envs`` (skill environments holding ``skill``) with ``policy`` until ``episodes``
    episodes have finished; episode ``k`` plays the game of seed ``seed * 100_003 + k``
    (:mod:`rl_baseline.envs.seeding`), so every policy meets the same games."""
    result = SkillEvalResult(skill, policy_kind)
    n = len(envs)
    obs, start_depths = [], []
    for i, env in enumerate(envs):
        o, info = env.reset(seed=evaluation_game_seed(seed, i))
        if env.skill != skill:
            raise ValueError(f"env {i} runs skill {env.skill}, expected {skill}")
        obs.append(o)
        start_depths.append(int(info.get("depth", 1)))
    lengths = np.zeros(n, dtype=np.int64)
    active = np.ones(n, dtype=bool)
    started = n
    names = _action_names(int(envs[0].action_space.n))
    taken = [Counter() for _ in range(n)]
    last: list[list[str]] = [[] for _ in range(n)]  # the episode's last few messages
    bar = tqdm(total=episodes, desc=f"{skill} ({policy_kind})", disable=None if progress else True)
    while active.any() and len(result.episodes) < episodes:
        actions = policy.act(obs)
        for i, env in enumerate(envs):
            if not active[i]:
                continue
            o, _, terminated, truncated, info = env.step(int(actions[i]))
            lengths[i] += 1
            taken[i][names[int(actions[i])]] += 1
            if info.get("messages"):
                last[i] = (last[i] + list(info["messages"]))[-4:]
            if terminated or truncated:
                ended_by = "step_limit" if truncated or not _is_game_over(info) else "game"
                result.episodes.append(_finished(env, skill, int(lengths[i]), ended_by, start_depths[i],
                                                 taken[i], last[i]))
                bar.update(1)
                taken[i], last[i] = Counter(), []
                lengths[i] = 0
                policy.episode_ended(i)
                if started < episodes:
                    o, info = env.reset(seed=evaluation_game_seed(seed, started))
                    started += 1
                    start_depths[i] = int(info.get("depth", 1))
                else:
                    active[i] = False
            obs[i] = o
    bar.close()
    result.episodes = result.episodes[:episodes]
    return result


def _is_game_over(info: dict) -> bool:
    """The game itself ended (NLE's end status DEATH or TASK_SUCCESSFUL), not the step limit
    (ABORTED)."""
    status = info.get("end_status")
    return status is not None and int(status) >= 1


def skill_env_config(cfg: Any) -> SkillEnvConfig:
    """The environment of a forced-skill evaluation (``cfg.eval_skill`` set, ``cfg.evaluation``)."""
    if forced_skill(cfg) is None:
        raise ConfigError("--eval_skill: name the skill to hold (forced-skill evaluation needs --evaluation True)")
    return SkillEnvConfig.from_cfg(cfg)


def evaluate_skill_with(cfg: Any, policy_kind: str, episodes: int, num_envs: int, seed: int = 0,
                        progress: bool = True, init_seed: int = 0) -> tuple[SkillEvalResult, dict]:
    """One policy (``trained``, ``untrained`` or ``random``) held on ``cfg.eval_skill``."""
    from rl_baseline.sf.env import (  # lazy: torch (the reward models) only when an evaluation runs
        build_skill_env,
        register_envs,
    )

    if policy_kind not in POLICY_KINDS:
        raise ValueError(f"policy kind {policy_kind!r}: expected one of {', '.join(POLICY_KINDS)}")
    if not _REGISTERED:
        register_envs()
        _REGISTERED.append(True)
    require_resolved(cfg, "forced-skill evaluation")
    skill = forced_skill(cfg)
    seed_run(seed)
    n_envs = max(1, min(int(num_envs), int(episodes)))
    envs = [build_skill_env(skill_env_config(cfg)) for _ in range(n_envs)]
    info: dict[str, Any] = {"checkpoint": None, "env_steps": 0}
    try:
        if policy_kind == "random":
            policy: Any = UniformRandomPolicy(envs[0].action_space.n, seed=seed)
        else:
            loaded = load_policy(cfg, envs[0].observation_space, envs[0].action_space,
                                 untrained=policy_kind == "untrained", init_seed=init_seed)
            policy = loaded.acting(n_envs, bool(getattr(cfg, "eval_deterministic_actions", False)))
            info = {"checkpoint": str(loaded.checkpoint) if loaded.checkpoint else None,
                    "env_steps": loaded.env_steps}
        result = run_skill_episodes(envs, policy, skill, int(episodes), policy_kind, seed=seed, progress=progress)
    finally:
        for env in envs:
            env.close()
    info["start_depth"] = skill_env_config(cfg).start_depth
    return result, info


def format_measure(stat: dict) -> str:
    """``mean [lo, hi]`` of one measure (every skill measure is non-negative: the bounds are printed within
    [0, ...], whatever the entry holds)."""
    return format_mean_interval(float(stat["mean"]), *map(float, stat["ci95"]))


def evaluate_skill(cfg: Any) -> dict:
    """``scripts.main --evaluation True --eval_skill S``: the trained policy held on one skill (a
    finished configuration, :func:`rl_baseline.sf.cfg.resolve_cfg`)."""
    skill = forced_skill(cfg)
    result, info = evaluate_skill_with(cfg, "trained", int(cfg.eval_episodes), int(cfg.eval_num_envs),
                                       seed=int(cfg.seed or 0))
    summary = result.summary()
    summary.update(experiment=cfg.experiment, checkpoint=info["checkpoint"], env_steps=info["env_steps"],
                   start_depth=info["start_depth"], game_clock=active_game_clock(), settings=evaluation_settings(cfg),
                   start_note="wizard-mode level teleport after reset" if info["start_depth"] > 1 else "level 1")
    path = atomic_write_json(eval_dir(cfg) / f"skill_{skill}.json", summary)
    parts = ", ".join(f"{m} {format_measure(s)}" for m, s in summary["measures"].items())
    logger.info("%s held for %d episodes (checkpoint %s): %s (mean [95%% interval, %s]); wrote %s", skill,
                summary["episodes"], info["checkpoint"], parts, interval_method(False), path)
    return summary
