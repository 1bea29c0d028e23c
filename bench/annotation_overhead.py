"""Annotation overhead: pairs/s of everything around the LLM.

Times captioning, prompt building, answer parsing and the whole chunk loop
(captions + prompts + parsing + conversation log + atomic saves + merge) with an
instant backend that answers at once, plus the rule-based heuristic backend
the CPU pipeline uses. Target: >= 20,000 pairs/s on one core. Prints the numbers.

    python -m bench.annotation_overhead --pairs 50000
"""
from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from common.llm import Backend, make_backend
from common.nethack.messages import encode_message
from rlaif.annotate import AnnotationConfig, annotate_chunk
from rlaif.captions import caption_sample
from rlaif.dataset import ObservationDataset, save_dataset
from rlaif.prompts import PromptBuilder, parse_answer

_WORDS = (
    "You see here a scroll labeled ZELGO MER. f - a potion. You kill the newt! There is a staircase down here. "
    "The jackal bites! You hit the grid bug. Welcome to Asidonhopo's general store! There is a black flash. "
    "You climb up the stairs. You find a hidden passage. Hello stranger, welcome. 12 gold pieces. It's a wall."
).split()


class InstantBackend(Backend):
    """Answers every conversation at once with a fixed parseable reply."""

    name = "instant"

    def generate(self, conversations: Sequence[list[dict[str, str]]]) -> list[str]:
        return ["The first moment is better.\nAnswer: 1"] * len(conversations)


def synthetic_dataset(num_pairs: int, seed: int = 0, realistic: bool = True) -> ObservationDataset:
    """Synthetic samples.

    ``realistic``: like game data, half the messages are empty and the rest come from a
    pool of 4,096 messages with Zipf-like frequencies; each stat changes in 10% of samples.
    Otherwise (worst case for the caches) nearly every sample is distinct: random
    messages and stats that change in 20% of samples.
    """
    rng = np.random.default_rng(seed)
    n = 2 * num_pairs
    if realistic:
        pool = np.stack([encode_message(" ".join(rng.choice(_WORDS, rng.integers(3, 13)))) for _ in range(4096)])
        weights = 1.0 / np.arange(1, len(pool) + 1)
        idx = rng.choice(len(pool), size=(n, 2), p=weights / weights.sum())
        messages = pool[idx]
        messages[rng.random((n, 2)) < 0.5] = 0
        change = 0.1
    else:
        messages = np.stack([encode_message(" ".join(rng.choice(_WORDS, rng.integers(3, 13)))) for _ in range(2 * n)])
        messages = messages.reshape(n, 2, -1)
        change = 0.2
    stats = np.zeros((n, 2, 6), np.int32)
    stats[:, 0] = np.stack([
        rng.integers(1, 10, n), rng.integers(0, 500, n), rng.integers(1, 30, n),
        np.full(n, 30), rng.integers(1, 8, n), rng.integers(0, 3, n),
    ], axis=1)
    if realistic:  # long stretches of play share depth, gold, HP and level
        stats[:, 0, :5] = stats[:: 100, 0, :5].repeat(100, axis=0)[:n]
    stats[:, 1] = stats[:, 0] + rng.integers(-1, 2, size=(n, 6)) * (rng.random((n, 6)) < change)
    return ObservationDataset(messages, stats, {"source": "bench"})


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.0f} pairs/s"


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script (the docs' commands are checked against it)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=50_000, help="number of pairs in the synthetic dataset")
    parser.add_argument("--batch_size", type=int, default=256, help="pairs per backend call")
    return parser


def main() -> None:
    parser = build_parser()
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    for realistic in (True, False):
        print(f"== {'game-like data (repeated observations)' if realistic else 'all-distinct data (worst case)'}, "
              f"{args.pairs} pairs")
        run(synthetic_dataset(args.pairs, realistic=realistic), args.batch_size)


def run(ds: ObservationDataset, batch_size: int) -> None:
    builder = PromptBuilder("discoverer")
    n = min(ds.num_pairs, 20_000)
    t = time.perf_counter()
    caps = [(caption_sample(ds.messages[2 * k], ds.stats[2 * k]), caption_sample(ds.messages[2 * k + 1], ds.stats[2 * k + 1])) for k in range(n)]
    print(f"caption_sample (public API, no cache, 2 captions per pair): {_rate(n, time.perf_counter() - t)}")
    t = time.perf_counter()
    convs = [builder.conversation(a, b) for a, b in caps]
    print(f"prompt building: {_rate(n, time.perf_counter() - t)}")
    replies = InstantBackend().generate(convs)
    t = time.perf_counter()
    for r in replies:
        parse_answer(r)
    print(f"answer parsing: {_rate(n, time.perf_counter() - t)}")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        save_dataset(root / "data" / "discoverer.npz", ds)
        for label, backend_name, log in (
            ("instant backend, conversation log on", "instant", True),
            ("instant backend, conversation log off", "instant", False),
            ("heuristic backend, conversation log on", "heuristic", True),
        ):
            cfg = AnnotationConfig(
                goal_key="discoverer", directory=str(root / "data"), preference_dir=str(root / "pref"),
                logdir=str(root / "logs"), backend=backend_name, batch_size=batch_size,
                flushing_freq=10, ignore_existing=True, progress=False, log_conversations=log,
            )
            backend = InstantBackend() if backend_name == "instant" else make_backend("heuristic", skill="discoverer")
            t = time.perf_counter()
            summary = annotate_chunk(cfg, backend=backend)
            total = time.perf_counter() - t
            print(f"full chunk loop, {label}: {_rate(summary.annotated, summary.seconds)} in the loop, "
                  f"{_rate(summary.annotated, total)} including dataset load, fingerprint and merge")


if __name__ == "__main__":
    main()
