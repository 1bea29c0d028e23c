"""The one language-model client of the project: annotation, code generation and anything later.

Every backend turns a batch of chat conversations (lists of ``{"role", "content"}`` dicts) into
one reply text per conversation; :meth:`Backend.chat` asks one conversation::

    backend = make_backend("openai", model=ANNOTATOR_MODEL, base_url="http://gpu-node:8000/v1")
    replies = backend.generate([[{"role": "system", ...}, {"role": "user", ...}], ...])
    answer = backend.chat([{"role": "user", "content": "..."}])

Backends:

* ``vllm``: offline batched ``vllm.LLM`` (tensor parallel over ``num_gpus``, default every visible GPU,
  after a check that the weights fit); the chat
  template is applied with the model's tokenizer. vLLM is imported only here, lazily.
* ``openai``: any OpenAI-compatible server (``/v1/chat/completions``: ``vllm serve``,
  TGI, FastChat, ...), requests in a thread pool, timeouts, retries with exponential
  backoff. Key from ``api_key``, the environment variable ``api_key_env``, or ``OPENAI_API_KEY``.
* ``hf``: ``huggingface_hub.InferenceClient.chat_completion`` against ``base_url`` or a
  model id; token from ``api_key_env`` (default ``HF_TOKEN``, or the usual Hugging Face login).
* ``transformers`` (alias ``hf-local``): a local ``AutoModelForCausalLM`` on ``device``
  (``cpu``, ``cuda``, ``cuda:1``; default CUDA when available) or spread over GPUs with
  ``device_map="auto"``; batched generation with the tokenizer's chat template. ``--model smollm2-135m``
  (or a ``.gguf`` path) loads a named local model's GGUF file (:mod:`common.local_models`).
* ``llamacpp``: a GGUF model in-process through llama.cpp (``llama-cpp-python``), e.g. ``smollm2-135m``.
* ``replay``: the assistant turns of a recorded transcript (JSONL), in order (tests, smoke runs).
* ``random``: random preference answers (seeded), for baselines and tests.
* ``heuristic``: a rule-based stand-in for the LLM, registered by :mod:`rlaif.heuristic`
  (its rules read annotation prompts; importing any ``rlaif`` module registers it).
* ``stand_in``: a rule-based stand-in for the LLM policies' action and next-skill prompts,
  registered by :mod:`rl_baseline.baselines.llm_policy` (not a language model either).

Replies restricted to fixed lines: :meth:`Backend.complete_choice` makes the reply exactly one of a few
strings (e.g. ``Answer: 1`` / ``Answer: 2`` / ``Answer: none``) by constrained decoding: ``llamacpp`` by
masking the logits to the choices' tokens, ``transformers`` through ``prefix_allowed_tokens_fn``; ``openai`` by sending a GBNF grammar (:func:`choice_grammar`) as ``grammar`` (llama.cpp's server)
and the list as ``structured_outputs.choice`` (vLLM's server), each server reading its own field. The other
backends refuse with a :class:`BackendError` naming the ones that can. A small model that never ends its
reply in the asked form (SmolLM2-135M) still gives usable labels this way; the paper's annotator needs none.

Seeds per request: :meth:`Backend.complete` and :meth:`Backend.complete_choice` take ``seeds``, one sampling seed
per conversation (:func:`request_seed` makes them from a run's seed and the request's place, e.g. a pair index),
and a backend that samples draws each reply from its own seed alone, so a reply does not depend on the batch it
came in nor on the requests before it: ``vllm`` (a ``SamplingParams`` per prompt), ``openai`` and ``hf`` (the
request's ``seed``; reproducible where the server honours it, as vLLM's and llama.cpp's do), ``transformers`` (a
generator per row), ``llamacpp`` (reseeded per reply) and ``random``. Without ``seeds``, ``SamplingConfig.seed``
seeds every request alike (``vllm``, ``openai``, ``hf``) or the backend once when it is made (``transformers``,
``llamacpp``, ``random``), and a reply then depends on the requests made before it.

Token usage: :meth:`Backend.complete` returns :class:`Completion` objects, the reply with the
prompt and completion token counts where the backend knows them exactly (``openai``: the server's
``usage``; ``hf``: the endpoint's ``usage``; ``vllm`` and ``transformers``: the tokenizer's counts;
``llamacpp``: llama.cpp's ``usage``);
the rule-based, random and replay backends report none (``None``), and callers that need a count
then approximate it (:mod:`rl_baseline.baselines.llm_policy.client`).

The model ids of the paper's two models live here once: :data:`ANNOTATOR_MODEL` (annotation)
and :data:`CODER_MODEL` (code generation); Motif's Llama 2 annotators in :data:`MOTIF_ANNOTATOR_MODELS`; the
annotator-scale ablation's Llama 3.1 sizes in :data:`ANNOTATOR_MODELS_BY_SIZE`.

One module on purpose: it is the one client, and each backend is a short class
behind the same two methods; splitting them would scatter what a reader compares.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import random as _random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from common.cli import MissingPackageError
from common.flag_checks import FlagError, check_llm_client
from common.gpu_memory import ModelMemoryError, preflight, visible_gpu_bytes
from common.local_models import (
    LLAMA_CPP_INSTALL,
    LocalModelError,
    gguf_token_ids,
    is_local_model,
    local_model_file,
)

logger = logging.getLogger(__name__)

Conversation = list[dict[str, str]]
Message = dict  # {"role": "system" | "user" | "assistant", "content": str}

BACKENDS: tuple[str, ...] = ("vllm", "openai", "hf", "transformers", "llamacpp", "heuristic", "random", "replay")
#: other names a backend answers to (Motif's scripts' spelling)
BACKEND_ALIASES: dict[str, str] = {"hf-local": "transformers"}
#: the backends that can restrict a reply to fixed choices (:meth:`Backend.complete_choice`), aliases included
CHOICE_BACKENDS: tuple[str, ...] = ("llamacpp", "transformers", "hf-local", "openai")


def backend_list(names: Sequence[str]) -> str:
    """``names`` for a help text or an error, each alias beside the name it stands for:
    ``llamacpp, transformers (alias hf-local), openai``."""
    aliases = {target: [a for a, t in BACKEND_ALIASES.items() if t == target] for target in names}
    return ", ".join(name + (f" (alias {', '.join(aliases[name])})" if aliases.get(name) else "")
                     for name in names if name not in BACKEND_ALIASES)
#: The paper's annotator (Llama 3.1 70B Instruct) and code generator (Llama 3.1 405B Instruct), as
#: Hugging Face names them.
ANNOTATOR_MODEL = "meta-llama/Llama-3.1-70B-Instruct"
CODER_MODEL = "meta-llama/Llama-3.1-405B-Instruct"
DEFAULT_MODEL = ANNOTATOR_MODEL
#: Motif's annotators (``scripts.annotate_pairs_dataset --llm-size``): the chat versions of Llama 2
MOTIF_ANNOTATOR_MODELS: dict[int, str] = {size: f"meta-llama/Llama-2-{size}b-chat-hf" for size in (7, 13, 70)}
#: Meta's FP8 release of the 405B model: 406 GB of weights fit one node of 8 x 80 GB GPUs; the bf16 model's 811 GB
#: need 16 such GPUs, more than one vLLM tensor-parallel group on one node holds
CODER_MODEL_FP8 = "meta-llama/Llama-3.1-405B-Instruct-FP8"
#: The annotator-scale ablation (``scripts.pipeline --annotator_size``): Llama 3.1 Instruct by size, one id per
#: model (70b is the paper's annotator; 405b is the paper's code generator in its FP8 release, as the LLM
#: baselines use it, so that it runs on the 8 GPUs its annotation job asks for)
ANNOTATOR_MODELS_BY_SIZE: dict[str, str] = {
    "8b": "meta-llama/Llama-3.1-8B-Instruct",
    "70b": ANNOTATOR_MODEL,
    "405b": CODER_MODEL_FP8,
}


class BackendError(RuntimeError):
    """A backend cannot be created or a request failed for good."""


class MissingBackendPackageError(BackendError, MissingPackageError):
    """A backend's optional package (vLLM, llama-cpp-python, a named local model's package) is not installed;
    the message says what to install. The scripts exit 2 for it, as for a flag that cannot work here."""


LLMError = BackendError  # the name code generation uses


@dataclass
class SamplingConfig:
    """Sampling settings shared by the LLM backends (paper: T=0.1, top-p 0.95, top-k 50)."""

    temperature: float = 0.1
    top_p: float = 0.95
    top_k: int = 50
    max_tokens: int = 512
    seed: int | None = None


@dataclass
class Completion:
    """One reply and its token counts as the backend reports them (``None``: not reported)."""

    text: str
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None

    @property
    def has_usage(self) -> bool:
        return self.prompt_tokens is not None and self.completion_tokens is not None


def request_seed(seed: int, *key: int) -> int:
    """The sampling seed of one request, from a run's ``seed`` and the request's place (``key``: a pair's index,
    its attempt): the same whatever batch the request goes in and wherever a run resumes. Below 2**31, which
    every backend's seed takes."""
    digest = hashlib.blake2b(repr((int(seed), *map(int, key))).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % 2**31


def _check_seeds(conversations: Sequence[Conversation], seeds: Sequence[int] | None) -> None:
    if seeds is not None and len(seeds) != len(conversations):
        raise BackendError(f"{len(seeds)} seeds for {len(conversations)} conversations")


class Backend:
    """Base class: ``generate(conversations) -> replies`` (one text per conversation)."""

    name: str = "base"

    def generate(self, conversations: Sequence[Conversation]) -> list[str]:
        raise NotImplementedError

    def complete(self, conversations: Sequence[Conversation], seeds: Sequence[int] | None = None) -> list[Completion]:
        """The replies with their token counts; backends that know the counts override this
        (the default reports none, so every backend keeps working). ``seeds``: one sampling seed per
        conversation (see the module's docstring); a backend that does not sample ignores them."""
        _check_seeds(conversations, seeds)
        return [Completion(text) for text in self.generate(conversations)]

    def complete_choice(self, conversations: Sequence[Conversation], choices: Sequence[str],
                        seeds: Sequence[int] | None = None) -> list[Completion]:
        """Replies each of which is exactly one of ``choices`` (constrained decoding); backends that
        can constrain their decoding override this."""
        raise BackendError(
            f"{self.describe()} cannot restrict a reply to fixed choices; use --backend llamacpp or transformers, "
            "or --backend openai against llama.cpp's server (scripts.serve_local_llm) or vLLM's"
        )

    def chat(self, messages: Conversation) -> str:
        """The reply to one conversation."""
        replies = self.generate([messages])
        if len(replies) != 1:
            raise BackendError(f"{self.describe()} returned {len(replies)} replies for one conversation")
        return replies[0]

    def close(self) -> None:
        """Releases resources (threads, models); the default does nothing."""

    def describe(self) -> str:
        return self.name


# --------------------------------------------------------------------------- cheap backends


class RandomBackend(Backend):
    """Random answers (1, 2 or none), reproducible with ``seed``."""

    name = "random"

    def __init__(self, seed: int | None = 0, tie_probability: float = 0.05, **_: Any) -> None:
        self._rng = _random.Random(seed)
        self.tie_probability = tie_probability

    def _answer(self, r: float) -> str:
        choice = "none" if r < self.tie_probability else ("1" if r < (1 + self.tie_probability) / 2 else "2")
        return f"Random choice.\nAnswer: {choice}"

    def generate(self, conversations: Sequence[Conversation]) -> list[str]:
        return [self._answer(self._rng.random()) for _ in conversations]

    def complete(self, conversations: Sequence[Conversation], seeds: Sequence[int] | None = None) -> list[Completion]:
        _check_seeds(conversations, seeds)
        if seeds is None:
            return super().complete(conversations)
        return [Completion(self._answer(_random.Random(seed).random())) for seed in seeds]

    def describe(self) -> str:
        return "random (random labels, no language model)"


class ReplayBackend(Backend):
    """Answers with the assistant turns of a recorded transcript (JSONL), in order."""

    name = "replay"

    def __init__(self, replay_path: str | Path | None = None, **_: Any) -> None:
        if not replay_path:
            raise BackendError("the replay backend needs --replay PATH (a transcript.jsonl)")
        path = Path(replay_path)
        if path.is_dir():
            raise BackendError(f"--replay {path}: a folder, not a transcript file (JSON lines of a recorded run)")
        if not path.is_file():
            raise BackendError(f"--replay {path}: transcript not found")
        self.path = path
        self.answers: list[str] = []
        self.recorded: dict[str, Any] = {}  # the run's own record ({"kind": "run", "task": ..., "seed": ...})
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise BackendError(f"{path}: not a readable replay transcript (JSON lines of a generation run; "
                               f"{type(exc).__name__}); record it again or restore it") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise BackendError(f"{path}:{number}: not a JSON line ({exc}); record it again or restore it") from exc
            if not isinstance(record, dict):
                raise BackendError(f"{path}:{number}: not a record of a transcript (a JSON object); record it again")
            if record.get("role") == "assistant":
                self.answers.append(str(record.get("content", "")))
            elif record.get("kind") == "run" and not self.recorded:
                self.recorded = record
        self.position = 0

    def generate(self, conversations: Sequence[Conversation]) -> list[str]:
        if self.position + len(conversations) > len(self.answers):
            made = ""
            if self.recorded.get("task"):
                made = f" (recorded for task {self.recorded['task']}, seed {self.recorded.get('seed', '?')})"
            raise BackendError(f"{self.path}: the recorded transcript{made} has only {len(self.answers)} answers; "
                               "the run asked for more")
        out = self.answers[self.position:self.position + len(conversations)]
        self.position += len(conversations)
        return out

    def describe(self) -> str:
        return f"replay ({self.path})"


# --------------------------------------------------------------------------- remote backends


def _check_client(concurrency: Any, timeout: Any, max_retries: Any) -> None:
    try:
        check_llm_client(concurrency, timeout, max_retries)
    except FlagError as exc:
        raise BackendError(str(exc)) from exc


def _usage_counts(usage: Any) -> tuple[Optional[int], Optional[int]]:
    """``(prompt_tokens, completion_tokens)`` of an OpenAI-style ``usage`` (a dict or an object), or Nones."""
    if usage is None:
        return None, None
    get = usage.get if isinstance(usage, dict) else lambda k: getattr(usage, k, None)
    prompt, completion = get("prompt_tokens"), get("completion_tokens")
    if isinstance(prompt, int) and isinstance(completion, int):
        return prompt, completion
    return None, None


def _retrying(call: Callable[[], Any], max_retries: int, backoff: float, what: str,
              retryable: Callable[[Exception], bool]) -> Any:
    delay = backoff
    for attempt in range(max_retries + 1):
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - classified below
            if not retryable(exc) or attempt == max_retries:
                raise BackendError(f"{what}: request failed after {attempt + 1} attempt(s): {exc}") from exc
            logger.warning("%s: attempt %d failed (%s); retrying in %.2fs", what, attempt + 1, exc, delay)
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


class _RetryableHTTP(Exception):
    pass


def chat_completions_url(base_url: str) -> str:
    """``http://host:8000`` / ``.../v1`` / ``.../v1/chat/completions`` -> the chat completions URL."""
    url = base_url.rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    if url.endswith("/v1"):
        return url + "/chat/completions"
    return url + "/v1/chat/completions"


def next_choice_tokens(sequences: Sequence[Sequence[int]], done: list[int], end: int) -> list[int]:
    """The tokens a reply restricted to the choices' token ``sequences`` may take after ``done``: the next token
    of every sequence ``done`` begins, or ``end`` (the end of the turn) once one is complete."""
    return sorted({seq[len(done)] if len(done) < len(seq) else end
                   for seq in sequences if list(seq[:len(done)]) == done} or {end})


def choice_grammar(choices: Sequence[str]) -> str:
    """A GBNF grammar (llama.cpp's) whose only sentences are ``choices``."""
    if not choices:
        raise BackendError("no choices to restrict the reply to")
    return "root ::= " + " | ".join(json.dumps(str(c)) for c in choices)


class OpenAIBackend(Backend):
    """Any OpenAI-compatible chat completions server, requests in a thread pool."""

    name = "openai"

    def __init__(
        self,
        base_url: str | None = None,
        model: str = DEFAULT_MODEL,
        sampling: SamplingConfig | None = None,
        concurrency: int = 16,
        timeout: float = 120.0,
        max_retries: int = 5,
        backoff: float = 1.0,
        api_key: str | None = None,
        api_key_env: str | None = None,
        check_connection: bool = True,
        **_: Any,
    ) -> None:
        import requests

        if not base_url:
            raise BackendError("the openai backend needs --base_url (e.g. http://localhost:8000/v1)")
        _check_client(concurrency, timeout, max_retries)
        self._requests = requests
        self.url = chat_completions_url(base_url)
        self.model = model
        self.sampling = sampling or SamplingConfig()
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self._session = requests.Session()
        key = api_key or (os.environ.get(api_key_env) if api_key_env else None) or os.environ.get("OPENAI_API_KEY")
        if key:
            self._session.headers["Authorization"] = f"Bearer {key}"
        self._pool = ThreadPoolExecutor(max_workers=int(concurrency))
        #: the model names the server lists at ``/models`` (read by the connection check); None: not known
        self.served_models: list[str] | None = None
        if check_connection:
            self._check_connection()

    def _check_connection(self) -> None:
        base = self.url[: -len("/chat/completions")]
        try:
            resp = self._session.get(base + "/models", timeout=min(self.timeout, 10.0))
        except self._requests.RequestException as exc:
            self.close()
            raise BackendError(
                f"cannot reach the server at {base} ({exc.__class__.__name__}); start it (e.g. "
                "'vllm serve MODEL') or fix --base_url"
            ) from exc
        try:
            ids = [str(m["id"]) for m in resp.json()["data"]] if resp.status_code == 200 else []
        except (ValueError, KeyError, TypeError):
            ids = []
        self.served_models = ids or None

    def _payload(self, conv: Conversation, seed: int | None = None) -> dict[str, Any]:
        s = self.sampling
        seed = s.seed if seed is None else seed
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": conv,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
        }
        if s.top_k and s.top_k > 0:
            payload["top_k"] = s.top_k  # vLLM/TGI extension; pass --top_k 0 for servers that refuse it
        if seed is not None:
            payload["seed"] = seed
        return payload

    def _constrained_payload(self, conv: Conversation, choices: Sequence[str], seed: int | None = None) -> dict[str, Any]:
        """The request of a reply restricted to ``choices``: each server reads its own field and ignores the
        other's (llama.cpp's server a GBNF grammar, vLLM's a list)."""
        return {**self._payload(conv, seed), "grammar": choice_grammar(choices),
                "structured_outputs": {"choice": list(choices)}}

    def _one_completion(self, conv: Conversation, choices: Sequence[str] | None = None,
                        seed: int | None = None) -> Completion:
        requests = self._requests
        payload = self._constrained_payload(conv, choices, seed) if choices else self._payload(conv, seed)

        def call() -> Completion:
            resp = self._session.post(self.url, json=payload, timeout=self.timeout)
            if resp.status_code == 429 or resp.status_code >= 500:
                raise _RetryableHTTP(f"HTTP {resp.status_code} from {self.url}")
            if resp.status_code != 200:
                raise BackendError(f"HTTP {resp.status_code} from {self.url}: {resp.text[:300]}")
            try:
                body = resp.json()
                text = body["choices"][0]["message"]["content"] or ""
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise BackendError(f"malformed reply from {self.url}: {resp.text[:300]}") from exc
            return Completion(text, *_usage_counts(body.get("usage")))

        def retryable(exc: Exception) -> bool:
            return isinstance(exc, (_RetryableHTTP, requests.ConnectionError, requests.Timeout))

        return _retrying(call, self.max_retries, self.backoff, f"openai backend ({self.url})", retryable)

    def _one(self, conv: Conversation) -> str:
        return self._one_completion(conv).text

    def generate(self, conversations: Sequence[Conversation]) -> list[str]:
        return list(self._pool.map(self._one, conversations))

    def complete(self, conversations: Sequence[Conversation], seeds: Sequence[int] | None = None) -> list[Completion]:
        _check_seeds(conversations, seeds)
        return list(self._pool.map(lambda conv, seed: self._one_completion(conv, seed=seed), conversations,
                                   seeds or [None] * len(conversations)))

    def complete_choice(self, conversations: Sequence[Conversation], choices: Sequence[str],
                        seeds: Sequence[int] | None = None) -> list[Completion]:
        choice_grammar(choices)  # refuses an empty list before any request
        _check_seeds(conversations, seeds)
        return list(self._pool.map(lambda conv, seed: self._one_completion(conv, choices, seed), conversations,
                                   seeds or [None] * len(conversations)))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._session.close()

    def describe(self) -> str:
        return f"openai ({self.model} at {self.url})"


