"""One home for the rules every entry point applies to its flags: env-step budgets, worker and env counts,
batch and rollout sizes, the LLM client's concurrency, timeout and retries, and the folders and files a run
writes (:func:`output_folder`, :func:`output_file`: checked before the work, not found unwritable at its end).

Each check raises :class:`FlagError` naming the flag (``--train_for_env_steps must be at least 1, got -100``);
the scripts turn it into exit status 2, as argparse does for a malformed value. Checks take the flag's
value as given, so a library caller gets the same message as a command-line user.
"""
from __future__ import annotations

import errno
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable


class FlagError(ValueError):
    """A flag's value cannot work; the message names the flag."""


def at_least(flag: str, value: Any, minimum: float, what: str = "") -> None:
    """``value >= minimum`` or :class:`FlagError` (``value`` may be None: then it is missing)."""
    try:
        ok = value is not None and float(value) >= minimum
    except (TypeError, ValueError):
        ok = False
    if not ok:
        shown = int(minimum) if float(minimum).is_integer() else minimum
        raise FlagError(f"--{flag} must be at least {shown}{f' ({what})' if what else ''}, got {value}")


def above(flag: str, value: Any, bound: float, what: str = "") -> None:
    """``value > bound`` or :class:`FlagError`."""
    try:
        ok = value is not None and float(value) > bound
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise FlagError(f"--{flag} must be more than {bound:g}{f' ({what})' if what else ''}, got {value}")


def positive_finite(flag: str, value: Any, what: str = "") -> None:
    """``value`` a finite number above 0 (a learning rate, a timeout) or :class:`FlagError`: ``nan`` and ``inf``
    parse as floats and passed every ``>`` check, and a NaN learning rate trained NaN weights."""
    try:
        ok = value is not None and math.isfinite(float(value)) and float(value) > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise FlagError(f"--{flag} must be a finite number above 0{f' ({what})' if what else ''}, got {value}")


#: what one worker process of a game needs at least (the interpreter, NLE and a game), for the cap below
WORKER_MEMORY_BYTES = 256 << 20
#: processes per core past which more workers only take turns on the cores
WORKERS_PER_CORE = 16


def max_worker_processes() -> int:
    """How many game worker processes this machine can hold: ``WORKERS_PER_CORE`` a core, and no more than its
    available memory fits at ``WORKER_MEMORY_BYTES`` each."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limit = WORKERS_PER_CORE * cores
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        limit = min(limit, max(1, available // WORKER_MEMORY_BYTES))
    except (ValueError, OSError, AttributeError):
        pass
    return max(1, int(limit))


def worker_count(flag: str, value: Any, what: str = "worker processes") -> None:
    """At least 1 and no more than :func:`max_worker_processes`, or :class:`FlagError` saying why."""
    at_least(flag, value, 1, what)
    cap = max_worker_processes()
    if int(value) > cap:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        raise FlagError(f"--{flag} {value}: this machine holds at most {cap} {what} ({cores} cores, at most "
                        f"{WORKERS_PER_CORE} processes a core, and its free memory at "
                        f"{WORKER_MEMORY_BYTES >> 20} MiB a process)")


#: the training sizes every entry point that trains checks (each at least 1)
TRAINING_SIZES: tuple[tuple[str, str], ...] = (
    ("train_for_env_steps", "env steps to train for"),
    ("num_workers", "rollout worker processes"),
    ("num_envs_per_worker", "environments per rollout worker"),
    ("games_per_env", "games per environment"),
    ("batch_size", "samples per learner step"),
    ("rollout", "steps per trajectory slice"),
)


def check_training_sizes(values: Any, names: Iterable[str] | None = None) -> None:
    """The training sizes of an argparse namespace (or any object with those attributes) that it has."""
    wanted = set(names) if names is not None else None
    for name, what in TRAINING_SIZES:
        if (wanted is None or name in wanted) and hasattr(values, name):
            at_least(name, getattr(values, name), 1, what)


def check_llm_client(concurrency: Any = 1, timeout: Any = 1.0, max_retries: Any = 0,
                     flags: tuple[str, str, str] = ("concurrency", "timeout", "max_retries")) -> None:
    """The LLM client's request settings: at least one request in flight, a positive timeout in seconds,
    and zero or more retries. ``flags`` names them as the calling script spells them."""
    at_least(flags[0], concurrency, 1, "requests in flight at once")
    above(flags[1], timeout, 0, "seconds per request")
    at_least(flags[2], max_retries, 0, "retries per failed request")


def _cannot_create_in(folder: Path) -> str | None:
    """Why no file can be created in the existing folder ``folder``, or None. One is created, as permission bits
    do not tell (root passes them; a read-only mount or /proc refuses anyway): an unnamed file where the
    filesystem has them, which leaves the folder as it was (its time of change too), else a named one, removed
    at once."""
    try:
        fd = os.open(folder, os.O_TMPFILE | os.O_WRONLY, 0o600)
    except (AttributeError, OSError) as exc:  # AttributeError: no O_TMPFILE on this system
        if isinstance(exc, OSError) and exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            return exc.strerror or type(exc).__name__
        try:
            fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-check-", suffix=".tmp")
        except OSError as named:
            return named.strerror or type(named).__name__
        os.unlink(probe)
    os.close(fd)
    return None


def _folder_problem(path: Path) -> str | None:
    """Why no file can be written in the folder ``path`` (there, or to be created below the nearest existing
    folder), or None."""
    folder = path  # os.path's tests: a folder that may not be searched is "not there", not a PermissionError
    while not os.path.exists(folder) and folder != folder.parent:
        folder = folder.parent
    if not os.path.isdir(folder):
        return f"{folder} is a file, not a folder"
    problem = _cannot_create_in(folder)
    return f"cannot be written: creating a file in {folder} fails ({problem})" if problem else None


def output_folder(flag: str, path: str | os.PathLike, error: type[Exception] = FlagError) -> Path:
    """``path`` as a folder a run writes into: a folder it can write in, or one it can create (nothing is
    created here). Else ``error`` naming ``flag`` and ``path``: a file in the way, or a place that refuses files."""
    path = Path(path)
    problem = "a file, not a folder" if os.path.exists(path) and not os.path.isdir(path) else _folder_problem(path)
    if problem:
        raise error(f"{flag} {path}: {problem}")
    return path


def output_file(flag: str, path: str | os.PathLike, overwrite: bool = True, remedy: str = "",
                error: type[Exception] = FlagError) -> Path:
    """``path`` as a file a run writes: not a folder, in a folder :func:`output_folder` accepts, and, unless
    ``overwrite``, not there yet (``remedy`` says how to replace it). Else ``error`` naming ``flag`` and ``path``."""
    path = Path(path)
    if os.path.isdir(path):
        raise error(f"{flag} {path}: a folder, not a file")
    if os.path.exists(path) and not overwrite:
        raise error(f"{flag} {path}: already exists" + (f"; {remedy}" if remedy else ""))
    problem = _folder_problem(path.parent)
    if problem:
        raise error(f"{flag} {path}: {problem}")
    return path
