"""The policy network's observation, built from NLE's observation every step.

Keys (see :data:`MODEL_OBS_KEYS`):

- ``crop_chars`` uint8 [12, 12]: map characters around the hero (hero at row 6,
  column 6), space outside the map;
- ``crop_colors`` uint8 [12, 12]: their colours, 0 outside the map;
- ``blstats`` float32 [27]: NLE's bottom-line stats, raw (the network scales them);
- ``message`` uint8 [256]: the current message bytes, zero padded;
- ``skill_onehot`` float32 [num_skills]: the active skill;
- ``skill_id`` float32 [1]: the active skill's index.

The crop is rendered to RGB inside the network (on its device) from the
characters and colours, which keeps these observations small.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
from nle import nethack

#: Side of the square crop around the hero, in map cells.
CROP_SIZE: int = 12
#: Number of entries in NLE's blstats vector (27 in nle 1.0).
BLSTATS_SIZE: int = nethack.NLE_BLSTATS_SIZE
#: Message length in bytes (NLE's message buffer).
MESSAGE_SIZE: int = 256

MODEL_OBS_KEYS: tuple[str, ...] = ("crop_chars", "crop_colors", "blstats", "message", "skill_onehot", "skill_id")

_SPACE = ord(" ")


def model_observation_space(num_skills: int) -> gym.spaces.Dict:
    """The gymnasium space of :func:`model_observation`'s output."""
    if num_skills < 1:
        raise ValueError(f"num_skills must be >= 1, got {num_skills}")
    crop = (CROP_SIZE, CROP_SIZE)
    return gym.spaces.Dict(
        {
            "crop_chars": gym.spaces.Box(0, 255, crop, dtype=np.uint8),
            "crop_colors": gym.spaces.Box(0, 15, crop, dtype=np.uint8),
            "blstats": gym.spaces.Box(-np.inf, np.inf, (BLSTATS_SIZE,), dtype=np.float32),
            "message": gym.spaces.Box(0, 255, (MESSAGE_SIZE,), dtype=np.uint8),
            "skill_onehot": gym.spaces.Box(0.0, 1.0, (num_skills,), dtype=np.float32),
            "skill_id": gym.spaces.Box(0.0, float(num_skills - 1), (1,), dtype=np.float32),
        }
    )


def _empty_observation(num_skills: int) -> dict[str, np.ndarray]:
    return {
        "crop_chars": np.full((CROP_SIZE, CROP_SIZE), _SPACE, dtype=np.uint8),
        "crop_colors": np.zeros((CROP_SIZE, CROP_SIZE), dtype=np.uint8),
        "blstats": np.zeros(BLSTATS_SIZE, dtype=np.float32),
        "message": np.zeros(MESSAGE_SIZE, dtype=np.uint8),
        "skill_onehot": np.zeros(num_skills, dtype=np.float32),
        "skill_id": np.zeros(1, dtype=np.float32),
    }


def crop_around(
    grid: np.ndarray, x: int, y: int, fill: int, out: np.ndarray | None = None, size: int = CROP_SIZE
) -> np.ndarray:
    """A ``size x size`` window of ``grid`` with cell (row y, column x) at (size//2, size//2).

    Cells outside the grid are ``fill``. Writes into ``out`` when given.
    """
    if out is None:
        out = np.empty((size, size), dtype=grid.dtype)
    half = size // 2
    rows, cols = grid.shape
    top, left = y - half, x - half
    r0, r1 = max(top, 0), min(top + size, rows)
    c0, c1 = max(left, 0), min(left + size, cols)
    if r0 >= r1 or c0 >= c1:
        out.fill(fill)
        return out
    if r0 != top or c0 != left or r1 != top + size or c1 != left + size:
        out.fill(fill)
    out[r0 - top : r1 - top, c0 - left : c1 - left] = grid[r0:r1, c0:c1]
    return out


def model_observation(
    nle_obs: dict, skill_id: int, num_skills: int, out: dict | None = None
) -> dict[str, np.ndarray]:
    """Builds the policy's observation from NLE's observation dict.

    ``nle_obs`` needs ``chars``, ``colors``, ``blstats`` and ``message``.
    Pass the previous result as ``out`` to reuse its arrays (no allocation);
    the result never aliases NLE's buffers.
    """
    if not 0 <= skill_id < num_skills:
        raise ValueError(f"skill_id {skill_id} out of range for {num_skills} skills")
    if out is None:
        out = _empty_observation(num_skills)
    blstats = nle_obs["blstats"]
    x, y = int(blstats[nethack.NLE_BL_X]), int(blstats[nethack.NLE_BL_Y])
    crop_around(nle_obs["chars"], x, y, _SPACE, out["crop_chars"])
    crop_around(nle_obs["colors"], x, y, 0, out["crop_colors"])
    out["blstats"][:] = blstats[:BLSTATS_SIZE]
    out["message"][:] = nle_obs["message"][:MESSAGE_SIZE]
    onehot = out["skill_onehot"]
    onehot.fill(0.0)
    onehot[skill_id] = 1.0
    out["skill_id"][0] = skill_id
    return out