class HFInferenceBackend(Backend):
    """``huggingface_hub.InferenceClient.chat_completion`` (a URL or a model id), threaded."""

    name = "hf"

    def __init__(
        self,
        base_url: str | None = None,
        model: str = DEFAULT_MODEL,
        sampling: SamplingConfig | None = None,
        concurrency: int = 8,
        timeout: float = 120.0,
        max_retries: int = 5,
        backoff: float = 1.0,
        token: str | None = None,
        api_key_env: str | None = None,
        **_: Any,
    ) -> None:
        from huggingface_hub import InferenceClient

        _check_client(concurrency, timeout, max_retries)
        token = (token or (os.environ.get(api_key_env) if api_key_env else None) or os.environ.get("HF_TOKEN")
                 or os.environ.get("HUGGING_FACE_HUB_TOKEN") or None)
        if base_url:
            self._client = InferenceClient(base_url=base_url, token=token, timeout=timeout)
        else:
            self._client = InferenceClient(model=model, token=token, timeout=timeout)
        self.model = model
        self.target = base_url or model
        self.sampling = sampling or SamplingConfig()
        self.max_retries = max_retries
        self.backoff = backoff
        self._pool = ThreadPoolExecutor(max_workers=int(concurrency))

    def _one_completion(self, conv: Conversation, seed: int | None = None) -> Completion:
        import requests
        from huggingface_hub.errors import HfHubHTTPError

        s = self.sampling
        seed = s.seed if seed is None else seed

        def call() -> Completion:
            out = self._client.chat_completion(
                messages=conv,
                model=self.model if self.target != self.model else None,
                max_tokens=s.max_tokens,
                temperature=s.temperature,
                top_p=s.top_p,
                seed=seed,
            )
            return Completion(out.choices[0].message.content or "", *_usage_counts(getattr(out, "usage", None)))

        def retryable(exc: Exception) -> bool:
            if isinstance(exc, HfHubHTTPError):
                status = exc.response.status_code if exc.response is not None else 0
                return status == 429 or status >= 500
            return isinstance(exc, (requests.ConnectionError, requests.Timeout, TimeoutError))

        return _retrying(call, self.max_retries, self.backoff, f"hf backend ({self.target})", retryable)

    def _one(self, conv: Conversation) -> str:
        return self._one_completion(conv).text

    def generate(self, conversations: Sequence[Conversation]) -> list[str]:
        return list(self._pool.map(self._one, conversations))

    def complete(self, conversations: Sequence[Conversation], seeds: Sequence[int] | None = None) -> list[Completion]:
        _check_seeds(conversations, seeds)
        return list(self._pool.map(self._one_completion, conversations, seeds or [None] * len(conversations)))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def describe(self) -> str:
        return f"hf ({self.target})"


