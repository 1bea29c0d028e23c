"""ONI's four environments: NLE tasks with the extended action set and ONI's macros.

``NetHackScoreExtendedActions-v1``, ``NetHackOracleExtendedActions-v1``,
``NetHackStaircaseLvl3ExtendedActions-v1`` and ``NetHackStaircaseLvl4ExtendedActions-v1``
behave as the ONI release's environments do (its ``rl_baseline/tasks_nle.py``), written anew
for NLE 1.0's gymnasium API:

* NLE's default character (``mon-hum-neu-mal``), options and 5000-step limit;
* 28 actions: NLE's 23 task actions, then cast, quaff, pray, pick up and pay
  (:data:`EXTENDED_ACTIONS`);
* macros: at the "What do you want to eat/drink?" prompt the north-west key ``y`` takes the
  first item offered and any other action cancels; casting takes the first spell; when NetHack
  says "You feel more confident in ..." the skill is enhanced at once; ``--More--`` is
  dismissed, keeping "You descend the stairs." on screen through every later ``--More--`` of the
  step (the staircase tasks read it); a text prompt is escaped; a yes/no question is declined,
  and the step ends there, unless it is about eating, attacking, a direction, praying or
  drinking, which ONI checks against the message it kept when it kept one;
* rewards: Score is NLE's score difference with the -0.01 penalty for a step on which game
  time stands still; StaircaseLvl3/Lvl4 pay 50 when the hero comes down the stairs onto
  dungeon level 3/4, Oracle pays 50 next to the Oracle; both end the episode there, and
  neither has a time penalty. The reward-free setting is Score with ``--extrinsic_reward_coeff 0``.

The info dict carries what the skill runtime and the measures read (depth, dungeon number and
level, time, every message of the step) and ONI's statistics (``dlvl``, ``gold``, ``xlvl``,
``scout``: map squares seen over the levels visited, ``kill_counts``).
"""
from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np
from nle import nethack
from nle.env import base as nle_base
from nle.env.tasks import TASK_ACTIONS, NetHackScore, NetHackStaircase

from common.nethack import blstats as B
from common.nethack.messages import decode_message, kept_over_more
from rl_baseline.envs.seeding import seed_game

#: ONI's action set: NLE's task actions, then cast, quaff, pray, pick up and pay.
EXTENDED_ACTIONS: tuple[int, ...] = tuple(TASK_ACTIONS) + (
    nethack.Command.CAST, nethack.Command.QUAFF, nethack.Command.PRAY, nethack.Command.PICKUP,
    nethack.Command.PAY,
)
ONI_MAX_EPISODE_STEPS = 5000
ONI_CHARACTER = "mon-hum-neu-mal"
#: questions the agent answers itself (NLE's list plus drinking, as ONI)
ONI_SKIP_EXCEPTIONS = tuple(nle_base.SKIP_EXCEPTIONS) + (b"drink",)
TASK_SUCCESS_REWARD = 50.0

_ESC, _SPACE = 27, 32
_Y = ord("y")
_FIRST = ord("a")
_ENHANCE = 0x80 | ord("e")  # M-e, #enhance
_ITEM_PROMPTS = (b"What do you want to eat", b"What do you want to drink")
_LETTERS = re.compile(rb"\[([a-zA-Z$]+)")
#: ONI's release keeps the descent message alone over a --More-- (MaestroMotif's also the climb and
#: freeze messages: common.nethack.messages.KEPT_OVER_MORE)
ONI_KEPT_OVER_MORE = (b"You descend the stairs.",)
_CONFIDENT = b"You feel more confident in"
_KILL = re.compile(r"you kill ", re.IGNORECASE)
OBSERVATION_KEYS = (
    "glyphs", "chars", "colors", "specials", "blstats", "message", "inv_glyphs", "inv_letters", "inv_oclasses",
    "inv_strs", "tty_chars", "tty_colors", "tty_cursor",
)


