"""The asynchronous annotator: new messages from the environments in, LLM labels out, on disk.

One process per training run (started by :func:`rl_baseline.baselines.oni.service.start_annotator`),
looping over rounds:

1. read the spool lines the environments appended (:mod:`.store`): a message not labelled yet
   joins the queue (at most ``max_pending``; the oldest are dropped beyond, and counted);
2. send the newest ``batch_size`` queued items to the server through the project's one LLM
   client (:mod:`common.llm`, ``openai`` backend) -- the newest first, as ONI does, so the agent's
   current states are labelled before stale ones;
3. append the parsed answers to the label store, fsynced, before anything else happens: a
   label on disk is never asked for again, also after a restart. A malformed answer is counted
   and the item goes back in the queue, up to ``max_attempts`` times, then it is given up
   (counted) and never labelled;
4. for the learned types, update the reward network on the labels (:mod:`.models`) and save it
   for the environments to reload;
5. write the statistics (``stats.json``: labels, labels/s, queue length, label shares, server
   latency, outages, malformed answers) that training logs to tensorboard.

The server down or slow: the client retries briefly, then the round ends with the outage logged
and counted and the queue kept; the next try waits 1, 2, 4 ... up to 60 seconds. Training never
waits for any of it.
"""
from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from common.atomic_io import atomic_write_json
from common.llm import Backend, BackendError, make_backend
from rl_baseline.baselines.oni import prompts
from rl_baseline.baselines.oni.store import (
    CLASSIFIER_FILE,
    RANKER_FILE,
    STATS_FILE,
    JsonlTail,
    LabelStore,
    spool_records,
)
from rlaif.preferences import UNKNOWN
from rlaif.prompts import parse_answer

logger = logging.getLogger(__name__)

#: the reward types the annotator serves
ANNOTATED_TYPES = ("online_cls", "online_cls_reward_model", "online_motif", "cosine-bow")
_BACKOFF_MAX_S = 60.0


@dataclass
class AnnotatorConfig:
    store_dir: str
    reward_type: str
    server_url: str  # http://HOST:PORT/v1
    model: str
    goals: tuple[str, ...]  # the goal text per skill index (one entry outside the skill environment)
    batch_size: int = 100
    temperature: float = 0.1
    max_tokens: int = 4096
    request_timeout_s: float = 120.0
    concurrency: int = 16
    max_attempts: int = 3
    max_pending: int = 100_000
    pairs_per_refill: int = 10
    reward_model_lr: float = 1e-4
    reward_model_batch_size: int = 256
    seed: int = 0
    poll_s: float = 0.5
    stats_every_s: float = 2.0
    save_every_updates: int = 32


@dataclass
class AnnotatorStats:
    started: float = field(default_factory=time.time)
    labels: int = 0  # labels on disk (those from earlier runs included)
    labels_this_run: int = 0
    requests: int = 0
    failed_requests: int = 0
    outages: int = 0
    outage_seconds: float = 0.0
    malformed: int = 0
    given_up: int = 0
    dropped: int = 0
    latency_s: float = float("nan")
    label_counts: dict[str, int] = field(default_factory=dict)
    model_updates: int = 0
    model_loss: float = float("nan")
    model_accuracy: float = float("nan")
    recent: list[tuple[float, int]] = field(default_factory=list)  # (time, labels) for the rate

    def count(self, labels: list[int]) -> None:
        for y in labels:
            key = str(y)
            self.label_counts[key] = self.label_counts.get(key, 0) + 1

    def rate(self, now: float, window_s: float = 30.0) -> float:
        """Labels per second over the last ``window_s`` seconds (or since the start)."""
        self.recent = [(t, n) for t, n in self.recent if now - t <= window_s]
        span = min(window_s, max(now - self.started, 1e-6))
        return sum(n for _, n in self.recent) / span