# --------------------------------------------------------------------------- local models


class TransformersBackend(Backend):
    """A local causal LM through ``transformers`` (CPU or GPU), batched generation."""

    name = "transformers"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        sampling: SamplingConfig | None = None,
        device: str | None = None,
        dtype: str = "auto",
        device_map: str | None = None,
        **_: Any,
    ) -> None:
        """``device_map="auto"`` (needs ``accelerate``) spreads a large model over all GPUs;
        otherwise the model is moved to ``device`` (default: CUDA if available, else CPU)."""
        import torch  # lazy: heavy, and only this backend needs it
        from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: heavy, and only this backend needs it

        self._torch = torch
        self.sampling = sampling or SamplingConfig()
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if str(self.device).startswith("cuda") and not torch.cuda.is_available():
            raise BackendError(f"--device {self.device}: no CUDA GPU is visible; use --device cpu")
        source, load = model, {}
        if is_local_model(model):  # a named local model or a GGUF file: transformers dequantises it
            gguf_path = _local_file(model)
            source, load = str(gguf_path.parent), {"gguf_file": gguf_path.name}
            dtype = "float32" if dtype == "auto" else dtype
        self.tokenizer = AutoTokenizer.from_pretrained(source, **load)
        self.tokenizer.padding_side = "left"
        if device_map is not None:
            self.model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, device_map=device_map, **load).eval()
            self.device = str(self.model.device)
        else:
            self.model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, **load).to(self.device).eval()
        if load:  # the file's own end-of-turn and padding ids (see local_models.gguf_token_ids)
            ids = gguf_token_ids(gguf_path)
            if "eos" in ids:
                self.tokenizer.eos_token = self.tokenizer.convert_ids_to_tokens(ids["eos"])
                self.model.generation_config.eos_token_id = ids["eos"]
            if "padding" in ids:
                self.tokenizer.pad_token = self.tokenizer.convert_ids_to_tokens(ids["padding"])
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model_name = model
        if self.sampling.seed is not None:
            torch.manual_seed(self.sampling.seed)

    def generate(self, conversations: Sequence[Conversation]) -> list[str]:
        return [c.text for c in self.complete(conversations)]

    def complete(self, conversations: Sequence[Conversation], seeds: Sequence[int] | None = None) -> list[Completion]:
        _check_seeds(conversations, seeds)
        return self._complete(conversations, None, seeds)

    def complete_choice(self, conversations: Sequence[Conversation], choices: Sequence[str],
                        seeds: Sequence[int] | None = None) -> list[Completion]:
        """transformers' ``prefix_allowed_tokens_fn``: each step may only continue one of the choices' token
        sequences, then end the turn."""
        choice_grammar(choices)  # refuses an empty list
        _check_seeds(conversations, seeds)
        tok = self.tokenizer
        sequences = [tok(c, add_special_tokens=False)["input_ids"] for c in choices]
        end = self.model.generation_config.eos_token_id
        end = end[0] if isinstance(end, (list, tuple)) else end
        return self._complete(conversations, (sequences, int(end)), seeds)

    def _complete(self, conversations: Sequence[Conversation], restrict: tuple[list[list[int]], int] | None,
                  seeds: Sequence[int] | None = None) -> list[Completion]:
        torch, tok, s = self._torch, self.tokenizer, self.sampling
        texts = [_chat_text(tok, c) for c in conversations]
        batch = tok(
            texts, return_tensors="pt", padding=True, add_special_tokens=False, return_token_type_ids=False
        ).to(self.device)
        kwargs: dict[str, Any] = {"max_new_tokens": s.max_tokens, "pad_token_id": tok.pad_token_id}
        if restrict is not None:
            sequences, end = restrict
            start = batch["input_ids"].shape[1]  # left padding: every row's reply starts here

            kwargs["prefix_allowed_tokens_fn"] = lambda _, ids: next_choice_tokens(sequences, ids[start:].tolist(), end)
        if s.temperature > 0 and seeds is not None:
            # greedy decoding of the sampled scores of _row_seeded_sampling: each row draws from its own seed
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None,
                          logits_processor=_row_seeded_sampling(s, seeds))
        elif s.temperature > 0:
            kwargs.update(do_sample=True, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k or None)
        else:
            kwargs.update(do_sample=False)
        with torch.no_grad():
            out = self.model.generate(**batch, **kwargs)
        new = out[:, batch["input_ids"].shape[1]:]
        replies = tok.batch_decode(new, skip_special_tokens=True)
        # exact counts: the prompt's non-padding tokens, and the new tokens up to the first padding one
        prompt_counts = batch["attention_mask"].sum(dim=1).tolist()
        pad = tok.pad_token_id
        new_counts = [int((row != pad).cumprod(dim=0).sum()) if pad is not None else int(row.numel()) for row in new]
        return [Completion(r, int(p), n) for r, p, n in zip(replies, prompt_counts, new_counts)]

    def describe(self) -> str:
        return f"transformers ({self.model_name} on {self.device})"


