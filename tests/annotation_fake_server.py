"""A small OpenAI-compatible chat server for tests (http.server in a thread, 127.0.0.1).

Replies are scripted by a marker in the last user prompt (``SCENARIO-<name>``,
put into the dataset's messages by the tests):

* ``good1`` / ``good2`` / ``tie``: a parseable answer at once;
* ``retry``: no answer the first time, ``Answer: 2`` to the retry prompt;
* ``garbage``: never an answer;
* ``flaky``: HTTP 503 on the first request for that prompt, then ``Answer: 1``;
* ``slow``: the first request for that prompt sleeps past the client's timeout,
  then ``Answer: 2``;
* ``sample``: an answer drawn from the request's ``seed`` (as a server that samples with it), so
  the same seed gets the same answer.

Unmarked prompts get ``Answer: 1``. A request restricted to fixed choices (vLLM's
``structured_outputs.choice``) gets its scripted reply when that is one of them, else the first
choice, as constrained decoding would. Every request body is recorded in ``requests``.
"""
from __future__ import annotations

import json
import random
import re
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Any

from rl_baseline.baselines.oni.stand_in_server import JSONRequestHandler
from rlaif.prompts import parse_answer

_MARK = re.compile(r"SCENARIO-(\w+)")


class FakeChatServer:
    def __init__(self, slow_seconds: float = 1.0) -> None:
        self.slow_seconds = slow_seconds
        self.requests: list[dict[str, Any]] = []
        self.attempts: dict[str, int] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(JSONRequestHandler):
            served_model = "fake-model"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": f"no route {self.path}"})
                    return
                status, text = server.reply(body)
                choices = (body.get("structured_outputs") or {}).get("choice")
                if status == 200 and choices and text not in choices:
                    code = parse_answer(text)  # the scripted reply's answer line, if it is one of the choices
                    text = choices[code] if code < len(choices) else choices[0]
                if status != 200:
                    self._send(status, {"error": text})
                    return
                self._send(200, {
                    "id": "cmpl-test", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "fake-model"), "system_fingerprint": "test",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                })

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def reply(self, body: dict[str, Any]) -> tuple[int, str]:
        messages = body.get("messages", [])
        first_user = next((m["content"] for m in messages if m.get("role") == "user"), "")
        is_retry = sum(1 for m in messages if m.get("role") == "user") > 1
        match = _MARK.search(first_user)
        scenario = match.group(1) if match else "default"
        key = f"{first_user}|{is_retry}"
        with self._lock:
            self.requests.append(body)
            self.attempts[key] = self.attempts.get(key, 0) + 1
            attempt = self.attempts[key]
        if scenario == "good2":
            return 200, "The second one goes deeper.\nAnswer: 2"
        if scenario == "tie":
            return 200, "Both look the same to me.\n**Answer:** none"
        if scenario == "retry":
            return 200, ("Answer: 2" if is_retry else "Hard to say; both moments are dull.")
        if scenario == "garbage":
            return 200, "I like turtles."
        if scenario == "flaky" and attempt == 1:
            return 503, "overloaded"
        if scenario == "slow" and attempt == 1:
            time.sleep(self.slow_seconds)
            return 200, "Answer: 2"
        if scenario == "slow":
            return 200, "Answer: 2"
        if scenario == "sample":
            return 200, f"Answer: {random.Random(body.get('seed')).choice(['1', '2', 'none'])}"
        return 200, "Answer: 1"

    def __enter__(self) -> "FakeChatServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
