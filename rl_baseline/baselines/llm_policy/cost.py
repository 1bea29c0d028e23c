"""What a baseline's evaluation cost: one ``cost`` section per evaluation JSON, summed in ``cost.json``.

Every evaluation of an LLM baseline (one task) writes into its result JSON a ``cost`` section
(:func:`cost_section`): LLM calls and tokens, CPU and GPU seconds, env steps and the run's honest
label. :func:`update_cost_json` then sums the sections of every ``{method_dir}/eval/*.json`` into
``{method_dir}/cost.json``::

    {"method": "llm_policy", "label": "LLM policy, rule-based stand-in (no LLM), 200-step cap",
     "llm_tokens": 123456, "cpu_hours": 0.01, "gpu_hours": 0.0, "env_steps": 1200, ...}

plus ``llm_calls``, ``llm_tokens_sent`` (tokens of the questions the backend answered in those
runs: cache hits excluded), ``tokens_counted_by`` and ``tasks`` (each task's section). Definitions:

* ``llm_tokens``: prompt + completion tokens of every question the method asked, cache hits
  included -- the cost of the method, which a warm cache must not hide;
* ``cpu_hours``: CPU time of the evaluating process (all its threads; the environments, the
  policy network, the prompt rendering; an in-process stand-in's rules too);
* ``gpu_hours``: wall time x GPUs the run held: the policy network's GPU (``--device gpu``) plus
  the GPUs serving the model (``--server_gpus`` / ``--meta_llm_server_gpus``: the server runs in
  another process, its time is attributed by the GPUs it holds; an in-process vLLM's
  ``--num_gpus``);
* ``env_steps``: env steps of the evaluation. The hierarchical baseline's skill training (shared
  with MaestroMotif) is not included; its ``training_env_steps`` says how long it was.

Each run rewrites ``cost.json`` from all the JSONs present, under a lock, so the array tasks of a
slurm job end with the sum of everything that finished.
"""
from __future__ import annotations

import json
import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from common.atomic_io import atomic_write_json

logger = logging.getLogger(__name__)

COST_FILE = "cost.json"


@dataclass
class CostClock:
    """Wall and CPU time of this process from :meth:`start`."""

    wall0: float = 0.0
    cpu0: float = 0.0

    def start(self) -> "CostClock":
        self.wall0, self.cpu0 = time.monotonic(), time.process_time()
        return self

    @property
    def wall_s(self) -> float:
        return time.monotonic() - self.wall0

    @property
    def cpu_s(self) -> float:
        return time.process_time() - self.cpu0


def cost_section(label: str, clock: CostClock, env_steps: int, gpus: float, llm: dict,
                 training_env_steps: Optional[int] = None) -> dict:
    """The ``cost`` section of one evaluation JSON (``llm``: its ``llm`` section)."""
    out = {
        "label": label,
        "llm_calls": int(llm.get("calls", 0)),
        "llm_tokens": int(llm.get("prompt_tokens", 0)) + int(llm.get("completion_tokens", 0)),
        "llm_tokens_sent": int(llm.get("sent_tokens", 0)),
        "tokens_counted_by": llm.get("tokens_counted_by", ""),
        "cpu_seconds": round(clock.cpu_s, 3),
        "wall_seconds": round(clock.wall_s, 3),
        "gpu_seconds": round(clock.wall_s * float(gpus), 3),
        "env_steps": int(env_steps),
    }
    if training_env_steps is not None:
        out["training_env_steps"] = int(training_env_steps)
    return out


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` where the file system has one (else unlocked, with a warning)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX)
        except OSError as exc:
            logger.warning("cannot lock %s (%s): writing cost.json without a lock", path, exc)
        try:
            yield
        finally:
            try:
                fcntl.flock(fh, fcntl.LOCK_UN)
            except OSError:
                pass


def update_cost_json(method_dir: str | Path, method: str) -> dict:
    """Sums the ``cost`` sections of ``{method_dir}/eval/*.json`` into ``{method_dir}/cost.json``."""
    method_dir = Path(method_dir)
    with _locked(method_dir / ".cost.lock"):
        tasks: dict[str, dict] = {}
        for path in sorted((method_dir / "eval").glob("*.json")):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and isinstance(data.get("cost"), dict):
                tasks[path.stem] = data["cost"]
        labels = sorted({c.get("label", "") for c in tasks.values()} - {""})
        counted = sorted({c.get("tokens_counted_by", "") for c in tasks.values()} - {""})
        out = {
            "method": method,
            "label": " / ".join(labels) if labels else method,
            "llm_tokens": sum(int(c.get("llm_tokens", 0)) for c in tasks.values()),
            "cpu_hours": round(sum(float(c.get("cpu_seconds", 0.0)) for c in tasks.values()) / 3600.0, 6),
            "gpu_hours": round(sum(float(c.get("gpu_seconds", 0.0)) for c in tasks.values()) / 3600.0, 6),
            "env_steps": sum(int(c.get("env_steps", 0)) for c in tasks.values()),
            "llm_calls": sum(int(c.get("llm_calls", 0)) for c in tasks.values()),
            "llm_tokens_sent": sum(int(c.get("llm_tokens_sent", 0)) for c in tasks.values()),
            "tokens_counted_by": " / ".join(counted),
            "measured": "CPU time of the evaluating processes; GPU hours: wall time x GPUs held; env steps of the "
                        "evaluations",
            "tasks": tasks,
        }
        training = sorted({int(c["training_env_steps"]) for c in tasks.values() if "training_env_steps" in c})
        if training:
            out["training_env_steps"] = training[-1]
            out["note"] = ("evaluation only: the skill policy's training (training_env_steps, shared with "
                           "MaestroMotif) is not included")
        atomic_write_json(method_dir / COST_FILE, out)
    return out
