"""The LLM policy: a language model picks every primitive action from the observation as text.

:class:`LLMActionPolicy` has the interface :func:`rl_baseline.evaluation.run_evaluation` steps
(``act(obs_list, active) -> actions``, ``episode_ended(i)``), so the LLM policy is evaluated by the
same loop, trackers and summaries as MaestroMotif. Each step it renders every active game's
observation (:mod:`.render`), asks the model once per game -- all games' questions in one batch,
which the ``openai`` backend sends concurrently -- and parses the reply (:mod:`.parse`). A reply
without a valid ``Action:`` line gets the fallback action ``search`` (it spends a turn and changes
nothing irreversible), and the failure is counted.

The prompt holds the last ``history`` steps (the message then and the action taken) so the model can
notice that it walks into a wall; the conversation is not kept longer, so the cost per step stays
flat over an episode. The step cap is the environment's ``max_episode_steps``.

Per episode it counts LLM calls, cache hits, prompt and completion tokens and parse failures
(:class:`rl_baseline.baselines.llm_policy.client.EpisodeLLMStats`), in the order episodes end -- the order of
``run_evaluation``'s results, so the counts sit next to each episode's outcome in the JSON.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Any, Optional, Sequence

import numpy as np

from common.nethack.actions import ACTION_NAMES
from rl_baseline.baselines.llm_policy.client import EpisodeLLMStats, LLMClient
from rl_baseline.baselines.llm_policy.parse import parse_action
from rl_baseline.baselines.llm_policy.prompts import action_conversation
from rl_baseline.baselines.llm_policy.render import RenderConfig, message_text, render_observation

logger = logging.getLogger(__name__)

FALLBACK_ACTION = "search"
STEP_MESSAGES_KEY = "step_messages"  # put into the observation by rl_baseline.baselines.llm_policy.run.LLMGame


class LLMActionPolicy:
    """One language-model question per game and step (module docstring)."""

    #: run_evaluation passes which games are still running, so finished games cost no question
    takes_active_mask = True

    def __init__(self, client: LLMClient, task: str, prompt_kind: str, n_envs: int, history: int = 4,
                 render: Optional[RenderConfig] = None, action_names: Sequence[str] = ACTION_NAMES) -> None:
        self.client = client
        self.task = task
        self.prompt_kind = prompt_kind
        self.action_names = tuple(action_names)
        self.render = render or RenderConfig()
        self.fallback = self.action_names.index(FALLBACK_ACTION)
        self.history: list[deque[str]] = [deque(maxlen=max(0, history)) for _ in range(n_envs)]
        self.current = [EpisodeLLMStats() for _ in range(n_envs)]
        self.finished: list[EpisodeLLMStats] = []
        self.parse_errors = 0
        self._logged_errors = 0

    def act(self, obs: list[dict], active: Optional[np.ndarray] = None) -> np.ndarray:
        actions = np.full(len(obs), self.fallback, dtype=np.int64)
        idx = [i for i in range(len(obs)) if active is None or bool(active[i])]
        if not idx:
            return actions
        convs = []
        for i in idx:
            text = render_observation(obs[i], obs[i].get(STEP_MESSAGES_KEY), self.render)
            convs.append(action_conversation(self.task, self.prompt_kind, text, list(self.history[i]),
                                             self.action_names))
        replies = self.client.ask(convs)
        for i, reply in zip(idx, replies):
            stats = self.current[i]
            stats.add(reply)
            action = parse_action(reply.text, self.action_names)
            if action is None:
                stats.parse_errors += 1
                self.parse_errors += 1
                if self._logged_errors < 5:
                    self._logged_errors += 1
                    logger.warning("no valid 'Action:' line in the reply (using %s, counted): %r", FALLBACK_ACTION,
                                   reply.text[-200:])
                action = self.fallback
            actions[i] = action
            self.history[i].append(f"- message: {message_text(obs[i], obs[i].get(STEP_MESSAGES_KEY))} -> action: "
                                   f"{self.action_names[action]}")
        return actions

    def episode_ended(self, i: int) -> None:
        self.finished.append(self.current[i])
        self.current[i] = EpisodeLLMStats()
        self.history[i].clear()

    def episode_stats(self) -> list[dict[str, Any]]:
        return [s.as_dict() for s in self.finished]
