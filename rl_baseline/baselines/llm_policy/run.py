"""Evaluating the LLM policy on one task: the same loop, trackers and JSON as MaestroMotif's evaluation.

:func:`evaluate_llm_policy` builds ``num_envs`` Monk environments (NetHackScoreMonk-v1 with the
paper's character, options, actions and macros; no skills, no reward model), lets
:class:`rl_baseline.baselines.llm_policy.agent.LLMActionPolicy` act in them through
:func:`rl_baseline.evaluation.run_evaluation` and writes, through
:func:`rl_baseline.evaluation.summarize` and :func:`~rl_baseline.evaluation.write_results`,
``{out_dir}/eval/{task}_seed{seed}.{json,csv,png}`` -- the summary ``scripts.main --evaluation True``
writes (``mean``, ``stderr``, ``episodes``, ``protocol``, ``release``, ``project``, ``run``,
``per_episode``) with, in addition, ``method``, ``label``, ``llm`` (calls, cache hits, tokens, parse
failures, how tokens were counted), ``llm`` per episode, and ``cost``
(:mod:`rl_baseline.baselines.llm_policy.cost`); then ``{out_dir}/cost.json`` is brought up to date.

Every episode's dungeon is seeded from ``seed`` (:class:`LLMGame`), so a rerun of the same command
plays the same games (and is answered from the reply cache). The per-episode step cap is the
environment's ``max_episode_steps``; episodes cut by it end as ``step_limit``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import gymnasium as gym

from common.flag_checks import output_file, output_folder
from common.nethack.actions import ACTION_NAMES
from common.vocabulary import TASK_MEASURE, check_eval_target
from rl_baseline.baselines.llm_policy.agent import STEP_MESSAGES_KEY, LLMActionPolicy
from rl_baseline.baselines.llm_policy.client import ClientStats, LLMClient, LLMSettings
from rl_baseline.baselines.llm_policy.cost import CostClock, cost_section, update_cost_json
from rl_baseline.baselines.llm_policy.prompts import PROMPT_KINDS
from rl_baseline.baselines.llm_policy.render import RenderConfig
from rl_baseline.envs import make_monk_env
from rl_baseline.evaluation import run_evaluation, summarize, write_results

logger = logging.getLogger(__name__)

METHOD_NAMES = {"zero_shot": "llm_policy", "equivalent": "llm_policy_equivalent"}


class LLMGame(gym.Wrapper):
    """A Monk game as the LLM policy plays it: reproducible, with every message of a step in the observation.

    The game is reproducible: ``run_evaluation`` gives every episode its own seed and our
    environment's ``reset(seed=...)`` seeds NetHack's generators (:mod:`rl_baseline.envs.seeding`),
    so the same command plays the same dungeons, a rerun finds its questions in the reply cache and
    a recorded transcript replays. The step's messages (also those dismissed with --More--) go into
    the observation for the prompt.
    """

    # what run_evaluation looks up on a skill environment; absent here (no skills), answered without
    # gymnasium's warning about attributes read through a wrapper
    preconds = None
    stats = None
    meta_policy = None

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        obs, info = self.env.reset(seed=seed, options=options)
        return self._with(obs, info), info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._with(obs, info), reward, terminated, truncated, info

    @staticmethod
    def _with(obs: dict, info: dict) -> dict:
        return {**obs, STEP_MESSAGES_KEY: list(info.get("messages") or ())}


@dataclass
class LLMPolicyConfig:
    """One evaluation of the LLM policy (the flags of ``scripts.llm_policy``)."""

    task: str
    out_dir: str
    llm: LLMSettings = field(default_factory=LLMSettings)
    prompt: str = "zero_shot"
    method: str = ""  # default: llm_policy / llm_policy_equivalent by prompt kind
    protocol: str = "project"
    episodes: int = 10
    env_steps: int = 3_000_000
    stats_avg: int = 1000
    num_envs: int = 1
    max_episode_steps: int = 5_000  # the per-episode step cap
    seed: int = 2
    history: int = 4
    server_gpus: float = 0.0  # GPUs of the server answering (cost attribution only)
    progress: bool = True

    @property
    def method_name(self) -> str:
        return self.method or METHOD_NAMES[self.prompt]

    def label(self) -> str:
        kind = "zero-shot" if self.prompt == "zero_shot" else "equivalent prompting"
        return f"LLM policy ({kind}), {self.llm.describe()}, {self.max_episode_steps}-step cap"

    def check(self) -> None:
        """Raises ValueError naming the flag; nothing has been started or written yet."""
        try:
            check_eval_target(self.task)
        except ValueError as exc:
            raise ValueError(f"--eval_target: {exc}") from None
        if self.prompt not in PROMPT_KINDS:
            raise ValueError(f"--prompt {self.prompt!r}: expected one of {', '.join(PROMPT_KINDS)}")
        if self.protocol not in ("project", "release"):
            raise ValueError(f"--eval_protocol {self.protocol!r}: expected project or release")
        for name in ("episodes", "env_steps", "stats_avg", "num_envs", "max_episode_steps"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"--{'eval_' if name in ('episodes', 'env_steps', 'stats_avg', 'num_envs') else ''}"
                                 f"{name} must be at least 1, got {getattr(self, name)}")
        output_folder("--out_dir", self.out_dir)
        if self.llm.cache_dir:
            output_folder("--cache_dir", self.llm.cache_dir)
        if self.llm.record:
            output_file("--record", self.llm.record)


def llm_section(stats: ClientStats, parse_errors: int, settings: LLMSettings, invalid_choices: int = 0) -> dict:
    """The JSON's ``llm`` section: what was asked and how the tokens were counted."""
    if stats.calls and stats.exact_calls == stats.calls:
        counted = "backend usage (exact)"
    elif stats.exact_calls:
        counted = "backend usage where reported, else about 4 characters per token"
    else:
        counted = "approximation: about 4 characters per token + 4 per message"
    return {
        "backend": settings.backend, "model": settings.model if settings.is_llm else None,
        "is_llm": settings.is_llm, "describes": settings.describe(), "sampling": settings.sampling(),
        "calls": stats.calls, "cache_hits": stats.cache_hits, "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens, "tokens": stats.prompt_tokens + stats.completion_tokens,
        "sent_tokens": stats.sent_tokens, "parse_errors": parse_errors, "invalid_choices": invalid_choices,
        "tokens_counted_by": counted, "cache_dir": settings.cache_dir,
    }


