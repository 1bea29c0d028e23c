"""The pairs: :func:`form_pairs` draws distinct steps in a seeded random order, laid out as the
offline datasets are (samples ``2k`` and ``2k+1`` are pair ``k``), uniformly or with the offline
collector's keep probabilities (:func:`sample_weights`)."""
from __future__ import annotations

import logging
from typing import Optional

import numpy as np

from common.vocabulary import SKILLS
from rl_baseline.collect.config import CollectConfig

from .config import AgreementError
from .rollouts import Rollouts

# the package's logger: log lines keep the name they had before the package was split
logger = logging.getLogger(__package__)


def sample_weights(rollouts: Rollouts, pair_sampling: str) -> Optional[np.ndarray]:
    """None (uniform over steps) or the offline collector's keep probability of each step."""
    if pair_sampling == "uniform":
        return None
    from rl_baseline.collect.rollouts import keep_probability  # lazy: pulls in NLE

    defaults = CollectConfig(skill=SKILLS[0], num_pairs=1)
    w = np.array([keep_probability(m[0], m[1], s[0], s[1], defaults.sample_prob, defaults.uninformative_keep_prob,
                                   defaults.level_change_prob) for m, s in zip(rollouts.messages, rollouts.stats)],
                 dtype=np.float64)
    return w / w.sum()


def form_pairs(num_observations: int, num_pairs: int, seed: int,
               weights: Optional[np.ndarray] = None) -> np.ndarray:
    """Indices of ``2P`` distinct observations in random order (seeded); samples ``2k`` and
    ``2k+1`` form pair ``k``, as in the offline datasets. ``P`` is ``num_pairs``, or as many as
    the observations (those of non-zero weight) allow (a warning says so)."""
    available = num_observations if weights is None else int(np.count_nonzero(np.asarray(weights) > 0))
    if available < 2:
        raise AgreementError(f"{available} observation(s) collected: at least 2 are needed to form a pair")
    pairs = min(int(num_pairs), available // 2)
    if pairs < num_pairs:
        logger.warning("only %d observations: %d pairs instead of --num_pairs %d", available, pairs, num_pairs)
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, 0x5041_4952])
    return rng.choice(num_observations, size=2 * pairs, replace=False, p=weights).astype(np.int64)