class _ExtendedActions:
    """The macros and the info dict, mixed into an NLE task class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("character", ONI_CHARACTER)
        kwargs.setdefault("max_episode_steps", ONI_MAX_EPISODE_STEPS)
        kwargs.setdefault("observation_keys", OBSERVATION_KEYS)
        super().__init__(*args, actions=EXTENDED_ACTIONS, allow_all_yn_questions=False, allow_all_modes=False,
                         **kwargs)
        self._messages: list[str] = []  # every message shown during the current step
        self._kills = 0
        self._scout: dict[tuple[int, int], int] = {}

    # -- raw stepping
    def _press(self, key: int) -> tuple[tuple, bool]:
        observation, done = self.nethack.step(int(key))
        text = decode_message(observation[self._message_index])
        if text and (not self._messages or self._messages[-1] != text):
            self._messages.append(text)
        return observation, done

    def _perform_known_steps(self, observation: tuple, done: bool, exceptions: bool = True) -> tuple[tuple, bool]:
        observation, done, kept = self._dismiss(observation, done, exceptions)
        if exceptions and not done and any(_CONFIDENT.decode() in m for m in self._messages):
            # "You feel more confident in ...": enhance the skill at once (the first entry of the menu)
            self._messages = [m for m in self._messages if _CONFIDENT.decode() not in m]
            observation, done = self._press(_ENHANCE)
            if not done:
                observation, done = self._press(_FIRST)
            observation, done, later = self._dismiss(observation, done, exceptions)
            kept = kept if later is None else later
        if kept is not None and not done:
            # the staircase tasks and the reward read the descent message, which --More-- would hide
            observation[self._message_index][:] = kept
        return observation, done

    def _dismiss(self, observation: tuple, done: bool, exceptions: bool) -> tuple[tuple, bool, Any]:
        """ONI's handling of what NetHack asks after a key (its ``_perform_known_steps``); returns the message
        array of a "You descend the stairs." that ``--More--`` took off screen.

        ONI's loop reads the message at a ``--More--`` and at a question from the observation it may already
        have replaced, so once kept the descent message stays through every later ``--More--`` of the step, and
        a question is checked against its list of the agent's questions with that kept message. A text prompt
        is escaped and the loop goes on; a question the agent does not answer is declined and the loop stops:
        whatever follows (a ``--More--``, another question) waits for the agent's next key."""
        kept = None
        for _ in range(64):  # a handful suffices; the bound only guards against a stuck loop
            if done:
                break
            internal = observation[self._internal_index]
            shown = kept if kept is not None else observation[self._message_index]
            if internal[3]:  # --More--
                kept = shown.copy() if kept_over_more(shown, ONI_KEPT_OVER_MORE) else None
                observation, done = self._press(_SPACE)
                continue
            if internal[2]:  # a line of text is asked for: never
                kept = None  # a text prompt replaces the message on screen
                observation, done = self._press(_ESC)
                continue
            if internal[1]:  # a one-character question
                if exceptions and any(q in bytes(shown) for q in ONI_SKIP_EXCEPTIONS):
                    break  # the agent answers it (ONI shows it the kept message, if any)
                kept = None
                observation, done = self._press(_ESC)
            break
        return observation, done, kept

    # -- gym API
    def reset(self, *args: Any, **kwargs: Any):
        if kwargs.get("seed") is not None:
            seed_game(self, kwargs["seed"])  # NLE's reset(seed=...) leaves the game's generators alone
        self._messages = []
        self._kills = 0
        self._scout = {}
        observation, info = super().reset(*args, **kwargs)
        return observation, self._info(self.last_observation, info["end_status"])

    def step(self, action: int):
        if not 0 <= int(action) < len(self.actions):
            raise ValueError(f"action {action} out of range: valid actions are 0..{len(self.actions) - 1}")
        last_observation = tuple(a.copy() for a in self.last_observation)
        previous = bytes(last_observation[self._message_index])
        self._messages = []
        key = int(self.actions[int(action)])
        if any(p in previous for p in _ITEM_PROMPTS):
            # the agent's action answers the item prompt: 'y' takes the first letter offered
            found = _LETTERS.search(previous)
            key = found.group(1)[0] if key == _Y and found else _SPACE
        observation, done = self._press(key)
        if key == nethack.Command.CAST and not done:
            observation, done = self._press(_FIRST)
        truncated = self._check_abort(observation)
        observation, done = self._perform_known_steps(observation, done, exceptions=True)
        self._steps += 1
        self.last_observation = observation
        self._kills += sum(1 for m in self._messages if _KILL.search(m))
        end_status = self._get_end_status(observation, done)
        reward = float(self._reward_fn(last_observation, action, observation, end_status))
        agent_observation = self._get_observation(observation)
        info = self._info(observation, end_status)  # before quitting overwrites NLE's buffers
        if end_status and not done:
            agent_observation = {k: v.copy() for k, v in agent_observation.items()}
            self._quit_game(observation, done)
            done = True
        return agent_observation, reward, bool(done), bool(truncated), info

    def _info(self, observation: tuple, end_status: Any) -> dict[str, Any]:
        stats = observation[self._blstats_index].tolist()
        level = (stats[B.BL_DUNGEON_NUMBER], stats[B.BL_DUNGEON_LEVEL])
        if stats[B.BL_DEPTH] > 0:
            seen = int(np.count_nonzero(observation[self._glyph_index] != nethack.GLYPH_CMAP_OFF))
            self._scout[level] = max(self._scout.get(level, 0), seen)
        return {
            "end_status": end_status,
            "is_ascended": bool(end_status) and self.nethack.how_done() == nethack.ASCENDED,
            "depth": stats[B.BL_DEPTH],
            "dungeon_number": stats[B.BL_DUNGEON_NUMBER],
            "dungeon_level": stats[B.BL_DUNGEON_LEVEL],
            "time": stats[B.BL_TIME],
            "gold": stats[B.BL_GOLD],
            "xp_level": stats[B.BL_XP_LEVEL],
            "message": decode_message(observation[self._message_index]),
            "messages": list(self._messages),
            # ONI's statistics
            "dlvl": stats[B.BL_DEPTH],
            "xlvl": stats[B.BL_XP_LEVEL],
            "scout": int(sum(self._scout.values())),
            "kill_counts": int(self._kills),
        }