def evaluate_llm_policy(cfg: LLMPolicyConfig, client: Optional[LLMClient] = None) -> dict:
    """Runs the evaluation of the module docstring; returns the summary (also written to disk).

    The backend is created (and checked) before any environment or file: a backend that cannot
    work raises :class:`common.llm.BackendError` with nothing written."""
    cfg.check()
    clock = CostClock().start()
    client = client or LLMClient(cfg.llm)
    task = cfg.task
    n = cfg.num_envs if cfg.protocol == "release" else max(1, min(cfg.num_envs, cfg.episodes))
    label = cfg.label()
    logger.info("%s on %s: %s protocol, %d game(s)", label, task, cfg.protocol, n)
    envs = [LLMGame(make_monk_env(max_episode_steps=cfg.max_episode_steps)) for _ in range(n)]
    policy = LLMActionPolicy(client, task, cfg.prompt, n, history=cfg.history, render=RenderConfig())
    try:
        run = run_evaluation(envs, policy, task, protocol=cfg.protocol, episodes=cfg.episodes,
                             env_steps=cfg.env_steps, action_names=ACTION_NAMES, seed=cfg.seed, skill_names=(),
                             progress=cfg.progress)
    finally:
        for env in envs:
            env.close()
        client.close()
    summary = summarize(task, TASK_MEASURE[task], run.episodes, (), protocol=cfg.protocol,
                        stats_avg=cfg.stats_avg, run=run)
    per_episode = policy.episode_stats()
    for entry, stats in zip(summary["per_episode"], per_episode):
        entry["llm"] = stats
    llm = llm_section(client.stats, policy.parse_errors, cfg.llm)
    gpus = cfg.server_gpus + (cfg.llm.num_gpus if cfg.llm.backend == "vllm" else 0)
    summary.update(
        method=cfg.method_name, experiment=cfg.method_name, label=label, prompt=cfg.prompt,
        max_episode_steps=cfg.max_episode_steps,
        seed=cfg.seed, llm=llm,
        cost=cost_section(label, clock, run.env_steps_run, gpus, llm),
    )
    out = Path(cfg.out_dir)
    paths = write_results(out / "eval" / f"{task}_seed{cfg.seed}", summary, ())
    update_cost_json(out, cfg.method_name)
    logger.info("%s: %s %.3f +- %.3f over %d episodes; %d LLM calls (%d from the cache), %d tokens (%s), %d parse "
                "failures; wrote %s and %s", task, summary["measure"], summary["mean"], summary["stderr"],
                summary["episodes"], llm["calls"], llm["cache_hits"], llm["tokens"], llm["tokens_counted_by"],
                llm["parse_errors"], ", ".join(str(p) for p in paths), out / "cost.json")
    if not cfg.llm.is_llm:
        logger.warning("%s: no language model was called (%s); these numbers are not an LLM's", task,
                       cfg.llm.describe())
    return summary
