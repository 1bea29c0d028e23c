"""Checks meta-policy modules already on disk (shipped or combined) the way new code is checked.

For each task: the static code check (allowed imports, no file/process access, the
``NetHackPlayer`` interface) and the task's reference unit test run in the sandbox after
the simulated-dungeon harness. Nothing is imported into this process.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from code_generation.loader import module_path
from code_generation.prompts import PROMPT_DIR
from code_generation.sandbox import FULL_METHODS, SandboxLimits, check_source, run_in_sandbox
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
    """Static check and sandboxed reference unit test of ``{root}/{task}/seed{seed}/execution.py``."""
    base = Path(prompt_dir) if prompt_dir is not None else PROMPT_DIR
    path = module_path(task, seed, root)
    if not path.is_file():
        return ModuleCheck(task, path, False, "module not found")
    source = path.read_text(encoding="utf-8")
    problems = check_source(source, FULL_METHODS)
    if problems:
        return ModuleCheck(task, path, False, "refused by the code check: " + "; ".join(problems))
    harness = (base / "unit_test_harness.py").read_text(encoding="utf-8")
    test = (base / task / "reference_check.py").read_text(encoding="utf-8")
    result = run_in_sandbox(source, limits or SandboxLimits(wall_seconds=30.0, cpu_seconds=30),
                            required_methods=FULL_METHODS, prelude=[harness], extra_sources=[test])
    if not result.ok:
        last = "\n".join(result.feedback().strip().splitlines()[-8:])
        return ModuleCheck(task, path, False, "reference unit test failed:\n" + last)
    return ModuleCheck(task, path, True, "code check and reference unit test passed")


def check_meta_policies(tasks: Iterable[str] = ALL_TASKS, seed: int = 42, root: str | Path | None = None,
                        prompt_dir: str | Path | None = None) -> list[ModuleCheck]:
    """:func:`check_meta_policy` for every task."""
    out = []
    for task in tasks:
        check = check_meta_policy(task, seed, root, prompt_dir)
        logger.info("%s: %s", task, "ok" if check.ok else check.detail)
        out.append(check)
    return out
