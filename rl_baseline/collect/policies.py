"""Behaviour policies of phase 0: the interface and uniformly random play."""
from __future__ import annotations

from typing import Optional

import numpy as np

from common.nethack.glyphs import game_tables


class Policy:
    """A behaviour policy: ``reset()`` at the start of an episode, ``act(obs)`` -> action index."""

    name = "policy"

    def reset(self) -> None:
        pass

    def act(self, obs: dict) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass


class RandomPolicy(Policy):
    """Uniform over the agent's action set."""

    name = "random"

    def __init__(self, rng: np.random.Generator, num_actions: Optional[int] = None) -> None:
        self.rng = rng
        self.num_actions = int(num_actions) if num_actions else len(game_tables().actions)

    def act(self, obs: dict) -> int:
        return int(self.rng.integers(self.num_actions))
