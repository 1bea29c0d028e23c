"""Validates and imports policy-over-skills modules (``{root}/{task}/seed{N}/execution.py``).

The one place where generated (or hand-written) policy code is read: the file's bytes must be plain UTF-8
and pass the static code check of :mod:`code_generation.sandbox` (a first filter); the text it checked is
the text that runs, in the isolated child of :mod:`code_generation.isolation` (or, under
``--trust_generated_code``, compiled in this process by :func:`load_class`). Once loaded, a module whose
``skill_termination`` would end a skill of the active set at once is refused (:func:`refuse_instant_endings`).
The run-time guard that calls the module during an episode is :mod:`rl_baseline.skills.meta_policy`.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from code_generation.isolation import source_digest
from code_generation.policy_host import load_player_class
from code_generation.sandbox import FULL_METHODS, check_source
from common.vocabulary import SKILLS

logger = logging.getLogger(__name__)

# what scripts.combine writes first and last (the loader refuses a module that starts like one of
# combine's and lacks the last line: cut short by a copy or a save that did not finish)
COMBINED_HEADER = "# Policy over skills for the "
COMBINED_FOOTER = "# end of the module written by scripts.combine"

#: The shipped modules (``scripts.combine`` output: the hand-written references at seed 42, built with
#: ``--reference``) and where ``scripts.combine`` writes.
DEFAULT_ROOT = Path(__file__).resolve().parents[1] / "rl_baseline" / "meta_policies"


class MetaPolicyError(RuntimeError):
    """A meta-policy module is missing or refused by the code check."""


def module_path(task: str, seed: int, root: str | Path | None = None) -> Path:
    return Path(root if root is not None else DEFAULT_ROOT) / task / f"seed{seed}" / "execution.py"


def available(root: str | Path | None = None) -> dict[str, list[int]]:
    """Tasks and seeds that have a module under ``root``."""
    base = Path(root if root is not None else DEFAULT_ROOT)
    found: dict[str, list[int]] = {}
    if not base.is_dir():
        return found
    for path in sorted(base.glob("*/seed*/execution.py")):
        suffix = path.parent.name[len("seed"):]
        if suffix.lstrip("-").isdigit():
            found.setdefault(path.parent.parent.name, []).append(int(suffix))
    return {task: sorted(seeds) for task, seeds in found.items()}


_CODING_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


def read_checked_source(path: str | Path) -> str:
    """The text of ``path`` exactly as the code check accepted it: UTF-8 bytes with no byte-order mark and no
    coding cookie (either would make Python read other text than the check read), not cut short, and passing
    :func:`code_generation.sandbox.check_source`. Raises :class:`MetaPolicyError` naming the file and why."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise MetaPolicyError(f"{path}: not readable ({exc.strerror or type(exc).__name__}); regenerate it "
                              "(python -m scripts.generate_code and scripts.combine) or restore it") from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raise MetaPolicyError(f"{path}: refused: it starts with a byte-order mark (only plain UTF-8 is loaded)")
    if any(_CODING_COOKIE.match(line) for line in raw.splitlines()[:2]):
        raise MetaPolicyError(f"{path}: refused: a source-encoding declaration (coding cookie) in its first two "
                              "lines; the loader reads UTF-8 only")
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MetaPolicyError(f"{path}: refused: not UTF-8 (byte {exc.start}); regenerate it "
                              "(python -m scripts.generate_code and scripts.combine) or restore it") from None
    if "\x00" in source:
        raise MetaPolicyError(f"{path}: refused: it holds a NUL byte")
    if source.startswith(COMBINED_HEADER) and COMBINED_FOOTER not in source[-200:]:
        raise MetaPolicyError(f"{path}: cut short (a module written by scripts.combine ends with "
                              f"{COMBINED_FOOTER!r}); run scripts.combine again or restore it")
    problems = check_source(source, FULL_METHODS)
    if problems:
        raise MetaPolicyError(f"{path}: refused by the code check:\n" + "\n".join(f"- {p}" for p in problems))
    return source


