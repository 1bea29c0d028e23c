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

Where the module runs: in a child process that the operating system confines (:mod:`code_generation.isolation`:
bubblewrap, no network, a read-only view of the interpreter and numpy only, an empty environment, 1 GiB of address
space), one child per module and process, all of a worker's environments in it; a step's calls travel together
(:meth:`MetaPolicy.step_decisions`, one round trip). Each request is bounded by the wall clock
(``MetaPolicyConfig.call_timeout_s`` per call into the module, default 1 s); code in the child cannot catch it:
the parent kills the child and starts another, the step takes the fallback and the error is counted, and the
players of that child's environments start afresh (``NetHackPlayer(-1, -2)``, ``set_initial_values()``, the
entrance depth if known). Its import and ``__init__`` run under the same limits. Where bubblewrap cannot run,
:func:`load` raises :class:`code_generation.isolation.IsolationUnavailable` (the scripts exit 2 with its line);
``MetaPolicyConfig.trust_generated_code`` (``--trust_generated_code``) runs the module in this process instead,
each call bounded in CPU time by :mod:`code_generation.time_bound` (0.1 s).

Every call into the module goes through a guard: any exception is logged (with task and seed) and replaced by a
fallback (``next_skill`` -> :data:`FALLBACK_SKILL`, the discoverer; ``should_terminate`` -> True, ``preconditions`` ->
``(False, False)``), so a bad module never crashes an env worker. A skill name outside ``SKILLS`` is replaced by
the fallback too. :func:`load` returns a wrapper that is already reset; call :meth:`MetaPolicy.reset` at every
episode start. ``MetaPolicy.player`` is a view of the module's player (attributes read and set through the host).

Pure Python + numpy: no NLE, no sample-factory.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from code_generation.isolation import (
    DEFAULT_ISOLATED_CALL_TIMEOUT_S,
    IMPORT_TIMEOUT_S,
    InProcessPlayerHost,
    IsolatedPlayerHost,
    IsolationUnavailable,
    ModuleRefused,
    Reply,
    cached_host,
    source_digest,
)
from code_generation.loader import (  # noqa: F401
    DEFAULT_ROOT,
    MetaPolicyError,
    available,
    checked_module,
    load_class,
    module_path,
    player_class,
)
from code_generation.policy_host import flat_decide
from code_generation.time_bound import DEFAULT_CALL_TIMEOUT_S
from common.vocabulary import ALWAYS_STARTABLE, SKILL_SET, SKILLS

logger = logging.getLogger(__name__)

__all__ = ["COLOR_MAP", "FALLBACK_SKILL", "IsolationUnavailable", "MetaPolicy", "MetaPolicyConfig", "MetaPolicyError",
           "available", "load", "module_path"]

#: the skill a failed call falls back on: the first that may always start (the designed set's discoverer)
FALLBACK_SKILL = (ALWAYS_STARTABLE or SKILLS)[0]
#: the skills that end on a depth increase (the designed set's descender): one that ends outside the Dungeons of
#: Doom went down the Mines' staircase, so the Mines' entrance is on the depth it started from
_DESCENDING = frozenset(s.name for s in SKILL_SET.specs if s.end == "depth_increase")
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

    # the bound per call into the module: wall clock in the isolated child (default 1 s), CPU time in-process
    # under trust_generated_code (default 0.1 s); 0 disables the bound
    call_timeout_s: float | None = None
    max_logged_errors: int = 20  # then errors are only counted
    # the discoverer's time budget in game turns, set on the player after ``set_initial_values()``
    # (None: the module's own, 500 in the release's training policy). A named deviation for
    # CPU-scale lives (``--discoverer_turns``, docs/results.md): the other budgets stay the module's.
    discoverer_turns: int | None = None
    # --trust_generated_code: run the module in this process, unconfined (off: the isolated child)
    trust_generated_code: bool = False
    import_timeout_s: float = IMPORT_TIMEOUT_S  # the isolated child's bound on the module's import

    def timeout(self) -> float:
        if self.call_timeout_s is not None:
            return float(self.call_timeout_s)
        return DEFAULT_CALL_TIMEOUT_S if self.trust_generated_code else DEFAULT_ISOLATED_CALL_TIMEOUT_S


def _make_host(path: Path, source: str, config: MetaPolicyConfig) -> Any:
    if config.trust_generated_code:  # the same checked text, compiled in this process (cached per text)
        return InProcessPlayerHost(player_class(path, source), COLOR_MAP, config.timeout())
    try:
        return IsolatedPlayerHost(source, str(path), COLOR_MAP, config.timeout(), config.import_timeout_s)
    except ModuleRefused as exc:
        raise MetaPolicyError(f"{path}: refused: {exc}") from None


