"""Hosts a policy-over-skills module and runs the calls the skill runtime makes into it.

Standard library only (numpy is imported lazily, for the 7x7 windows): this file is also the program that
runs inside the isolated child (:mod:`code_generation.isolation` binds it read-only into a bubblewrap sandbox
and runs it with ``python -I -S -B``), where nothing else of the project is visible. The same
:class:`PlayerHost` runs in-process under ``--trust_generated_code``, so both paths decide alike.

The runtime's calls arrive as lists of *ops* for one player (one environment's ``NetHackPlayer``), so that a
step costs one round trip to the child; every call is guarded as the runtime always guarded it: an exception
becomes an error record and the runtime's fallback (``(False, False)``, True, ``"discoverer"``).

======================================================  =========================================================
op                                                      what it does, its result
======================================================  =========================================================
``["new", discoverer_turns]``                           ``NetHackPlayer(-1, -2)``, ``set_initial_values()``, the
                                                        discoverer's budget when not None; ``{"alive": true,
                                                        "e": n}``: n errors in the request so far, its own included
``["drop"]``                                            forgets the player
``["set", label, name, value]``                         ``setattr(player, name, value)``
``["set_if_has", label, name, value]``                  the same where the player has that attribute
``["hook", name, args]``                                ``player.name(*args)``
``["defeat", n]``                                       ``defeat_monster()`` n times, stopping at a failure
``["pre", chars, colors, num_items]``                   ``skill_precondition``: ``[worshipper_ok, merchant_ok]``
``["term", skill, time, depth, previous, preconds]``    ``skill_termination``: a bool (None on failure)
``["next", skill, depth, branch, merchant, worshipper]``  ``perform_task``: the name it returned
``["decide", pre, term, branch_depth, next]``           the three above in the runtime's order: the preconditions
                                                        feed the termination, ``perform_task`` runs only when the
                                                        skill ends, after ``branch_depth`` is set (when not None)
``("d", chars, colors, num_items, ...)``                 ``decide`` as it travels to the child, flat (see
                                                        :func:`flat_decide`)
``["get", name]``                                       an attribute's value, where JSON can carry it
``["peek", name]``                                      the same, a missing one not counted as an error
======================================================  =========================================================

A request is ``{"op": "run", "h": handle, "ops": [...]}`` (answered ``{"r": results, "e": errors}``) or, for
several players at once (the games of one rollout worker, stepped together), ``{"op": "many", "b": [[handle,
ops], ...]}``, answered ``{"m": [{"r": ..., "e": ...}, ...]}``, one answer per player in order.

A window (``chars``, ``colors``) is a numpy array in the ops; to the child it travels as ``[dtype, shape, bytes]``
(:func:`encode_array`). Requests go to the child in :mod:`marshal`'s format, each after its length (4 bytes, little
endian): the parent's own data, read only by the child, at a tenth of JSON's cost a game. Replies are JSON lines:
the parent never unmarshals or unpickles what the child sends.
"""
from __future__ import annotations

import json
import marshal
import os
import sys
from typing import Any, Callable

PLAYER_CLASS = "NetHackPlayer"
HOOKS = ("update_gold", "defeat_monster", "update_xp_level", "update_hunger", "update_position")
MAX_TEXT = 300  # longest repr carried back in an error or a bad result


def encode_array(array: Any) -> list:
    """A window as the child receives it: dtype, shape and its bytes (C order)."""
    if type(array).__name__ != "ndarray":
        import numpy as np  # lazy: the child imports numpy after its start-up (see serve)

        array = np.asarray(array)
    return [array.dtype.str, list(array.shape), array.tobytes()]  # tobytes: C order, contiguous or not


def flat_decide(op: list) -> tuple:
    """A ``decide`` op as it travels to the child: one flat tuple, its windows' bytes in it (a tenth of the nested
    op's objects to unmarshal there, every step): ``("d", chars, colors, num_items, skill, time, depth, previous,
    branch_depth, next_skill, next_depth, branch)``, each window as :func:`encode_array`'s form."""
    _, (chars, colors, num_items), term_args, branch_depth, next_args = op
    return ("d", encode_array(chars), encode_array(colors), num_items, *term_args, branch_depth, *next_args)


def decode_array(spec: Any) -> Any:
    """A window from :func:`encode_array`'s form; an array (the in-process host's calls) passes as it is."""
    if not isinstance(spec, list):
        return spec
    import numpy as np  # lazy: the child imports numpy after its start-up (see serve)

    dtype, shape, data = spec
    # a bytearray keeps the array writable, as the runtime's own window is
    return np.ndarray(shape, np.dtype(dtype), bytearray(data))


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # generated code's __repr__ may raise anything
        text = f"<unprintable {type(value).__name__}: {type(exc).__name__}>"
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "..."


def _error_text(exc: BaseException) -> str:
    return "timed out" if type(exc).__name__ == "CallTimeout" else _short(exc)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if hasattr(value, "item") and getattr(value, "shape", None) == ():  # a numpy scalar
        return _jsonable(value.item())
    return {"repr": _short(value)}


