"""Reward model training speed on this machine: one epoch over 180,000 pairs.

Builds a synthetic dataset whose current messages repeat the way NetHack messages do
(about a third empty, the rest drawn with a heavy-tailed frequency from a few thousand
templated messages), trains the default reward model (the release's architecture) for one epoch with the paper's
batch size (1000 pairs), and prints the time per epoch, pairs per second, the split
between batch preparation and compute, the time of one save, and the projected time
for the paper's 20 epochs (target: under 15 minutes on 2 CPU cores).

It also times one training step on the same batches with and without encoding each
distinct message once, and prints the speed-up of the deduplication.

Usage: ``python -m bench.reward_training [--pairs 180000] [--epochs 1] [--device cpu]``.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from common.nethack.messages import encode_message
from rlaif.dataset import ObservationDataset, save_dataset
from rlaif.preferences import save_preferences
from rlaif.reward_model import RewardModelConfig, SkillRewardModel, build_reward_model
from rlaif.train_reward import RewardTrainingConfig, bradley_terry_loss, reward_inputs, train_reward

MONSTERS = ["newt", "jackal", "grid bug", "sewer rat", "lichen", "kobold", "goblin", "gnome", "gnome lord", "dwarf",
            "hill orc", "giant rat", "fox", "coyote", "acid blob", "yellow mold", "floating eye", "hobbit",
            "large kobold", "homunculus", "gecko", "iguana", "killer bee", "water moccasin", "rothe", "werejackal",
            "gnome king", "dingo", "jackalwere", "giant bat", "hill giant", "soldier ant", "cave spider", "centipede"]
ITEMS = ["a lichen corpse", "a newt corpse", "a scroll labeled FOOBIE BLETCH", "a blue potion", "an apple",
         "2 food rations", "a dagger", "a +0 leather armor", "an oak wand", "a jackal corpse", "a ruby ring",
         "a tin", "3 rocks", "a sack", "an uncursed bag", "a fortune cookie", "a gnome corpse", "a crossbow",
         "a pick-axe", "a wooden harp", "a scroll labeled ZELGO MER", "a bugle", "a candle", "a pair of boots"]
TEMPLATES = ["You hit the {m}.", "You miss the {m}.", "The {m} bites!", "The {m} misses!", "You kill the {m}!",
             "The {m} hits!", "You see here {i}.", "{n} gold pieces.", "You see here {n} gold pieces.",
             "There is a doorway here.", "It's a wall.", "You find a hidden passage.", "The door opens.",
             "This door is locked.", "There is a staircase down here.", "There is a staircase up here.",
             "You climb down the stairs.", "You climb up the stairs.", "Hello Agent, welcome to NetHack!",
             "You are beginning to feel hungry.", "You feel more experienced.", "Welcome to experience level {n}.",
             "There is an open door here.", "You displace your kitten.", "{i} - {i}.", "Really attack the {m}?",
             "The {m} turns to flee.", "You hear some noises in the distance.", "There are several objects here.",
             "You stop. Your kitten is in the way.", "The {m} is killed!", "You destroy the {m}!"]


def message_vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    vocab: set[str] = set()
    # The templates allow about 1,700 distinct messages; stop drawing well before that.
    for _ in range(200 * size):
        if len(vocab) >= size:
            break
        t = TEMPLATES[rng.integers(len(TEMPLATES))]
        vocab.add(t.format(m=MONSTERS[rng.integers(len(MONSTERS))], i=ITEMS[rng.integers(len(ITEMS))],
                           n=int(rng.integers(1, 200))))
    return sorted(vocab)


def synthetic_dataset(pairs: int, seed: int = 0, vocab_size: int = 1200, empty_share: float = 0.35
                      ) -> tuple[ObservationDataset, np.ndarray]:
    rng = np.random.default_rng(seed)
    vocab = message_vocabulary(rng, vocab_size)
    encoded = np.stack([encode_message("")] + [encode_message(t) for t in vocab])
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1  # heavy-tailed, like NetHack's message frequencies
    weights /= weights.sum()
    n = 2 * pairs
    choice = rng.choice(len(vocab), size=n, p=weights) + 1
    choice[rng.random(n) < empty_share] = 0
    messages = np.zeros((n, 2, 256), dtype=np.uint8)
    messages[:, 1] = encoded[choice]
    messages[:, 0] = encoded[np.roll(choice, 1)]
    stats = np.zeros((n, 2, 6), dtype=np.int32)
    stats[:, 0, 0] = rng.integers(1, 8, size=n)
    stats[:, 1, 0] = stats[:, 0, 0] + rng.choice([-1, 0, 1], size=n, p=[0.02, 0.93, 0.05])
    labels = rng.choice(4, size=pairs, p=[0.45, 0.49, 0.05, 0.01]).astype(np.int32)
    return ObservationDataset(messages, stats, {"source": "synthetic benchmark data"}), labels


def step_time(model: SkillRewardModel, batches: list[tuple], dedup: bool) -> float:
    opt = torch.optim.Adam(model.parameters(), lr=1e-5)
    start = time.perf_counter()
    for msgs, depth, labels in batches:
        r = model(msgs, depth, dedup=dedup).reshape(-1, 2)
        loss = bradley_terry_loss(r[:, 0], r[:, 1], labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return (time.perf_counter() - start) / len(batches)


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script (the docs' commands are checked against it)."""
    p = argparse.ArgumentParser(description="Time reward model training on synthetic data with NetHack-like "
                                            "message repetition.")
    p.add_argument("--pairs", type=int, default=180_000, help="number of pairs (default: %(default)s)")
    p.add_argument("--epochs", type=int, default=1, help="epochs to time (default: %(default)s)")
    p.add_argument("--batch_size", type=int, default=1000, help="pairs per step (default: %(default)s)")
    p.add_argument("--num_workers", type=int, default=0, help="batch prefetch threads (default: %(default)s)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"), help="device (default: %(default)s)")
    p.add_argument("--dedup_batches", type=int, default=5,
                   help="batches for the dedup on/off step comparison (0 skips it; default: %(default)s)")
    return p