def host_for(task: str, seed: int, root: str | Path | None, config: MetaPolicyConfig) -> Callable[[], Any]:
    """A factory of this process's host for the module (checked now; a fork makes its own host on first use)."""
    path, source = checked_module(task, seed, root)
    key = (path.resolve(), source_digest(source), config.trust_generated_code, config.timeout(),
           config.import_timeout_s)

    def make() -> Any:
        return cached_host(key, lambda: _make_host(path, source, config))

    make()
    return make


def load(task: str, seed: int, root: str | Path | None = None,
         config: MetaPolicyConfig | None = None) -> "MetaPolicy":
    """The guarded meta-policy of ``task`` / ``seed``: the module checked, then loaded in its isolated child
    (one per module and process), or in-process under ``config.trust_generated_code``."""
    config = config or MetaPolicyConfig()
    policy = MetaPolicy(host_for(task, seed, root, config), task, seed, config)
    policy.reset()
    policy._flush()  # the first player now: a constructor that fails or hangs shows at load
    return policy


@dataclass
class DecisionRequest:
    """One game's step calls (:meth:`MetaPolicy.decision_request`), waiting for their reply."""

    policy: "MetaPolicy"
    host: Any
    sent: list
    learnt: Optional[int]

    def run(self) -> tuple[tuple[bool, bool], bool, str | None]:
        """Sends it alone and returns its decisions."""
        return self.finish(self.host.request(self.policy.handle, self.sent))

    def finish(self, reply: Reply) -> tuple[tuple[bool, bool], bool, str | None]:
        """The preconditions, whether the skill ends, and the next skill, as :meth:`MetaPolicy.step_decisions`."""
        return self.policy._decided(self.sent, self.learnt, reply)


def decide_together(requests: Sequence[DecisionRequest]) -> list[tuple[tuple[bool, bool], bool, str | None]]:
    """The decisions of several games' steps, one round trip per host (the games of one rollout worker share
    its host: one round trip for all of them); each game decides as :meth:`MetaPolicy.step_decisions` would."""
    replies: list[Optional[Reply]] = [None] * len(requests)
    by_host: dict[int, list[int]] = {}
    for i, request in enumerate(requests):
        by_host.setdefault(id(request.host), []).append(i)
    for indices in by_host.values():
        host = requests[indices[0]].host
        answers = host.request_many([(requests[i].policy.handle, requests[i].sent) for i in indices])
        for i, answer in zip(indices, answers):
            replies[i] = answer
    return [request.finish(reply) for request, reply in zip(requests, replies)]


class PlayerView:
    """The module's player as the tests and tools see it: attribute reads and writes go through the host."""

    def __init__(self, policy: "MetaPolicy") -> None:
        object.__setattr__(self, "_policy", policy)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        out = self._policy._request([["peek", name]])[0]
        if not isinstance(out, dict) or "value" not in out:
            raise AttributeError(f"the player has no attribute {name!r}")
        return out["value"]

    def __setattr__(self, name: str, value: Any) -> None:
        self._policy._pending.append(["set", name, name, value])


