"""The LLM server seen from training: its address, the readiness wait, and the annotator process.

The server is any OpenAI-compatible endpoint (``scripts/launch_llm_server.sh`` starts vLLM's, or
FastChat in front of vLLM as the ONI release did) at ``http://{--llm_server_addr}:{--llm_server_port}/v1``
(port 9001 by default, as in the ONI release). Training waits for ``/v1/models`` to list the model
(``--llm_server_wait_s``), then starts one annotator process (:mod:`.annotator`) and stops it at
the end.
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import time
from typing import Any, Callable, Optional

from rl_baseline.baselines.oni.annotator import AnnotatorConfig, run_annotator

logger = logging.getLogger(__name__)

DEFAULT_PORT = 9001


class ServerError(RuntimeError):
    """The LLM server is not there (not reachable, or not serving the model)."""


def server_url(addr: str, port: int = DEFAULT_PORT) -> str:
    """``http://{addr}:{port}/v1``; an address given as a URL keeps its scheme and port."""
    addr = addr.strip().rstrip("/")
    if addr.startswith(("http://", "https://")):
        return addr if addr.endswith("/v1") else addr + "/v1"
    return f"http://{addr}:{int(port)}/v1"


def served_models(url: str, timeout_s: float = 5.0) -> list[str]:
    """The model names ``{url}/models`` lists (``ServerError`` when it does not answer)."""
    import requests

    try:
        resp = requests.get(url + "/models", timeout=timeout_s)
        resp.raise_for_status()
        return [str(m.get("id")) for m in resp.json().get("data", [])]
    except (requests.RequestException, ValueError, AttributeError) as exc:
        raise ServerError(f"{url}/models: {exc.__class__.__name__}: {exc}") from exc


def wait_for_server(url: str, model: str, timeout_s: float, poll_s: float = 2.0,
                    alive: Optional[Callable[[], bool]] = None) -> None:
    """Waits until the server lists ``model``; ``ServerError`` saying what was seen after ``timeout_s``,
    or as soon as ``alive()`` says the server's process is gone."""
    deadline = time.monotonic() + max(0.0, timeout_s)
    last = "no answer yet"
    announced = False
    while True:
        if alive is not None and not alive():
            raise ServerError(f"the LLM server process died before {url} served {model!r} ({last}); see its log")
        try:
            models = served_models(url)
            if model in models:
                return
            last = f"it serves {', '.join(models) or 'no model'}, not {model!r}"
        except ServerError as exc:
            last = str(exc)
        if time.monotonic() >= deadline:
            raise ServerError(
                f"no LLM server serving {model!r} at {url} after {timeout_s:.0f} s ({last}). Start one with "
                f"scripts/launch_llm_server.sh MODEL_PATH NUM_GPUS (port {DEFAULT_PORT}), or check --llm_server_addr, "
                "--llm_server_port and --llm_model (the served model's name)"
            )
        if not announced:
            logger.info("waiting for the LLM server at %s to serve %s (%s)", url, model, last)
            announced = True
        time.sleep(poll_s)


def _annotator_main(config: AnnotatorConfig, stop: Any) -> None:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][annotator] %(message)s")
    run_annotator(config, should_stop=stop.is_set)


class AnnotatorProcess:
    """The annotator in its own process (spawned: no state of the training process is shared)."""

    def __init__(self, config: AnnotatorConfig) -> None:
        ctx = mp.get_context("spawn")
        self._stop = ctx.Event()
        self.process = ctx.Process(target=_annotator_main, args=(config, self._stop), name="oni-annotator", daemon=True)

    def start(self) -> "AnnotatorProcess":
        self.process.start()
        logger.info("annotator process %d started", self.process.pid)
        return self

    def alive(self) -> bool:
        return self.process.is_alive()

    def stop(self, timeout_s: float = 30.0) -> Optional[int]:
        self._stop.set()
        self.process.join(timeout_s)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5.0)
        return self.process.exitcode
