"""``NetHackScoreMonk-v1``: NLE's score task played as a Monk with the paper's options,
action set and macro actions.

Layering: :mod:`rl_baseline.nethack` holds game facts (blstats indices, action keys, the
options file, the dungeon overview); this module is the gym environment built on
``nle.env.tasks.NetHackScore`` (subclassed, NLE is not modified); tasks and skills wrap it.

What an agent step does beyond NLE's:

* ``eat`` / ``quaff``: as in the authors' release, the command opens NetHack's prompt and the
  agent's next action answers it: at "What do you want to eat/drink? [...]" the north-west
  key ``y`` picks the first item offered and any other action cancels the prompt; the
  "There is ... here; eat it? [ynq]" question takes the agent's key as it is (``y`` yes,
  ``n`` no). An eat that takes game time sets ``info["just_eaten"]``.
* ``drop``: drops the first inventory item that was not in the starting inventory and is
  neither food nor gold (nothing happens when there is none).
* ``cast``: casts the first known spell; a healing spell is cast on the hero, as the release
  does for a Monk that starts with the healing spellbook (other spells' directions are the
  agent's to give).
* ``wait``: rests 25 moves (the count prefix ``25`` before ``.``), as the authors' release
  does; NetHack stops resting early when something happens.
* ``enhance`` and the message "You feel more confident in your skills": the first skill that
  can be advanced is advanced.
* ``--More--`` is dismissed, and yes/no questions are declined, except those an agent must
  answer itself (eat, attack, direction, pray, drop, drink, sell): those stay on screen and
  the agent answers with its compass keys (``y`` = north-west, ``n`` = south-east).

``info`` (at reset and every step): depth, dungeon_number, dungeon_level, gold, xp_level,
time, hp, hpmax, hunger, kill (monsters killed this step), kills (this episode), just_eaten,
message (the message the agent sees), messages (every message shown during the step, also
those dismissed with --More--), branch_depth (depth of the Gnomish Mines branch, -2 until
known), overview (the dungeon overview text, re-read without game time whenever the level
changes; the agent never sees that screen), end_status.

One module on purpose: the macros, the question handling and the info dict share
the raw-stepping state of one NLE subclass.
"""
from __future__ import annotations

import logging
import re
from typing import Any

import numpy as np
from nle import nethack
from nle.env import base as nle_base
from nle.env.tasks import NetHackScore

from common.nethack import actions as A
from common.nethack import blstats as B
from common.nethack.messages import KEPT_OVER_MORE, decode_message, kept_over_more
from rl_baseline.envs.options import nle_options
from rl_baseline.envs.overview import parse_overview, read_overview
from rl_baseline.envs.seeding import seed_game

log = logging.getLogger(__name__)

DEFAULT_CHARACTER = "mon-hum-neu-mal"
DEFAULT_MAX_EPISODE_STEPS = 10_000
UNKNOWN_BRANCH_DEPTH = -2

OBSERVATION_KEYS = (
    "glyphs",
    "chars",
    "colors",
    "specials",
    "blstats",
    "message",
    "inv_glyphs",
    "inv_letters",
    "inv_oclasses",
    "inv_strs",
    "tty_chars",
    "tty_colors",
    "tty_cursor",
)

# Questions the agent answers itself; every other yes/no question is declined. The release's list: a
# match is a substring, case included, so the fountain's "Drink from the fountain?" is declined (the
# inventory's "What do you want to drink?" follows, which the agent answers).
AGENT_QUESTIONS = (b"eat", b"attack", b"direction?", b"pray", b"drop", b"drink", b"Sell")

_ROLES = ("arc", "bar", "cav", "hea", "kni", "mon", "pri", "ran", "rog", "sam", "tou", "val", "wiz")
_RACES = ("hum", "elf", "dwa", "gno", "orc")
_ALIGNS = ("law", "neu", "cha")
_GENDERS = ("mal", "fem")

