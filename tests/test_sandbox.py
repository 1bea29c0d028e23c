"""The static check and the sandboxed runner of generated code."""
from __future__ import annotations

import pytest

from code_generation.sandbox import (
    FULL_METHODS,
    POLICY_METHODS,
    SandboxLimits,
    SandboxViolation,
    check_source,
    minimal_env,
    run_in_sandbox,
    split_unit_test,
    validate_source,
)

CLASS = '''
class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        return "discoverer"
'''

FAST = SandboxLimits(wall_seconds=3.0, cpu_seconds=5)


def test_good_code_runs_and_output_is_captured():
    result = run_in_sandbox(CLASS + "\nprint(NetHackPlayer(3, -2).perform_task('descender', 1, 0, False, False))\n",
                            FAST)
    assert result.ok, result.feedback()
    assert result.output.strip() == "discoverer"


@pytest.mark.parametrize("snippet, expected", [
    ("import os", "import of 'os'"),
    ("from subprocess import run", "import from 'subprocess'"),
    ("data = open('/etc/passwd').read()", "'open'"),
    ("mod = __import__('os')", "'__import__'"),
    ("bases = ().__class__.__bases__", "'__bases__'"),
    ("f = getattr(NetHackPlayer, 'perform_task')", "'getattr'"),
    ("eval('1 + 1')", "'eval'"),
    ("try:\n    pass\nexcept:\n    pass", "bare 'except:'"),
    ("import numpy as np\nnp.save('x.npy', np.zeros(2))", "'save'"),
    ("import random\nrandom._os.remove('x')", "'_os'"),
    ("import typing\ntyping.sys.exit(3)", "'sys'"),
    ("from random import _os", "'_os'"),
    ("import numpy.lib.npyio as io", "'numpy.lib.npyio'"),
])
def test_forbidden_code_is_rejected_before_running(snippet, expected):
    result = run_in_sandbox(CLASS + "\n" + snippet + "\n", FAST)
    assert not result.ok and result.violation and result.returncode is None
    assert any(expected in p for p in result.problems), result.problems
    assert "REJECTED" in result.feedback() and expected in result.feedback()


@pytest.mark.slow
def test_infinite_loop_hits_the_wall_clock_limit():
    result = run_in_sandbox(CLASS + "\nwhile True:\n    pass\n", SandboxLimits(wall_seconds=1.0, cpu_seconds=30))
    assert not result.ok and result.timed_out
    assert "time limit" in result.feedback()


def test_huge_allocation_hits_the_memory_limit():
    result = run_in_sandbox(CLASS + "\nblock = bytearray(10 * 1024 ** 3)\nprint('allocated')\n", FAST)
    assert not result.ok and not result.timed_out
    assert "MemoryError" in result.output and "allocated" not in result.output


def test_missing_method_and_wrong_arity_are_reported():
    without = CLASS.replace("def perform_task", "def other_name")
    problems = check_source(without, POLICY_METHODS)
    assert any("no method perform_task" in p for p in problems)
    short = CLASS.replace("def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,\n"
                          "                     worshipper_precondition)", "def perform_task(self, current_skill)")
    assert any("perform_task() must take 5" in p for p in check_source(short, POLICY_METHODS))
    with pytest.raises(SandboxViolation, match="set_initial_values"):
        validate_source(CLASS, FULL_METHODS)
    result = run_in_sandbox(without, FAST)
    assert result.violation and not result.ok


def test_syntax_error_is_a_reported_rejection():
    result = run_in_sandbox(CLASS + "\ndef broken(:\n", FAST)
    assert result.violation and "syntax error" in result.problems[0]


def test_environment_is_minimal(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "secret-token")
    env = minimal_env("/tmp/x")
    assert "HF_TOKEN" not in env and "secret-token" not in env.values()
    assert env["HOME"] == "/tmp/x"


def test_split_unit_test_at_marker_and_without_marker():
    code = CLASS + "\n# === UNIT TEST ===\nprint(1)\n"
    head, tail = split_unit_test(code)
    assert "class NetHackPlayer" in head and "print(1)" not in head and tail.startswith("# === UNIT TEST")
    head2, tail2 = split_unit_test("import random\n" + CLASS + "\nplayer = NetHackPlayer(1, -2)\nprint(player)\n")
    assert "player = NetHackPlayer" not in head2 and tail2.startswith("player = NetHackPlayer")
