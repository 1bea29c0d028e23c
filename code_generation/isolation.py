"""Runs generated code in a child process that the operating system confines (bubblewrap).

Where generated code runs: the policies over skills at run time (:mod:`rl_baseline.skills.meta_policy`, through
:class:`IsolatedPlayerHost`) and the unit tests of code generation (:func:`code_generation.sandbox.run_in_sandbox`).
Both start ``bwrap`` (Debian's ``bubblewrap``) with:

* every namespace of its own (``--unshare-all``): no network but a loopback of its own that is down, its own
  process tree, no way to signal or see the trainer's processes;
* a file system of a few read-only binds: the shared libraries (``/usr/lib*``), the Python installation the
  trainer runs on, numpy, and :mod:`code_generation.policy_host`; no home, no work tree, no data, no ``/tmp``
  (the unit test gets its own scratch folder, writable, and nothing else of the user's);
* an empty environment (``--clearenv``; the child program clears the few thread settings numpy reads at import);
* ``RLIMIT_AS`` of 1 GiB (:data:`MEMORY_BYTES`, as the unit-test sandbox always had), no core files, and for the
  run-time child no file writes at all;
* ``--die-with-parent``: when the trainer dies, by any signal, the sandbox dies with it.

The run-time child serves one module for one process (one sample-factory rollout worker: all its environments'
players live in it; a step costs one round trip, for all of the worker's games where they step together:
:mod:`rl_baseline.skills.skill_games`). The child runs on its caller's core (:class:`Beside`): a round
trip is then a context switch rather than a wake-up of another core. The parent bounds every request by the wall clock; code in
the child cannot catch that: on a timeout the parent kills the child and starts a new one, the step takes the
runtime's fallback and the error is counted. The same limits hold while the child imports the module and runs
``__init__``.

:func:`require_isolation` says in one line what to install or enable where bubblewrap cannot run (a cluster node
without user namespaces, say); the scripts exit 2 with it. ``--trust_generated_code`` keeps the in-process path
(:class:`InProcessPlayerHost`) for a user who accepts the risk.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import logging
import marshal
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from code_generation import policy_host, time_bound

logger = logging.getLogger(__name__)

MEMORY_BYTES = 1 << 30  # the child's address space, as the unit-test sandbox's
#: the wall-clock budget of one call into the module in the isolated child (a request of n calls: n times it)
DEFAULT_ISOLATED_CALL_TIMEOUT_S = 1.0
IMPORT_TIMEOUT_S = 5.0  # the module's import, after the child has started (numpy imported)
START_TIMEOUT_S = 60.0  # bubblewrap, the interpreter and numpy
MAX_REPLY_BYTES = 1 << 20
HOST_PROGRAM = "/mm/policy_host.py"
PKGS = "/mm/pkgs"
#: thread settings numpy's OpenBLAS reads at import: one thread in the child, and the machine's core type
#: where it is set (older OpenBLAS builds misdetect some processors); cleared before the module is loaded
_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_PASSED_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), "
                "or pass --trust_generated_code to run generated code in-process, unconfined, at your own risk")


class IsolationUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create its namespaces here; the message says what to do."""


class ModuleRefused(RuntimeError):
    """The module failed in the child while it was imported (an exception, a timeout, the memory limit)."""


# -- the sandbox's command line --------------------------------------------------------------------------------
def _interpreter() -> tuple[str, str]:
    """The real interpreter (a venv's python is a link to it) and the installation it needs (its prefix)."""
    return os.path.realpath(sys.executable), os.path.realpath(sys.base_prefix)


def _numpy_dirs() -> list[tuple[str, str]]:
    import numpy  # lazy: only where a sandbox is built, to find numpy's folder

    package = Path(numpy.__file__).resolve().parent
    binds = [(str(package), f"{PKGS}/numpy")]
    libs = package.parent / "numpy.libs"  # the wheel's OpenBLAS, found through the extension's rpath
    if libs.is_dir():
        binds.append((str(libs), f"{PKGS}/numpy.libs"))
    return binds


