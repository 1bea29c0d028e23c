"""Skill runtime: the call-and-return loop of the policy over skills, as an env wrapper.

At every reset the meta-policy module is (re)set; at every step the wrapper

* computes the initiation conditions (a shopkeeper or an altar in the 7x7 window of
  :func:`initiation_window` while holding items that were not part of the starting kit,
  coins and comestibles excluded: :meth:`SkillRuntime._num_new_items`),
* asks the meta-policy whether the active skill terminates and, if so, which skill
  comes next,
* replaces the game reward by the shaped reward of :mod:`rl_baseline.skills.intrinsic_reward`
  (``reward_timing``: by default, as the release's learner, the observation the step's action
  was chosen on, scored by the model of the skill that observation carries; ``after_action``
  scores the observation the action led to with the skill that acted), or, as a diagnostic,
  each skill's own progress measure (``skill_reward="progress"``, :data:`PROGRESS_MEASURE`),
* says in ``info`` what the step was paid (``intrinsic_reward``) and, with the reward models, which
  skill's model scored which message (``scored_skill``, ``scored_message``),
* returns the model observation (NLE observation + skill one-hot and id),
* counts per-skill statistics and hands them to sample-factory in
  ``info["episode_extra_stats"]`` when the episode ends (they reach tensorboard under
  ``skills/...``, ``intrinsic/...`` and ``measures/{skill}/{measure}``; the measures are
  :mod:`rl_baseline.tasks.skill_measures`', the same ones the forced-skill evaluation reports).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import gymnasium as gym
import numpy as np

from common import part_times
from common.nethack import blstats as B
from common.nethack.messages import DESCENT_MESSAGE, WALL_MESSAGES, message_bytes
from common.vocabulary import NUM_SKILLS, SKILLS
from rl_baseline.envs.seeding import training_game_seed
from rl_baseline.models import obs as model_obs
from rl_baseline.models.obs import STAIRS_KEY, STAIRS_SIZE, model_observation_space
from rl_baseline.skills import REWARD_TIMINGS, SKILL_REWARDS
from rl_baseline.skills.intrinsic_reward import IntrinsicReward
from rl_baseline.tasks.skill_measures import MAIN_MEASURE, SkillMeasures
from rlaif.reward_model import clip_depth_change

logger = logging.getLogger(__name__)

SPACE = ord(" ")
NO_ITEM_CLASS = 18  # NLE's inv_oclasses value for an empty inventory slot

ObservationFn = Callable[[dict, int, int], dict]



#: Side of the initiation window and the hero's cell in it (row, column).
WINDOW_SIZE = 7
WINDOW_HERO = (4, 3)
# NetHack object classes (include/objclass.h) as NLE's inv_oclasses reports them.
FOOD_CLASS, COIN_CLASS = 7, 12


def initiation_window(chars: np.ndarray, colors: np.ndarray, x: int, y: int) -> tuple[np.ndarray, np.ndarray]:
    """The 7x7 window the skill preconditions look at, as the authors' release builds it.

    The release cuts rows ``y-3 .. y+3`` and columns ``x-3 .. x+3`` out of the *terminal*
    screen (``tty_chars``), whose row ``r+1`` is map row ``r`` (row 0 holds the message).
    In map rows that is ``y-4 .. y+2``: four rows above the hero, two below, and the hero at
    ``[4][3]``. We keep that window so the preconditions fire where the release's do. The
    hero's own cell keeps its character but gets colour 0, so a colour check never mistakes
    the hero (a white ``@``) for a shopkeeper. Cells outside the map are blank with colour 0
    (the release's slice would come back short near the top and left edges).
    """
    top, left = y - WINDOW_HERO[0], x - WINDOW_HERO[1]
    h, w = chars.shape
    if top >= 0 and left >= 0 and top + WINDOW_SIZE <= h and left + WINDOW_SIZE <= w:
        out_c = chars[top : top + WINDOW_SIZE, left : left + WINDOW_SIZE].copy()
        out_k = colors[top : top + WINDOW_SIZE, left : left + WINDOW_SIZE].copy()
        out_k[WINDOW_HERO] = 0
        return out_c, out_k
    out_c = np.full((WINDOW_SIZE, WINDOW_SIZE), SPACE, dtype=np.uint8)
    out_k = np.zeros((WINDOW_SIZE, WINDOW_SIZE), dtype=np.uint8)
    r0, r1 = max(top, 0), min(top + WINDOW_SIZE, h)
    c0, c1 = max(left, 0), min(left + WINDOW_SIZE, w)
    if r0 < r1 and c0 < c1:
        out_c[r0 - top : r1 - top, c0 - left : c1 - left] = chars[r0:r1, c0:c1]
        out_k[r0 - top : r1 - top, c0 - left : c1 - left] = colors[r0:r1, c0:c1]
    out_k[WINDOW_HERO] = 0
    return out_c, out_k


def countable_items(letters: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Letters of held items that can count as new: not coins, not comestibles (as the release).

    Gold is picked up automatically and food is eaten, so neither is something to sell or drop.
    """
    keep = (classes != NO_ITEM_CLASS) & (classes != FOOD_CLASS) & (classes != COIN_CLASS)
    return letters[keep]


#: step_parts(pause_after_game=True)'s first yield: the game has made its move
GAME_STEPPED = None


class _ModelObservation:
    """The policy network's observation (:mod:`rl_baseline.models.obs`), one reused output per env.

    sample-factory copies each observation into its buffers, so one output is updated in place:
    the crops, stats and message every step, the skill one-hot when the skill changed and the
    Monk features when the inventory did (the same values as building it anew, tested).
    The release's Monk features use the spellbook kind seen at episode start: the runtime
    calls :meth:`new_episode` at every reset.
    """

    def __init__(self) -> None:
        self._obs = model_obs
        self.out: Optional[dict] = None
        self.spell_kind = model_obs.NO_SPELL
        self._classes = b""  # the inventory classes the features were counted from
        self._skill_id = -1  # the skill the one-hot holds
        self._prepared: Optional[dict] = None  # the observation prepare() wrote the view of

    def new_episode(self, nle_obs: dict) -> None:
        self.spell_kind = self._obs.spell_kind(nle_obs)
        self._classes = b""
        self._prepared = None

    def prepare(self, nle_obs: dict, skill_id: int, n: int) -> None:
        """Writes what does not depend on the skill (the crops, stats, message and Monk features) ahead of the
        call for this same observation: :class:`SkillGames` does it before the policy over skills decides, while
        the game's arrays are still in the CPU caches; the call then writes the skill alone."""
        self._write_view(nle_obs, skill_id, n)
        self._prepared = nle_obs

    def _write_view(self, nle_obs: dict, skill_id: int, n: int) -> None:
        out = self.out
        if out is None:
            self.out = out = self._obs.model_observation(nle_obs, skill_id, n)
            self._skill_id = skill_id
            self._classes = b""
        bl = nle_obs["blstats"]
        x, y = bl[:2].tolist()
        crop_around = self._obs.crop_around
        crop_around(nle_obs["chars"], x, y, SPACE, out["crop_chars"])
        crop_around(nle_obs["colors"], x, y, 0, out["crop_colors"])
        out["blstats"][:] = bl[: self._obs.BLSTATS_SIZE]
        out["message"][:] = nle_obs["message"][: self._obs.MESSAGE_SIZE]
        classes = nle_obs["inv_oclasses"].tobytes()
        if classes != self._classes:  # the counts change only with the inventory
            self._classes = classes
            self._obs.monk_features(nle_obs, self.spell_kind, out["monk_features"])

    def __call__(self, nle_obs: dict, skill_id: int, n: int) -> dict:
        if self._prepared is not nle_obs:
            self._write_view(nle_obs, skill_id, n)
        self._prepared = None
        out = self.out
        if skill_id != self._skill_id:
            if not 0 <= skill_id < n:
                raise ValueError(f"skill_id {skill_id} out of range for {n} skills")
            onehot = out["skill_onehot"]
            onehot.fill(0.0)
            onehot[skill_id] = 1.0
            out["skill_id"][0] = skill_id
            self._skill_id = skill_id
        return out


class SingleSkillPolicy:
    """Trivial policy over skills: one skill for the whole episode (Motif runs, pure RL)."""

    def __init__(self, skill: str = SKILLS[0]) -> None:
        self.skill = skill

    def reset(self) -> None:
        pass

    def preconditions(self, chars: np.ndarray, colors: np.ndarray, num_items: int) -> tuple[bool, bool]:
        return False, False

    def should_terminate(self, *args: Any) -> bool:
        return False

    def next_skill(self, current_skill: str, *args: Any) -> str:
        return self.skill

    def update_state(self, info: dict) -> None:
        pass


@dataclass
class EpisodeSkillStats:
    """Per-episode bookkeeping of the skills: time, intrinsic reward, activations; what each
    skill achieved is in ``measures`` (:class:`rl_baseline.tasks.skill_measures.SkillMeasures`)."""

    num_skills: int
    # one entry per skill; Python lists: a list item's += costs a quarter of a numpy element's, every step
    time: list[int] = field(init=False)
    intrinsic: list[float] = field(init=False)
    nonzero: list[int] = field(init=False)
    activations: list[int] = field(init=False)
    with_item: list[int] = field(init=False)
    measures: SkillMeasures = field(init=False)
    restarts: int = 0
    switches: int = 0
    max_depth: int = 1
    meta_policy_errors: int = 0
    # what the reward sees: steps whose observed message is empty or a wall message, and the skill reward
    # paid for the observations that arrived one level deeper by a walk down the stairs (the descents)
    empty_messages: int = 0
    wall_messages: int = 0
    descents: int = 0
    descent_reward: float = 0.0
    last_depth: int = 1

    def __post_init__(self) -> None:
        n = self.num_skills
        self.time = [0] * n
        self.intrinsic = [0.0] * n
        self.nonzero = [0] * n
        self.activations = [0] * n
        self.with_item = [0] * n
        self.measures = SkillMeasures(SKILLS[:n])

    def summary(self, names: tuple[str, ...], cache_hit_rate: float) -> dict[str, float]:
        total = max(sum(self.time), 1)
        out: dict[str, float] = {
            "skills/switches": float(self.switches),
            "skills/restarts": float(self.restarts),
            "skills/max_depth": float(self.max_depth),
            "skills/meta_policy_errors": float(self.meta_policy_errors),
            "intrinsic/cache_hit_rate": float(cache_hit_rate),
            "intrinsic/episode_sum": float(np.sum(self.intrinsic)),  # numpy's pairwise sum, as before
            "messages/empty_share": self.empty_messages / total,
            "messages/wall_share": self.wall_messages / total,
            "skills/descents": float(self.descents),
        }
        if self.descents:
            out["intrinsic/reward_per_descent"] = self.descent_reward / self.descents
        values = self.measures.values
        for i, name in enumerate(names):
            out[f"skills/{name}_share"] = float(self.time[i]) / total
            out[f"skills/{name}_activations"] = float(self.activations[i])
            out[f"skills/{name}_started_with_item"] = float(self.with_item[i])
            out[f"intrinsic/{name}_return"] = float(self.intrinsic[i])
            if self.time[i] > 0:
                # the skill's main measure (skill_measures.MAIN_MEASURE), over the steps it was active: the
                # same value as measures/{skill}/{main measure}, under the name the curves plot
                out[f"skills/{name}_success"] = float(values[name][MAIN_MEASURE[name]])
                out[f"intrinsic/{name}_mean"] = float(self.intrinsic[i] / self.time[i])
                out[f"intrinsic/{name}_nonzero_frac"] = float(self.nonzero[i] / self.time[i])
        out.update(self.measures.summary())
        return out


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
        training_seed: Optional[int] = None,
        reward_timing: str = "release",
        skill_reward: str = "llm",
        progress_scales: Sequence[float] = (),
        progress_stairs_reward: float = 0.0,
        stairs_input: bool = False,
    ) -> None:
        super().__init__(env)
        if reward_timing not in REWARD_TIMINGS:
            raise ValueError(f"reward_timing must be one of {REWARD_TIMINGS}, got {reward_timing!r}")
        if skill_reward not in SKILL_REWARDS:
            raise ValueError(f"skill_reward must be one of {SKILL_REWARDS}, got {skill_reward!r}")
        self.reward_timing = reward_timing
        self.skill_reward = skill_reward
        # skill_reward="progress": each skill's factor on its measure (--progress_scale); 1 where not given
        self.progress_scales = tuple(float(v) for v in progress_scales)
        self.progress_stairs_reward = float(progress_stairs_reward)
        # release timing: (skill id, message bytes, depth change, arrived by the stairs) of the observation
        # the next action is chosen on, scored when that action's step comes back
        self._scored_next: tuple[int, bytes, int, bool] = (0, b"", 0, False)
        # sample-factory's training run (its --seed): reset(seed=env index) plays that run's own game
        # (rl_baseline.envs.seeding.training_game_seed); None outside training, where seeds are the games'
        self.training_seed = training_seed
        if not 1 <= num_skills <= NUM_SKILLS:
            raise ValueError(f"num_skills must be in [1, {NUM_SKILLS}], got {num_skills}")
        self.num_skills = num_skills
        self.skill_names = SKILLS[:num_skills]
        self._meta_factory = meta_policy_factory
        self.meta_policy: Any = None
        self.reward_fn = reward
        self.observation_fn = observation_fn if observation_fn is not None else _ModelObservation()
        self._prepare = self.observation_fn.prepare if isinstance(self.observation_fn, _ModelObservation) else None
        # --stairs_input: the observation says whether the hero stands on a staircase down / up seen before
        self.stairs_input = bool(stairs_input)
        self.observation_space = (
            observation_space if observation_space is not None
            else model_observation_space(num_skills, stairs_input=self.stairs_input)
        )
        self.skill_id = 0
        self.skill_time = 0  # game turns since the active skill started
        self.skill_steps = 0  # env steps since the active skill started
        self.skill_start_turn = 0
        self.skill_start_depth = 1
        self.preconds = (False, False)
        self.start_letters = np.zeros(256, dtype=bool)  # letters of the non-food starting items
        self._inv_key = b""  # the inventory last counted by _num_new_items, and its count
        self._inv_new = 0
        self.stats = EpisodeSkillStats(num_skills)
        self._errors_at_reset = 0
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
        """Held items, coins and comestibles excluded, whose letter no non-food starting item had."""
        letters, classes = obs["inv_letters"], obs["inv_oclasses"]
        key = letters.tobytes() + classes.tobytes()
        if key != self._inv_key:  # the inventory rarely changes: count again only when it did
            self._inv_key = key
            self._inv_new = int(np.count_nonzero(~self.start_letters[countable_items(letters, classes)]))
        return self._inv_new

    def _preconditions(self, obs: dict, new_items: int) -> tuple[bool, bool]:
        bl = obs["blstats"]
        chars, colors = initiation_window(obs["chars"], obs["colors"], int(bl[B.BL_X]), int(bl[B.BL_Y]))
        ok = self.meta_policy.preconditions(chars, colors, new_items)
        return bool(ok[0]), bool(ok[1])

    @staticmethod
    def _depth(obs: dict, info: dict) -> int:
        if "depth" in info:
            return int(info["depth"])
        return int(obs["blstats"][B.BL_DEPTH])

    @staticmethod
    def _branch(info: dict) -> int:
        return int(info.get("dungeon_number", 0))

    def _start_skill(self, skill_id: int, depth: int, info: dict, new_items: int) -> None:
        # A skill chosen again right after it ended (e.g. the merchant while the shopkeeper is
        # still in view: any met precondition ends the running skill) is a restart, not a
        # new activation.
        if skill_id != self.skill_id:
            self.stats.switches += 1
            self.stats.activations[skill_id] += 1
            if new_items > 0:
                self.stats.with_item[skill_id] += 1
        else:
            self.stats.restarts += 1
        self.skill_id = skill_id
        self.skill_time = 0
        self.skill_steps = 0
        self.skill_start_turn = int(info.get("time", 0))
        self.skill_start_depth = depth

    def _observe(self, obs: dict) -> dict:
        self.last_obs = obs  # raw NLE observation (NLE reuses its buffers: copy to keep)
        out = self.observation_fn(obs, self.skill_id, self.num_skills)
        if self.stairs_input:
            stairs = out.get(STAIRS_KEY)
            if stairs is None:  # the observation function's reused output gets the key once
                stairs = out[STAIRS_KEY] = np.zeros(STAIRS_SIZE, dtype=np.float32)
            bl = obs["blstats"]
            stairs[:] = self.stats.measures.stairs_under_hero(int(bl[B.BL_X]), int(bl[B.BL_Y]))
        return out

    def _annotate(self, info: dict) -> dict:
        info["skill"] = self.skill
        info["skill_id"] = self.skill_id
        info["skill_time"] = self.skill_time
        return info

    # ------------------------------------------------------------------ gym API
    def reset(self, **kwargs: Any):
        times = part_times.PART_TIMES if part_times.PART_TIMES.enabled else None
        if times is None:
            return self._reset(None, **kwargs)
        start = part_times.now()
        out = self._reset(times, **kwargs)
        times.add("skill_env", part_times.now() - start)
        return out

    def step(self, action: Any):
        times = part_times.PART_TIMES if part_times.PART_TIMES.enabled else None
        if times is None:
            return self._step(action, None)
        start = part_times.now()
        out = self._step(action, times)
        times.add("skill_env", part_times.now() - start)
        times.tick()
        return out

    def _reset(self, times: Optional[part_times.PartTimes], **kwargs: Any):
        if self.training_seed is not None and kwargs.get("seed") is not None:
            kwargs["seed"] = training_game_seed(self.training_seed, kwargs["seed"])
        start = part_times.now() if times is not None else 0.0
        obs, info = self.env.reset(**kwargs)
        if times is not None:
            times.add("env", part_times.now() - start)
        if self.meta_policy is None:
            self.meta_policy = self._meta_factory()
        self.meta_policy.reset()
        # the errors before this episode: a MetaPolicy knows them when its new player's reply comes (no round trip
        # of its own); another policy is asked now
        self._errors_at_reset = (None if hasattr(self.meta_policy, "errors_at_new")
                                 else int(getattr(self.meta_policy, "num_errors", 0)))
        self.reward_fn.reset()
        if isinstance(self.observation_fn, _ModelObservation):
            self.observation_fn.new_episode(obs)
        self.stats = EpisodeSkillStats(self.num_skills)
        self.start_letters = np.zeros(256, dtype=bool)
        self._inv_key = b""
        classes = obs["inv_oclasses"]
        self.start_letters[obs["inv_letters"][(classes != NO_ITEM_CLASS) & (classes != FOOD_CLASS)]] = True
        depth = self._depth(obs, info)
        self.stats.max_depth = self.stats.last_depth = depth
        self.stats.measures.reset(info, obs["chars"], obs["colors"])
        self.meta_policy.update_state(info)
        start = getattr(self.meta_policy, "start_decisions", None)
        if start is not None:  # the generated code's host: both calls in one round trip
            bl = obs["blstats"]
            chars, colors = initiation_window(obs["chars"], obs["colors"], int(bl[B.BL_X]), int(bl[B.BL_Y]))
            self.preconds, first = start(chars, colors, self._num_new_items(obs))
        else:
            self.preconds = self._preconditions(obs, self._num_new_items(obs))
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
        if self._num_new_items(obs) > 0:
            self.stats.with_item[self.skill_id] += 1
        self._scored_next = (self.skill_id, message_bytes(obs["message"]), 0, False)
        return self._observe(obs), self._annotate(info)

    def _count_events(self, obs: dict, info: dict, msg: bytes, depth: int, active: int) -> None:
        st = self.stats
        st.max_depth = max(st.max_depth, depth)
        if "messages" not in info and "message" not in info:  # an env without NLE's info (tests)
            info["message"] = msg.decode("latin-1")
        st.measures.update(info, obs["chars"], obs["colors"], self.skill_names[active])

    def _step(self, action: Any, times: Optional[part_times.PartTimes]):
        parts = self.step_parts(action, times)
        try:
            request = next(parts)  # the generated code's calls, when this step makes them
            parts.send(request.run())
        except StopIteration as end:
            return end.value
        raise RuntimeError("step_parts yields once")  # pragma: no cover - a generator that yields twice

    def step_parts(self, action: Any, times: Optional[part_times.PartTimes] = None, pause_after_game: bool = False):
        """The step as a generator: it yields the policy over skills' request of the step (when the generated
        code's host decides) and takes its decisions back; its return value is the step's 5-tuple. Several
        games' requests can so travel together (:class:`SkillGames`); :meth:`step` sends each at once.
        ``pause_after_game``: it first yields :data:`GAME_STEPPED` once the game has made its move, so that a caller
        can move every game before any game's bookkeeping runs."""
        if times is not None:
            start = part_times.now()
            obs, game_reward, terminated, truncated, info = self.env.step(action)
            times.add("env", part_times.now() - start)
        else:
            obs, game_reward, terminated, truncated, info = self.env.step(action)
        if pause_after_game:
            yield GAME_STEPPED
        active = self.skill_id
        st = self.stats
        depth = self._depth(obs, info)
        msg = message_bytes(obs["message"])  # read once per step
        depth_change = clip_depth_change(depth - self.skill_start_depth)
        descended = DESCENT_MESSAGE in msg and depth > st.last_depth
        if self.skill_reward == "progress":
            measures = self.stats.measures
            before = measures.progress(self.skill_names[active])
            stairs_before = len(measures.stairs_levels_reached)
            self._count_events(obs, info, msg, depth, active)
            intrinsic = measures.progress(self.skill_names[active]) - before
            # the descender's first arrival on each level's down staircase, in levels (--progress_stairs_reward)
            intrinsic += self.progress_stairs_reward * (len(measures.stairs_levels_reached) - stairs_before)
            if active < len(self.progress_scales):
                intrinsic *= self.progress_scales[active]
            scored_descent = descended
        else:
            if self.reward_timing == "release":
                scored_skill, scored_msg, scored_change, scored_descent = self._scored_next
            else:
                scored_skill, scored_msg, scored_change, scored_descent = active, msg, depth_change, descended
            if times is not None:
                start = part_times.now()
                intrinsic = self.reward_fn.intrinsic(scored_skill, obs["message"], scored_change, scored_msg)
                times.add("reward", part_times.now() - start)
            else:
                intrinsic = self.reward_fn.intrinsic(scored_skill, obs["message"], scored_change, scored_msg)
            self._count_events(obs, info, msg, depth, active)
            # what was scored, by whose model: under the release's timing the message the action was chosen on
            info["scored_skill"] = self.skill_names[scored_skill]
            info["scored_message"] = scored_msg
        reward = self.reward_fn.combine(game_reward, intrinsic)
        if depth > 0:
            st.last_depth = depth
        st.empty_messages += not msg
        st.wall_messages += msg in WALL_MESSAGES
        if scored_descent:
            st.descents += 1
            st.descent_reward += intrinsic
        st.time[active] += 1
        st.intrinsic[active] += intrinsic
        if intrinsic != 0.0:
            st.nonzero[active] += 1
        self.skill_steps += 1
        # the meta-policy contract counts skill time in game turns (steps when the env has no clock)
        self.skill_time = int(info["time"]) - self.skill_start_turn if "time" in info else self.skill_steps
        info["intrinsic_reward"] = intrinsic
        info["game_reward"] = float(game_reward)

        if not (terminated or truncated):
            meta = self.meta_policy
            new_items = self._num_new_items(obs)
            decide = getattr(meta, "decision_request", None)
            if decide is not None:  # the generated code's host: the step's calls in one round trip
                x, y = obs["blstats"][:2].tolist()  # BL_X, BL_Y
                chars, colors = initiation_window(obs["chars"], obs["colors"], x, y)
                if self._prepare is not None:
                    self._prepare(obs, active, self.num_skills)
                self.preconds, ends, nxt = yield decide(info, chars, colors, new_items, self.skill_names[active],
                                                        self.skill_time, depth, self.skill_start_depth,
                                                        self._branch(info))
                if ends:
                    self._start_skill(self._skill_index(nxt), depth, info, new_items)
            else:
                meta.update_state(info)
                self.preconds = self._preconditions(obs, new_items)
                if meta.should_terminate(self.skill, self.skill_time, depth, self.skill_start_depth, self.preconds):
                    ended = getattr(meta, "skill_ended", None)
                    if ended is not None:  # what the end of a skill tells (a descent into the Mines)
                        ended(self.skill, self.skill_start_depth, self._branch(info))
                    nxt = meta.next_skill(self.skill, depth, self._branch(info), self.preconds[1], self.preconds[0])
                    self._start_skill(self._skill_index(nxt), depth, info, new_items)
            # the observation the next action is chosen on: its message, its depth change since the start
            # of the skill that was running when it came (the release computes it before a switch resets
            # it), and the skill it carries (after a switch, the new one)
            self._scored_next = (self.skill_id, msg, depth_change, descended)
        else:
            errors = int(getattr(self.meta_policy, "num_errors", 0))
            st.meta_policy_errors = errors - (self._errors_at_reset if self._errors_at_reset is not None
                                              else self.meta_policy.errors_at_new)
            extra = info.get("episode_extra_stats") or {}
            extra = dict(extra)
            extra.update(st.summary(self.skill_names, self.reward_fn.cache.hit_rate))
            info["episode_extra_stats"] = extra
        return self._observe(obs), reward, terminated, truncated, self._annotate(info)
