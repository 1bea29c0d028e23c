"""Small chat clients for code generation: ``chat(messages) -> reply text``.

Backends: ``hf`` (huggingface_hub InferenceClient, any TGI/vLLM endpoint with
``base_url``), ``openai`` (any OpenAI-compatible server, ``/v1/chat/completions``
through ``requests``), ``transformers`` (a local model through ``from_pretrained``)
and ``replay`` (the assistant turns of a recorded transcript, in order).
Heavy libraries are imported only by the backend that needs them.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

logger = logging.getLogger(__name__)

Message = dict  # {"role": "system" | "user" | "assistant", "content": str}

DEFAULT_MODEL = "meta-llama/Meta-Llama-3.1-405B-Instruct"
BACKENDS = ("hf", "openai", "transformers", "replay")


class LLMError(RuntimeError):
    """The language model could not be reached or gave no usable answer."""


@dataclass
class ChatConfig:
    """Sampling and connection settings shared by the backends."""

    backend: str = "hf"
    model: str = DEFAULT_MODEL
    base_url: str | None = None
    temperature: float = 0.2
    max_tokens: int = 10000
    timeout_s: float = 600.0
    api_key_env: str = "HF_TOKEN"  # name of the environment variable holding the token
    replay_path: str | None = None
    seed: int | None = None  # sampling seed, passed to servers that accept one


class ChatClient(Protocol):
    def chat(self, messages: list[Message]) -> str: ...


class HFChat:
    """huggingface_hub.InferenceClient (serverless API, TGI or vLLM endpoint)."""

    def __init__(self, config: ChatConfig) -> None:
        from huggingface_hub import InferenceClient

        token = os.environ.get(config.api_key_env) or os.environ.get("HUGGING_FACE_HUB_TOKEN")
        if config.base_url:
            self.client = InferenceClient(base_url=config.base_url, token=token, timeout=config.timeout_s)
        else:
            self.client = InferenceClient(model=config.model, token=token, timeout=config.timeout_s)
        self.config = config

    def chat(self, messages: list[Message]) -> str:
        try:
            out = self.client.chat_completion(messages=messages,
                                              model=None if self.config.base_url else self.config.model,
                                              temperature=self.config.temperature, max_tokens=self.config.max_tokens,
                                              seed=self.config.seed)
        except Exception as exc:  # HTTP, auth and server errors of huggingface_hub
            where = self.config.base_url or self.config.model
            raise LLMError(f"the hf backend failed for {where}: {exc}") from exc
        return out.choices[0].message.content or ""


class OpenAIChat:
    """Any OpenAI-compatible server (vLLM, TGI, FastChat ...) through plain HTTP."""

    def __init__(self, config: ChatConfig) -> None:
        if not config.base_url:
            raise LLMError("the openai backend needs --base_url (e.g. http://localhost:8000/v1)")
        self.url = config.base_url.rstrip("/")
        if not self.url.endswith("/v1"):
            self.url += "/v1"
        self.url += "/chat/completions"
        self.config = config
        self.api_key = os.environ.get(config.api_key_env) or os.environ.get("OPENAI_API_KEY")

    def chat(self, messages: list[Message]) -> str:
        import requests

        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        body = {"model": self.config.model, "messages": messages,
                "temperature": self.config.temperature, "max_tokens": self.config.max_tokens}
        if self.config.seed is not None:
            body["seed"] = self.config.seed
        try:
            resp = requests.post(self.url, json=body, headers=headers, timeout=self.config.timeout_s)
        except requests.RequestException as exc:
            raise LLMError(f"cannot reach {self.url}: {exc}") from exc
        if resp.status_code != 200:
            raise LLMError(f"{self.url} answered HTTP {resp.status_code}: {resp.text[:500]}")
        try:
            return resp.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"{self.url} gave an unexpected answer: {resp.text[:500]}") from exc


class TransformersChat:
    """A local chat model through transformers' ``from_pretrained`` (CPU or GPU)."""

    def __init__(self, config: ChatConfig) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(config.model)
        self.model = AutoModelForCausalLM.from_pretrained(config.model, torch_dtype="auto")
        if self.model.device.type == "cpu":
            import torch

            if torch.cuda.is_available():
                self.model = self.model.to("cuda")
        self.config = config

    def _prompt_ids(self, messages: list[Message]):
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "
        return self.tokenizer(text, return_tensors="pt").input_ids

    def chat(self, messages: list[Message]) -> str:
        import torch

        if self.config.seed is not None:
            torch.manual_seed(self.config.seed)
        ids = self._prompt_ids(messages).to(self.model.device)
        with torch.no_grad():
            out = self.model.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=self.config.max_tokens,
                do_sample=self.config.temperature > 0, temperature=max(self.config.temperature, 1e-5),
                pad_token_id=self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None
                else self.tokenizer.eos_token_id)
        return self.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)


class ReplayChat:
    """Answers with the assistant turns of a recorded transcript (JSONL), in order."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        if not path.is_file():
            raise LLMError(f"replay transcript not found: {path}")
        self.path = path
        self.answers: list[str] = []
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    raise LLMError(f"{path}:{number}: not a JSON line ({exc})") from exc
                if record.get("role") == "assistant":
                    self.answers.append(str(record.get("content", "")))
        self.position = 0

    def chat(self, messages: list[Message]) -> str:
        if self.position >= len(self.answers):
            raise LLMError(f"{self.path}: the recorded transcript has only {len(self.answers)} answers; "
                           "the run asked for more")
        answer = self.answers[self.position]
        self.position += 1
        return answer


def make_client(config: ChatConfig) -> ChatClient:
    if config.backend == "hf":
        return HFChat(config)
    if config.backend == "openai":
        return OpenAIChat(config)
    if config.backend == "transformers":
        return TransformersChat(config)
    if config.backend == "replay":
        if not config.replay_path:
            raise LLMError("the replay backend needs --replay PATH (a transcript.jsonl)")
        return ReplayChat(config.replay_path)
    raise LLMError(f"unknown backend {config.backend!r}; valid backends: {', '.join(BACKENDS)}")
