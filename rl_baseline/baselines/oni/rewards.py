"""The environment side of online rewards: labels and networks read from disk, never waited for.

:class:`OnlineReward` is the skill runtime's intrinsic reward (same interface and the same count
division as :class:`~rl_baseline.skills.intrinsic_reward.IntrinsicReward`) with the score of a
message coming from the annotator's files:

* ``online_cls``: the LLM's label of exactly this message (1 progress, 0 not), 0 while unlabelled;
* ``online_cls_reward_model``: 1 when the online classifier puts p(progress) above
  ``--classification_threshold``, else 0 (0 until its first save);
* ``online_motif``: the online ranker's output for the message (0 until its first save);
* ``cosine-bow``: the largest bag-of-words cosine similarity between the message and the goals
  for the state before it -- those an LLM proposed for the previous message, and the goal
  sentence itself (the release's ELLM-BoW used that sentence alone) -- kept above the threshold
  (``--eps_threshold_quantile``, -0.5 by default as in ONI), else 0.

Every ``refresh_s`` seconds the process reads the labels appended since, reloads a network
whose file changed, and writes out the messages it met (:class:`~rl_baseline.baselines.oni.store.MessageSpool`):
for the label types each new unlabelled message once, for ranking the counts of every tenth
step's message every 30 seconds, so the spool files stay small over long runs.
"""
from __future__ import annotations

import logging
import math
import os
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from common.nethack.messages import message_bytes
from rl_baseline.baselines.oni.store import CLASSIFIER_FILE, RANKER_FILE, LabelStore, MessageSpool
from rl_baseline.skills import MSG_MAX_KEYS
from rl_baseline.skills.intrinsic_reward import IntrinsicReward, ScoreCache

logger = logging.getLogger(__name__)

ONLINE_TYPES = ("online_cls", "online_cls_reward_model", "online_motif", "cosine-bow")
#: ranking: every this many steps a message joins the pool pairs are drawn from (ONI's
#: --online_dataset_subsample), so frequent messages are drawn more often
RANKING_SUBSAMPLE = 10
#: ranking: seconds between two writes of the pool counts (the spool stays small over days of training)
RANKING_FLUSH_S = 30.0
_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class OnlineRewardConfig:
    store_dir: str
    reward_type: str
    goals: tuple[str, ...]  # the goal sentence per skill index
    classification_threshold: float = 0.5
    bow_threshold: float = -0.5
    refresh_s: float = 1.0


def bag_of_words(text: str) -> Counter:
    return Counter(_WORD.findall(text.lower()))


def cosine(a: Counter, b: Counter) -> float:
    """Cosine similarity of two word-count vectors (0 when either is empty)."""
    if not a or not b:
        return 0.0
    dot = sum(v * b.get(k, 0) for k, v in a.items())
    return dot / math.sqrt(sum(v * v for v in a.values()) * sum(v * v for v in b.values()))