def _row_seeded_sampling(sampling: SamplingConfig, seeds: Sequence[int]) -> Any:
    """transformers logits processors that sample each row of a batch from its own generator, seeded with its
    entry of ``seeds``: the warpers of transformers' own sampling (temperature, top-k, top-p), then Gumbel noise
    drawn from the row's generator, so that the greedy pick is a sample of the warped distribution (the Gumbel-max
    trick). transformers' sampling draws every row from one global generator, so a reply would depend on the
    batch it came in and on the batches before it."""
    import torch  # lazy: heavy, and only this backend needs it
    from transformers import (  # lazy: heavy, and only this backend needs it
        LogitsProcessor,
        LogitsProcessorList,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    class RowSeededGumbel(LogitsProcessor):
        def __init__(self) -> None:
            self.generators: list[Any] | None = None

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            if self.generators is None:  # on the device of the scores, known at the first step
                self.generators = [torch.Generator(device=scores.device).manual_seed(int(seed)) for seed in seeds]
            tiny = torch.finfo(torch.float32).tiny
            # -log E with E ~ Exp(1) is Gumbel(0, 1); E never 0, so a masked (-inf) token stays masked
            exp = torch.stack([torch.empty(scores.shape[-1], dtype=torch.float32, device=scores.device)
                               .exponential_(generator=g).clamp_min_(tiny) for g in self.generators])
            return scores.float() - exp.log()

    processors: list[Any] = [TemperatureLogitsWarper(sampling.temperature)]
    if sampling.top_k and sampling.top_k > 0:
        processors.append(TopKLogitsWarper(sampling.top_k))
    if sampling.top_p < 1.0:
        processors.append(TopPLogitsWarper(sampling.top_p))
    return LogitsProcessorList([*processors, RowSeededGumbel()])


def _local_file(model: str) -> Path:
    try:
        return local_model_file(model)
    except MissingPackageError as exc:
        raise MissingBackendPackageError(str(exc)) from exc
    except LocalModelError as exc:
        raise BackendError(str(exc)) from exc


class _TokenChoices:
    """A llama.cpp logits processor (one per reply): only tokens that continue one of ``sequences`` (the choices'
    token ids) keep their logits, then only the end of the turn; sampling then picks among them as usual."""

    def __init__(self, sequences: list[list[int]], end: int) -> None:
        self.sequences, self.end = sequences, end
        self.start: int | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import numpy as np  # lazy: only the llamacpp backend needs it here

        if self.start is None:  # the first call comes right after the prompt
            self.start = len(input_ids)
        allowed = next_choice_tokens(self.sequences, [int(t) for t in input_ids[self.start:]], self.end)
        keep = np.asarray(allowed, dtype=np.int64)
        masked = np.full_like(scores, -np.inf)
        masked[keep] = scores[keep]
        return masked


class LlamaCppBackend(Backend):
    """A GGUF model in-process through llama.cpp (``llama-cpp-python``): a named local model
    (:data:`common.local_models.LOCAL_MODELS`) or a ``.gguf`` path. One conversation at a time, each on
    ``n_threads`` threads (llama.cpp's default: all cores); the chat template is the file's own."""

    name = "llamacpp"

    def __init__(
        self,
        model: str = "smollm2-135m",
        sampling: SamplingConfig | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        **_: Any,
    ) -> None:
        try:
            import llama_cpp  # lazy: optional (llama-cpp-python, requirements-local-llm.txt)
        except ImportError as exc:
            raise MissingBackendPackageError(f"the llamacpp backend needs llama-cpp-python ({exc}): "
                                             f"{LLAMA_CPP_INSTALL}") from exc
        path = _local_file(model)
        self.sampling = sampling or SamplingConfig()
        seed = self.sampling.seed if self.sampling.seed is not None else llama_cpp.LLAMA_DEFAULT_SEED
        self._llm = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, seed=seed, verbose=False)
        self.model_name = model

    def generate(self, conversations: Sequence[Conversation]) -> list[str]:
        return [c.text for c in self.complete(conversations)]

    def complete(self, conversations: Sequence[Conversation], seeds: Sequence[int] | None = None) -> list[Completion]:
        _check_seeds(conversations, seeds)
        return self._complete(conversations, None, seeds)

    def complete_choice(self, conversations: Sequence[Conversation], choices: Sequence[str],
                        seeds: Sequence[int] | None = None) -> list[Completion]:
        import llama_cpp  # lazy: optional (llama-cpp-python); __init__ has checked it is there

        choice_grammar(choices)  # refuses an empty list
        _check_seeds(conversations, seeds)
        # Not llama.cpp's GBNF grammar: its sampler took 3.6 s per 4-token reply here (it matches all 49k
        # vocabulary entries at every step); masking the logits to the choices' own tokens takes 0.08 s.
        sequences = [self._llm.tokenize(c.encode("utf-8"), add_bos=False, special=False) for c in choices]
        return self._complete(conversations, lambda: llama_cpp.LogitsProcessorList(
            [_TokenChoices(sequences, self._llm.token_eos())]), seeds)

    def _complete(self, conversations: Sequence[Conversation], processors: Callable[[], Any] | None,
                  seeds: Sequence[int] | None = None) -> list[Completion]:
        s, out = self.sampling, []
        for conv, seed in zip(conversations, seeds or [None] * len(conversations)):
            try:  # seed=None: the sampler goes on from the reply before
                r = self._llm.create_chat_completion(
                    messages=conv, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, max_tokens=s.max_tokens,
                    logits_processor=processors() if processors else None, seed=seed,
                )
            except ValueError as exc:  # llama.cpp's "Requested tokens (...) exceed context window"
                raise BackendError(f"{self.describe()}: {exc}") from exc
            prompt_tokens, completion_tokens = _usage_counts(r.get("usage"))
            out.append(Completion(r["choices"][0]["message"]["content"] or "", prompt_tokens, completion_tokens))
        return out

    def close(self) -> None:
        self._llm.close()

    def describe(self) -> str:
        return f"llamacpp ({self.model_name})"


