"""Env-side intrinsic reward from the skills' reward models (Motif-style shaping).

For the active skill ``k`` and a step with current message ``m``:

1. ``r = model_k.score(m, depth_change)``: the reward model's output, already
   normalised by the model's running mean/std (``depth_change`` is the dungeon depth
   now minus the depth when skill ``k`` started);
2. ``r = 0`` when ``r`` is below the skill's threshold, the normalised-reward value at
   the skill's ``--eps_threshold_quantile`` read from its quantile CSV;
3. ``r = r / count(m)**beta`` where ``count(m)`` counts how many times the message
   has been seen in this episode, this step included (so the first sighting keeps
   its full value);
4. the environment reward becomes ``extrinsic_coef * game_reward + llm_coef * r``.

Empty messages are scored like any other message, as in Motif: the reward model
has seen many empty messages in its training data and usually rates them low, so
the threshold removes them; when it does not, the count division makes repeated
empty messages worth almost nothing.

NetHack repeats its messages constantly, so steps 1-2 are cached by
``(skill, message bytes, depth change)``: most steps cost one dictionary lookup.
The cache is shared by the environments of a process (a worker process hosts many
environments) that score with the same models and thresholds: another set of models in
the same process (an evaluation of a second run, a test) has a cache of its own. It is
bounded and simply cleared when full.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

import numpy as np

from common.nethack.messages import MESSAGE_LEN, message_bytes
from rl_baseline.skills import MSG_MAX_KEYS

logger = logging.getLogger(__name__)



class RewardModelLike(Protocol):
    """What the runtime needs from ``rlaif.reward_model.LoadedSkillReward``."""

    def score(self, messages: np.ndarray, depth_change: np.ndarray) -> np.ndarray: ...

    def threshold(self, q: float) -> float: ...


class RewardConfigError(ValueError):
    """A reward directory that cannot be loaded, or a bad message-count window."""


_MODEL_CACHE: dict[tuple[str, str, str, int], Any] = {}


def _checkpoint_stamp(reward_dir: str) -> tuple[str, int]:
    """The newest checkpoint's path and modification time ("", 0 when there is none): a directory trained
    again in the same process is loaded again."""
    from rlaif.reward_model import CHECKPOINT_DIRNAME, latest_checkpoint  # lazy: torch; sf.cfg imports this module

    ckpt = latest_checkpoint(os.path.join(reward_dir, CHECKPOINT_DIRNAME))
    if ckpt is None:
        return "", 0
    try:
        return str(ckpt), ckpt.stat().st_mtime_ns
    except OSError:
        return str(ckpt), 0


def load_reward_models(reward_dirs: Sequence[str], device: str = "cpu") -> list[Any]:
    """Loads each reward directory's newest checkpoint once per process (environments of a worker share them)."""
    from rlaif.reward_model import RewardCheckpointError, load_skill_reward  # lazy: torch; sf.cfg imports this module

    models = []
    for d in reward_dirs:
        key = (os.path.abspath(d), device, *_checkpoint_stamp(d))
        if key not in _MODEL_CACHE:
            try:
                _MODEL_CACHE[key] = load_skill_reward(d, device=device)
            except (FileNotFoundError, RewardCheckpointError) as exc:
                raise RewardConfigError(f"--reward_dir {d}: {exc}") from exc
        models.append(_MODEL_CACHE[key])
    return models


@dataclass
class ScoreCache:
    """Process-wide cache of thresholded normalised scores, keyed by (skill, message, depth change)."""

    max_entries: int = 200_000
    log_every: int = 100_000
    table: dict[tuple[int, bytes, int], float] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def note(self, hit: bool) -> None:
        if hit:
            self.hits += 1
        else:
            self.misses += 1
        self.logged()

    def logged(self) -> None:
        """Logs the counts every ``log_every`` lookups (called after each lookup was counted)."""
        total = self.hits + self.misses
        if total % self.log_every == 0:
            logger.info(
                "intrinsic reward cache: %d lookups, hit rate %.3f, %d entries", total, self.hit_rate, len(self.table)
            )


_SHARED_CACHES: dict[tuple, ScoreCache] = {}


def shared_cache(models: Sequence[Any] = (), thresholds: Sequence[float] = ()) -> ScoreCache:
    """The process's cache for one set of models and thresholds (the cache's keys name neither)."""
    key = (tuple(id(m) for m in models), tuple(float(t) for t in thresholds))
    cache = _SHARED_CACHES.get(key)
    if cache is None:
        cache = _SHARED_CACHES[key] = ScoreCache()
    return cache


UNLIMITED_KEYS = -1


def check_msg_max_keys(value: int) -> int:
    """``value`` if it is a window size (>= 1) or -1 (count over the whole episode); else RewardConfigError."""
    if int(value) != value or (value < 1 and value != UNLIMITED_KEYS):
        raise RewardConfigError(
            f"--msg_max_keys {value}: use a window of at least 1 message, or -1 to count over the whole episode"
        )
    return int(value)