class MetaPolicy:
    """Guarded wrapper around one ``NetHackPlayer`` in its host (see the module docstring)."""

    def __init__(self, host_factory: Callable[[], Any], task: str, seed: int,
                 config: MetaPolicyConfig | None = None) -> None:
        self._host_factory = host_factory
        self.host = host_factory()
        self.handle = self.host.new_handle()
        self._generation = self.host.generation
        self.task = task
        self.seed = seed
        self.config = config or MetaPolicyConfig()
        self._num_errors = 0
        self._kills_seen = 0
        self._branch_depth = -2
        self._alive = False
        self._pending: list = []
        self._hooks = dict(self.host.hooks)
        self._episode_op: Optional[list] = None  # the "new" op of the last reset (not a restarted child's)
        #: the error count when the last reset's player was made (see reset)
        self.errors_at_new = 0

    # -- the host --------------------------------------------------------------------------------------------
    def _request(self, ops: list) -> list:
        """Sends what waits and ``ops`` in one request; one result per op of ``ops`` (None: the fallback)."""
        host, sent = self._outgoing(ops)
        return self._incoming(sent, len(ops), host.request(self.handle, sent))

    def _outgoing(self, ops: list) -> tuple[Any, list]:
        """The host and what goes to it: a new player first where the child was (re)started, what waits, ``ops``."""
        host = self.host
        prefix: list = []
        if host.pid != os.getpid():  # a forked process: its own child, a player made afresh there
            host = self.host = self._host_factory()
            self.handle = host.new_handle()
            self._generation = -1
        if self._generation != host.generation:  # the child was restarted: this player is gone
            self._generation = host.generation
            prefix = [["new", self.config.discoverer_turns]]
            if self._branch_depth != -2:
                prefix.append(["set", "branch_depth", "branch_depth", self._branch_depth])
        sent = prefix + self._pending + ops
        self._pending = []
        return host, sent

    def _incoming(self, sent: list, num_ops: int, reply: Reply) -> list:
        before = self._num_errors
        for what, text in reply.errors:
            self._error(what, text)
        if reply.results is None:
            if any(op is self._episode_op for op in sent):
                self.errors_at_new = self._num_errors  # the whole request failed: its errors came before the steps
            return [None] * num_ops
        for op, out in zip(sent, reply.results):
            if op[0] == "new":
                self._alive = isinstance(out, dict) and bool(out.get("alive"))
                if op is self._episode_op:  # the episode's player: the errors up to it are not the episode's
                    made = out.get("e") if isinstance(out, dict) else None
                    self.errors_at_new = before + (min(made, len(reply.errors)) if type(made) is int
                                                   else len(reply.errors))
        return reply.results[len(sent) - num_ops:]

    def _flush(self) -> None:
        if self._pending:
            self._request([])

    def _error(self, what: str, text: str) -> None:
        self._num_errors += 1
        if self._num_errors <= self.config.max_logged_errors:
            logger.warning("meta-policy %s seed %d: %s failed (%s); using the fallback",
                           self.task, self.seed, what, text)

    @property
    def num_errors(self) -> int:
        self._flush()
        return self._num_errors

    @property
    def player(self) -> PlayerView | None:
        """A view of the module's player (None where its constructor failed)."""
        self._flush()
        return PlayerView(self) if self._alive else None

    # -- API used by the run-time ---------------------------------------------
    def reset(self) -> None:
        """New episode: a fresh ``NetHackPlayer(max_depth=-1, branch_depth=-2)`` + ``set_initial_values()``. It
        travels with the episode's first request; :attr:`errors_at_new` is then the error count the episode's
        steps start from (the errors of that request up to the new player included, told by the host)."""
        self._kills_seen = 0
        self._branch_depth = -2
        self._episode_op = ["new", self.config.discoverer_turns]
        self._pending.append(self._episode_op)

    @property
    def initial_skill(self) -> str:
        out = self._request([["peek", "skill"]])[0]
        skill = out.get("value") if isinstance(out, dict) else None
        return skill if isinstance(skill, str) and skill in SKILLS else FALLBACK_SKILL

    def start_decisions(self, chars: Any, colors: Any, num_items: int) -> tuple[tuple[bool, bool], str]:
        """An episode's first :meth:`preconditions` and :attr:`initial_skill`, in that order, in one round trip (a
        reset's); a child that fails the request gives both fallbacks."""
        pre, peek = self._request([["pre", chars, colors, int(num_items)], ["peek", "skill"]])
        skill = peek.get("value") if isinstance(peek, dict) else None
        return ((bool(pre[0]), bool(pre[1])) if pre is not None else (False, False),
                skill if isinstance(skill, str) and skill in SKILLS else FALLBACK_SKILL)

    def preconditions(self, chars: Any, colors: Any, num_items: int) -> tuple[bool, bool]:
        """``(worshipper_ok, merchant_ok)``; ``(False, False)`` on any failure."""
        out = self._request([["pre", chars, colors, int(num_items)]])[0]
        return (bool(out[0]), bool(out[1])) if out is not None else (False, False)

    def should_terminate(self, skill: str, skill_time: int, current_depth: int, previous_depth: int,
                         preconditions: Sequence[bool]) -> bool:
        """Whether the active skill ends now; True on any failure."""
        out = self._request([["term", skill, int(skill_time), int(current_depth), int(previous_depth),
                              [bool(p) for p in preconditions]]])[0]
        return True if out is None else bool(out)

    def _skill_name(self, out: Any) -> str:
        if out is None:
            return FALLBACK_SKILL
        if not isinstance(out, str) or out not in SKILLS:
            shown = out["repr"] if isinstance(out, dict) and "repr" in out else repr(out)
            self._error("perform_task", f"returned {shown}, not one of {', '.join(SKILLS)}")
            return FALLBACK_SKILL
        return out

    def next_skill(self, current_skill: str, depth: int, branch_number: int, merchant_ok: bool,
                   worshipper_ok: bool) -> str:
        """The next skill name (one of ``common.vocabulary.SKILLS``); :data:`FALLBACK_SKILL` on any failure."""
        out = self._request([["next", current_skill, int(depth), int(branch_number), bool(merchant_ok),
                              bool(worshipper_ok)]])[0]
        return self._skill_name(out)

    def step_decisions(self, info: Mapping[str, Any], chars: Any, colors: Any, num_items: int, skill: str,
                       skill_time: int, depth: int, start_depth: int, branch_number: int
                       ) -> tuple[tuple[bool, bool], bool, str | None]:
        """A step's calls in one round trip, in the runtime's order: :meth:`update_state`, :meth:`preconditions`,
        :meth:`should_terminate` and, when the skill ends, :meth:`skill_ended` then :meth:`next_skill`.
        Returns the preconditions, whether the skill ends, and the next skill (None when it does not end).
        :meth:`decision_request` and :func:`decide_together` make the same calls for several games at once."""
        request = self.decision_request(info, chars, colors, num_items, skill, skill_time, depth, start_depth,
                                        branch_number)
        return request.run()

    def decision_request(self, info: Mapping[str, Any], chars: Any, colors: Any, num_items: int, skill: str,
                         skill_time: int, depth: int, start_depth: int, branch_number: int) -> "DecisionRequest":
        """The step's calls of :meth:`step_decisions`, not yet sent."""
        self.update_state(info)
        learnt = None
        if skill in _DESCENDING and int(branch_number) != 0 and self._branch_depth == -2 and int(start_depth) != -2:
            learnt = int(start_depth)  # set only if the skill ends (skill_ended)
        op = ["decide", [chars, colors, int(num_items)], [skill, int(skill_time), int(depth), int(start_depth)],
              learnt, [skill, int(depth), int(branch_number)]]
        host, sent = self._outgoing([])
        sent.append(flat_decide(op) if host.isolated else op)  # isolated: the op as it travels to the child
        return DecisionRequest(self, host, sent, learnt)

    def _decided(self, sent: list, learnt: Optional[int], reply: Reply) -> tuple[tuple[bool, bool], bool, str | None]:
        out = self._incoming(sent, 1, reply)[0]
        if out is None:
            pre, term, nxt = None, None, None
        else:
            pre, term, nxt = out
        preconds = (bool(pre[0]), bool(pre[1])) if pre is not None else (False, False)
        ends = True if term is None else bool(term)
        if not ends:
            return preconds, False, None
        if learnt is not None and self._alive:
            self._branch_depth = learnt
        return preconds, True, self._skill_name(nxt)

    def _learn_branch_depth(self, value: int) -> None:
        # once known, the entrance stays where it was first seen (the release writes it once)
        if self._branch_depth == -2 and value != -2:
            self._branch_depth = value
            self._pending.append(["set", "branch_depth", "branch_depth", value])

    def skill_ended(self, skill: str, start_depth: int, dungeon_number: int) -> None:
        """The active skill ended: a descending skill (the descender) that ends outside the Dungeons of Doom
        (dungeon number 0) went down the Mines staircase, so the entrance is on the depth it started from."""
        if skill in _DESCENDING and int(dungeon_number) != 0:
            self._flush()
            if self._alive:
                self._learn_branch_depth(int(start_depth))

    def update_state(self, info: Mapping[str, Any]) -> None:
        """Passes the env's info dict to the module's state hooks (see the module docstring); the calls travel
        with the next request."""
        ops = self._pending
        if "branch_depth" in info and self._branch_depth == -2:  # _learn_branch_depth's test first: every step
            self._learn_branch_depth(int(info["branch_depth"]))
        if self._hooks["update_gold"] and "gold" in info:
            ops.append(["hook", "update_gold", [int(info["gold"])]])
        if "kills" in info:
            kills = int(info["kills"])
            if self._hooks["defeat_monster"] and kills > self._kills_seen:
                ops.append(["defeat", kills - self._kills_seen])
            self._kills_seen = max(self._kills_seen, kills)
        if self._hooks["update_xp_level"] and "xp_level" in info:
            ops.append(["hook", "update_xp_level", [int(info["xp_level"])]])
        if self._hooks["update_hunger"] and "hunger" in info:
            ops.append(["hook", "update_hunger", [int(info["hunger"])]])
        if info.get("just_eaten") and int(info.get("dungeon_number", -1)) == 2:
            ops.append(["set_if_has", "eaten_food", "eaten_food", True])
        if self._hooks["update_position"] and "depth" in info and "dungeon_number" in info:
            ops.append(["hook", "update_position", [int(info["depth"]), int(info["dungeon_number"])]])