def main() -> None:
    p = build_parser()
    args = p.parse_args()

    t0 = time.perf_counter()
    dataset, labels = synthetic_dataset(args.pairs)
    inputs = reward_inputs(dataset)
    print(f"dataset: {args.pairs:,} pairs, {len(inputs.table):,} distinct current messages "
          f"({time.perf_counter() - t0:.1f}s to build)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        save_dataset(root / "og_dataset" / "descender.npz", dataset)
        save_preferences(root / "preference" / "bench_descender.npy", labels)
        cfg = RewardTrainingConfig(experiment="bench_descender", dataset_dir=str(root / "og_dataset"),
                                   preference_dir=str(root / "preference"), train_dir=str(root / "runs"),
                                   batch_size=args.batch_size, num_epochs=args.epochs, num_workers=args.num_workers,
                                   device=args.device, progress=False)
        t0 = time.perf_counter()
        result = train_reward(cfg)
        wall = time.perf_counter() - t0
    train_s = result["data_seconds"] + result["compute_seconds"]
    per_epoch = train_s / args.epochs
    save_s = result["save_seconds"] / args.epochs
    setup_s = wall - train_s - result["save_seconds"]
    rate = result["trained_pairs"] / train_s
    trained = RewardTrainingConfig().model
    print(f"model: {trained.arch} architecture ({sum(p.numel() for p in build_reward_model(trained).parameters()):,} "
          f"parameters); the dedup timing below uses the small model {RewardModelConfig()}")
    print(f"one epoch over {result['trained_pairs'] // args.epochs:,} training pairs: {per_epoch:.1f}s "
          f"({rate:,.0f} pairs/s; batch preparation {100 * result['data_seconds'] / train_s:.1f}%, "
          f"compute {100 * result['compute_seconds'] / train_s:.1f}%)")
    print(f"one save (validation, reward statistics, CSVs, checkpoint): {save_s:.1f}s; set-up: {setup_s:.1f}s")
    projected = setup_s + 20 * (per_epoch + save_s)
    print(f"projected 20 epochs: {projected / 60:.1f} min (target < 15 min) -> "
          f"{'OK' if projected < 15 * 60 else 'over target'}")

    if args.dedup_batches > 0:
        torch.manual_seed(0)
        model = SkillRewardModel()
        rng = np.random.default_rng(1)
        change = (dataset.stats[:, 1, 0] - dataset.stats[:, 0, 0]).astype(np.float32)
        batches = []
        for _ in range(args.dedup_batches):
            pairs = rng.choice(len(labels), size=args.batch_size, replace=False)
            pairs = pairs[labels[pairs] != 3]
            samples = np.stack([2 * pairs, 2 * pairs + 1], axis=1).reshape(-1)
            batches.append((torch.from_numpy(dataset.messages[samples, 1]), torch.from_numpy(change[samples]),
                            torch.from_numpy(labels[pairs].astype(np.int64))))
        uniq = np.mean([len(np.unique(b[0].numpy(), axis=0)) for b in batches])
        with_dedup = step_time(model, batches, dedup=True)
        without = step_time(model, batches, dedup=False)
        print(f"one step, {2 * args.batch_size} samples (~{uniq:.0f} distinct messages): dedup {with_dedup * 1e3:.0f} ms, "
              f"no dedup {without * 1e3:.0f} ms, speed-up x{without / with_dedup:.1f}")


if __name__ == "__main__":
    main()