_OFFERED = re.compile(rb"\[([^\]]*)\]")
_KILL = re.compile(r"\bYou (?:kill|destroy) |\bis (?:killed|destroyed)!")
_CONFIDENT = "You feel more confident in your"
_MENU_FIRST = re.compile(rb"^\s*a - ")
_WIZARD_OVERVIEW = tuple(ord(c) for c in "#overview") + (A.RETURN,)


class EnvConfigError(ValueError):
    """Bad arguments to the environment (unknown character, wizard-only call...)."""


def check_character(character: str) -> str:
    """Validate an NLE character string ``role-race-alignment-gender``."""
    parts = character.split("-")
    choices = (_ROLES, _RACES, _ALIGNS, _GENDERS)
    if len(parts) != 4 or any(p not in c for p, c in zip(parts, choices)):
        raise EnvConfigError(
            f"unknown character {character!r}: expected role-race-alignment-gender with "
            f"role in {_ROLES}, race in {_RACES}, alignment in {_ALIGNS}, gender in {_GENDERS} "
            f"(the paper plays {DEFAULT_CHARACTER!r})"
        )
    return character


def offered_letters(message: bytes) -> bytes:
    """The choices of a prompt such as ``What do you want to eat? [fg or ?*]``, expanded.

    ``[a-dh or ?*]`` -> ``b"abcdh"``; ``[ynq]`` -> ``b"ynq"``.
    """
    match = _OFFERED.search(message)
    if match is None:
        return b""
    spec = match.group(1).split(b" or ")[0]
    out = bytearray()
    i = 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1:i + 2] == b"-":
            out.extend(range(spec[i], spec[i + 2] + 1))
            i += 3
        else:
            out.append(spec[i])
            i += 1
    return bytes(c for c in out if chr(c).isalpha())


#: wizard mode's question when the hero dies (declined by default: the hero lives on)
WIZARD_DIE_QUESTION = b"Die? [yn]"