class IntrinsicReward:
    """Per-environment intrinsic reward: shared models and cache, per-episode message counts."""

    def __init__(
        self,
        models: Sequence[RewardModelLike],
        thresholds: Sequence[float],
        beta: float = 3.0,
        llm_coef: float = 0.1,
        extrinsic_coef: float = 0.0,
        cache: ScoreCache | None = None,
        msg_max_keys: int = MSG_MAX_KEYS,
    ) -> None:
        if len(models) != len(thresholds):
            raise ValueError(f"{len(models)} reward models but {len(thresholds)} thresholds")
        self.models = list(models)
        self.thresholds = [float(t) for t in thresholds]
        self.beta = float(beta)
        self.llm_coef = float(llm_coef)
        self.extrinsic_coef = float(extrinsic_coef)
        self.cache = cache if cache is not None else ScoreCache()
        check_msg_max_keys(msg_max_keys)
        self.msg_max_keys = int(msg_max_keys)
        # message -> count this episode, least recently seen first (dicts keep insertion order)
        self.counts: dict[bytes, int] = {}
        self._buf = np.zeros((1, MESSAGE_LEN), dtype=np.uint8)
        self._dc = np.zeros(1, dtype=np.float32)

    @property
    def enabled(self) -> bool:
        return self.llm_coef != 0.0 and bool(self.models)

    def reset(self) -> None:
        """Starts a new episode: message counts are per episode."""
        self.counts.clear()

    def thresholded_score(self, skill_id: int, message: np.ndarray, depth_change: int, key: bytes | None = None) -> float:
        """Normalised score of the skill's model, zero below the skill's threshold (cached)."""
        if key is None:
            key = message_bytes(message)
        ckey = (int(skill_id), key, int(depth_change))
        cache = self.cache
        value = cache.table.get(ckey)
        if value is not None:  # most steps: note(True) written out
            cache.hits += 1
            cache.logged()
            return value
        cache.note(False)
        self._buf[0].fill(0)
        n = min(len(key), MESSAGE_LEN)
        self._buf[0, :n] = np.frombuffer(key[:n], dtype=np.uint8)
        self._dc[0] = float(depth_change)
        raw = float(np.asarray(self.models[skill_id].score(self._buf, self._dc)).reshape(-1)[0])
        value = raw if raw >= self.thresholds[skill_id] else 0.0
        if len(self.cache.table) >= self.cache.max_entries:
            self.cache.table.clear()
        self.cache.table[ckey] = value
        return value

    def count(self, key: bytes) -> int:
        """Counts one more sighting of a message and returns its count.

        As in the release, counts live in a window of the ``msg_max_keys`` most recently seen
        distinct messages (the empty message included): a message pushed out of the window by
        that many others starts again at 1, so an event that recurs across an episode (stairs,
        an altar, a shop) pays again once other messages have come in between.
        """
        count = self.counts.pop(key, 0) + 1
        self.counts[key] = count  # now the most recently seen
        if 0 < self.msg_max_keys < len(self.counts):
            del self.counts[next(iter(self.counts))]
        return count

    def intrinsic(self, skill_id: int, message: np.ndarray, depth_change: int, key: bytes | None = None) -> float:
        """Thresholded score divided by count(message) ** beta (see :meth:`count`); updates the count.

        ``key``: :func:`~common.nethack.messages.message_bytes` of ``message`` when the caller has it already."""
        if key is None:
            key = message_bytes(message)
        # count() and the cache's hit path written out: every step of every game
        counts = self.counts
        count = counts.pop(key, 0) + 1
        counts[key] = count  # now the most recently seen
        if 0 < self.msg_max_keys < len(counts):
            del counts[next(iter(counts))]
        if type(self) is not IntrinsicReward:  # a subclass (ONI's online rewards) scores and caches its own way
            if not self.enabled:
                return 0.0
            value = self.thresholded_score(skill_id, message, depth_change, key)
        elif self.llm_coef == 0.0 or not self.models:  # not self.enabled
            return 0.0
        else:
            cache = self.cache
            value = cache.table.get((int(skill_id), key, int(depth_change)))
            if value is not None:
                cache.hits += 1
                cache.logged()
            else:
                value = self.thresholded_score(skill_id, message, depth_change, key)
        if value == 0.0:
            return 0.0
        return value / (count**self.beta)

    #: clip of the game reward before its coefficient (ONI's environments: 10, sample-factory 1's reward_clip)
    game_reward_clip: float | None = None

    def combine(self, game_reward: float, intrinsic: float) -> float:
        game = float(game_reward)
        if self.game_reward_clip is not None:
            game = max(-self.game_reward_clip, min(self.game_reward_clip, game))
        return self.extrinsic_coef * game + self.llm_coef * float(intrinsic)


def build_intrinsic_reward(
    reward_dirs: Sequence[str],
    quantiles: Sequence[float],
    beta: float,
    llm_coef: float,
    extrinsic_coef: float,
    device: str = "cpu",
    msg_max_keys: int = MSG_MAX_KEYS,
) -> IntrinsicReward:
    """The reward for one environment from flag values (models/cache shared within the process)."""
    if llm_coef == 0.0 or not reward_dirs:
        return IntrinsicReward([], [], beta, 0.0, extrinsic_coef, shared_cache(), msg_max_keys)
    models = load_reward_models(reward_dirs, device)
    thresholds = [float(m.threshold(q)) for m, q in zip(models, quantiles)]
    return IntrinsicReward(models, thresholds, beta, llm_coef, extrinsic_coef, shared_cache(models, thresholds),
                           msg_max_keys)


def describe(reward: IntrinsicReward) -> str:
    return json.dumps(
        {"thresholds": reward.thresholds, "beta": reward.beta, "llm": reward.llm_coef, "ext": reward.extrinsic_coef}
    )
