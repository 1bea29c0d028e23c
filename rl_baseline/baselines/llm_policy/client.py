"""The LLM baselines' way to the project's one LLM client: settings, a disk cache, token counts.

:class:`LLMClient` wraps a :mod:`common.llm` backend:

* **Cache.** Every reply is stored in ``{cache_dir}/responses.jsonl`` under the SHA-256 of
  (who answers, model, sampling settings, conversation); a question asked again -- in this run or
  a later one -- is answered from disk without asking the backend. "Who answers" is the model name
  for a language model (``vllm``, ``openai``, ``hf``, ``transformers`` serving the same model share
  replies) and ``{backend}:{model}`` otherwise, so a rule-based stand-in's replies are never served
  to a run that asks a real model. With a temperature above 0 this makes a repeated prompt get the
  same reply, which is the point (a rerun costs nothing and is reproducible); a fresh ``cache_dir``
  samples anew. Records are appended with one ``write`` on an ``O_APPEND`` descriptor, so the array
  tasks of a slurm job can share a cache folder; a torn last line is skipped when read.
* **Tokens.** Each :class:`Reply` carries prompt and completion token counts: the backend's own
  (the server's ``usage``, or vLLM's / the tokenizer's counts) when it reports them, else
  :func:`approx_tokens`: about 4 characters per token plus 4 per message for the chat template --
  a rule of thumb for English with Llama 3's tokenizer, not an exact count. Replies say which
  (``exact``). A cached reply keeps the counts it had when it was first asked.
* **Transcript.** ``record`` appends every question the backend answered, and its reply, as
  ``{"role", "content"}`` lines: the format of :class:`common.llm.ReplayBackend`, so a recorded run
  can be replayed (``--backend replay --replay FILE``) with an empty cache.

:func:`check_backend` tells, without loading a model, whether a backend can work here, naming the
flag to fix (used before anything is started or written).
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional, Sequence

from common.flag_checks import FlagError, above, at_least
from common.llm import CODER_MODEL, Backend, BackendError, Completion, Conversation, make_backend, served_instead

logger = logging.getLogger(__name__)

#: backends that call a language model (the others are stand-ins, recordings or random)
LLM_BACKENDS: tuple[str, ...] = ("vllm", "openai", "hf", "transformers", "llamacpp")
POLICY_BACKENDS: tuple[str, ...] = LLM_BACKENDS + ("replay", "stand_in")
CHARS_PER_TOKEN = 4.0
TOKENS_PER_MESSAGE = 4
CACHE_FILE = "responses.jsonl"


def approx_tokens(text: str) -> int:
    """Rough token count of ``text`` (module docstring)."""
    return int(math.ceil(len(text) / CHARS_PER_TOKEN)) if text else 0


def approx_conversation_tokens(conversation: Conversation) -> int:
    return sum(approx_tokens(m.get("content", "")) + TOKENS_PER_MESSAGE for m in conversation)


@dataclass
class LLMSettings:
    """Which model answers and how (flags ``--backend``, ``--model``, ... of the baselines)."""

    backend: str = "stand_in"
    model: str = CODER_MODEL
    base_url: Optional[str] = None
    replay: Optional[str] = None
    temperature: float = 0.1  # the paper's sampling for its language models (docs/paper.md)
    top_p: float = 0.95
    top_k: int = 50
    max_tokens: int = 256  # a short reasoning and the answer line
    seed: Optional[int] = None
    num_gpus: int = 1  # vllm: tensor parallel size
    concurrency: int = 16  # openai / hf: requests in flight
    timeout_s: float = 300.0
    cache_dir: Optional[str] = None
    record: Optional[str] = None  # transcript file of the questions the backend answered

    @property
    def is_llm(self) -> bool:
        return self.backend in LLM_BACKENDS

    def describe(self) -> str:
        """One honest phrase for labels and logs."""
        if self.backend == "stand_in":
            return "rule-based stand-in (no LLM)"
        if self.backend == "replay":
            return f"replayed transcript {self.replay} (no LLM called)"
        return f"{self.model} via {self.backend}"

    def identity(self) -> str:
        return self.model if self.is_llm else f"{self.backend}:{self.model}"

    def sampling(self) -> dict:
        return {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k,
                "max_tokens": self.max_tokens, "seed": self.seed}


def check_backend(settings: LLMSettings, flag_prefix: str = "--") -> None:
    """Raises :class:`BackendError` naming the flag when ``settings`` cannot work here; loads nothing."""
    b, p = settings.backend, flag_prefix
    try:
        at_least(f"{p[2:]}concurrency", settings.concurrency, 1, "requests in flight at once")
        above(f"{p[2:]}timeout_s", settings.timeout_s, 0, "seconds per request")
        at_least(f"{p[2:]}max_tokens", settings.max_tokens, 1)
    except FlagError as exc:
        raise BackendError(str(exc)) from None
    if b not in POLICY_BACKENDS:
        raise BackendError(f"{p}backend {b!r}: expected one of {', '.join(POLICY_BACKENDS)} "
                           "(stand_in: a rule-based stand-in for the LLM, no language model)")
    if b == "openai" and not settings.base_url:
        raise BackendError(f"{p}backend openai needs {p}base_url (an OpenAI-compatible server, e.g. "
                           f"http://HOST:8000/v1 from 'vllm serve {settings.model}')")
    if b == "replay":
        if not settings.replay:
            raise BackendError(f"{p}backend replay needs {p}replay FILE (a transcript recorded with {p}record)")
        if not Path(settings.replay).is_file():
            raise BackendError(f"{p}replay {settings.replay}: no such file")
    if b == "vllm":
        raise BackendError(served_instead(p, settings.model, settings.num_gpus))


@dataclass
class Reply:
    """One answer, its token counts and where it came from."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    exact: bool  # counts from the backend (True) or approx_tokens (False)
    cached: bool  # served from the cache: the backend was not asked

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class _LLMUse:
    """Calls, cache hits and tokens: what every counter of LLM use here counts."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, r: Reply) -> None:
        self.calls += 1
        self.cache_hits += int(r.cached)
        self.prompt_tokens += r.prompt_tokens
        self.completion_tokens += r.completion_tokens


@dataclass
class ClientStats(_LLMUse):
    sent_tokens: int = 0  # tokens of the questions the backend answered in this run (cache misses)
    exact_calls: int = 0

    def add(self, r: Reply) -> None:
        super().add(r)
        self.exact_calls += int(r.exact)
        if not r.cached:
            self.sent_tokens += r.tokens


class LLMClient:
    """A backend with the cache, token counts and transcript of the module docstring."""

    def __init__(self, settings: LLMSettings, backend: Optional[Backend] = None) -> None:
        self.settings = settings
        if backend is None:
            check_backend(settings)
            if settings.backend == "stand_in":  # importing stand_in registers the backend
                from rl_baseline.baselines.llm_policy import stand_in  # noqa: F401  # lazy: only when it is chosen
            backend = make_backend(
                settings.backend, model=settings.model, base_url=settings.base_url, replay_path=settings.replay,
                temperature=settings.temperature, top_p=settings.top_p, top_k=settings.top_k,
                max_tokens=settings.max_tokens, seed=settings.seed, num_gpus=settings.num_gpus,
                concurrency=settings.concurrency, timeout=settings.timeout_s)
        self.backend = backend
        self.stats = ClientStats()
        self._cache: dict[str, dict] = {}
        self._cache_path: Optional[Path] = None
        if settings.cache_dir:
            self._cache_path = Path(settings.cache_dir) / CACHE_FILE
            self._load_cache()
        if not settings.is_llm:
            logger.warning("LLM baseline backend %s: %s", settings.backend, settings.describe())

    # -- cache ----------------------------------------------------------------
    def key(self, conversation: Conversation) -> str:
        payload = {"who": self.settings.identity(), "sampling": self.settings.sampling(), "messages": conversation}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def _load_cache(self) -> None:
        assert self._cache_path is not None
        if not self._cache_path.is_file():
            return
        with self._cache_path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                    self._cache[rec["key"]] = rec
                except (ValueError, KeyError, TypeError):
                    continue  # a torn line from an interrupted write
        logger.info("LLM response cache %s: %d replies", self._cache_path, len(self._cache))

    @staticmethod
    def _append(path: Path, lines: Sequence[str]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = "".join(lines).encode("utf-8")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)  # one write: concurrent writers do not interleave inside a record
        finally:
            os.close(fd)

    # -- asking ----------------------------------------------------------------
    def ask(self, conversations: Sequence[Conversation]) -> list[Reply]:
        """One :class:`Reply` per conversation; the backend gets only the ones not in the cache."""
        keys = [self.key(c) for c in conversations]
        out: list[Optional[Reply]] = [None] * len(conversations)
        todo: list[int] = []
        for i, k in enumerate(keys):
            rec = self._cache.get(k)
            if rec is not None:
                out[i] = Reply(rec["text"], int(rec["prompt_tokens"]), int(rec["completion_tokens"]),
                               bool(rec["exact"]), True)
            else:
                todo.append(i)
        if todo:
            # the same question twice in one batch is asked once
            first: dict[str, int] = {}
            unique = [i for i in todo if first.setdefault(keys[i], i) == i]
            completions: list[Completion] = self.backend.complete([conversations[i] for i in unique])
            if len(completions) != len(unique):
                raise BackendError(f"{self.backend.describe()} returned {len(completions)} replies for "
                                   f"{len(unique)} questions")
            new: dict[str, Reply] = {}
            records, transcript = [], []
            for i, c in zip(unique, completions):
                if c.has_usage:
                    r = Reply(c.text, int(c.prompt_tokens), int(c.completion_tokens), True, False)
                else:
                    r = Reply(c.text, approx_conversation_tokens(conversations[i]), approx_tokens(c.text), False,
                              False)
                new[keys[i]] = r
                rec = {"key": keys[i], "text": r.text, "prompt_tokens": r.prompt_tokens,
                       "completion_tokens": r.completion_tokens, "exact": r.exact}
                self._cache[keys[i]] = rec
                records.append(json.dumps(rec, ensure_ascii=False) + "\n")
                transcript += [json.dumps(m, ensure_ascii=False) + "\n" for m in conversations[i]]
                transcript.append(json.dumps({"role": "assistant", "content": r.text}, ensure_ascii=False) + "\n")
            if self._cache_path is not None:
                self._append(self._cache_path, records)
            if self.settings.record:
                self._append(Path(self.settings.record), transcript)
            for i in todo:
                r = new[keys[i]]
                # a duplicate inside the batch was answered once: it costs nothing more
                out[i] = r if first[keys[i]] == i else Reply(r.text, r.prompt_tokens, r.completion_tokens, r.exact,
                                                             True)
        replies = [r for r in out if r is not None]
        for r in replies:
            self.stats.add(r)
        return replies

    def close(self) -> None:
        self.backend.close()


@dataclass
class EpisodeLLMStats(_LLMUse):
    """LLM use of one episode (the per-episode counter of the baselines)."""

    parse_errors: int = 0
    invalid_choices: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict:
        return dict(asdict(self), tokens=self.tokens)


_SHARED: dict[str, LLMClient] = {}


def shared_client(settings: LLMSettings) -> LLMClient:
    """One client per process and settings: the environments of one evaluation share the model
    (an in-process vLLM model is loaded once), the cache and the counts."""
    key = json.dumps(asdict(settings), sort_keys=True)
    client = _SHARED.get(key)
    if client is None:
        client = _SHARED[key] = LLMClient(settings)
    return client
