"""Skill runtime: the call-and-return loop of the policy over skills, as an env wrapper.

At every reset the meta-policy module is (re)set; at every step the wrapper

* computes the initiation conditions (a shopkeeper or an altar in the 3x3 crop around
  the hero while holding items that were not part of the starting kit),
* asks the meta-policy whether the active skill terminates and, if so, which skill
  comes next,
* replaces the game reward by the shaped reward of :mod:`rl_baseline.intrinsic_reward`
  for the skill that was active during the step,
* returns the model observation (NLE observation + skill one-hot and id),
* counts per-skill statistics and hands them to sample-factory in
  ``info["episode_extra_stats"]`` when the episode ends (they reach tensorboard under
  ``skills/...`` and ``intrinsic/...``).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import gymnasium as gym
import numpy as np

from rl_baseline.intrinsic_reward import IntrinsicReward
from rlaif.reward_model import clip_depth_change
from rlaif.skills import NUM_SKILLS, SKILLS

logger = logging.getLogger(__name__)

# blstats positions of the hero's coordinates and the depth (NLE's NLE_BL_X/Y/DEPTH).
BL_X, BL_Y, BL_DEPTH = 0, 1, 12
NO_ITEM_CLASS = 18  # NLE's inv_oclasses value for an empty inventory slot
SPACE = ord(" ")

# Message fragments that count as skill-specific events.
SALE_MARKERS = (b"You sold ",)
PRICE_MARKERS = (b"offers ", b"Sell it?")
BUC_MARKERS = (b"black flash", b"amber flash")
SHOP_MARKERS = (b"Welcome to ",)

ObservationFn = Callable[[dict, int, int], dict]


def crop3x3(chars: np.ndarray, colors: np.ndarray, x: int, y: int) -> tuple[np.ndarray, np.ndarray]:
    """3x3 crop of the map around (x, y); cells outside the map are blank with colour 0."""
    out_c = np.full((3, 3), SPACE, dtype=np.uint8)
    out_k = np.zeros((3, 3), dtype=np.uint8)
    h, w = chars.shape
    y0, y1 = max(y - 1, 0), min(y + 2, h)
    x0, x1 = max(x - 1, 0), min(x + 2, w)
    out_c[y0 - (y - 1) : y1 - (y - 1), x0 - (x - 1) : x1 - (x - 1)] = chars[y0:y1, x0:x1]
    out_k[y0 - (y - 1) : y1 - (y - 1), x0 - (x - 1) : x1 - (x - 1)] = colors[y0:y1, x0:x1]
    return out_c, out_k


def _message_bytes(message: np.ndarray) -> bytes:
    raw = np.asarray(message, dtype=np.uint8).tobytes()
    end = raw.find(b"\0")
    return raw if end < 0 else raw[:end]


def _default_observation_fn(num_skills: int) -> ObservationFn:
    from rl_baseline.models.obs import model_observation

    buffers: dict[str, dict] = {}

    def fn(nle_obs: dict, skill_id: int, n: int) -> dict:
        # one reused output per environment: sample-factory copies observations into its buffers
        out = model_observation(nle_obs, skill_id, n, out=buffers.get("out"))
        buffers["out"] = out
        return out

    return fn


def _default_observation_space(num_skills: int) -> gym.spaces.Dict:
    from rl_baseline.models.obs import model_observation_space

    return model_observation_space(num_skills)


class SingleSkillPolicy:
    """Trivial policy over skills: one skill for the whole episode (Motif runs, pure RL)."""

    def __init__(self, skill: str = SKILLS[0]) -> None:
        self.skill = skill

    def reset(self) -> None:
        pass

    def preconditions(self, chars3x3: np.ndarray, colors3x3: np.ndarray, num_items: int) -> tuple[bool, bool]:
        return False, False

    def should_terminate(self, *args: Any) -> bool:
        return False

    def next_skill(self, current_skill: str, *args: Any) -> str:
        return self.skill

    def update_state(self, info: dict) -> None:
        pass


@dataclass
class EpisodeSkillStats:
    num_skills: int
    time: np.ndarray = field(init=False)
    intrinsic: np.ndarray = field(init=False)
    nonzero: np.ndarray = field(init=False)
    activations: np.ndarray = field(init=False)
    success: np.ndarray = field(init=False)
    switches: int = 0
    sales: int = 0
    price_ids: int = 0
    buc_ids: int = 0
    altar_seen: int = 0
    shop_seen: int = 0
    max_depth: int = 1

    def __post_init__(self) -> None:
        n = self.num_skills
        self.time = np.zeros(n, dtype=np.int64)
        self.intrinsic = np.zeros(n, dtype=np.float64)
        self.nonzero = np.zeros(n, dtype=np.int64)
        self.activations = np.zeros(n, dtype=np.int64)
        self.success = np.zeros(n, dtype=np.int64)

    def summary(self, names: tuple[str, ...], cache_hit_rate: float) -> dict[str, float]:
        total = max(int(self.time.sum()), 1)
        out: dict[str, float] = {
            "skills/switches": float(self.switches),
            "skills/max_depth": float(self.max_depth),
            "skills/sales": float(self.sales),
            "skills/price_ids": float(self.price_ids),
            "skills/buc_ids": float(self.buc_ids),
            "skills/altar_seen": float(self.altar_seen),
            "skills/shop_seen": float(self.shop_seen),
            "intrinsic/cache_hit_rate": float(cache_hit_rate),
            "intrinsic/episode_sum": float(self.intrinsic.sum()),
        }
        for i, name in enumerate(names):
            out[f"skills/{name}_share"] = float(self.time[i]) / total
            out[f"skills/{name}_activations"] = float(self.activations[i])
            out[f"skills/{name}_success"] = float(self.success[i])
            if self.time[i] > 0:
                out[f"intrinsic/{name}_mean"] = float(self.intrinsic[i] / self.time[i])
                out[f"intrinsic/{name}_nonzero_frac"] = float(self.nonzero[i] / self.time[i])
        return out


# What counts as success of a skill while it is active (reported as skills/{name}_success):
# discoverer: newly seen map cells; descender: levels gone down; ascender: levels gone up;
# worshipper: BUC identifications; merchant: sales.
SKILL_SUCCESS_DOC = {
    "discoverer": "new map cells seen",
    "descender": "levels descended",
    "ascender": "levels ascended",
    "worshipper": "items BUC-identified",
    "merchant": "items sold",
}


class SkillRuntime(gym.Wrapper):
    """Runs the policy over skills inside the environment and shapes the reward per skill.

    ``meta_policy_factory`` returns an object with the interface of
    ``rl_baseline.skills.meta_policy.MetaPolicy``; it is called once, lazily.
    """

    def __init__(
        self,
        env: gym.Env,
        meta_policy_factory: Callable[[], Any],
        reward: IntrinsicReward,
        num_skills: int = NUM_SKILLS,
        observation_fn: Optional[ObservationFn] = None,
        observation_space: Optional[gym.spaces.Space] = None,
    ) -> None:
        super().__init__(env)
        if not 1 <= num_skills <= NUM_SKILLS:
            raise ValueError(f"num_skills must be in [1, {NUM_SKILLS}], got {num_skills}")
        self.num_skills = num_skills
        self.skill_names = SKILLS[:num_skills]
        self._meta_factory = meta_policy_factory
        self.meta_policy: Any = None
        self.reward_fn = reward
        self.observation_fn = observation_fn if observation_fn is not None else _default_observation_fn(num_skills)
        self.observation_space = (
            observation_space if observation_space is not None else _default_observation_space(num_skills)
        )
        self.skill_id = 0
        self.skill_time = 0  # game turns since the active skill started
        self.skill_steps = 0  # env steps since the active skill started
        self.skill_start_turn = 0
        self.skill_start_depth = 1
        self.preconds = (False, False)
        self.start_letters: set[int] = set()
        self.stats = EpisodeSkillStats(num_skills)
        self.seen_cells = 0
        self.seen_depth = 1
        self.last_depth = 1
        self.last_obs: dict = {}

    # ------------------------------------------------------------------ helpers
    @property
    def skill(self) -> str:
        return self.skill_names[self.skill_id]

    def _skill_index(self, name: Any) -> int:
        if isinstance(name, str) and name in self.skill_names:
            return self.skill_names.index(name)
        logger.warning("meta-policy returned %r, not one of %s; keeping %s", name, self.skill_names, self.skill)
        return self.skill_id

    def _num_new_items(self, obs: dict) -> int:
        letters = obs["inv_letters"]
        classes = obs["inv_oclasses"]
        return int(sum(1 for l, c in zip(letters, classes) if c != NO_ITEM_CLASS and int(l) not in self.start_letters))

    def _preconditions(self, obs: dict) -> tuple[bool, bool]:
        bl = obs["blstats"]
        chars3, colors3 = crop3x3(obs["chars"], obs["colors"], int(bl[BL_X]), int(bl[BL_Y]))
        ok = self.meta_policy.preconditions(chars3, colors3, self._num_new_items(obs))
        return bool(ok[0]), bool(ok[1])

    @staticmethod
    def _depth(obs: dict, info: dict) -> int:
        if "depth" in info:
            return int(info["depth"])
        return int(obs["blstats"][BL_DEPTH])

    @staticmethod
    def _branch(info: dict) -> int:
        return int(info.get("dungeon_number", 0))

    def _start_skill(self, skill_id: int, depth: int, info: dict) -> None:
        if skill_id != self.skill_id:
            self.stats.switches += 1
        self.skill_id = skill_id
        self.skill_time = 0
        self.skill_steps = 0
        self.skill_start_turn = int(info.get("time", 0))
        self.skill_start_depth = depth
        self.stats.activations[skill_id] += 1

    def _observe(self, obs: dict) -> dict:
        self.last_obs = obs  # raw NLE observation (NLE reuses its buffers: copy to keep)
        return self.observation_fn(obs, self.skill_id, self.num_skills)

    def _annotate(self, info: dict) -> dict:
        info["skill"] = self.skill
        info["skill_id"] = self.skill_id
        info["skill_time"] = self.skill_time
        return info

    # ------------------------------------------------------------------ gym API
    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        if self.meta_policy is None:
            self.meta_policy = self._meta_factory()
        self.meta_policy.reset()
        self.reward_fn.reset()
        self.stats = EpisodeSkillStats(self.num_skills)
        self.start_letters = {
            int(l) for l, c in zip(obs["inv_letters"], obs["inv_oclasses"]) if c != NO_ITEM_CLASS
        }
        depth = self._depth(obs, info)
        self.stats.max_depth = depth
        self.seen_cells = int(np.count_nonzero(obs["chars"] != SPACE))
        self.seen_depth = depth
        self.last_depth = depth
        self.meta_policy.update_state(info)
        self.preconds = self._preconditions(obs)
        first = getattr(self.meta_policy, "initial_skill", None)
        if first is None:
            first = self.meta_policy.next_skill(
                self.skill_names[0], depth, self._branch(info), self.preconds[1], self.preconds[0]
            )
        self.skill_id = self._skill_index(first)
        self.skill_time = 0
        self.skill_steps = 0
        self.skill_start_turn = int(info.get("time", 0))
        self.skill_start_depth = depth
        self.stats.activations[self.skill_id] += 1
        return self._observe(obs), self._annotate(info)

    def _count_events(self, obs: dict, msg: bytes, depth: int, prev_depth: int, active: int) -> None:
        st = self.stats
        name = self.skill_names[active]
        if any(m in msg for m in SALE_MARKERS):
            st.sales += 1
            if name == "merchant":
                st.success[active] += 1
        if all(m in msg for m in PRICE_MARKERS):
            st.price_ids += 1
        if any(m in msg for m in BUC_MARKERS):
            st.buc_ids += 1
            if name == "worshipper":
                st.success[active] += 1
        if any(m in msg for m in SHOP_MARKERS):
            st.shop_seen = 1
        if not st.altar_seen and self.preconds[0]:
            st.altar_seen = 1
        if name == "descender" and depth > prev_depth:
            st.success[active] += depth - prev_depth
        elif name == "ascender" and depth < prev_depth:
            st.success[active] += prev_depth - depth
        st.max_depth = max(st.max_depth, depth)
        cells = int(np.count_nonzero(obs["chars"] != SPACE))
        if depth != self.seen_depth:
            self.seen_depth = depth
        elif name == "discoverer" and cells > self.seen_cells:
            st.success[active] += cells - self.seen_cells
        self.seen_cells = cells

    def step(self, action: Any):
        obs, game_reward, terminated, truncated, info = self.env.step(action)
        active = self.skill_id
        depth = self._depth(obs, info)
        prev_depth = self.last_depth
        self.last_depth = depth
        msg_arr = obs["message"]
        intrinsic = self.reward_fn.intrinsic(active, msg_arr, clip_depth_change(depth - self.skill_start_depth))
        reward = self.reward_fn.combine(game_reward, intrinsic)
        st = self.stats
        st.time[active] += 1
        st.intrinsic[active] += intrinsic
        if intrinsic != 0.0:
            st.nonzero[active] += 1
        self._count_events(obs, _message_bytes(msg_arr), depth, prev_depth, active)
        self.skill_steps += 1
        # the meta-policy contract counts skill time in game turns (steps when the env has no clock)
        self.skill_time = int(info["time"]) - self.skill_start_turn if "time" in info else self.skill_steps
        info["intrinsic_reward"] = intrinsic
        info["game_reward"] = float(game_reward)

        if not (terminated or truncated):
            self.meta_policy.update_state(info)
            self.preconds = self._preconditions(obs)
            if self.meta_policy.should_terminate(
                self.skill, self.skill_time, depth, self.skill_start_depth, self.preconds
            ):
                nxt = self.meta_policy.next_skill(
                    self.skill, depth, self._branch(info), self.preconds[1], self.preconds[0]
                )
                self._start_skill(self._skill_index(nxt), depth, info)
        else:
            extra = info.get("episode_extra_stats") or {}
            extra = dict(extra)
            extra.update(st.summary(self.skill_names, self.reward_fn.cache.hit_rate))
            info["episode_extra_stats"] = extra
        return self._observe(obs), reward, terminated, truncated, self._annotate(info)
