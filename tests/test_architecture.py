"""The layer contracts of ``.importlinter`` hold: imports point down only (scripts and benchmarks,
orchestration, rl_baseline, rlaif | code_generation, common), annotation and code generation
never reach NLE or sample-factory, and the benchmarks do not depend on the tests. Inside rl_baseline,
collect (phase 0) > sf > the baselines' wing > the evaluation loop | skills > tasks | models > envs, and the method's
modules (and phase 0's collection) import nothing from the wing. And modules stay small: none of the project's
packages holds a file over :data:`MAX_MODULE_LINES` lines (a longer one is split by responsibility)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.test_import_cycles import PACKAGES

REPO = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 1000


def test_no_module_is_longer_than_the_ceiling():
    long = {str(path.relative_to(REPO)): n for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"over {MAX_MODULE_LINES} lines: {long}"


def test_import_contracts_are_kept():
    out = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"],
                         cwd=REPO, capture_output=True, text=True)
    assert "BROKEN" not in out.stdout and out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert out.stdout.count("KEPT") == 6


def test_a_new_upward_import_breaks_the_layers(tmp_path):
    """The check is live: a copy of the tree with rlaif importing the environment fails it."""
    import shutil

    for name in (".importlinter", "common", "rlaif", "code_generation", "rl_baseline", "orchestration", "scripts",
                 "slurm", "bench", "tests"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "meta_policies"))
        else:
            shutil.copy(src, tmp_path / name)
    (tmp_path / "rlaif" / "sneaky.py").write_text("from rl_baseline.envs import make_monk_env\n")
    (tmp_path / "rl_baseline" / "skills" / "sneaky.py").write_text("from rl_baseline.baselines import task_reward\n")
    (tmp_path / "rl_baseline" / "sf" / "sneaky.py").write_text("from rl_baseline.collect.explorer import ExplorerPolicy\n")
    out = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode != 0 and "rlaif.sneaky -> rl_baseline" in out.stdout.replace("\n", " ")
    # the method's skills reaching into the baselines' wing break the floors inside rl_baseline
    assert "rl_baseline.skills.sneaky -> rl_baseline.baselines" in out.stdout.replace("\n", " ")
    # collect (phase 0) plays trained policies through sf, so sf reaching back into collect breaks them too
    assert "rl_baseline.sf.sneaky -> rl_baseline.collect" in out.stdout.replace("\n", " ")