def bwrap_command(program: list[str], binds_rw: Iterable[tuple[str, str]] = (), chdir: str = "/") -> list[str]:
    """``bwrap ... <interpreter> -I -S -B <program>``: the view described in the module docstring."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise IsolationUnavailable(f"generated code cannot be isolated: bubblewrap (bwrap) is not installed; "
                                   f"{INSTALL_HINT}")
    python, prefix = _interpreter()
    cmd = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--cap-drop", "ALL"]
    for lib in ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib"):
        if os.path.islink(lib):
            cmd += ["--symlink", os.readlink(lib), lib]
        elif os.path.isdir(lib):
            cmd += ["--ro-bind", lib, lib]
    cmd += ["--ro-bind", prefix, prefix]
    if not python.startswith(prefix + os.sep):
        cmd += ["--ro-bind", python, python]
    for src, dst in _numpy_dirs():
        cmd += ["--ro-bind", src, dst]
    cmd += ["--ro-bind", os.path.abspath(policy_host.__file__), HOST_PROGRAM]
    for src, dst in binds_rw:
        cmd += ["--bind", src, dst]
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    for name, value in _THREAD_ENV.items():
        cmd += ["--setenv", name, value]
    for name in _PASSED_ENV:
        if os.environ.get(name):
            cmd += ["--setenv", name, os.environ[name]]
    cmd += ["--remount-ro", "/", "--chdir", chdir, python, "-I", "-S", "-B"] + program
    return cmd


def limit_child(memory_bytes: int = MEMORY_BYTES, file_bytes: int = 0, cpu_seconds: Optional[int] = None
                ) -> Callable[[], None]:
    """rlimits set between fork and exec (bubblewrap and everything it starts inherit them)."""

    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
        if cpu_seconds is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))

    return apply


_PROBE: Optional[str] = None  # "" once bubblewrap has been seen to work in this process, else the reason


def require_isolation() -> None:
    """Raises :class:`IsolationUnavailable` (one line: what to install or enable) where bubblewrap cannot run."""
    global _PROBE
    if _PROBE is None:
        try:
            cmd = bwrap_command(["-c", "import sys; sys.path.insert(0, '/mm/pkgs'); import numpy"])
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  timeout=START_TIMEOUT_S, preexec_fn=limit_child())
            if proc.returncode == 0:
                _PROBE = ""
            else:
                said = proc.stderr.decode("utf-8", "replace").strip().splitlines()
                reason = said[-1] if said else f"exit status {proc.returncode}"
                _PROBE = (f"generated code cannot be isolated: bubblewrap failed to start a sandbox ({reason}); "
                          "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 and "
                          "user.max_user_namespaces > 0), or pass --trust_generated_code to run generated code "
                          "in-process, unconfined, at your own risk")
        except IsolationUnavailable as exc:
            _PROBE = str(exc)
        except subprocess.TimeoutExpired:
            _PROBE = (f"generated code cannot be isolated: a bubblewrap sandbox did not start within "
                      f"{START_TIMEOUT_S:g} s; pass --trust_generated_code to run generated code in-process")
    if _PROBE:
        raise IsolationUnavailable(_PROBE)


# -- the child beside its caller ---------------------------------------------------------------------------------
def _cpu_reader() -> Optional[Callable[[], int]]:
    """``sched_getcpu`` (a vDSO read, well under a microsecond), or None where there is none."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        import ctypes

        getcpu = ctypes.CDLL(None, use_errno=True).sched_getcpu
        getcpu.restype = ctypes.c_int
        return getcpu if getcpu() >= 0 else None
    except (OSError, AttributeError):
        return None


_GETCPU = _cpu_reader()


def _descendants(pid: int) -> list[int]:
    """``pid`` and the processes under it (bubblewrap runs the child two levels down, in its own pid namespace)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            pass
    return found


class Beside:
    """Keeps the child on its caller's core for the length of a request.

    The caller waits while the child decides: on one core a round trip is a context switch, across cores a wake-up
    of the other core (in one skill environment on a 2-core VM: about 110 us a step on one core, about 400 us
    across two). Where the caller may run on several cores (an evaluation, a test; sample-factory pins a rollout
    worker only where the workers fill the cores), the caller's thread is held on its current core during the
    request and the child moved there (when it moved); the caller's affinity is given back after."""

    def __init__(self) -> None:
        self.pids: list[int] = []
        self.cpu = -1
        self.allowed: set[int] = set()

    def child_started(self, pid: int) -> None:
        self.pids = _descendants(pid)
        self.cpu = -1
        # the caller's own affinity, read once (sample-factory sets a worker's before its environments start)
        self.allowed = os.sched_getaffinity(0) if _GETCPU is not None else set()

    def enter(self) -> Optional[set[int]]:
        if _GETCPU is None or not self.pids:
            return None
        allowed = self.allowed
        cpu = _GETCPU()
        if len(allowed) > 1:
            os.sched_setaffinity(0, {cpu})
        if cpu != self.cpu:
            self.cpu = cpu
            for pid in self.pids:
                try:
                    os.sched_setaffinity(pid, {cpu})
                except OSError:
                    pass
        return allowed if len(allowed) > 1 else None

    @staticmethod
    def leave(allowed: Optional[set[int]]) -> None:
        if allowed is not None:
            os.sched_setaffinity(0, allowed)