def _chat_text(tokenizer: Any, conversation: Conversation) -> str:
    """The prompt text of a conversation: the tokenizer's chat template, or plain ``role: content``
    lines for a model without one (small local test models)."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    return "".join(f"{m['role']}: {m['content']}\n" for m in conversation) + "assistant: "


VLLM_MISSING = (
    "the vllm backend needs vLLM and a GPU: {why}. Fixes: install requirements-vllm.txt on a GPU node "
    "(python -m venv venv-vllm && venv-vllm/bin/pip install -r requirements-vllm.txt); or point "
    "--backend openai --base_url http://HOST:PORT/v1 at a running server; or use --backend heuristic "
    "for a CPU smoke run"
)


#: the vLLM engine arguments the backend passes through (``scripts.annotate_pairs`` has a flag for each)
VLLM_ENGINE_ARGS = ("max_model_len", "gpu_memory_utilization", "dtype", "quantization")


def chat_prompt_token_ids(tokenizer: Any, conversation: Conversation) -> list[int]:
    """The token ids vLLM's OpenAI server feeds the model for a chat request: the chat template rendered as
    text, then tokenized without the tokenizer's own special tokens. Tokenizing the rendered text with the
    defaults (what ``LLM.generate`` does to a string prompt) adds a second begin-of-text token in front of
    the template's own for Llama 3 models, so offline prompts are passed as these ids instead."""
    text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])