class NetHackScoreExtendedActions(_ExtendedActions, NetHackScore):
    """Score task: NLE's score difference plus its frozen-time penalty (-0.01)."""


class _ReachTask(_ExtendedActions, NetHackStaircase):
    """A goal task: 50 on success, which ends the episode; no time penalty."""

    def _success(self, observation: tuple) -> bool:
        raise NotImplementedError

    def _is_episode_end(self, observation: tuple) -> Any:
        return self.StepStatus.TASK_SUCCESSFUL if self._success(observation) else self.StepStatus.RUNNING

    def _reward_fn(self, last_observation: tuple, action: int, observation: tuple, end_status: Any) -> float:
        return TASK_SUCCESS_REWARD if end_status == self.StepStatus.TASK_SUCCESSFUL else 0.0


class NetHackStaircaseLvl3ExtendedActions(_ReachTask):
    """Come down the stairs onto dungeon level 3."""

    target_level = 3

    def _success(self, observation: tuple) -> bool:
        return (any("You descend the stairs" in m for m in self._messages)
                and int(observation[self._blstats_index][B.BL_DUNGEON_LEVEL]) == self.target_level)


class NetHackStaircaseLvl4ExtendedActions(NetHackStaircaseLvl3ExtendedActions):
    """Come down the stairs onto dungeon level 4."""

    target_level = 4


class NetHackOracleExtendedActions(_ReachTask):
    """Stand next to the Oracle."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._oracle = next(g for g in range(nethack.GLYPH_MON_OFF, nethack.GLYPH_PET_OFF)
                            if nethack.permonst(nethack.glyph_to_mon(g)).mname == "Oracle")

    def _success(self, observation: tuple) -> bool:
        x, y = (int(v) for v in observation[self._blstats_index][:2])
        near = observation[self._glyph_index][max(y - 1, 0): y + 2, max(x - 1, 0): x + 2]
        return bool(np.any(near == self._oracle))


ONI_ENVS: dict[str, type] = {
    "NetHackScoreExtendedActions-v1": NetHackScoreExtendedActions,
    "NetHackOracleExtendedActions-v1": NetHackOracleExtendedActions,
    "NetHackStaircaseLvl3ExtendedActions-v1": NetHackStaircaseLvl3ExtendedActions,
    "NetHackStaircaseLvl4ExtendedActions-v1": NetHackStaircaseLvl4ExtendedActions,
}


def make_oni_env(name: str, max_episode_steps: int = ONI_MAX_EPISODE_STEPS, **kwargs: Any) -> gym.Env:
    """One of :data:`ONI_ENVS` (a ``ValueError`` lists them for another name)."""
    if name not in ONI_ENVS:
        raise ValueError(f"unknown ONI environment {name!r}; valid: {', '.join(ONI_ENVS)}")
    return ONI_ENVS[name](max_episode_steps=int(max_episode_steps), **kwargs)


for _name, _cls in ONI_ENVS.items():
    if _name not in gym.envs.registry:
        gym.register(id=_name, entry_point=f"{__name__}:{_cls.__name__}")
