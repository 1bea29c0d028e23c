"""Validates and imports policy-over-skills modules (``{root}/{task}/seed{N}/execution.py``).

The one place where generated (or hand-written) policy code enters a Python process: the
module must pass the static code check of :mod:`code_generation.sandbox` before it is
imported, and it is imported once per process (again when the file changes). The run-time
guard that calls the module during an episode is :mod:`rl_baseline.skills.meta_policy`.
"""
from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path

from code_generation.sandbox import FULL_METHODS, PLAYER_CLASS, check_source

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


_CLASS_CACHE: dict[tuple[Path, int], type] = {}


def load_class(task: str, seed: int, root: str | Path | None = None) -> type:
    """Validates and imports ``{root}/{task}/seed{seed}/execution.py`` once per process."""
    path = module_path(task, seed, root)
    if not path.is_file():
        have = available(root)
        listing = ", ".join(f"{t} (seeds {', '.join(map(str, s))})" for t, s in have.items()) or "none"
        raise MetaPolicyError(
            f"no meta-policy module for task {task!r} seed {seed}: {path} does not exist. "
            f"Available under {path.parents[2]}: {listing}. "
            "Create one with `python -m scripts.generate_code` and `python -m scripts.combine`."
        )
    resolved = path.resolve()
    key = (resolved, resolved.stat().st_mtime_ns)  # a rewritten file is imported again
    if key in _CLASS_CACHE:
        return _CLASS_CACHE[key]
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MetaPolicyError(f"{path}: not a readable Python module ({type(exc).__name__}); regenerate it "
                              "(python -m scripts.generate_code and scripts.combine) or restore it") from None
    if source.startswith(COMBINED_HEADER) and COMBINED_FOOTER not in source[-200:]:
        raise MetaPolicyError(f"{path}: cut short (a module written by scripts.combine ends with "
                              f"{COMBINED_FOOTER!r}); run scripts.combine again or restore it")
    problems = check_source(source, FULL_METHODS)
    if problems:
        raise MetaPolicyError(f"{path}: refused by the code check:\n" + "\n".join(f"- {p}" for p in problems))
    if root is None:
        name = f"rl_baseline.meta_policies.{task}.seed{seed}.execution"
    else:
        name = f"_meta_policy_{task}_seed{seed}_{abs(hash(key)):x}"
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise MetaPolicyError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise MetaPolicyError(f"{path}: importing the module failed: {exc!r}") from exc
    cls = getattr(module, PLAYER_CLASS, None)
    if not isinstance(cls, type):
        raise MetaPolicyError(f"{path}: defines no class {PLAYER_CLASS}")
    _CLASS_CACHE[key] = cls
    logger.info("loaded meta-policy %s seed %d from %s", task, seed, path)
    return cls