class NetHackScoreMonk(NetHackScore):
    """NLE score task with the MaestroMotif character, options, actions and macros."""

    def __init__(
        self,
        *args: Any,
        character: str = DEFAULT_CHARACTER,
        max_episode_steps: int = DEFAULT_MAX_EPISODE_STEPS,
        wizard: bool = False,
        final_death: bool = False,
        observation_keys: tuple[str, ...] = OBSERVATION_KEYS,
        read_overview_on_level_change: bool = True,
        kept_over_more: tuple[bytes, ...] = KEPT_OVER_MORE,
        **kwargs: Any,
    ) -> None:
        check_character(character)
        if int(max_episode_steps) <= 0:
            raise EnvConfigError(f"max_episode_steps must be positive, got {max_episode_steps}")
        for key in ("actions", "options", "allow_all_yn_questions", "allow_all_modes"):
            if key in kwargs:
                raise EnvConfigError(f"{key!r} is fixed by NetHackScoreMonk and cannot be passed")
        keys = tuple(observation_keys)
        for needed in ("tty_chars", "inv_letters", "inv_oclasses"):
            if needed not in keys:
                keys = keys + (needed,)
        self._agent_keys = tuple(observation_keys)
        self._wizard = bool(wizard)
        # wizard mode asks "Die?" when the hero dies, and declining (the default) revives her;
        # with final_death the answer is yes, so a wizard-mode game ends at death as a normal one
        self._final_death = bool(final_death)
        self._read_overview = read_overview_on_level_change
        self._kept_over_more = tuple(kept_over_more)
        super().__init__(
            *args,
            character=character,
            max_episode_steps=int(max_episode_steps),
            observation_keys=keys,
            actions=A.ACTIONS,
            options=nle_options("Agent-" + character, wizard=self._wizard),
            wizard=self._wizard,
            allow_all_yn_questions=False,
            allow_all_modes=False,
            **kwargs,
        )
        if keys != self._agent_keys:
            space = self.observation_space.spaces
            self.observation_space = type(self.observation_space)({k: space[k] for k in self._agent_keys})
            self._original_observation_keys = self._agent_keys
            self._original_indices = tuple(self._observation_keys.index(k) for k in self._agent_keys)
        self._tty_index = self._observation_keys.index("tty_chars")
        self._letters_index = self._observation_keys.index("inv_letters")
        self._oclasses_index = self._observation_keys.index("inv_oclasses")
        self._kept_indices = (self._blstats_index, self._letters_index, self._oclasses_index)
        self._episode_state()

    # ------------------------------------------------------------------ episode state
    def _episode_state(self) -> None:
        self._starting_letters = np.zeros(256, dtype=bool)
        self._num_starting = 0
        self._held_letters = b""  # inventory letters last checked by _forget_used_letters
        self._kills = 0
        self._branch_depth = UNKNOWN_BRANCH_DEPTH
        self._overview = ""
        self._level: tuple[int, int] | None = None
        self._messages: list[str] = []
        self._just_eaten = False
        self._last_message_bytes = b""
        self._last_message_text = ""

    @property
    def wizard(self) -> bool:
        return self._wizard

    # ------------------------------------------------------------------ raw stepping
    def _press(self, key: int) -> tuple[tuple, bool]:
        """One key to NetHack, remembering the message it shows."""
        observation, done = self.nethack.step(int(key))
        self._remember_message(observation)
        return observation, done

    def _remember_message(self, observation: tuple) -> None:
        raw = observation[self._message_index].tobytes()
        if raw != self._last_message_bytes:  # the same bytes as the last press: already decoded
            self._last_message_bytes = raw
            self._last_message_text = decode_message(raw)
        text = self._last_message_text
        if text and (not self._messages or self._messages[-1] != text):
            self._messages.append(text)

    def _message_text(self, observation: tuple) -> str:
        """The decoded message of ``observation`` (the last press's, already decoded, in the usual case)."""
        raw = observation[self._message_index].tobytes()
        return self._last_message_text if raw == self._last_message_bytes else decode_message(raw)

    def _perform_known_steps(self, observation, done, exceptions=True):
        """Dismiss --More-- and text prompts; decline questions the agent does not answer.

        A level change or a freeze message shown at a ``--More--`` stays the observation's message
        once the ``--More--`` is dismissed (:func:`common.nethack.messages.kept_over_more`), as in
        the authors' release: without it the step that went down a level shows an empty message."""
        kept = None  # the message array to show instead of the one on screen, if any
        for _ in range(64):  # a handful suffices; the bound only guards against a stuck loop
            if done:
                break
            internal = observation[self._internal_index]
            if internal[3]:  # waiting for --More--
                message = observation[self._message_index]
                # as the release: the message at this --More-- is kept if it is one of those, and
                # whatever a later key shows replaces it otherwise
                kept = message.copy() if kept_over_more(message, self._kept_over_more) else None
                observation, done = self._press(A.SPACE)
                continue
            if internal[2]:  # a line of text is asked for: never
                kept = None
                observation, done = self._press(A.ESC)
                continue
            if internal[1]:  # a one-character question
                message = bytes(observation[self._message_index])
                if exceptions and any(q in message for q in AGENT_QUESTIONS):
                    kept = None  # the question stays on screen for the agent to answer
                    break
                kept = None
                if self._final_death and WIZARD_DIE_QUESTION in message:
                    observation, done = self._press(ord("y"))
                    continue
                observation, done = self._press(A.ESC)
                continue
            break
        if kept is not None and not done:
            observation = (
                *observation[: self._message_index], kept, *observation[self._message_index + 1:])
        return observation, done

    def _in_question(self, observation: tuple) -> bool:
        return bool(observation[self._internal_index][1])

    # ------------------------------------------------------------------ macros
    def _item_prompt(self, observation: tuple) -> bytes | None:
        """The "What do you want to eat/drink?" prompt on screen, if it is."""
        if not self._in_question(observation):
            return None
        message = bytes(observation[self._message_index])
        return next((p for p in A.ITEM_PROMPTS if p in message), None)

    def _is_eat_question(self, observation: tuple) -> bool:
        return self._in_question(observation) and b"eat it?" in bytes(observation[self._message_index])

    def _answer_item_prompt(self, key: int, prompt: bytes, before: tuple) -> tuple[tuple, bool]:
        """The agent's action at an item prompt: ``y`` takes the first item offered, others cancel."""
        letters = offered_letters(bytes(before[self._message_index]))
        if key != A.ANSWER_ITEM_PROMPT or not letters:
            return self._press(A.ESC)
        time_before = int(before[self._blstats_index][B.BL_TIME])
        observation, done = self._press(letters[0])
        if prompt == A.ITEM_PROMPTS[0] and not done:
            observation, done = self._perform_known_steps(observation, done, exceptions=False)
            self._just_eaten = int(observation[self._blstats_index][B.BL_TIME]) > time_before
        return observation, done

    def _droppable_letter(self, observation: tuple) -> int | None:
        letters = observation[self._letters_index]
        classes = observation[self._oclasses_index]
        for letter, oclass in zip(letters, classes):
            if letter == 0:
                break
            if oclass in (nethack.FOOD_CLASS, nethack.COIN_CLASS):
                continue
            if not self._starting_letters[letter]:
                return int(letter)
        return None

    def _forget_used_letters(self, observation: tuple) -> None:
        """A starting item that was used up frees its letter for new items."""
        letters = observation[self._letters_index]
        key = letters.tobytes()
        if key == self._held_letters:
            return  # the inventory letters did not change (the usual case)
        self._held_letters = key
        if self._starting_letters[letters].sum() == self._num_starting:
            return  # every remaining starting letter is still held
        held = np.zeros(256, dtype=bool)
        held[letters] = True
        self._starting_letters &= held
        self._num_starting = int(np.count_nonzero(self._starting_letters))

    def _menu_open(self, observation: tuple) -> bool:
        """A menu with a selectable first entry (``a - ...``) is on screen."""
        return any(_MENU_FIRST.match(bytes(row)) for row in observation[self._tty_index])

    def _enhance(self, observation: tuple, done: bool) -> tuple[tuple, bool]:
        observation, done = self._press(A.ENHANCE)
        if done:
            return observation, done
        if self._menu_open(observation):
            # A pick-one menu closes as soon as its entry is chosen.
            return self._press(A.FIRST_MENU_ENTRY)
        # Nothing can be advanced: close the list of skills.
        return self._press(A.ESC)

    def _act(self, key: int, before: tuple) -> tuple[tuple, bool]:
        """Send an agent action, running its macro when it has one."""
        if key == A.DROP:
            letter = self._droppable_letter(before)
            observation, done = self._press(key)
            if not done and self._in_question(observation):
                observation, done = self._press(letter if letter is not None else A.ESC)
            return observation, done
        if key == A.EAT or self._is_eat_question(before):
            # the eat command, or "eat it?" answered with the agent's key
            time_before = int(before[self._blstats_index][B.BL_TIME])
            observation, done = self._press(key)
            self._just_eaten = int(observation[self._blstats_index][B.BL_TIME]) > time_before
            return observation, done
        if key == A.CAST:
            observation, done = self._press(key)
            if not done and self._menu_open(observation):
                # "Choose which spell to cast": the first spell (no menu: no spell known).
                healing = any(_MENU_FIRST.match(bytes(row)) and b"healing" in bytes(row)
                              for row in observation[self._tty_index])
                observation, done = self._press(A.FIRST_SPELL)
                if healing and not done and b"In what direction?" in bytes(observation[self._message_index]):
                    # as the release does for a healing spellbook: cast it on the hero ('.')
                    observation, done = self._press(A.CAST_AT_SELF)
            return observation, done
        if key == A.ENHANCE:
            return self._enhance(before, False)
        if key == A.WAIT:
            # "25." rests 25 turns, as the release's rest action does
            for digit in str(A.REST_TURNS):
                observation, done = self._press(ord(digit))
                if done:
                    return observation, done
        return self._press(key)

    # ------------------------------------------------------------------ gym API
    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            seed_game(self, seed)  # NLE's reset(seed=...) leaves the game's generators alone
        self._episode_state()
        observation, info = super().reset(seed=seed, options=options)
        raw = self.last_observation
        self._starting_letters = np.zeros(256, dtype=bool)
        self._starting_letters[raw[self._letters_index]] = True
        self._starting_letters[0] = False
        self._num_starting = int(np.count_nonzero(self._starting_letters))
        self._messages = []
        self._remember_message(raw)
        raw = self._after_level_check(raw)
        return self._get_observation(raw), self._build_info(raw, info["end_status"], kill=0)

    def step(self, action: int):
        if not 0 <= int(action) < len(self.actions):
            raise EnvConfigError(
                f"action {action} out of range: valid actions are 0..{len(self.actions) - 1} "
                f"({', '.join(A.ACTION_NAMES)})"
            )
        # NLE reuses its buffers; keep copies of what the reward and the macros read from the
        # previous state (bottom-line stats, inventory letters and classes).
        last_observation = list(self.last_observation)
        for index in self._kept_indices:
            last_observation[index] = last_observation[index].copy()
        last_observation = tuple(last_observation)
        self._messages = []
        self._just_eaten = False
        key = self.actions[int(action)]

        prompt = self._item_prompt(last_observation)
        if prompt is not None:
            observation, done = self._answer_item_prompt(key, prompt, last_observation)
        else:
            observation, done = self._act(key, last_observation)
        truncated = self._check_abort(observation)
        observation, done = self._perform_known_steps(observation, done, exceptions=True)
        if not done and self._messages and _CONFIDENT in "\n".join(self._messages) and not self._in_question(observation):
            observation, done = self._enhance(observation, done)
            observation, done = self._perform_known_steps(observation, done, exceptions=True)
        self._steps += 1
        if not done:
            observation = self._after_level_check(observation)
        self._forget_used_letters(observation)
        self.last_observation = observation

        end_status = self._get_end_status(observation, done)
        reward = float(self._reward_fn(last_observation, action, observation, end_status))
        kill = sum(1 for m in self._messages if _KILL.search(m)) if self._messages else 0
        self._kills += kill
        info = self._build_info(observation, end_status, kill=kill)
        agent_observation = self._get_observation(observation)
        if end_status and not done:
            # The episode ends on our side (step limit): let NLE quit the game cleanly, after
            # handing the agent a copy of its last view.
            agent_observation = {k: v.copy() for k, v in agent_observation.items()}
            self._quit_game(observation, done)
            done = True
        return agent_observation, reward, bool(done), bool(truncated), info

    def _reward_fn(self, last_observation: tuple, action: int, observation: tuple, end_status: Any) -> float:
        """The release's reward: the score difference only (its Monk env computes NLE's time penalty
        and never adds it), in Python numbers. Motif's score task adds the penalty itself
        (:class:`rl_baseline.baselines.motif_tasks.MotifTaskReward`)."""
        if not self.nethack.in_normal_game():
            return 0.0  # before the game started and after it ended blstats are zero
        return float(int(observation[self._blstats_index][B.BL_SCORE]) - int(
            last_observation[self._blstats_index][B.BL_SCORE]))

    # ------------------------------------------------------------------ info
    def _after_level_check(self, observation: tuple) -> tuple:
        """Re-read the dungeon overview when the level changed; returns the agent's view."""
        stats = observation[self._blstats_index]
        level = (int(stats[B.BL_DUNGEON_NUMBER]), int(stats[B.BL_DUNGEON_LEVEL]))
        if level == self._level:
            return observation
        previous, self._level = self._level, level
        if (
            previous is not None
            and previous[0] == B.DNUM_DUNGEONS_OF_DOOM
            and level[0] == B.DNUM_GNOMISH_MINES
            and self._branch_depth == UNKNOWN_BRANCH_DEPTH
        ):
            self._branch_depth = int(previous[1])
        if not self._read_overview:
            return observation
        # The overview screen overwrites NLE's buffers: the agent keeps a copy of its view.
        view = tuple(a.copy() for a in observation)
        keys = _WIZARD_OVERVIEW if self._wizard else None
        text = read_overview(self.nethack, command_keys=keys)
        if text:
            self._overview = text
            parsed = parse_overview(text)
            if parsed.mines_branch_depth is not None and self._branch_depth == UNKNOWN_BRANCH_DEPTH:
                self._branch_depth = int(parsed.mines_branch_depth)
        return view

    def _build_info(self, observation: tuple, end_status: Any, kill: int) -> dict[str, Any]:
        stats = observation[self._blstats_index].tolist()  # Python ints, one conversion
        messages = list(self._messages)
        return {
            "end_status": end_status,
            # how the game ended: only asked once it has (a C call per step otherwise)
            "is_ascended": bool(end_status) and self.nethack.how_done() == nethack.ASCENDED,
            "depth": stats[B.BL_DEPTH],
            "dungeon_number": stats[B.BL_DUNGEON_NUMBER],
            "dungeon_level": stats[B.BL_DUNGEON_LEVEL],
            "gold": stats[B.BL_GOLD],
            "xp_level": stats[B.BL_XP_LEVEL],
            "time": stats[B.BL_TIME],
            "hp": stats[B.BL_HP],
            "hpmax": stats[B.BL_HPMAX],
            "hunger": stats[B.BL_HUNGER],
            "kill": int(kill),
            "kills": int(self._kills),
            "just_eaten": bool(self._just_eaten),
            "message": self._message_text(observation),
            "messages": messages,
            "branch_depth": int(self._branch_depth),
            "overview": self._overview,
        }

    # ------------------------------------------------------------------ wizard mode
    def wizard_keys(self, keys: str | bytes | list[int]) -> dict[str, Any]:
        """Type raw keys (wizard mode only), e.g. ``"\\x17blessed scroll of identify\\r"``.

        Used by tests to build situations deterministically. Returns the info dict.
        """
        if not self._wizard:
            raise EnvConfigError(
                "wizard_keys needs NetHack's wizard mode: create the env with wizard=True "
                f"(wizard commands: {', '.join(sorted(A.WIZARD_KEYS))})"
            )
        if isinstance(keys, str):
            keys = keys.encode("latin-1")
        self._messages = []
        observation, done = self.last_observation, False
        for key in keys:
            observation, done = self._press(int(key))
            if done:
                break
        if not done:
            observation, done = self._perform_known_steps(observation, done, exceptions=True)
            observation = self._after_level_check(observation)
        self.last_observation = observation
        return self._build_info(observation, self._get_end_status(observation, done), kill=0)

    def wizard_wish(self, text: str) -> dict[str, Any]:
        """Wish for an object (or, in wizard mode, terrain such as ``altar``)."""
        return self.wizard_keys(bytes([A.WIZARD_KEYS["wizwish"]]) + text.encode() + b"\r")

    def wizard_level_teleport(self, depth: int) -> dict[str, Any]:
        """Teleport to ``depth`` in the current dungeon."""
        return self.wizard_keys(bytes([A.WIZARD_KEYS["wizlevelport"]]) + str(int(depth)).encode() + b"\r")

    def current_observation(self) -> dict[str, np.ndarray]:
        """A copy of what the agent currently sees."""
        return {k: v.copy() for k, v in self._get_observation(self.last_observation).items()}


# NLE's own question list, kept for reference in tests: ours must be a superset.
NLE_SKIP_EXCEPTIONS = nle_base.SKIP_EXCEPTIONS
