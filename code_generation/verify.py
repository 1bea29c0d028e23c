"""Checks meta-policy modules already on disk (shipped or combined) the way new code is checked.

For each task: the static code check (allowed imports, no file/process access, the
``NetHackPlayer`` interface), that no skill of the active set ends at once (in the isolated child the runtime
uses, :func:`code_generation.loader.refuse_instant_endings`) and the task's reference unit test run in the sandbox
after the simulated-dungeon harness. Nothing is imported into this process (unless the limits trust generated
code).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

from code_generation.isolation import (
    DEFAULT_ISOLATED_CALL_TIMEOUT_S,
    InProcessPlayerHost,
    IsolatedPlayerHost,
    ModuleRefused,
)
from code_generation.loader import MetaPolicyError, module_path, refuse_instant_endings
from code_generation.policy_host import load_player_class
from code_generation.prompts import PROMPT_DIR, harness_text
from code_generation.sandbox import FULL_METHODS, SandboxLimits, check_source, run_in_sandbox
from code_generation.time_bound import DEFAULT_CALL_TIMEOUT_S
from common.vocabulary import ALL_TASKS

logger = logging.getLogger(__name__)

@dataclass
class ModuleCheck:
    task: str
    path: Path
    ok: bool
    detail: str


def check_meta_policy(task: str, seed: int = 42, root: str | Path | None = None,
                      prompt_dir: str | Path | None = None,
                      limits: Optional[SandboxLimits] = None) -> ModuleCheck:
    """Static check, the check that no skill ends at once, and sandboxed reference unit test of
    ``{root}/{task}/seed{seed}/execution.py``."""
    base = Path(prompt_dir) if prompt_dir is not None else PROMPT_DIR
    path = module_path(task, seed, root)
    if not path.is_file():
        return ModuleCheck(task, path, False, "module not found")
    source = path.read_text(encoding="utf-8")
    problems = check_source(source, FULL_METHODS)
    if problems:
        return ModuleCheck(task, path, False, "refused by the code check: " + "; ".join(problems))
    limits = limits or SandboxLimits(wall_seconds=30.0, cpu_seconds=30)
    ending = _ends_a_skill_at_once(path, source, limits.trust_generated_code)
    if ending:
        return ModuleCheck(task, path, False, ending)
    test = (base / task / "reference_check.py").read_text(encoding="utf-8")
    result = run_in_sandbox(source, limits, required_methods=FULL_METHODS, prelude=[harness_text(base)],
                            extra_sources=[test])
    if not result.ok:
        last = "\n".join(result.feedback().strip().splitlines()[-8:])
        return ModuleCheck(task, path, False, "reference unit test failed:\n" + last)
    return ModuleCheck(task, path, True, "code check and reference unit test passed")


def _ends_a_skill_at_once(path: Path, source: str, trust_generated_code: bool) -> str:
    """Why the module is refused by :func:`refuse_instant_endings` (loaded where the runtime loads it), or ""."""
    host: Any
    if trust_generated_code:
        try:
            host = InProcessPlayerHost(load_player_class(source, str(path)), {}, DEFAULT_CALL_TIMEOUT_S)
        except Exception as exc:  # the module's own import raised
            return f"importing the module failed: {exc!r}"
    else:
        try:
            host = IsolatedPlayerHost(source, str(path), {}, DEFAULT_ISOLATED_CALL_TIMEOUT_S)
        except ModuleRefused as exc:
            return f"refused where it runs: {exc}"
    try:
        refuse_instant_endings(host, path)
    except MetaPolicyError as exc:
        return str(exc)
    finally:
        host.close()
    return ""


def check_meta_policies(tasks: Iterable[str] = ALL_TASKS, seed: int = 42, root: str | Path | None = None,
                        prompt_dir: str | Path | None = None) -> list[ModuleCheck]:
    """:func:`check_meta_policy` for every task."""
    out = []
    for task in tasks:
        check = check_meta_policy(task, seed, root, prompt_dir)
        logger.info("%s: %s", task, "ok" if check.ok else check.detail)
        out.append(check)
    return out