class OnlineReward(IntrinsicReward):
    """Per-environment online reward (see the module docstring)."""

    def __init__(self, config: OnlineRewardConfig, beta: float = 3.0, llm_coef: float = 0.1,
                 extrinsic_coef: float = 0.0, msg_max_keys: int = MSG_MAX_KEYS, cache: Optional[ScoreCache] = None) -> None:
        if config.reward_type not in ONLINE_TYPES:
            raise ValueError(f"unknown online reward type {config.reward_type!r}; valid: {', '.join(ONLINE_TYPES)}")
        super().__init__([], [], beta=beta, llm_coef=llm_coef, extrinsic_coef=extrinsic_coef,
                         cache=cache or ScoreCache(), msg_max_keys=msg_max_keys)
        self.config = config
        self.kind = config.reward_type
        self.store = LabelStore(config.store_dir)
        self.spool = MessageSpool(config.store_dir)
        self._next_refresh = 0.0
        self._model: Any = None
        self._model_path: Optional[Path] = None
        self._model_mtime = -1
        self._failed_mtime = -1  # the network file version that could not be read (warned once)
        self._scores: dict[tuple[int, str], float] = {}
        self._previous: dict[int, str] = {}
        self._sent: set[tuple[int, str]] = set()  # messages this process has announced
        self._steps = 0
        self._next_count_flush = 0.0
        self._goal_bows = [bag_of_words(g) for g in config.goals]
        if self.kind in ("online_cls_reward_model", "online_motif"):
            name = CLASSIFIER_FILE if self.kind == "online_cls_reward_model" else RANKER_FILE
            self._model_path = Path(config.store_dir) / name

    @property
    def enabled(self) -> bool:
        return self.llm_coef != 0.0

    def reset(self) -> None:
        super().reset()
        self._previous.clear()
        self.refresh(force=True)

    # -- keeping up with the annotator
    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now < self._next_refresh:
            return
        self._next_refresh = now + self.config.refresh_s
        if self.kind != "online_motif" or force or now >= self._next_count_flush:
            self.spool.flush()
            self._next_count_flush = now + RANKING_FLUSH_S
        if self.store.refresh() and self.kind == "cosine-bow":
            self._scores.clear()
        if self._model_path is not None:
            try:
                mtime = os.stat(self._model_path).st_mtime_ns
            except FileNotFoundError:
                return
            if mtime != self._model_mtime and mtime != self._failed_mtime:
                from rl_baseline.baselines.oni.models import load_online_model  # lazy: torch; only with a model file

                kind = "classifier" if self.kind == "online_cls_reward_model" else "ranker"
                try:
                    model = load_online_model(self._model_path, kind)
                except ValueError as exc:
                    # The annotator replaces the file atomically, so this is damage, not a race: keep
                    # scoring with the network we have and read the file again when it next changes.
                    logger.warning("%s; keeping the previous online network%s", exc,
                                   "" if self._model is not None else " (none yet: online reward 0)")
                    self._failed_mtime = mtime
                    return
                self._model = model
                self._model_mtime = mtime
                self._scores.clear()

    # -- the score of one message
    def thresholded_score(self, skill_id: int, message: np.ndarray, depth_change: int, key: bytes | None = None) -> float:
        self.refresh()
        text = (key if key is not None else message_bytes(message)).decode("latin-1")
        self._announce(skill_id, text)
        if self.kind == "online_cls":
            value = float(self.store.labels.get((skill_id, text), 0))
            self.cache.note(value != 0.0)
            return value
        if self.kind == "cosine-bow":
            value = self._bow_score(skill_id, text)
            self._previous[skill_id] = text
            return value
        ckey = (skill_id, text)
        value = self._scores.get(ckey)
        self.cache.note(value is not None)
        if value is None:
            value = self._network_score(text)
            if self._model is not None:
                self._scores[ckey] = value
        return value

    def _announce(self, skill_id: int, text: str) -> None:
        """Tells the annotator about the message: once per process and only while unlabelled for the
        label types; a subsample of every sighting (counts) for ranking."""
        if self.kind == "online_motif":
            self._steps += 1
            if self._steps % RANKING_SUBSAMPLE == 0:
                self.spool.note(skill_id, text)
            return
        key = (skill_id, text)
        if key in self._sent:
            return
        labelled = self.store.goals if self.kind == "cosine-bow" else self.store.labels
        if key not in labelled:
            self.spool.note(skill_id, text)
        self._sent.add(key)

    def _network_score(self, text: str) -> float:
        if self._model is None:
            return 0.0
        import torch  # lazy: torch only with a trained model

        from rl_baseline.baselines.oni.models import encode_messages  # lazy: imports torch, as above

        with torch.no_grad():
            codes = encode_messages([text])
            if self.kind == "online_cls_reward_model":
                p = float(self._model.progress_probability(codes)[0])
                return 1.0 if p > self.config.classification_threshold else 0.0
            return float(self._model(codes)[0])

    def _bow_score(self, skill_id: int, text: str) -> float:
        previous = self._previous.get(skill_id)
        ckey = (skill_id, previous or "", text)
        value = self._scores.get(ckey)  # type: ignore[arg-type]
        self.cache.note(value is not None)
        if value is not None:
            return value
        words = bag_of_words(text)
        goals = [self._goal_bows[skill_id]] if skill_id < len(self._goal_bows) else []
        if previous is not None:
            goals += [bag_of_words(g) for g in self.store.goals.get((skill_id, previous), [])]
        best = max((cosine(words, g) for g in goals), default=0.0)
        value = best if best > self.config.bow_threshold and words else 0.0
        self._scores[ckey] = value  # type: ignore[index]
        return value