def served_instead(flag_prefix: str, model: str, num_gpus: int | None) -> str:
    """Why ``--backend vllm`` is refused in a phase that plays NetHack, and the commands to use instead."""
    p, n = flag_prefix, max(1, num_gpus or 1)
    name = Path(model.rstrip("/")).name
    return (f"{p}backend vllm would load vLLM into the process that plays NetHack, and no environment holds both "
            "(vLLM pins its own torch and transformers >= 5; sample-factory's huggingface_hub < 1.0 needs "
            "transformers < 5). Serve the model from the vLLM environment (requirements-vllm.txt) instead: "
            f"`vllm serve {model} --served-model-name {name} --tensor-parallel-size {n} --port 8000` "
            f"(or `scripts/launch_llm_server.sh {model} {n} 8000`), then pass {p}backend openai "
            f"{p}base_url http://HOST:8000/v1 {p}model {name}")

class VLLMBackend(Backend):
    """Offline batched ``vllm.LLM``, tensor parallel over ``num_gpus`` (default: every visible GPU, as the
    release did), after a pre-flight check that the weights fit (:mod:`common.gpu_memory`)."""

    name = "vllm"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        sampling: SamplingConfig | None = None,
        num_gpus: int | None = None,
        **llm_kwargs: Any,
    ) -> None:
        try:
            import vllm  # lazy: optional, only the vLLM environment (requirements-vllm.txt) has it
        except ImportError as exc:
            raise MissingBackendPackageError(VLLM_MISSING.format(why=f"vllm is not installed ({exc})")) from exc
        gpu_bytes = visible_gpu_bytes()
        if not gpu_bytes:
            raise BackendError(VLLM_MISSING.format(why="no CUDA GPU is visible"))
        num_gpus = len(gpu_bytes) if num_gpus is None else num_gpus
        engine = {k: llm_kwargs[k] for k in VLLM_ENGINE_ARGS if llm_kwargs.get(k) is not None}
        try:
            preflight(model, num_gpus, engine.get("gpu_memory_utilization"), engine.get("dtype"),
                      engine.get("quantization"), gpu_bytes)
        except ModelMemoryError as exc:
            raise BackendError(str(exc)) from exc
        self.sampling = sampling or SamplingConfig()
        s = self.sampling
        self._llm = vllm.LLM(model=model, tensor_parallel_size=num_gpus, seed=s.seed or 0, **engine)
        self._sampling_params = vllm.SamplingParams
        self._param_fields = dict(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k if s.top_k else -1,
                                  max_tokens=s.max_tokens)
        self._params = vllm.SamplingParams(**self._param_fields, seed=s.seed)
        self._tokenizer = self._llm.get_tokenizer()
        self.model_name = model

    def generate(self, conversations: Sequence[Conversation]) -> list[str]:
        return [c.text for c in self.complete(conversations)]

    def complete(self, conversations: Sequence[Conversation], seeds: Sequence[int] | None = None) -> list[Completion]:
        _check_seeds(conversations, seeds)
        # token ids as the server builds them (chat_prompt_token_ids), so that offline and served judges read
        # the same input; a dict with "prompt_token_ids" is vLLM's TokensPrompt
        prompts = [{"prompt_token_ids": chat_prompt_token_ids(self._tokenizer, c)} for c in conversations]
        # one SamplingParams per prompt: vLLM seeds a request's own generator with its params' seed
        params = self._params if seeds is None else [self._sampling_params(**self._param_fields, seed=seed)
                                                     for seed in seeds]
        outputs = self._llm.generate(prompts, params, use_tqdm=False)
        out = []
        for o in outputs:
            prompt_ids, new_ids = getattr(o, "prompt_token_ids", None), getattr(o.outputs[0], "token_ids", None)
            counted = prompt_ids is not None and new_ids is not None
            out.append(Completion(o.outputs[0].text, len(prompt_ids) if counted else None,
                                  len(new_ids) if counted else None))
        return out

    def describe(self) -> str:
        return f"vllm ({self.model_name})"