class Annotator:
    """One annotator: the state of the loop; :meth:`round` runs one round (tests call it directly)."""

    def __init__(self, config: AnnotatorConfig, backend: Optional[Backend] = None) -> None:
        if config.reward_type not in ANNOTATED_TYPES:
            raise ValueError(f"reward type {config.reward_type!r} needs no annotator; annotated: {', '.join(ANNOTATED_TYPES)}")
        self.config = config
        self.dir = Path(config.store_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.store = LabelStore(self.dir)
        self.store.refresh()
        self.backend = backend or make_backend(
            "openai", base_url=config.server_url, model=config.model, temperature=config.temperature,
            top_k=0, top_p=1.0, max_tokens=config.max_tokens, concurrency=config.concurrency,
            timeout=config.request_timeout_s, max_retries=1, backoff=0.5, check_connection=False)
        self.tails: dict[Path, JsonlTail] = {}
        self.pending: "OrderedDict[tuple, int]" = OrderedDict()  # item -> malformed answers so far
        self.given_up: set = set()
        self.pool: list[dict[str, int]] = [dict() for _ in config.goals]  # ranking: message counts per skill
        self.asked_pairs: set = {(k, a, b) for k, a, b, _ in self.store.pairs}
        self.rng = np.random.default_rng(config.seed)
        self.stats = AnnotatorStats()
        self.stats.labels = len(self.store.labels) + len(self.store.pairs) + len(self.store.goals)
        self.stats.count([y for y in self.store.labels.values()] + [p[3] for p in self.store.pairs])
        self.next_try = 0.0
        self.backoff = 1.0
        self.outage_since: Optional[float] = None
        self.last_stats = 0.0
        self.trainer = None
        if config.reward_type in ("online_cls_reward_model", "online_motif"):
            from rl_baseline.baselines.oni.models import OnlineTrainer  # lazy: torch; only the model annotators need it

            kind = "classifier" if config.reward_type == "online_cls_reward_model" else "ranker"
            self.trainer = OnlineTrainer(kind, config.reward_model_lr, config.reward_model_batch_size, config.seed)
            self.model_path = self.dir / (CLASSIFIER_FILE if kind == "classifier" else RANKER_FILE)
            if kind == "classifier":
                self.trainer.add([(m, y) for (_, m), y in self.store.labels.items()])
            else:
                self.trainer.add([(a, b, y) for _, a, b, y in self.store.pairs])
            self._saved_updates = 0

    # -- the queue
    def _is_known(self, item: tuple) -> bool:
        if self.config.reward_type == "cosine-bow":
            return item in self.store.goals
        return item in self.store.labels

    def _enqueue(self, item: tuple) -> None:
        if item in self.pending or item in self.given_up:
            return
        self.pending[item] = 0
        while len(self.pending) > self.config.max_pending:
            self.pending.popitem(last=False)
            self.stats.dropped += 1

    def read_spools(self) -> int:
        n = 0
        for record in spool_records(self.dir, self.tails):
            try:
                skill, message = int(record.get("k", 0)), str(record.get("m", ""))
                seen = int(record.get("n", 1))
            except (TypeError, ValueError, OverflowError):  # a damaged spool line: skipped
                continue
            if not 0 <= skill < len(self.config.goals):
                continue
            n += 1
            if self.config.reward_type == "online_motif":
                counts = self.pool[skill]
                counts[message] = counts.get(message, 0) + seen
            elif not self._is_known((skill, message)):
                self._enqueue((skill, message))
        if self.config.reward_type == "online_motif":
            self._refill_pairs()
        return n

    def _refill_pairs(self) -> None:
        """Ranking: new random pairs of seen messages (drawn by how often they were seen, as ONI
        draws them from training batches) while fewer than twice a batch wait."""
        for skill, counts in enumerate(self.pool):
            if len(counts) < 2 or len(self.pending) >= 2 * self.config.batch_size:
                continue
            messages = list(counts)
            weights = np.array([counts[m] for m in messages], dtype=np.float64)
            weights /= weights.sum()
            for _ in range(self.config.pairs_per_refill):
                i, j = self.rng.choice(len(messages), size=2, replace=False, p=weights)
                item = (skill, messages[int(i)], messages[int(j)])
                if item not in self.asked_pairs:
                    self._enqueue(item)

    # -- one request
    def _conversation(self, item: tuple) -> Any:
        goal = self.config.goals[item[0]]
        if self.config.reward_type == "online_motif":
            return prompts.ranking_conversation(item[1], item[2], goal)
        if self.config.reward_type == "cosine-bow":
            return prompts.goals_conversation(item[1], goal)
        return prompts.classification_conversation(item[1], goal)

    def _parse(self, item: tuple, reply: str) -> Optional[dict[str, Any]]:
        kind = self.config.reward_type
        if kind == "online_motif":
            label = parse_answer(reply)
            return None if label == UNKNOWN else {"k": item[0], "a": item[1], "b": item[2], "y": int(label)}
        if kind == "cosine-bow":
            goals = prompts.parse_goals(reply)
            return None if goals is None else {"k": item[0], "m": item[1], "goals": goals}
        label = prompts.parse_label(reply)
        return None if label is None else {"k": item[0], "m": item[1], "y": int(label)}

    def request(self, now: float) -> int:
        """Asks for the newest queued items; returns the labels written (0 during an outage)."""
        if not self.pending or now < self.next_try:
            return 0
        batch = list(self.pending)[-self.config.batch_size:]
        t0 = time.monotonic()
        try:
            replies = self.backend.generate([self._conversation(item) for item in batch])
        except BackendError as exc:
            self.stats.failed_requests += 1
            if self.outage_since is None:
                self.outage_since = now
                self.stats.outages += 1
                logger.warning("LLM server unreachable (%s); training goes on, messages wait for labels", exc)
            self.next_try = now + self.backoff
            self.backoff = min(2 * self.backoff, _BACKOFF_MAX_S)
            return 0
        latency = time.monotonic() - t0
        if self.outage_since is not None:
            self.stats.outage_seconds += now - self.outage_since
            logger.warning("LLM server back after %.0f s", now - self.outage_since)
            self.outage_since = None
        self.backoff = 1.0
        self.stats.requests += 1
        self.stats.latency_s = latency
        records = []
        for item, reply in zip(batch, replies):
            record = self._parse(item, reply)
            if record is None:
                self.stats.malformed += 1
                self.pending[item] += 1
                if self.pending[item] >= self.config.max_attempts:
                    del self.pending[item]
                    self.given_up.add(item)
                    self.stats.given_up += 1
                continue
            records.append(record)
            del self.pending[item]
        self.store.append(records)  # durable before the labels count anywhere
        self.store.refresh()
        for r in records:
            if "a" in r:
                self.asked_pairs.add((r["k"], r["a"], r["b"]))
        self.stats.labels += len(records)
        self.stats.labels_this_run += len(records)
        self.stats.recent.append((now, len(records)))
        self.stats.count([int(r["y"]) for r in records if "y" in r])
        if self.trainer is not None and records:
            if self.trainer.kind == "classifier":
                self.trainer.add([(r["m"], r["y"]) for r in records])
            else:
                self.trainer.add([(r["a"], r["b"], r["y"]) for r in records])
        return len(records)

    # -- the reward network
    def train(self, new_labels: int) -> None:
        if self.trainer is None:
            return
        for _ in range(self.trainer.updates_for(new_labels)):
            self.trainer.step()
        self.stats.model_updates = self.trainer.updates
        self.stats.model_loss, self.stats.model_accuracy = self.trainer.last_loss, self.trainer.last_accuracy
        if self.trainer.updates - self._saved_updates >= self.config.save_every_updates or (
                new_labels and self._saved_updates == 0 and self.trainer.updates):
            self.trainer.save(self.model_path)
            self._saved_updates = self.trainer.updates

    def write_stats(self, now: float, force: bool = False) -> None:
        if not force and now - self.last_stats < self.config.stats_every_s:
            return
        self.last_stats = now
        s = self.stats
        total = sum(s.label_counts.values())
        atomic_write_json(self.dir / STATS_FILE, {
            "time": now, "reward_type": self.config.reward_type, "labels": s.labels,
            "labels_this_run": s.labels_this_run, "labels_per_s": round(s.rate(now), 3),
            "queue_length": len(self.pending), "requests": s.requests, "failed_requests": s.failed_requests,
            "outages": s.outages, "outage_seconds": round(s.outage_seconds + (now - self.outage_since if self.outage_since else 0.0), 1),
            "server_up": self.outage_since is None, "malformed": s.malformed, "given_up": s.given_up, "dropped": s.dropped,
            "latency_s": s.latency_s,
            "label_shares": {k: v / total for k, v in sorted(s.label_counts.items())} if total else {},
            "model_updates": s.model_updates, "model_loss": s.model_loss, "model_accuracy": s.model_accuracy,
        })

    def round(self, now: Optional[float] = None) -> int:
        now = time.time() if now is None else now
        self.read_spools()
        new = self.request(now)
        self.train(new)
        self.write_stats(now)
        return new


def run_annotator(config: AnnotatorConfig, should_stop: Callable[[], bool] = lambda: False) -> None:
    """The process's loop: rounds until ``should_stop()``; sleeps when there is nothing to do."""
    annotator = Annotator(config)
    logger.info("annotator: %s labels on disk, serving %s from %s (%s)", annotator.stats.labels,
                config.reward_type, config.server_url, config.model)
    try:
        while not should_stop():
            busy = annotator.round()
            if not busy:
                time.sleep(config.poll_s)
    finally:
        if annotator.trainer is not None and annotator.trainer.updates:
            annotator.trainer.save(annotator.model_path)
        annotator.write_stats(time.time(), force=True)