# -- the hosts -------------------------------------------------------------------------------------------------
@dataclass
class Reply:
    """What one request got: a result per op (None: the whole request failed) and the module's errors."""

    results: Optional[list]
    errors: list
    restarted: bool = False


class InProcessPlayerHost:
    """``--trust_generated_code``: the module runs in this process, each call under a CPU-time bound
    (:mod:`code_generation.time_bound`; ``call_timeout_s`` 0 runs calls unbounded)."""

    isolated = False

    def __init__(self, player_class: type, color_map: dict, call_timeout_s: float) -> None:
        self.call_timeout_s = call_timeout_s
        self.color_map = dict(color_map)
        self.host = policy_host.PlayerHost(player_class, guard=self._guard,
                                           catch=(Exception, time_bound.CallTimeout))
        self.hooks = dict(self.host.hooks)
        self.generation = 0
        self.restarts = 0
        self.pid = os.getpid()
        self._bounded = False
        self._ready: Optional[bool] = None
        self._handles = 0

    def new_handle(self) -> int:
        self._handles += 1
        return self._handles

    def _guard(self, fn: Callable[..., Any], *args: Any) -> Any:
        if not self._bounded:
            return fn(*args)
        # time_bound.deadline written out: several calls a step, a context manager's cost each
        watchdog = time_bound.WATCHDOG
        watchdog.deadline = watchdog.now() + self.call_timeout_s
        watchdog.in_call = True
        try:
            return fn(*args)
        finally:
            watchdog.in_call = False
            watchdog.deadline = 0.0

    def request(self, handle: int, ops: list) -> Reply:
        if self._ready is None or any(op[0] == "new" for op in ops):
            # whether calls can be bounded here (main thread, SIGALRM ours): asked at each new player, not each step
            self._ready = time_bound.ready(self.call_timeout_s)
        self._bounded = self._ready
        self.host.errors = []
        results = self.host.run(handle, ops, self.color_map)
        return Reply(results, self.host.errors)

    def request_many(self, batch: list[tuple[int, list]]) -> list[Reply]:
        """:meth:`request` for several players, one after the other (the isolated host's one round trip)."""
        return [self.request(handle, ops) for handle, ops in batch]

    def close(self) -> None:
        self.host.players.clear()