_FACTORIES: dict[str, Callable[..., Backend]] = {
    "vllm": VLLMBackend,
    "openai": OpenAIBackend,
    "hf": HFInferenceBackend,
    "transformers": TransformersBackend,
    "hf-local": TransformersBackend,
    "llamacpp": LlamaCppBackend,
    "random": RandomBackend,
    "replay": ReplayBackend,
}
# backends whose rules live in a phase package, registered when that package is imported
_REGISTERED_BY = {
    "heuristic": "rlaif.heuristic (import any rlaif module)",
    "stand_in": "rl_baseline.baselines.llm_policy.stand_in (import it)",
}


def register_backend(name: str, factory: Callable[..., Backend]) -> None:
    """Adds a backend (a phase's rule-based stand-in for the LLM) under ``name``."""
    _FACTORIES[name] = factory


def check_backend_name(name: str) -> str:
    if name not in _FACTORIES:
        if name in _REGISTERED_BY:
            raise BackendError(f"backend {name!r} is provided by {_REGISTERED_BY[name]}, which is not loaded")
        raise BackendError(f"unknown backend {name!r}; valid backends: {', '.join(BACKENDS)}")
    return name


def make_backend(name: str, **kwargs: Any) -> Backend:
    """Creates backend ``name`` (one of :data:`BACKENDS`).

    Common kwargs: ``model``, ``base_url``, ``num_gpus``, ``sampling`` (a
    :class:`SamplingConfig`, or ``temperature``/``top_p``/``top_k``/``max_tokens``/``seed``
    given separately), ``skill`` (heuristic), ``seed`` (random), ``concurrency``,
    ``timeout``, ``max_retries``, ``backoff``, ``api_key_env`` (openai/hf), ``device`` /
    ``device_map`` (transformers), ``replay_path`` (replay). Backends ignore what they do not use.
    """
    factory = _FACTORIES[check_backend_name(name)]
    if "sampling" not in kwargs:
        fields = {k: kwargs.pop(k) for k in ("temperature", "top_p", "top_k", "max_tokens") if k in kwargs}
        kwargs["sampling"] = SamplingConfig(seed=kwargs.get("seed"), **fields)
    if name != "random":
        kwargs.pop("seed", None)
    return factory(**kwargs)


#: the importable module each backend needs beyond the main install, with what installs it
_OPTIONAL_MODULES: dict[str, tuple[str, str]] = {
    "llamacpp": ("llama_cpp", f"the llamacpp backend needs llama-cpp-python: {LLAMA_CPP_INSTALL}"),
    "vllm": ("vllm", VLLM_MISSING.format(why="vllm is not installed")),
}


def check_installed(backend: str, model: str) -> None:
    """Whether backend ``backend`` can load ``model`` here, without loading anything (no import, no network):
    its optional package and, for a named local model, the package that carries the file.
    :class:`MissingBackendPackageError` saying what to install (a pipeline checks this before its first phase)."""
    module, install = _OPTIONAL_MODULES.get(BACKEND_ALIASES.get(backend, backend), (None, ""))
    if module is not None and module not in sys.modules and importlib.util.find_spec(module) is None:
        raise MissingBackendPackageError(install)
    if backend in ("llamacpp", "transformers", "hf-local") and is_local_model(model):
        _local_file(model)