def _pair(value: Any) -> list[bool]:
    """``skill_precondition``'s result as the runtime reads it: ``[worshipper_ok, merchant_ok]``."""
    worshipper_ok, merchant_ok = value
    return [bool(worshipper_ok), bool(merchant_ok)]


class PlayerHost:
    """The module's ``NetHackPlayer`` instances, keyed by handle, and the guarded calls into them.

    ``guard(fn, *args)`` runs one call (in-process: under the CPU-time bound of
    :mod:`code_generation.time_bound`; in the child: directly, the parent's wall clock bounds the child);
    ``catch`` is what a call may raise and still count as the module's failure.
    """

    def __init__(self, player_class: type, guard: Callable[..., Any] | None = None,
                 catch: tuple[type[BaseException], ...] = (Exception,)) -> None:
        self.player_class = player_class
        self.guard = guard  # None: calls run directly (the child)
        self.catch = catch
        self.players: dict[int, Any] = {}
        self.errors: list[list[str]] = []
        self.hooks = {name: callable(getattr(player_class, name, None)) for name in HOOKS}

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
        try:
            return True, (fn(*args) if self.guard is None else self.guard(fn, *args))
        except self.catch as exc:  # generated code may raise anything
            self.errors.append([what, _error_text(exc)])
            return False, None

    def _result(self, what: str, convert: Callable[[Any], Any], out: Any) -> tuple[bool, Any]:
        # converting the result runs the module's code too (its __bool__, its __iter__), unless the result is
        # plain: a bool, an int, or a tuple or list of them (the usual case; no bound needed, a step's worth of
        # time saved)
        try:
            kind = type(out)
            if kind is bool or kind is int:
                return True, convert(out)
            if kind is tuple or kind is list:
                for v in out:
                    if type(v) is not bool and type(v) is not int:
                        break
                else:
                    return True, convert(out)
            return True, (convert(out) if self.guard is None else self.guard(convert, out))
        except self.catch as exc:
            self.errors.append([f"{what} (result)", _error_text(exc)])
            return False, None

    # -- the decisions ---------------------------------------------------------------------------------------
    def _pre(self, player: Any, chars: Any, colors: Any, num_items: int, color_map: dict) -> list[bool] | None:
        ok, out = self._call("skill_precondition", player.skill_precondition, decode_array(chars),
                             decode_array(colors), int(num_items), dict(color_map))
        if not ok:
            return None
        ok, out = self._result("skill_precondition", _pair, out)
        return out if ok else None

    def _term(self, player: Any, skill: str, skill_time: int, depth: int, previous: int,
              preconds: list) -> bool | None:
        ok, out = self._call("skill_termination", player.skill_termination, skill, int(skill_time), int(depth),
                             int(previous), [bool(p) for p in preconds])
        if not ok:
            return None
        ok, out = self._result("skill_termination", bool, out)
        return out if ok else None

    def _next(self, player: Any, skill: str, depth: int, branch: int, merchant: bool, worshipper: bool) -> Any:
        ok, out = self._call("perform_task", player.perform_task, skill, int(depth), int(branch), bool(merchant),
                             bool(worshipper))
        if not ok:
            return None
        return out if isinstance(out, str) else {"repr": _short(out)}

    def _decide(self, player: Any, color_map: dict, chars: Any, colors: Any, num_items: int, skill: str,
                skill_time: int, depth: int, previous: int, branch_depth: int | None, next_skill: str,
                next_depth: int, branch: int) -> list:
        """The ``decide`` op: the preconditions feed the termination; ``perform_task`` runs only when the skill ends
        (a failed termination ends it: the runtime's fallback), after ``branch_depth`` is set when not None."""
        pre = self._pre(player, chars, colors, num_items, color_map)
        preconds = pre if pre is not None else [False, False]
        term = self._term(player, skill, skill_time, depth, previous, preconds)
        nxt = None
        if term is None or term:
            if branch_depth is not None:
                self._call("branch_depth", setattr, player, "branch_depth", int(branch_depth))
            nxt = self._next(player, next_skill, next_depth, branch, preconds[1], preconds[0])
        return [pre, term, nxt]

    def _new(self, handle: int, discoverer_turns: int | None) -> Any:
        ok, player = self._call("NetHackPlayer()", self.player_class, -1, -2)
        if not ok:
            self.players.pop(handle, None)
            return {"alive": False, "e": len(self.errors)}
        self.players[handle] = player
        self._call("set_initial_values", player.set_initial_values)
        if discoverer_turns is not None:
            self._call("discoverer_skill_steps", setattr, player, "discoverer_skill_steps", int(discoverer_turns))
        return {"alive": True, "e": len(self.errors)}

    def run(self, handle: int, ops: list, color_map: dict) -> list:
        """Runs ``ops`` on the player ``handle``; one result per op (errors go to :attr:`errors`)."""
        results: list = []
        for op in ops:
            kind = op[0]
            player = self.players.get(handle)
            if kind == "new":
                results.append(self._new(handle, op[1]))
                continue
            if kind == "drop":
                self.players.pop(handle, None)
                results.append(None)
                continue
            if player is None:  # no player (its constructor failed): every decision takes the fallback
                results.append(None)
                continue
            if kind == "d":  # the op of every step, as it travels to the child (flat_decide): tested first
                results.append(self._decide(player, color_map, *op[1:]))
            elif kind == "decide":
                _, (chars, colors, num_items), term_args, branch_depth, next_args = op
                results.append(self._decide(player, color_map, chars, colors, num_items, *term_args, branch_depth,
                                            *next_args))
            elif kind in ("set", "set_if_has"):
                _, label, name, value = op
                if kind == "set_if_has":
                    ok, has = self._call(label, hasattr, player, name)
                    if not (ok and has):
                        results.append(None)
                        continue
                self._call(label, setattr, player, name, value)
                results.append(None)
            elif kind == "hook":
                name, args = op[1], op[2]
                self._call(name, lambda: getattr(player, name)(*args))
                results.append(None)
            elif kind == "defeat":
                for _ in range(int(op[1])):
                    if not self._call("defeat_monster", player.defeat_monster)[0]:
                        break
                results.append(None)
            elif kind == "pre":
                results.append(self._pre(player, op[1], op[2], op[3], color_map))
            elif kind == "term":
                results.append(self._term(player, *op[1:]))
            elif kind == "next":
                results.append(self._next(player, *op[1:]))
            elif kind == "get":
                ok, value = self._call(op[1], getattr, player, op[1])
                results.append({"value": _jsonable(value)} if ok else None)
            elif kind == "peek":  # a look from outside (tests, tools): a missing attribute is no module error
                try:
                    value = getattr(player, op[1]) if self.guard is None else self.guard(getattr, player, op[1])
                    results.append({"value": _jsonable(value)})
                except self.catch:
                    results.append({"missing": True})
            else:
                raise ValueError(f"unknown op {kind!r}")
        return results


