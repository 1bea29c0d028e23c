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
  ``n`` no). ``info["just_eaten"]`` is the release's: set on the step that picks the first food
  offered at "What do you want to eat?" (eating from the floor at "eat it?" does not set it);
  what the eating asks after the item is picked is the agent's to answer.
* ``drop``: drops a held item whose letter no non-food starting item had, neither food nor
  gold (the letters are fixed at reset for the episode, and the item is the release's pick:
  the first of its set of such letters); ESC when there is none.
* ``cast``: the first spell (``a``); for a Monk that started with the healing spellbook ``.``
  follows, as in the release, so the spell is cast on the hero (other spells' directions are
  the agent's to give).
* ``wait``: rests 25 moves (the count prefix ``25`` before ``.``), as the authors' release
  does; NetHack stops resting early when something happens.
* ``travel_down`` / ``travel_up`` (only with ``travel_actions``, a lever of this project's CPU screens, not the
  release's action set): NetHack's travel command ``_``, then ``>`` / ``<`` (the cursor jumps to a staircase down
  / up on the map), then ``.``: the hero walks towards that staircase (travel stops at closed doors, boulders
  and anything that interrupts a run; with no such staircase on the map the cursor stays and nothing is gained).
* ``enhance`` is NetHack's ``#enhance`` as it is: its menu is dismissed like any ``--More--``,
  so the action advances nothing (the release's rule). When "You feel more confident in"
  shows, the first skill that can be advanced is advanced at the end of the step.
* ``--More--`` is dismissed, as many as there are; then at most one text prompt (escaped) or
  yes/no question is handled: declined, except those an agent must answer itself (eat,
  attack, direction, pray, drop, drink, sell; and with ``exit_question_to_agent``, the release's
  goldenexit evaluation, level 1's "Still climb?"), which stay on screen for the agent's compass
  keys (``y`` = north-west, ``n`` = south-east). Whatever follows an escape (a new
  ``--More--`` or question) is left to the agent's next key, as in the release.

``info`` (at reset and every step): depth, dungeon_number, dungeon_level, gold, xp_level,
time, hp, hpmax, hunger, kill (monsters killed this step), kills (this episode), just_eaten,
message (the message the agent sees), messages (every message shown during the step, also
those dismissed with --More--), branch_depth (depth of the Dungeons of Doom level holding the
Gnomish Mines staircase, -2 until known: known, as in the release, once two down staircases are
on the map of the level the hero is on; NetHack's overview lists the branch only after the hero
took it), overview (the dungeon overview text, re-read without game time whenever the level
changes; the agent never sees that screen), prompt_open (a question, a text prompt or a
``--More--`` waits for the agent's next key at the end of the step), end_status.

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
from common.nethack.glyphs import S_DNSTAIR
from common.nethack.messages import KEPT_OVER_MORE, decode_message, kept_over_more
from rl_baseline.envs.options import nle_options
from rl_baseline.envs.overview import read_overview
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

#: what NLE fills for a training run's environments (rl_baseline.sf.env.make_sf_env): the arrays that the skill
#: runtime, the policy's observation, the policy over skills and this env's own macros read. NLE copies every array
#: it was asked for after each key, whether read or not; the four left out (specials, inv_glyphs, tty_colors,
#: tty_cursor) cost about 5% of raw NLE's game step (docs/performance.md). Evaluations keep them all: their GIFs
#: draw the terminal's colours. tty_chars stays: the dungeon overview is read from it.
TRAINING_OBSERVATION_KEYS = tuple(k for k in OBSERVATION_KEYS
                                  if k not in ("specials", "inv_glyphs", "tty_colors", "tty_cursor"))

# Questions the agent answers itself; every other yes/no question is declined. The release's list: a
# match is a substring, case included, so the fountain's "Drink from the fountain?" is declined (the
# inventory's "What do you want to drink?" follows, which the agent answers).
AGENT_QUESTIONS = (b"eat", b"attack", b"direction?", b"pray", b"drop", b"drink", b"Sell")
#: the release's test for the exit question of level 1's up stairs ("... Still climb? [yn] (n)")
EXIT_QUESTION = b"climb"

_ROLES = ("arc", "bar", "cav", "hea", "kni", "mon", "pri", "ran", "rog", "sam", "tou", "val", "wiz")
_RACES = ("hum", "elf", "dwa", "gno", "orc")
_ALIGNS = ("law", "neu", "cha")
_GENDERS = ("mal", "fem")

_OFFERED = re.compile(rb"\[([^\]]*)\]")
_KILL = re.compile(r"\bYou (?:kill|destroy) |\bis (?:killed|destroyed)!")
_CONFIDENT = b"You feel more confident in"
_MAX_MORE = 64  # --More-- screens dismissed in one step; a handful suffices, the bound guards a stuck loop
_WIZARD_OVERVIEW = tuple(ord(c) for c in "#overview") + (A.RETURN,)
#: the glyph of a down staircase: two of them on a level's map are the Gnomish Mines branch level
DOWN_STAIRCASE_GLYPH = nethack.GLYPH_CMAP_OFF + S_DNSTAIR


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
        exit_question_to_agent: bool = False,
        travel_actions: bool = False,
        **kwargs: Any,
    ) -> None:
        check_character(character)
        if int(max_episode_steps) <= 0:
            raise EnvConfigError(f"max_episode_steps must be positive, got {max_episode_steps}")
        for key in ("actions", "options", "allow_all_yn_questions", "allow_all_modes"):
            if key in kwargs:
                raise EnvConfigError(f"{key!r} is fixed by NetHackScoreMonk and cannot be passed")
        keys = tuple(observation_keys)
        for needed in ("glyphs", "tty_chars", "inv_letters", "inv_oclasses", "inv_strs"):
            if needed not in keys:
                keys = keys + (needed,)
        self._agent_keys = tuple(observation_keys)
        self._wizard = bool(wizard)
        # wizard mode asks "Die?" when the hero dies, and declining (the default) revives her;
        # with final_death the answer is yes, so a wizard-mode game ends at death as a normal one
        self._final_death = bool(final_death)
        self._read_overview = read_overview_on_level_change
        # the release's goldenexit evaluation leaves "Beware, there will be no return!  Still climb?" open for the
        # agent, whose next key may leave the dungeon (every other run declines it)
        self._agent_questions = AGENT_QUESTIONS + ((EXIT_QUESTION,) if exit_question_to_agent else ())
        self._kept_over_more = tuple(kept_over_more)
        super().__init__(
            *args,
            character=character,
            max_episode_steps=int(max_episode_steps),
            observation_keys=keys,
            actions=A.agent_actions(travel_actions),
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
        self._chars_index = self._observation_keys.index("chars") if "chars" in self._observation_keys else None
        self._tty_index = self._observation_keys.index("tty_chars")
        self._letters_index = self._observation_keys.index("inv_letters")
        self._oclasses_index = self._observation_keys.index("inv_oclasses")
        self._strs_index = self._observation_keys.index("inv_strs")
        self._episode_state()

    # ------------------------------------------------------------------ episode state
    def _episode_state(self) -> None:
        self._starting_letters: set[int] = set()  # letters of the non-food starting items (fixed at reset)
        self._healing_book = False  # the hero started with the healing spellbook
        self._enhance_pending = False  # "You feel more confident in" was seen: enhance at the end of a step
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

    def _perform_known_steps(self, observation, done, exceptions=True, read_first_message=True):
        """The release's handling of what NetHack asks after a key (its ``_perform_known_steps``).

        Every ``--More--`` is dismissed. A level change or a freeze message shown at a ``--More--``
        (:func:`common.nethack.messages.kept_over_more`) becomes the observation's message and stays
        it through every later ``--More--`` of the step: the release reads the message at a
        ``--More--`` from the observation it already replaced. Then one text prompt is escaped or one
        question declined (an agent question is left on screen; the release reads it from the same,
        possibly replaced, message), and whatever that leads to is left for the agent's next key.
        Last, when "You feel more confident in" was on screen, the first skill is advanced
        (``#enhance``, ``a``), unless the step ended on an agent question (then at a later step).
        ``read_first_message=False``: the release does not look at the first observation for that
        message after its cast macro."""
        kept = None  # the message array shown instead of the one on screen, once one was kept
        for _ in range(_MAX_MORE):
            if done:
                break
            shown = kept if kept is not None else observation[self._message_index]
            if read_first_message and _CONFIDENT in shown.tobytes():
                self._enhance_pending = True
            read_first_message = True
            internal = observation[self._internal_index]
            if internal[3]:  # waiting for --More--
                if kept is None and kept_over_more(shown, self._kept_over_more):
                    kept = shown.copy()
                observation, done = self._press(A.SPACE)
                continue
            if internal[2]:  # a line of text is asked for: never
                kept = None
                observation, done = self._press(A.ESC)
            elif internal[1]:  # a one-character question
                if exceptions and any(q in shown.tobytes() for q in self._agent_questions):
                    break  # the question stays on screen for the agent to answer
                kept = None
                if self._final_death and WIZARD_DIE_QUESTION in bytes(observation[self._message_index]):
                    observation, done = self._press(ord("y"))  # ends the game: NetHack's last screens follow
                    continue
                observation, done = self._press(A.ESC)
            if self._enhance_pending and not done:
                self._enhance_pending = False
                kept = None
                observation, done = self._press(A.ENHANCE)
                if not done:
                    observation, done = self._press(A.FIRST_MENU_ENTRY)
            break
        if kept is not None and not done:
            observation = (
                *observation[: self._message_index], kept, *observation[self._message_index + 1:])
        return observation, done

    def _settle(self, observation: tuple, done: bool) -> tuple[tuple, bool]:
        """Known steps until nothing but an agent question is pending (the wizard-mode set-up helpers)."""
        for _ in range(_MAX_MORE):
            observation, done = self._perform_known_steps(observation, done, exceptions=True)
            internal = observation[self._internal_index]
            if done or not (internal[1] or internal[2] or internal[3]):
                break
            if internal[1] and any(q in bytes(observation[self._message_index]) for q in self._agent_questions):
                break
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

    def _answer_item_prompt(self, key: int, prompt: bytes, before: tuple) -> tuple[tuple, bool]:
        """The agent's action at an item prompt: ``y`` takes the first item offered, others cancel."""
        letters = offered_letters(bytes(before[self._message_index]))
        if key != A.ANSWER_ITEM_PROMPT or not letters:
            return self._press(A.ESC)
        # the release's "just eaten": the agent picked food at the inventory prompt (what the eating asks
        # afterwards, "Continue eating?", is the agent's to answer)
        self._just_eaten = prompt == A.ITEM_PROMPTS[0]
        return self._press(letters[0])

    def _droppable_letter(self, observation: tuple) -> int | None:
        """The release's pick: of the held letters, food and coins left out, those no non-food starting
        item had, the first in the order of a Python set built as the release builds it (a fixed
        order: the same inventory always drops the same item)."""
        letters = observation[self._letters_index]
        classes = observation[self._oclasses_index]
        held = {int(letter) for letter, oclass in zip(letters.tolist(), classes.tolist())
                if oclass not in (nethack.FOOD_CLASS, nethack.COIN_CLASS)}
        new = held.copy().difference(self._starting_letters)  # 0, an empty slot, is in both
        return next(iter(new), None)

    def _press_keys(self, keys: tuple[int, ...]) -> tuple[tuple, bool]:
        """Keys in a row, stopping if the game ends."""
        observation, done = self.last_observation, False
        for key in keys:
            observation, done = self._press(key)
            if done:
                break
        return observation, done

    def _act(self, key: int, before: tuple) -> tuple[tuple, bool]:
        """Send an agent action, running its macro when it has one."""
        if key == A.DROP:
            letter = self._droppable_letter(before)
            observation, done = self._press(key)
            if not done:  # the release answers without looking (the prompt is always there for a Monk)
                observation, done = self._press(letter if letter is not None else A.ESC)
            return observation, done
        if key == A.CAST:
            # the release's macro: the first spell, then '.' for a hero that started with the healing
            # book (the hero as the direction; a '.' with no direction asked rests a move)
            observation, done = self._press(key)
            if not done:
                observation, done = self._press(A.FIRST_SPELL)
            if not done and self._healing_book:
                observation, done = self._press(A.CAST_AT_SELF)
            return observation, done
        if key in A.TRAVEL_ACTIONS:
            # --travel_actions: NetHack's travel command, the cursor on a staircase down / up of the map, go
            return self._press_keys((A.TRAVEL_KEY, key & 0xFF, A.TRAVEL_CONFIRM))
        if key == A.WAIT:
            # "25." rests 25 turns, as the release's rest action does
            for digit in str(A.REST_TURNS):
                observation, done = self._press(ord(digit))
                if done:
                    return observation, done
        return self._press(key)

    # ------------------------------------------------------------------ gym API
    def _in_moveloop(self, observation: tuple) -> bool:
        """NLE's start-up loop asks this before each space it sends. A game that starts on a scroll of scare
        monster picks it up, sees it turn to dust and asks what to call it: a text prompt that spaces never end,
        so NLE's reset retried the same seed until the recursion limit (game seed 92007: a crashed worker).
        Here the prompt gets an empty name (Return; ESC does not end it in NLE), as a player would, and the game
        starts."""
        if not observation[self._program_state_index][3] and observation[self._internal_index][2]:  # in getlin
            self.last_observation, _ = self.nethack.step(A.RETURN)
            observation = self.last_observation
        return bool(observation[self._program_state_index][3])

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            seed_game(self, seed)  # NLE's reset(seed=...) leaves the game's generators alone
        self._episode_state()
        observation, info = super().reset(seed=seed, options=options)
        raw = self._starting_kit(self.last_observation)
        self._messages = []
        self._remember_message(raw)
        raw = self._after_level_check(raw)
        return self._get_observation(raw), self._build_info(raw, info["end_status"], kill=0)

    def _starting_kit(self, raw: tuple) -> tuple:
        """Remember the non-food starting letters (fixed for the episode) and the spellbook kind."""
        letters, classes = raw[self._letters_index].tolist(), raw[self._oclasses_index].tolist()
        # as the release builds it (empty slots' 0 included), so the sets' sizes and order are the release's
        self._starting_letters = {letter for letter, oclass in zip(letters, classes) if oclass != nethack.FOOD_CLASS}
        books = [bytes(row) for row, oclass in zip(raw[self._strs_index], classes) if oclass == nethack.SPBOOK_CLASS]
        self._healing_book = any(b"healing" in book for book in books)
        return raw

    def step(self, action: int):
        if not 0 <= int(action) < len(self.actions):
            raise EnvConfigError(
                f"action {action} out of range: valid actions are 0..{len(self.actions) - 1} "
                f"({', '.join(A.action_names_for(len(self.actions)))})"
            )
        # NLE reuses its buffers: a copy of what is read from the previous state after the first key, the bottom
        # line (the reward's score); the macros read the inventory and the message before their first key
        previous, kept = self.last_observation, self._blstats_index
        last_observation = (*previous[:kept], previous[kept].copy(), *previous[kept + 1:])
        self._messages = []
        self._just_eaten = False
        key = self.actions[int(action)]

        prompt = self._item_prompt(last_observation)
        if prompt is not None:
            observation, done = self._answer_item_prompt(key, prompt, last_observation)
        else:
            observation, done = self._act(key, last_observation)
        truncated = self._check_abort(observation)
        observation, done = self._perform_known_steps(
            observation, done, exceptions=True, read_first_message=prompt is not None or key != A.CAST)
        self._steps += 1
        if not done:
            observation = self._after_level_check(observation)
            self._look_for_branch_staircases(observation)
        self.last_observation = observation

        end_status = self._get_end_status(observation, done)
        reward = float(self._reward_fn(last_observation, action, observation, end_status))
        # a kill message holds "kill" or "destroy": a substring test first, a tenth of the pattern's search
        kill = sum(1 for m in self._messages if ("kill" in m or "destroy" in m) and _KILL.search(m)) \
            if self._messages else 0
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

    def _get_end_status(self, observation: tuple, done: bool) -> Any:
        """NLE's end status, the same member without its enum call (every step): a game that ended is DEATH (NLE's
        ``StepStatus(done or ...)``), else the step limit's ABORTED, else the task's own (RUNNING here)."""
        if done:
            return self.StepStatus.DEATH
        if self._check_abort(observation):
            return self.StepStatus.ABORTED
        return self._is_episode_end(observation)

    def _reward_fn(self, last_observation: tuple, action: int, observation: tuple, end_status: Any) -> float:
        """The release's reward: the score difference only (its Monk env computes NLE's time penalty
        and never adds it), in Python numbers; so also the score task of the Motif-style runs here
        (Motif's own ``tasks_nle.py`` added NLE's -0.01 for a step on which game time stands still)."""
        if not self.nethack.in_normal_game():
            return 0.0  # before the game started and after it ended blstats are zero
        return float(int(observation[self._blstats_index][B.BL_SCORE]) - int(
            last_observation[self._blstats_index][B.BL_SCORE]))

    # ------------------------------------------------------------------ info
    def _look_for_branch_staircases(self, observation: tuple) -> None:
        """The release's rule for the Mines entrance: two down staircases on the map of the level the hero
        is on (the Dungeons of Doom level holding the branch has two; every other level at most one)."""
        if self._branch_depth != UNKNOWN_BRANCH_DEPTH:
            return
        if self._chars_index is not None:
            # every step until the entrance is known: a staircase down shows as '>' (the options set no symbol set),
            # so a map with fewer than two '>' has fewer than two; two byte searches, a fifth of the exact count
            raw = observation[self._chars_index].tobytes()
            first = raw.find(b">")
            if first == -1 or raw.find(b">", first + 1) == -1:
                return
        if np.count_nonzero(observation[self._glyph_index] == DOWN_STAIRCASE_GLYPH) > 1:
            self._branch_depth = int(observation[self._blstats_index][B.BL_DEPTH])

    def _after_level_check(self, observation: tuple) -> tuple:
        """Re-read the dungeon overview when the level changed; returns the agent's view."""
        stats = observation[self._blstats_index]
        level = (int(stats[B.BL_DUNGEON_NUMBER]), int(stats[B.BL_DUNGEON_LEVEL]))
        if level == self._level:
            return observation
        self._level = level
        if not self._read_overview:
            return observation
        # The overview screen overwrites NLE's buffers: the agent keeps a copy of its view.
        view = tuple(a.copy() for a in observation)
        keys = _WIZARD_OVERVIEW if self._wizard else None
        text = read_overview(self.nethack, command_keys=keys)
        if text:
            self._overview = text
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
            # a question, a text prompt or a --More-- waits for the agent's next key
            "prompt_open": any(observation[self._internal_index][1:4].tolist()),  # a tenth of ndarray.any()'s cost
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
            observation, done = self._settle(observation, done)
        if not done:
            observation = self._after_level_check(observation)
            self._look_for_branch_staircases(observation)
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
