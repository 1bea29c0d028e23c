"""A RULE-BASED STAND-IN for the LLM server of online rewards: OpenAI-compatible HTTP, no model.

For CPU smoke runs of ONI, the tests and the overhead benchmark; its labels are a few keyword rules,
not a language model's judgement (every reply says so in the server's log line at start)::

    python -m scripts.serve_stand_in_llm --port 9001 --model stand-in [--mode normal|garbage] [--delay 0.0]

It serves ``GET /v1/models`` and ``POST /v1/chat/completions``. Answers (``normal`` mode), read off the
last user prompt of the project's online prompts (rl_baseline/baselines/oni/prompts.py):

* classification: ``<label> FOO </label>`` when the message mentions gold, a kill, experience or
  going down (a stand-in for a judge's taste), else ``<label> BAR </label>``;
* ranking: ``Answer: 1`` / ``Answer: 2`` for the message with more of those words, ``none`` on a tie;
* goals: two goal lines;
* the LLM baselines' next-action and next-skill questions (rl_baseline/baselines/llm_policy/prompts.py): the
  rules of :mod:`rl_baseline.baselines.llm_policy.stand_in`.

Every reply carries a ``usage`` with the stand-in's own token counts (whitespace-separated words of
the request's messages and of the reply; not a tokenizer's), so clients read ``usage`` as they do
from a real server.

``garbage`` mode answers every question with text that has no label. Every request is appended to
``--log`` (one JSON line per answered request) when given, so tests can count what was asked.
"""
from __future__ import annotations

import argparse
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from common.cli import listen_port
from rl_baseline.baselines.llm_policy.stand_in import answer as policy_answer

WORDS = ("gold", "kill", "experience", "descend", "down")
_QUOTED = re.compile(r'\{"(.*)"\}', re.S)
_PAIR = re.compile(r'Message 1: "(.*)"\nMessage 2: "(.*)"\n', re.S)


def score(text: str) -> int:
    return sum(word in text.lower() for word in WORDS)


def answer(prompt: str, mode: str) -> str:
    if mode == "garbage":
        return "I am not sure what to say about that."
    policy = policy_answer(prompt)  # the LLM baselines' action / next-skill questions
    if policy is not None:
        return policy
    pair = _PAIR.search(prompt)
    if pair:
        a, b = score(pair.group(1)), score(pair.group(2))
        return "Comparing them.\nAnswer: " + ("1" if a > b else "2" if b > a else "none")
    if "Suggest up to five" in prompt:
        return "- pick up the gold\n- go down the stairs"
    found = _QUOTED.search(prompt)
    message = found.group(1) if found else ""
    label = "FOO" if score(message) else "BAR"
    return f"<knowledge> NetHack. </knowledge>\n<analysis> A message. </analysis>\n<label> {label} </label>"


class JSONRequestHandler(BaseHTTPRequestHandler):
    """Quiet JSON replies and the OpenAI model list (``GET .../models`` names ``served_model``): the part
    every chat server here shares (this stand-in, the tests' scripted servers)."""

    served_model = ""

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test): nothing to do
            pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": self.served_model, "object": "model"}]})
        else:
            self._send(404, {"error": "not found"})


def serve(port: int, model: str, mode: str, delay: float = 0.0, log: str | None = None) -> None:
    """Serves until the process ends."""
    lock = threading.Lock()

    class Handler(JSONRequestHandler):
        served_model = model

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if not self.path.endswith("/chat/completions"):
                self._send(404, {"error": f"no route {self.path}"})
                return
            if body.get("model") != model:
                self._send(404, {"error": f"model {body.get('model')!r} is not served"})
                return
            prompt = [m["content"] for m in body.get("messages", []) if m.get("role") == "user"][-1]
            if delay:
                time.sleep(delay)
            text = answer(prompt, mode)
            usage = {"prompt_tokens": sum(len(str(m.get("content", "")).split()) for m in body.get("messages", [])),
                     "completion_tokens": len(text.split())}
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            self._send(200, {"id": "x", "object": "chat.completion", "created": int(time.time()), "model": model,
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                          "finish_reason": "stop"}], "usage": usage})
            if log:  # after the reply: a server killed mid-request has not answered it, and does not log it
                with lock, open(log, "a") as fh:
                    fh.write(json.dumps({"prompt": prompt, "answer": text, "usage": usage}) + "\n")

    if log:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
    ThreadingHTTPServer.request_queue_size = 128  # the annotator sends a batch of requests at once
    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    httpd.daemon_threads = True
    print(f"rule-based stand-in for an LLM (not a language model) serving {model!r} on 127.0.0.1:{port}", flush=True)
    httpd.serve_forever()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=listen_port, default=9001, help="port on 127.0.0.1 (default: %(default)s)")
    p.add_argument("--model", default="stand-in", help="the model name /v1/models lists (default: %(default)s)")
    p.add_argument("--mode", default="normal", choices=("normal", "garbage"),
                   help="normal: rule-based answers; garbage: answers without a label (default: %(default)s)")
    p.add_argument("--delay", type=float, default=0.0, help="seconds each answer takes (default: %(default)s)")
    p.add_argument("--log", default=None, help="append every answered request to this JSON-lines file (written after the reply)")
    return p
