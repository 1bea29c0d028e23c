"""The policy network's observation, built from NLE's observation every step.

Keys (see :data:`MODEL_OBS_KEYS`):

- ``crop_chars`` uint8 [12, 12]: map characters around the hero (hero at row 6,
  column 6), space outside the map;
- ``crop_colors`` uint8 [12, 12]: their colours, 0 outside the map;
- ``blstats`` float32 [27]: NLE's bottom-line stats, raw (the network scales them);
- ``message`` uint8 [256]: the current message bytes, zero padded;
- ``skill_onehot`` float32 [num_skills]: the active skill;
- ``skill_id`` float32 [1]: the active skill's index;
- ``monk_features`` float32 [3]: the release's three Monk features (see
  :func:`monk_features`): starting spellbook kind (0 healing, 1 protection,
  2 sleep, -1 none/unknown), number of potion inventory slots, number of
  comestible (food) inventory slots;
- ``stairs_here`` float32 [2], only with ``--stairs_input`` (a lever of this project's CPU screens, not the
  release's input): 1 where the hero stands on a staircase down / up of the level seen before (the skill
  runtime's memory of the map: on the stairs the hero's ``@`` hides them).

The crop is rendered to RGB inside the network (on its device) from the
characters and colours, which keeps these observations small.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
from nle import nethack

from common.nethack.messages import MESSAGE_LEN

#: Side of the square crop around the hero, in map cells.
CROP_SIZE: int = 12
#: Number of entries in NLE's blstats vector (27 in nle 1.0).
BLSTATS_SIZE: int = nethack.NLE_BLSTATS_SIZE
#: Message length in bytes (NLE's message buffer).
MESSAGE_SIZE: int = MESSAGE_LEN

MODEL_OBS_KEYS: tuple[str, ...] = (
    "crop_chars", "crop_colors", "blstats", "message", "skill_onehot", "skill_id", "monk_features",
)

#: Entries of ``monk_features``.
MONK_FEATURES_SIZE: int = 3
#: The optional key of ``--stairs_input`` and its size: (on a staircase down, on a staircase up).
STAIRS_KEY: str = "stairs_here"
STAIRS_SIZE: int = 2
#: Starting spellbook kinds, in the release's numbering (index = feature value).
SPELL_KINDS: tuple[str, ...] = ("healing", "protection", "sleep")
#: ``spell kind`` when the inventory holds no spellbook of the three kinds (or was not observed).
NO_SPELL: int = -1
#: Slots of NLE's inventory arrays (``inv_oclasses`` has this many entries).
_INV_SLOTS: int = 55

_SPACE = ord(" ")
_SPELLBOOK_NEEDLES = tuple(kind.encode() for kind in SPELL_KINDS)


def spell_kind(nle_obs: dict) -> int:
    """The kind of the spellbook in the inventory: 0 healing, 1 protection, 2 sleep, -1 none.

    Read from ``inv_oclasses`` (spellbook class, ``nethack.SPBOOK_CLASS`` = 10) and the item's
    name in ``inv_strs``, as the release did at episode start (a Monk starts with one of the
    three). -1 when the observation has no ``inv_strs``/``inv_oclasses`` or no such spellbook.
    With several spellbooks the first of healing, protection, sleep found wins (release order).
    """
    if "inv_oclasses" not in nle_obs or "inv_strs" not in nle_obs:
        return NO_SPELL
    slots = np.flatnonzero(np.asarray(nle_obs["inv_oclasses"]) == nethack.SPBOOK_CLASS)
    if slots.size == 0:
        return NO_SPELL
    names = np.asarray(nle_obs["inv_strs"])[slots].tobytes()
    for kind, needle in enumerate(_SPELLBOOK_NEEDLES):
        if needle in names:
            return kind
    return NO_SPELL


_spell_kind = spell_kind  # monk_features's argument of the same name shadows it


def monk_features(nle_obs: dict, spell_kind: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """The release's three Monk features, float32 [3]: spell kind, potion slots, comestible slots.

    * ``spell_kind``: pass the value :func:`spell_kind` gave at episode start (the release fixed
      it at reset); None reads it from this observation's inventory (-1 when it has none);
    * potions: inventory slots of class ``POTION_CLASS`` (8), comestibles: slots of class
      ``FOOD_CLASS`` (7), counted on every observation as the release did. Slots, not items
      ("3 potions of healing" is one slot). 0 when ``inv_oclasses`` is absent.
    """
    if out is None:
        out = np.empty(MONK_FEATURES_SIZE, dtype=np.float32)
    out[0] = _spell_kind(nle_obs) if spell_kind is None else int(spell_kind)
    if "inv_oclasses" not in nle_obs:
        out[1] = out[2] = 0.0
    else:
        classes = np.asarray(nle_obs["inv_oclasses"])
        out[1] = np.count_nonzero(classes == nethack.POTION_CLASS)
        out[2] = np.count_nonzero(classes == nethack.FOOD_CLASS)
    return out


def model_observation_space(num_skills: int, stairs_input: bool = False) -> gym.spaces.Dict:
    """The gymnasium space of :func:`model_observation`'s output (with ``stairs_input``, also
    :data:`STAIRS_KEY`, which the skill runtime fills in)."""
    if num_skills < 1:
        raise ValueError(f"num_skills must be >= 1, got {num_skills}")
    crop = (CROP_SIZE, CROP_SIZE)
    extra = {STAIRS_KEY: gym.spaces.Box(0.0, 1.0, (STAIRS_SIZE,), dtype=np.float32)} if stairs_input else {}
    return gym.spaces.Dict(
        {
            "crop_chars": gym.spaces.Box(0, 255, crop, dtype=np.uint8),
            "crop_colors": gym.spaces.Box(0, 15, crop, dtype=np.uint8),
            "blstats": gym.spaces.Box(-np.inf, np.inf, (BLSTATS_SIZE,), dtype=np.float32),
            "message": gym.spaces.Box(0, 255, (MESSAGE_SIZE,), dtype=np.uint8),
            "skill_onehot": gym.spaces.Box(0.0, 1.0, (num_skills,), dtype=np.float32),
            "skill_id": gym.spaces.Box(0.0, float(num_skills - 1), (1,), dtype=np.float32),
            "monk_features": gym.spaces.Box(
                np.array([NO_SPELL, 0, 0], dtype=np.float32),
                np.array([len(SPELL_KINDS) - 1, _INV_SLOTS, _INV_SLOTS], dtype=np.float32),
                (MONK_FEATURES_SIZE,),
                dtype=np.float32,
            ),
            **extra,
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
        "monk_features": np.array([NO_SPELL, 0, 0], dtype=np.float32),
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
    if top >= 0 and left >= 0 and top + size <= rows and left + size <= cols:  # the usual case
        out[:] = grid[top : top + size, left : left + size]
        return out
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
    nle_obs: dict,
    skill_id: int,
    num_skills: int,
    out: dict | None = None,
    monk_features: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Builds the policy's observation from NLE's observation dict.

    ``nle_obs`` needs ``chars``, ``colors``, ``blstats`` and ``message``.
    Pass the previous result as ``out`` to reuse its arrays (no allocation);
    the result never aliases NLE's buffers.

    ``monk_features``: the 3 values of :func:`monk_features` (computed by the caller with the
    spell kind of the episode start, as the release did). When not given they are computed
    from ``nle_obs``: spell kind from ``inv_strs`` (-1 without it), potion and comestible
    slots from ``inv_oclasses`` (0 without it).
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
    if monk_features is None:
        _monk_features(nle_obs, None, out["monk_features"])
    else:
        values = np.asarray(monk_features, dtype=np.float32).reshape(-1)
        if values.shape != (MONK_FEATURES_SIZE,):
            raise ValueError(f"monk_features must hold {MONK_FEATURES_SIZE} values, got shape {values.shape}")
        out["monk_features"][:] = values
    return out


_monk_features = monk_features  # model_observation's argument of the same name shadows it
