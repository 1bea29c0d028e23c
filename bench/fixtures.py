"""Stand-ins for trained artifacts, shared by the benchmarks and the tests.

:func:`build_tiny_reward_dirs` trains one small reward model per skill (the ``small`` architecture,
two epochs) on a synthetic dataset of common NetHack messages, each skill liking a different share of them
(one in as many as there are skills), so the skill environment runs with real reward-model inference, its
thresholds and caches, without a collection or annotation phase.
"""
from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

import numpy as np

from common.nethack.messages import encode_message
from common.vocabulary import SKILL_SPECS, SKILLS
from rlaif.dataset import ObservationDataset, save_dataset
from rlaif.preferences import save_preferences

TINY_MESSAGES = [
    "", "You kill the newt!", "You see here a scroll labeled ELBIB YLOH.", "There is a staircase down here.",
    "You climb up the stairs.", "Welcome to Asidonhopo's general store!", "There is an altar to Huan Ti here.",
    "You sold a dagger for 2 gold pieces.", "The jackal bites!", "You find a hidden passage.",
    "Asidonhopo offers 5 gold pieces for your dagger.  Sell it?", "There is a black flash as it hits the altar.",
    "You hit the grid bug.", "It's solid stone.", "You are beginning to feel hungry.", "12 gold pieces.",
]


def build_tiny_reward_dirs(root: Path, pairs: int = 96, seed: int = 0) -> list[str]:
    """One reward model per skill, trained for two epochs on a synthetic message dataset."""
    from rlaif.reward_model import RewardModelConfig  # lazy: pulls in torch
    from rlaif.train_reward import RewardTrainingConfig, train_reward  # lazy: pulls in torch

    rng = np.random.default_rng(seed)
    n = 2 * pairs
    messages = np.zeros((n, 2, 256), dtype=np.uint8)
    stats = np.ones((n, 2, 6), dtype=np.int32)
    for i in range(n):
        messages[i, 0] = encode_message(TINY_MESSAGES[rng.integers(len(TINY_MESSAGES))])
        messages[i, 1] = encode_message(TINY_MESSAGES[rng.integers(len(TINY_MESSAGES))])
        stats[i, 1, 0] = 1 + rng.integers(0, 2)
    dataset = ObservationDataset(messages, stats, {"source": "synthetic test data"})
    data_dir, pref_dir, train_dir = root / "og_dataset", root / "preference", root / "skill_rewards"
    dirs = []
    for k, skill in enumerate(SKILLS):
        save_dataset(data_dir / f"{skill}.npz", dataset)
        # each skill prefers a different set of messages (by the message index modulo the number of skills)
        def liked(i: int) -> int:
            text = bytes(messages[i, 1]).rstrip(b"\0").decode()
            return int(TINY_MESSAGES.index(text) % len(SKILLS) == k)
        labels = np.array([2 if liked(2 * j) == liked(2 * j + 1) else (0 if liked(2 * j) else 1)
                           for j in range(pairs)], dtype=np.int32)
        experiment = SKILL_SPECS[skill].experiment
        save_preferences(pref_dir / f"{experiment}.npy", labels)
        train_reward(RewardTrainingConfig(
            dataset_dir=str(data_dir), preference_dir=str(pref_dir), experiment=experiment,
            train_dir=str(train_dir), num_epochs=2, batch_size=64, seed=777, num_workers=0, reward_lr=1e-3,
            device="cpu", progress=False,
            model=RewardModelConfig(embed_dim=8, conv_channels=(16,), kernel_sizes=(3,), pool_sizes=(1,),
                                    hidden_dim=16, mlp_layers=1),
        ))
        dirs.append(str(train_dir / experiment))
    return dirs


def machine_description() -> str:
    """The machine a benchmark ran on, as the benchmarks print it."""
    return f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a local server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