# -- the child's program -----------------------------------------------------------------------------------------
def load_player_class(source: str, filename: str) -> type:
    """Compiles exactly ``source`` (the text the parent checked) into a fresh module; never a .pyc."""
    namespace: dict[str, Any] = {"__name__": "generated_policy", "__file__": filename, "__builtins__": __builtins__}
    exec(compile(source, filename, "exec", dont_inherit=True), namespace)
    cls = namespace.get(PLAYER_CLASS)
    if not isinstance(cls, type):
        raise TypeError(f"defines no class {PLAYER_CLASS}")
    return cls


def serve() -> None:
    """The isolated child: one JSON request per line on fd 0, one JSON reply per line on fd 1."""
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the module's own reads and prints reach nothing
        os.dup2(devnull, fd)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "pkgs"))
    import numpy  # noqa: F401  # lazy: found on the path set just above; before the module, whose budget it is not

    os.environ.clear()  # the thread settings numpy read at import are the only variables the child had
    reader = _FrameReader(requests)

    def reply(message: Any) -> None:
        replies.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    reply({"ready": True})
    host: PlayerHost | None = None
    color_map: dict = {}
    while True:
        frame = reader.frame()
        if frame is None:
            return  # the parent closed the pipe: its process ended
        request = marshal.loads(frame)
        if request["op"] == "load":
            try:
                host = PlayerHost(load_player_class(request["source"], request["filename"]))
                color_map = request["color_map"]
                reply({"ok": True, "hooks": host.hooks})
            except BaseException as exc:  # noqa: BLE001 - whatever the module's import raised is its failure
                reply({"ok": False, "error": _short(exc)})
            continue
        assert host is not None, "load first"
        if request["op"] == "many":  # several players' ops (a rollout worker's games) in one round trip
            reply({"m": [_run_one(host, h, ops, color_map) for h, ops in request["b"]]})
            continue
        reply(_run_one(host, request["h"], request["ops"], color_map))


def _run_one(host: PlayerHost, handle: int, ops: list, color_map: dict) -> dict:
    """One player's ops as the child answers them: ``{"r": results, "e": errors}``."""
    host.errors = []
    try:
        results = host.run(handle, ops, color_map)
    except BaseException as exc:  # noqa: BLE001 - e.g. a result too deep to convert
        return {"r": None, "e": [["host", _short(exc)]]}
    return {"r": results, "e": host.errors}


class _FrameReader:
    """Length-prefixed requests from a raw pipe (the module cannot reach it: fd 0 is /dev/null by then)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.buffer = b""

    def _fill(self, size: int) -> bool:
        while len(self.buffer) < size:
            chunk = self.stream.read(max(1 << 16, size - len(self.buffer)))
            if not chunk:
                return False
            self.buffer += chunk
        return True

    def frame(self) -> bytes | None:
        if not self._fill(4):
            return None
        size = int.from_bytes(self.buffer[:4], "little")
        if not self._fill(4 + size):
            return None
        frame, self.buffer = self.buffer[4:4 + size], self.buffer[4 + size:]
        return frame


if __name__ == "__main__":
    serve()
