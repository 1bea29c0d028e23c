"""Run-time loader of policy-over-skills modules (``rl_baseline/meta_policies/{task}/seed{N}/execution.py``).

Where the modules come from: ``scripts.combine`` joins a policy part with the skill functions
and the task's initial values (see :mod:`code_generation.combine`). The policy part is written
by a language model (``scripts.generate_code``), or, for the shipped ``seed42`` modules, it is
the hand-written reference ``code_generation/{task}/reference_policy.py`` (``scripts.combine
--reference``; each such module says in its header that it is hand-written). Any module that
follows the contract below loads, whoever wrote it: the authors' released modules too.

What the run-time passes (the contract for generated and hand-written modules):

* ``NetHackPlayer(max_depth=-1, branch_depth=-2)`` is built at every episode start
  (:meth:`MetaPolicy.reset`), then ``set_initial_values()`` is called; it sets
  ``self.skill`` (the first skill), ``self.max_depth`` (deepest level the policy may
  go to) and the skills' time budgets.
* ``skill_precondition(char_ascii_encodings, char_ascii_colors, num_items, color_map)``
  -> ``(worshipper_ok, merchant_ok)``: ``char_ascii_encodings`` / ``char_ascii_colors``
  are the 7x7 window of :func:`rl_baseline.skills.runtime.initiation_window` (uint8 numpy
  arrays; the release's terminal window: four map rows above the hero, two below, three
  columns either side; the hero at ``[4, 3]`` with its colour set to 0); ``num_items`` is
  the number of held items not in the starting kit, coins and comestibles excluded;
  ``color_map`` is :data:`COLOR_MAP` (NetHack colour names -> colour ints, per NetHack's
  ``CLR_*`` values, plus the keys ``"@"`` and ``"_"``: the shopkeeper's and the altar's
  colours, read off live games in ``tests/test_preconditions.py``). A shopkeeper is an
  ``'@'`` in ``color_map["@"]`` (watchmen are not; priests and elves share the colour,
  as in the release); an altar is a ``'_'`` in ``color_map["_"]``.
* ``skill_termination(skill, skill_time, current_depth, previous_depth, preconditions)``
  -> bool, called every step: ``skill_time`` is game turns since the skill started,
  ``previous_depth`` the depth when it started, ``preconditions`` the list
  ``[worshipper_ok, merchant_ok]``.
* ``perform_task(current_skill, dungeon_depth, branch_number, merchant_precondition,
  worshipper_precondition)`` -> skill name (one of ``common.vocabulary.SKILLS``), called
  when the current skill terminated. ``branch_number`` is NetHack's dungeon number
  (0 Dungeons of Doom, 2 Gnomish Mines).
* ``branch_depth`` attribute: the depth of the Dungeons of Doom level holding the Gnomish
  Mines entrance, once known (-2 until then), learnt as the release learns it, and kept for
  the episode once learnt: from ``info["branch_depth"]`` (:meth:`MetaPolicy.update_state`;
  the environment sets it when two down staircases are on the level's map), or when the
  descender ends outside the Dungeons of Doom: the depth it started from
  (:meth:`MetaPolicy.skill_ended`).

State hooks of composite tasks, all optional, called by :meth:`MetaPolicy.update_state`
(before ``perform_task``) when the module defines them:

=====================  ===================================================================
``update_gold(gold)``  ``info["gold"]``: the hero's current gold
``defeat_monster()``   once per new kill (``info["kills"]`` is cumulative per episode)
``update_xp_level(x)`` ``info["xp_level"]``
``update_hunger(h)``   ``info["hunger"]``: NLE hunger state (0 satiated, 1 not hungry,
                       2 hungry, 3 weak, 4 fainting, 5 fainted, 6 starved); hungry means >= 2
``eaten_food`` (attr)  set to True when ``info["just_eaten"]`` while
                       ``info["dungeon_number"] == 2`` (the hero ate in the Gnomish Mines)
``update_position(depth, dungeon_number)``  ``info["depth"]``, ``info["dungeon_number"]``
=====================  ===================================================================

Every call into the module goes through a guard: any exception is logged (with
task and seed) and replaced by a fallback (``next_skill`` -> ``"discoverer"``,
``should_terminate`` -> True, ``preconditions`` -> ``(False, False)``), so a bad
module never crashes an env worker. Each call is bounded in time
(``MetaPolicyConfig.call_timeout_s``, default 0.1 s) when the wrapper is reset in the main
thread of the process (the case for sample-factory env workers) and SIGALRM is not used by
anything else, by :mod:`code_generation.time_bound` (a watchdog thread and SIGALRM, on the
CPU time the call uses, so a loaded machine does not stop it). Elsewhere (other threads,
platforms without ``pthread_kill``) calls run unbounded.
A skill name outside ``SKILLS`` is replaced by the fallback too. :func:`load` returns
a wrapper that is already reset; call :meth:`MetaPolicy.reset` at every episode start.

Pure Python + numpy: no NLE, no sample-factory.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from code_generation import time_bound
from code_generation.loader import DEFAULT_ROOT, MetaPolicyError, available, load_class, module_path  # noqa: F401
from code_generation.time_bound import DEFAULT_CALL_TIMEOUT_S
from common.vocabulary import SKILLS

logger = logging.getLogger(__name__)

FALLBACK_SKILL = "discoverer"
HUNGRY = 2  # NLE hunger state: values >= 2 mean hungry or worse

# NetHack's CLR_* colour numbers (include/color.h), plus characters -> usual colours.
COLOR_MAP: dict[str, int] = {
    "black": 0, "red": 1, "green": 2, "brown": 3, "blue": 4, "magenta": 5, "cyan": 6,
    "gray": 7, "no_color": 8, "orange": 9, "bright_green": 10, "yellow": 11,
    "bright_blue": 12, "bright_magenta": 13, "bright_cyan": 14, "white": 15,
    "@": 15,  # shopkeepers are white '@' (so is the hero: the window hides the hero's colour)
    "_": 7,  # altars are gray '_'
}


@dataclass
class MetaPolicyConfig:
    """How generated code is called at run time."""

    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S  # 0 disables the time bound
    max_logged_errors: int = 20  # then errors are only counted
    # the discoverer's time budget in game turns, set on the player after ``set_initial_values()``
    # (None: the module's own, 500 in the release's training policy). A named deviation for
    # CPU-scale lives (``--discoverer_turns``, docs/results.md): the other budgets stay the module's.
    discoverer_turns: int | None = None


def load(task: str, seed: int, root: str | Path | None = None,
         config: MetaPolicyConfig | None = None) -> "MetaPolicy":
    """The guarded meta-policy of ``task`` / ``seed`` (module imported once per process)."""
    policy = MetaPolicy(load_class(task, seed, root), task, seed, config)
    policy.reset()
    return policy


class MetaPolicy:
    """Guarded wrapper around a ``NetHackPlayer`` instance (see the module docstring)."""

    def __init__(self, player_class: type, task: str, seed: int, config: MetaPolicyConfig | None = None) -> None:
        self.player_class = player_class
        self.task = task
        self.seed = seed
        self.config = config or MetaPolicyConfig()
        self.player: Any = None
        self.num_errors = 0
        self._kills_seen = 0
        self._branch_depth = -2
        self._color_map = dict(COLOR_MAP)
        self._use_timer = False
        self._hooks = {name: callable(getattr(player_class, name, None)) for name in
                       ("update_gold", "defeat_monster", "update_xp_level", "update_hunger", "update_position")}

    # -- guard -----------------------------------------------------------------
    def _timer_ready(self) -> bool:
        """Whether calls can be bounded (main thread, our SIGALRM handler); starts the watchdog."""
        return time_bound.ready(self.config.call_timeout_s)

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
        watch = time_bound.WATCHDOG if self._use_timer else None
        try:
            if watch is not None:
                watch.deadline = watch.now() + self.config.call_timeout_s
                watch.in_call = True
            try:
                return True, fn(*args)
            finally:
                if watch is not None:
                    watch.in_call = False
                    watch.deadline = 0.0
        except (time_bound.CallTimeout, Exception) as exc:  # generated code may raise anything
            self._error(what, exc)
            return False, None

    def _error(self, what: str, exc: BaseException | str) -> None:
        self.num_errors += 1
        text = "timed out" if isinstance(exc, time_bound.CallTimeout) else repr(exc)
        if self.num_errors <= self.config.max_logged_errors:
            logger.warning("meta-policy %s seed %d: %s failed (%s); using the fallback",
                           self.task, self.seed, what, text)

    # -- API used by the run-time ---------------------------------------------
    def reset(self) -> None:
        """New episode: a fresh ``NetHackPlayer(max_depth=-1, branch_depth=-2)`` + ``set_initial_values()``."""
        self._kills_seen = 0
        self._branch_depth = -2
        self._color_map = dict(COLOR_MAP)
        self._use_timer = self._timer_ready()
        ok, player = self._call("NetHackPlayer()", self.player_class, -1, -2)
        self.player = player if ok else None
        if self.player is not None:
            self._call("set_initial_values", self.player.set_initial_values)
            if self.config.discoverer_turns is not None:
                self._call("discoverer_skill_steps", _set_attr, self.player, "discoverer_skill_steps",
                           int(self.config.discoverer_turns))

    @property
    def initial_skill(self) -> str:
        skill = getattr(self.player, "skill", FALLBACK_SKILL) if self.player is not None else FALLBACK_SKILL
        return skill if isinstance(skill, str) and skill in SKILLS else FALLBACK_SKILL

    def preconditions(self, chars: Any, colors: Any, num_items: int) -> tuple[bool, bool]:
        """``(worshipper_ok, merchant_ok)``; ``(False, False)`` on any failure."""
        if self.player is None:
            return False, False
        ok, out = self._call("skill_precondition", self.player.skill_precondition,
                             chars, colors, int(num_items), self._color_map)
        if not ok:
            return False, False
        try:
            worshipper_ok, merchant_ok = out
            return bool(worshipper_ok), bool(merchant_ok)
        except Exception as exc:
            self._error("skill_precondition (result)", exc)
            return False, False

    def should_terminate(self, skill: str, skill_time: int, current_depth: int, previous_depth: int,
                         preconditions: Sequence[bool]) -> bool:
        """Whether the active skill ends now; True on any failure."""
        if self.player is None:
            return True
        ok, out = self._call("skill_termination", self.player.skill_termination, skill, int(skill_time),
                             int(current_depth), int(previous_depth), [bool(p) for p in preconditions])
        if not ok:
            return True
        try:
            return bool(out)
        except Exception as exc:
            self._error("skill_termination (result)", exc)
            return True

    def next_skill(self, current_skill: str, depth: int, branch_number: int, merchant_ok: bool,
                   worshipper_ok: bool) -> str:
        """The next skill name (one of ``common.vocabulary.SKILLS``); ``"discoverer"`` on any failure."""
        if self.player is None:
            return FALLBACK_SKILL
        ok, out = self._call("perform_task", self.player.perform_task, current_skill, int(depth),
                             int(branch_number), bool(merchant_ok), bool(worshipper_ok))
        if not ok:
            return FALLBACK_SKILL
        if not isinstance(out, str) or out not in SKILLS:
            self._error("perform_task", f"returned {out!r}, not one of {', '.join(SKILLS)}")
            return FALLBACK_SKILL
        return out

    def _learn_branch_depth(self, value: int) -> None:
        # once known, the entrance stays where it was first seen (the release writes it once)
        if self._branch_depth == -2 and value != -2:
            self._branch_depth = value
            self._call("branch_depth", _set_attr, self.player, "branch_depth", value)

    def skill_ended(self, skill: str, start_depth: int, dungeon_number: int) -> None:
        """The active skill ended: a descender that ends outside the Dungeons of Doom (dungeon number
        0) went down the Mines staircase, so the entrance is on the depth it started from."""
        if self.player is not None and skill == "descender" and int(dungeon_number) != 0:
            self._learn_branch_depth(int(start_depth))

    def update_state(self, info: Mapping[str, Any]) -> None:
        """Passes the env's info dict to the module's state hooks (see the module docstring)."""
        if self.player is None:
            return
        player = self.player
        if "branch_depth" in info:
            self._learn_branch_depth(int(info["branch_depth"]))
        if self._hooks["update_gold"] and "gold" in info:
            self._call("update_gold", player.update_gold, int(info["gold"]))
        if "kills" in info:
            kills = int(info["kills"])
            if self._hooks["defeat_monster"]:
                for _ in range(max(0, kills - self._kills_seen)):
                    if not self._call("defeat_monster", player.defeat_monster)[0]:
                        break
            self._kills_seen = max(self._kills_seen, kills)
        if self._hooks["update_xp_level"] and "xp_level" in info:
            self._call("update_xp_level", player.update_xp_level, int(info["xp_level"]))
        if self._hooks["update_hunger"] and "hunger" in info:
            self._call("update_hunger", player.update_hunger, int(info["hunger"]))
        if info.get("just_eaten") and int(info.get("dungeon_number", -1)) == 2 and hasattr(player, "eaten_food"):
            self._call("eaten_food", _set_attr, player, "eaten_food", True)
        if self._hooks["update_position"] and "depth" in info and "dungeon_number" in info:
            self._call("update_position", player.update_position, int(info["depth"]), int(info["dungeon_number"]))


def _set_attr(obj: Any, name: str, value: Any) -> None:
    setattr(obj, name, value)