def checked_module(task: str, seed: int, root: str | Path | None = None) -> tuple[Path, str]:
    """``{root}/{task}/seed{seed}/execution.py`` and its checked text (see :func:`read_checked_source`)."""
    path = module_path(task, seed, root)
    if not path.is_file():
        have = available(root)
        listing = ", ".join(f"{t} (seeds {', '.join(map(str, s))})" for t, s in have.items()) or "none"
        raise MetaPolicyError(
            f"no meta-policy module for task {task!r} seed {seed}: {path} does not exist. "
            f"Available under {path.parents[2]}: {listing}. "
            "Create one with `python -m scripts.generate_code` and `python -m scripts.combine`."
        )
    return path, read_checked_source(path)


_CLASS_CACHE: dict[tuple[Path, str], type] = {}


def player_class(path: Path, source: str) -> type:
    """``--trust_generated_code`` only: the ``NetHackPlayer`` of ``source`` (the checked text of ``path``), compiled
    in this process (never through the import system, so never from a ``.pyc``), once per process and text. Its
    import runs unbounded: the isolated path (:mod:`code_generation.isolation`) is the one with limits."""
    key = (path.resolve(), source_digest(source))
    if key not in _CLASS_CACHE:
        try:
            _CLASS_CACHE[key] = load_player_class(source, str(path))
        except Exception as exc:
            raise MetaPolicyError(f"{path}: importing the module failed: {exc!r}") from exc
        logger.info("loaded the meta-policy %s in-process (--trust_generated_code)", path)
    return _CLASS_CACHE[key]


def load_class(task: str, seed: int, root: str | Path | None = None) -> type:
    """``{root}/{task}/seed{seed}/execution.py`` checked and compiled in this process (:func:`player_class`)."""
    return player_class(*checked_module(task, seed, root))


#: a skill's first turn with nothing happening: no depth change, no shopkeeper or altar in view (the arguments of
#: ``skill_termination`` after the skill, as the runtime passes them)
FIRST_TURN = (0, 1, 1, [False, False])


def refuse_instant_endings(host: Any, path: str | Path, skills: tuple[str, ...] = SKILLS) -> None:
    """Refuses the module ``host`` runs when its ``skill_termination`` ends a skill of ``skills`` on the skill's
    first turn with nothing happening: that skill would end at every step. A generated ``skill_termination``
    returns True for a skill it has no branch for, so a skill added to the skill files after the module was
    written is the usual cause; a call that raises (a time budget ``set_initial_values`` does not set) ends the
    skill too, as the runtime's fallback does. One request on a player of its own (``host``: an
    :class:`~code_generation.isolation.IsolatedPlayerHost` or an ``InProcessPlayerHost``); raises
    :class:`MetaPolicyError` naming the skills."""
    reply = host.request(host.new_handle(), [["new", None]] + [["term", s, *FIRST_TURN] for s in skills] + [["drop"]])
    errors = "; ".join(f"{what}: {text}" for what, text in reply.errors)
    if reply.results is None or reply.results[0] is None:
        raise MetaPolicyError(f"{path}: refused: its player could not be made to ask skill_termination"
                              f"{' (' + errors + ')' if errors else ''}")
    ending = [s for s, out in zip(skills, reply.results[1:]) if out is None or out]
    if ending:
        raise MetaPolicyError(
            f"{path}: refused: skill_termination ends the skill{'s' if len(ending) > 1 else ''} "
            f"{', '.join(ending)} on {'their' if len(ending) > 1 else 'its'} first turn (skill_time 0, no depth "
            f"change, no shopkeeper or altar in view), so {'they' if len(ending) > 1 else 'it'} would end at every "
            f"step; every skill of the skill set ({', '.join(skills)}) needs its branch (a skill the module does "
            f"not know ends at once){' (' + errors + ')' if errors else ''}")
