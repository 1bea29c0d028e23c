"""Seeding a NetHack game through ``reset(seed=...)``.

NLE 1.x's ``reset(seed=s)`` seeds gymnasium's generator only; the game itself draws from NetHack's
two generators (core and disp), set by ``NLE.seed(core, disp, reseed)`` for the next reset and
then left to run on: without a seed per reset, the second and later games of an environment differ
from run to run. Our environments seed the game in ``reset(seed=s)``, so the same ``s`` gives the
same game (same map, same starting inventory), and the evaluation loops pass one seed per episode.
NetHack's own re-seeding (an anti-automation measure) is turned off for a seeded game.
"""
from __future__ import annotations

from typing import Any

import numpy as np

_MASK = (1 << 63) - 1


def game_seeds(seed: int) -> tuple[int, int]:
    """NetHack's (core, disp) seeds for ``seed`` (distinct, non-negative, 63 bits)."""
    core = int(seed) & _MASK
    disp = (int(seed) * 0x9E3779B97F4A7C15 + 0x5EED) & _MASK
    return core, disp


def evaluation_game_seed(seed: int, episode: int) -> int:
    """The game of an evaluation's episode ``episode`` (0, 1, ...) under ``--seed seed``: every policy
    evaluated with the same seed meets the same games."""
    return int(seed) * 100_003 + int(episode)


#: training games are drawn from seeds far above the evaluation's (:func:`evaluation_game_seed`)
_TRAINING_SEEDS = 1 << 40


def training_game_seed(run_seed: int, env_index: int) -> int:
    """The game seed of a training environment's first reset. sample-factory seeds that reset with
    the environment's index alone, the same in every run; mixed with the run's seed, each run plays
    its own games (later games run on from there)."""
    return _TRAINING_SEEDS + int(run_seed) * 1_000_003 + int(env_index)


def seed_game(nle_env: Any, seed: int) -> None:
    """The next ``reset`` of ``nle_env`` (an ``nle.env.NLE``) starts the game of ``seed``."""
    core, disp = game_seeds(seed)
    nle_env.seed(core, disp, reseed=False)


def seed_run(seed: int) -> None:
    """The generators an evaluation draws from besides the games: action sampling (torch) and the
    generated policies over skills (Python's ``random``, numpy's global generator)."""
    import random

    import torch  # lazy: torch only to seed a run; the environments import this module

    random.seed(int(seed))
    np.random.seed(int(seed) & 0xFFFFFFFF)
    torch.manual_seed(int(seed))
