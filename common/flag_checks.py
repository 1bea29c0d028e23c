"""One home for the size rules every entry point applies to its flags: env-step budgets, worker and
env counts, batch and rollout sizes, and the LLM client's concurrency, timeout and retries.

Each check raises :class:`FlagError` naming the flag (``--train_for_env_steps must be at least 1, got -100``);
the scripts turn it into exit status 2, as argparse does for a malformed value. Checks take the flag's
value as given, so a library caller gets the same message as a command-line user.
"""
from __future__ import annotations

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


#: the training sizes every entry point that trains checks (each at least 1)
TRAINING_SIZES: tuple[tuple[str, str], ...] = (
    ("train_for_env_steps", "env steps to train for"),
    ("num_workers", "rollout worker processes"),
    ("num_envs_per_worker", "games per rollout worker"),
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