class IsolatedPlayerHost:
    """The module in a bubblewrap child (see the module docstring); over two pipes, requests in marshal's format
    after their length, replies as JSON lines (:mod:`code_generation.policy_host`)."""

    isolated = True

    def __init__(self, source: str, filename: str, color_map: dict, call_timeout_s: float,
                 import_timeout_s: float = IMPORT_TIMEOUT_S) -> None:
        self.source = source
        self.filename = filename
        self.color_map = dict(color_map)
        self.call_timeout_s = call_timeout_s
        self.import_timeout_s = import_timeout_s
        self.hooks: dict[str, bool] = {}
        self.generation = 0  # +1 at every (re)start: the players of an older generation are gone
        self.restarts = 0
        self.dead: Optional[str] = None  # why the child could not be restarted; then every call falls back
        self.pid = os.getpid()
        self.proc: Optional[subprocess.Popen] = None
        self._buffer = b""
        self._handles = 0
        self._poller: Any = None
        self._beside = Beside()
        self._start()  # raises ModuleRefused / IsolationUnavailable: the module cannot be loaded at all

    def new_handle(self) -> int:
        self._handles += 1
        return self._handles

    # -- the child's life ------------------------------------------------------------------------------------
    def _start(self) -> None:
        require_isolation()
        cmd = bwrap_command([HOST_PROGRAM])
        self._buffer = b""
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     preexec_fn=limit_child(), start_new_session=True, close_fds=True)
        self.generation += 1
        self._poller = select.poll()
        assert self.proc.stdout is not None
        self._poller.register(self.proc.stdout.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
        ready = self._read(START_TIMEOUT_S)
        self._beside.child_started(self.proc.pid)
        if not (isinstance(ready, dict) and ready.get("ready")):
            err = self._stderr_tail()
            self.kill()
            raise ModuleRefused(f"the isolated child did not start ({ready if isinstance(ready, str) else 'no answer'}"
                                f"{'; ' + err if err else ''})")
        self._write({"op": "load", "source": self.source, "filename": self.filename, "color_map": self.color_map})
        loaded = self._read(self.import_timeout_s)
        if isinstance(loaded, str):
            self.kill()
            raise ModuleRefused(f"importing it {loaded} (the limits: {self.import_timeout_s:g} s, "
                                f"{MEMORY_BYTES >> 20} MiB)")
        if not loaded.get("ok"):
            self.kill()
            raise ModuleRefused(f"importing it failed: {loaded.get('error')}")
        self.hooks = {k: bool(v) for k, v in dict(loaded.get("hooks", {})).items()}
        if self.proc.stderr is not None:
            self.proc.stderr.close()  # the child's stderr is /dev/null from here on

    def _stderr_tail(self) -> str:
        if self.proc is None or self.proc.stderr is None:
            return ""
        try:
            if self.proc.poll() is None:
                return ""
            text = self.proc.stderr.read().decode("utf-8", "replace").strip().splitlines()
            return text[-1] if text else ""
        except (OSError, ValueError):
            return ""

    def kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at collection or exit; the child also dies with its parent
            pass

    def close(self) -> None:
        """Ends the child (closing its pipe ends its loop; a child stuck in a call is killed)."""
        proc = self.proc
        if proc is None or self.pid != os.getpid():
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=0.5)
            self.proc = None
        except (OSError, subprocess.TimeoutExpired):
            self.kill()

    # -- the pipe ------------------------------------------------------------------------------------------
    def _write(self, message: dict) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        payload = _for_child(message)
        data = len(payload).to_bytes(4, "little") + payload
        fd = self.proc.stdin.fileno()
        while data:  # one system call for a request (a pipe takes 64 KiB at once); the loop for a long source
            data = data[os.write(fd, data):]

    def _read(self, timeout_s: float) -> Any:
        """The next reply (a dict), or a string saying why there is none (timed out, ended, too long)."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s if timeout_s > 0 else None
        poller = self._poller
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_REPLY_BYTES:
                return f"sent a reply over {MAX_REPLY_BYTES >> 20} MiB"
            wait_ms = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000) + 1)
            if not poller.poll(wait_ms):
                if deadline is not None and time.monotonic() >= deadline:
                    return f"timed out (wall clock, {timeout_s:g} s)"
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return "ended (killed by a limit, or crashed)"
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            reply = json.loads(line)
        except ValueError:
            return "sent a reply that is not JSON"
        return reply if isinstance(reply, dict) else "sent a reply that is not a JSON object"

    def request(self, handle: int, ops: list) -> Reply:
        """Runs ``ops`` on player ``handle`` in the child, within ``call_timeout_s`` per call into the module."""
        if self.dead is not None:
            return Reply(None, [["child", self.dead]])
        reply = self._round_trip({"op": "run", "h": handle, "ops": ops}, _calls(ops))
        if isinstance(reply, dict) and _well_formed(reply, len(ops)):
            return _answer(reply)
        return self._failed(reply)

    def request_many(self, batch: list[tuple[int, list]]) -> list[Reply]:
        """:meth:`request` for several players in one round trip (a rollout worker's games, stepped together);
        the wall-clock budget is the sum of theirs. A child that fails fails the whole batch: every player
        takes the fallback, as each would have after the restart."""
        if self.dead is not None:
            return [Reply(None, [["child", self.dead]]) for _ in batch]
        if not batch:
            return []
        calls = 0
        for _, ops in batch:
            calls += _calls(ops)
        reply = self._round_trip({"op": "many", "b": batch}, calls)
        answers = reply.get("m") if isinstance(reply, dict) else None
        if isinstance(answers, list) and len(answers) == len(batch):
            replies = []
            for answer, (_, ops) in zip(answers, batch):
                if not (isinstance(answer, dict) and _well_formed(answer, len(ops))):
                    break
                replies.append(_answer(answer))
            else:
                return replies
        failed = self._failed(reply)  # the restart lost every player in the child, not only this batch's
        return [failed] + [Reply(None, list(failed.errors), restarted=True) for _ in batch[1:]]

    def _round_trip(self, message: dict, calls: int) -> Any:
        allowed = self._beside.enter()
        try:
            self._write(message)
            return self._read(self.call_timeout_s * max(1, calls))
        except (BrokenPipeError, OSError, AssertionError):
            return "ended (killed by a limit, or crashed)"
        finally:
            self._beside.leave(allowed)

    def _failed(self, reply: Any) -> Reply:
        why = reply if isinstance(reply, str) else "sent a malformed reply"
        self._restart()
        return Reply(None, [["child", "timed out" if why.startswith("timed out") else why]], restarted=True)

    def _restart(self) -> None:
        self.kill()
        self.restarts += 1
        try:
            self._start()
        except (ModuleRefused, IsolationUnavailable) as exc:
            self.dead = f"could not be restarted: {exc}"
            logger.error("%s: the isolated child %s; every call takes the fallback", self.filename, self.dead)


def _portable(value: Any) -> Any:
    """``value`` with its numpy arrays as :func:`policy_host.encode_array`'s lists and numpy scalars as Python's."""
    if isinstance(value, (list, tuple)):
        return [_portable(v) for v in value]
    if isinstance(value, dict):
        return {k: _portable(v) for k, v in value.items()}
    if type(value).__name__ == "ndarray":
        return policy_host.encode_array(value)
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        return value.item()
    return value


#: ops the runtime builds every step from plain values (``int(...)``, ``bool(...)``, skill names): sent as they
#: are, but for the windows of ``decide`` (``d``, the flat form, comes with its windows encoded already); every
#: other op is made portable first
_PLAIN_OPS = ("decide", "d", "hook", "defeat")


def _encoded(ops: list) -> list:
    """``ops`` (not changed) as the child receives them: the windows encoded, numpy numbers made Python's
    (marshal would carry a numpy number as its bytes, through the buffer protocol)."""
    out = []
    for op in ops:
        kind = op[0]
        if kind == "decide":
            op = policy_host.flat_decide(op)
        elif kind not in _PLAIN_OPS:
            op = _portable(op)
        out.append(op)
    return out


def _for_child(message: dict) -> bytes:
    """A request in marshal's format (:func:`_encoded`); what marshal cannot carry is refused with a
    ``TypeError``, as the JSON of the requests refused it before."""
    if "ops" in message:
        message = {**message, "ops": _encoded(message["ops"])}
    elif "b" in message:
        message = {**message, "b": [(handle, _encoded(ops)) for handle, ops in message["b"]]}
    else:
        message = _portable(message)
    try:
        return marshal.dumps(message)
    except ValueError as exc:
        raise TypeError(f"a request cannot travel to the isolated child: {exc}") from None


def _answer(reply: dict) -> Reply:
    """One player's well-formed answer (:func:`_well_formed`) as a :class:`Reply`."""
    errors = reply["e"]
    return Reply(reply["r"], [[str(w), str(t)] for w, t in errors] if errors else [])


def _calls(ops: list) -> int:
    """Calls into the module that ``ops`` make (a ``decide`` makes up to three): its wall-clock budget."""
    calls = 0
    for op in ops:
        calls += 3 if op[0] == "decide" or op[0] == "d" else 1
    return calls


def _well_formed(reply: dict, n: int) -> bool:
    results, errors = reply.get("r"), reply.get("e")
    if type(results) is not list or len(results) != n or type(errors) is not list:
        return False
    for error in errors:
        if type(error) is not list or len(error) != 2:
            return False
    return True


# -- one host per module and process ---------------------------------------------------------------------------
# weak: a host lives while a policy uses it (its child is closed when the last one goes), so a process that loads
# many modules in turn (tests, evaluations of several tasks) does not keep a child for each
_HOSTS: "weakref.WeakValueDictionary[tuple, Any]" = weakref.WeakValueDictionary()


def source_digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def cached_host(key: tuple, make: Callable[[], Any]) -> Any:
    """The process's host for ``key`` (a module's path and digest, and the mode), made once."""
    host = _HOSTS.get(key)
    if host is None or host.pid != os.getpid():
        host = _HOSTS[key] = make()
    return host


_STALE: list = []  # hosts inherited through a fork: kept, so that collecting them never closes a reused fd


def _forget_after_fork() -> None:
    # a forked process must not talk to its parent's children: it closes its copies of their pipes, makes its own
    for host in _HOSTS.values():
        proc = getattr(host, "proc", None)
        if proc is not None:
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                try:
                    if stream is not None:
                        stream.close()
                except (OSError, ValueError):
                    pass
        host.pid = -1
        _STALE.append(host)
    _HOSTS.clear()


def close_all() -> None:
    for host in list(_HOSTS.values()):
        try:
            host.close()
        except Exception:  # noqa: BLE001 - at exit, a host that cannot close is killed with its parent anyway
            pass
    _HOSTS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
atexit.register(close_all)
