"""A red team against the code a language model writes: each attack is a complete policy-over-skills module.

Two layers are tested apart, since the first is only a filter:

* through the runtime's own loader (``meta_policy.load`` and the policy's three decisions): every escape is refused
  by the code check or, where it is plain Python (a loop, a big allocation), bounded, and the decisions go on
  with the fallback;
* the operating system's barrier alone: the same payloads, unchecked, run in the isolated child
  (:class:`code_generation.isolation.IsolatedPlayerHost`), at import, in ``__init__`` and in a decision. None of
  them reads or writes a file outside, runs a command, reaches a server on 127.0.0.1, sees the environment or
  changes numpy in the trainer.
"""
from __future__ import annotations

import importlib.util
import marshal
import os
import socket
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from code_generation.isolation import IsolatedPlayerHost, ModuleRefused
from rl_baseline.skills import meta_policy

pytestmark = pytest.mark.skipif(os.environ.get("MM_NO_ISOLATION") == "1", reason="isolation disabled by hand")

DECIDE_OK = '''
class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth

    def set_initial_values(self):
        self.skill = "discoverer"

    def skill_precondition(self, char_ascii_encodings, char_ascii_colors, num_items, color_map):
        return False, False

    def skill_termination(self, skill, skill_time, current_depth, previous_depth, preconditions):
        return skill_time > 3

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        return "descender"
'''


@pytest.fixture
def target(tmp_path):
    """What an attacker wants: a secret file, a folder to write into, a server on 127.0.0.1."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the user's token")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    os.environ["MM_TEST_SECRET_ENV"] = "visible"
    yield {"dir": outside, "secret": outside / "secret.txt", "port": server.getsockname()[1], "server": server}
    server.close()
    os.environ.pop("MM_TEST_SECRET_ENV", None)


def _no_effect(target) -> None:
    """Nothing the payloads try reached the machine: no file written or command run outside, no connection."""
    assert sorted(p.name for p in target["dir"].iterdir()) == ["secret.txt"]
    with pytest.raises(BlockingIOError):
        target["server"].accept()


def _write(root: Path, seed: int, text: str | bytes) -> Path:
    folder = root / "gnomish" / f"seed{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "execution.py"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def _decide_all(policy) -> None:
    chars = np.full((7, 7), ord("."), np.uint8)
    colors = np.full((7, 7), 7, np.uint8)
    policy.preconditions(chars, colors, 1)
    policy.should_terminate("discoverer", 5, 1, 1, [False, False])
    policy.next_skill("discoverer", 1, 0, False, False)
    policy.step_decisions({"depth": 1}, chars, colors, 0, "discoverer", 9, 1, 1, 0)
    policy.reset()


def _load_and_drive(root: Path, seed: int, **config):
    """The runtime's path: load, the three decisions and a step; the refusal's text when the loader refuses."""
    try:
        policy = meta_policy.load("gnomish", seed, root=root, config=meta_policy.MetaPolicyConfig(**config))
    except meta_policy.MetaPolicyError as exc:
        return str(exc)
    _decide_all(policy)
    return policy


# -- escapes that the old deny list let through: each module runs a command (touch) if its trick works ----------
# (os.spawnlp with P_WAIT, 0: the old list named system and popen)
def _touch(target, name: str) -> str:
    return f"touch {target['dir'] / name}"


ESCAPES = {
    "attrgetter of a re-exported module": '''
import typing

GET = typing.operator.attrgetter("sys.modules")
''' + DECIDE_OK + '''
    def set_initial_values(self):
        self.skill = "discoverer"
        GET(typing)["os"].spawnlp(0, "sh", "sh", "-c", "{cmd}")
''',
    "string annotation evaluated": '''
import typing


def hint(x: "__import__('os').system('{cmd}')"):
    return x


typing.get_type_hints(hint)
''' + DECIDE_OK,
    "class pattern with keyword attributes": DECIDE_OK + '''
    def set_initial_values(self):
        self.skill = "discoverer"
        match self.set_initial_values:
            case object(__func__=f):
                match f:
                    case object(__globals__=g):
                        g["__builtins__"]["__import__"]("os").spawnlp(0, "sh", "sh", "-c", "{cmd}")
''',
    "async generator frame": '''
async def gen():
    yield 1


FRAME = gen().ag_frame
FRAME.f_builtins["__import__"]("os").spawnlp(0, "sh", "sh", "-c", "{cmd}")
''' + DECIDE_OK,
    "dunder method run outside the guard": DECIDE_OK + '''
    def __del__(self):
        # runs wherever the object is collected: in the trainer, outside any time bound
        while True:
            pass
''',
    "the private module that random holds": '''
import random
import typing

typing.operator.attrgetter("_os")(random).spawnlp(0, "sh", "sh", "-c", "{cmd}")
''' + DECIDE_OK,
    "numpy reads and writes files": '''
import numpy as np

DATA = np.fromregex("{secret}", r"(.*)", [("line", "U100")])
np.array([1]).dump("{written}")
''' + DECIDE_OK,
    "numpy patched in the host": '''
import numpy as np

np.mean = lambda *args, **kwargs: 42
''' + DECIDE_OK,
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_each_escape_is_refused_by_the_loader_and_runs_nowhere(name, tmp_path, target):
    source = ESCAPES[name].replace("{cmd}", _touch(target, "pwned")).replace(
        "{secret}", str(target["secret"])).replace("{written}", str(target["dir"] / "written.npy"))
    _write(tmp_path / "modules", 1, source)
    outcome = _load_and_drive(tmp_path / "modules", 1)
    assert isinstance(outcome, str) and "refused by the code check" in outcome, outcome
    assert "execution.py" in outcome
    _no_effect(target)
    assert np.mean([1, 2, 3]) == 2


def test_a_coding_cookie_is_refused_so_the_checked_text_is_the_text_that_runs(tmp_path, target):
    # read as UTF-8 the second line is a comment; read as UTF-7, as Python would, it is a statement
    hidden = f"#+AAo-import os+ADs-os.system(+ACI-{_touch(target, 'pwned')}+ACI-)\n"
    path = _write(tmp_path, 2, ("# -*- coding: utf-7 -*-\n" + hidden + DECIDE_OK).encode())
    outcome = _load_and_drive(tmp_path, 2)
    assert isinstance(outcome, str) and "coding cookie" in outcome and str(path) in outcome
    _write(tmp_path, 3, b"\xef\xbb\xbf" + DECIDE_OK.encode())
    assert "byte-order mark" in _load_and_drive(tmp_path, 3)
    _write(tmp_path, 4, DECIDE_OK.encode() + b"\n# \xff\xfe not UTF-8\n")
    assert "not UTF-8" in _load_and_drive(tmp_path, 4)
    _no_effect(target)


def test_a_planted_pyc_is_never_used(tmp_path, target):
    """A ``__pycache__`` file whose header matches the checked source's size and modification time: the import
    system would run it instead of the source; the loader compiles the checked text itself."""
    path = _write(tmp_path, 5, DECIDE_OK)
    evil = compile(f"import os\nos.system({_touch(target, 'pwned')!r})\n" + DECIDE_OK, str(path), "exec")
    cache = Path(importlib.util.cache_from_source(str(path)))
    cache.parent.mkdir()
    stat = path.stat()
    header = importlib.util.MAGIC_NUMBER + b"\x00\x00\x00\x00" + int(stat.st_mtime).to_bytes(4, "little") + (
        stat.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    cache.write_bytes(header + marshal.dumps(evil))
    for trust in (False, True):
        policy = _load_and_drive(tmp_path, 5, trust_generated_code=trust)
        assert not isinstance(policy, str), policy
        assert policy.next_skill("discoverer", 1, 0, False, False) == "descender"
    _no_effect(target)


# -- the operating system's barrier alone: the payloads unchecked, in the child ---------------------------------
PROBE = '''
import os
import socket
import subprocess


def probe(where):
    found = {{}}
    try:
        found["read"] = open({secret!r}).read()
    except Exception as exc:
        found["read"] = "refused: " + type(exc).__name__
    try:
        with open({written!r} + where, "w") as fh:
            fh.write("x")
        found["write"] = "written"
    except Exception as exc:
        found["write"] = "refused: " + type(exc).__name__
    for cmd in ("touch {dir}/cmd_" + where, "/bin/sh -c 'touch {dir}/sh_" + where + "'"):
        try:
            found.setdefault("system", []).append(os.system(cmd))
        except Exception as exc:
            found.setdefault("system", []).append(type(exc).__name__)
    try:
        subprocess.run(["/usr/bin/touch", "{dir}/sub_" + where], timeout=2)
        found["subprocess"] = "ran"
    except Exception as exc:
        found["subprocess"] = "refused: " + type(exc).__name__
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=1).close()
        found["connect"] = "connected"
    except Exception as exc:
        found["connect"] = "refused: " + type(exc).__name__
    found["environ"] = dict(os.environ)
    found["root"] = sorted(os.listdir("/"))
    found["home"] = os.path.isdir({home!r}) and sorted(os.listdir({home!r}))
    found["work_tree"] = os.path.exists({work!r})
    return found


AT_IMPORT = probe("import")
import numpy as np
np.mean = lambda *args, **kwargs: 42


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.at_import = AT_IMPORT
        self.at_init = probe("init")

    def set_initial_values(self):
        self.skill = "discoverer"

    def skill_precondition(self, char_ascii_encodings, char_ascii_colors, num_items, color_map):
        return False, False

    def skill_termination(self, skill, skill_time, current_depth, previous_depth, preconditions):
        return True

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        self.at_decision = probe("decision")
        return "descender"
'''


def _interpreter_under_home() -> set[str]:
    prefix, home = Path(sys.base_prefix).resolve(), Path("~").expanduser().resolve()
    return {prefix.relative_to(home).parts[0]} if prefix.is_relative_to(home) else set()


def test_the_child_has_no_files_no_commands_no_network_no_environment(target):
    source = PROBE.format(secret=str(target["secret"]), written=str(target["dir"] / "written_"),
                          dir=str(target["dir"]), port=target["port"], home=os.path.expanduser("~"),
                          work=str(Path(__file__).resolve().parents[1]))
    host = IsolatedPlayerHost(source, "probe.py", meta_policy.COLOR_MAP, call_timeout_s=20.0)
    try:
        reply = host.request(1, [["new", None], ["next", "discoverer", 1, 0, False, False],
                                 ["peek", "at_import"], ["peek", "at_init"], ["peek", "at_decision"]])
        assert reply.results is not None, reply.errors
        assert reply.results[1] == "descender"
        for found in (r["value"] for r in reply.results[2:]):
            assert found["read"].startswith("refused"), found
            assert found["write"].startswith("refused"), found
            assert all(status != 0 for status in found["system"]), found  # no shell in the sandbox
            assert found["subprocess"].startswith("refused"), found
            assert found["connect"].startswith("refused"), found
            assert found["environ"] == {}, found
            assert "work" not in found["root"] and "home" not in found["root"] and "tmp" not in found["root"]
            # of the home folder only the way to the interpreter's installation, where it lies there (pyenv)
            assert found["home"] in (False, []) or set(found["home"]) <= _interpreter_under_home(), found
            assert found["work_tree"] is False, found
    finally:
        host.close()
    _no_effect(target)
    assert np.mean([1, 2, 3]) == 2  # the child's patch stayed in the child


def test_the_unit_test_sandbox_is_isolated_too(target):
    from code_generation.sandbox import SandboxLimits, run_in_sandbox

    # the harness's program is checked too: run the probe as the unit test would, minus the check
    source = PROBE.format(secret=str(target["secret"]), written=str(target["dir"] / "written_"),
                          dir=str(target["dir"]), port=target["port"], home=os.path.expanduser("~"),
                          work=str(Path(__file__).resolve().parents[1])) + "\nprint(repr(probe('unit')))\n"
    import code_generation.sandbox as sandbox

    checked = sandbox.check_source
    try:
        sandbox.check_source = lambda *args, **kwargs: []  # the barrier alone
        result = run_in_sandbox(source, SandboxLimits(wall_seconds=30, cpu_seconds=30), required_methods=None)
    finally:
        sandbox.check_source = checked
    assert result.ok, result.output
    found = eval(result.output.strip().splitlines()[-1])  # noqa: S307 - our own probe's repr
    assert found["read"].startswith("refused") and found["write"].startswith("refused"), found
    assert found["connect"].startswith("refused") and found["environ"] == {}, found
    assert found["work_tree"] is False, found
    _no_effect(target)


# -- resources: each attack stopped within seconds, and the decisions go on --------------------------------------
LOOP_AT_IMPORT = "while True:\n    pass\n" + DECIDE_OK
BIG_AT_IMPORT = "HOARD = bytearray(3 << 30)\n" + DECIDE_OK
CATCHING = DECIDE_OK.replace('''        return "descender"''', '''        Catch = BaseException
        if dungeon_depth == 2:
            while True:
                try:
                    while True:
                        pass
                except Catch:
                    pass
        if dungeon_depth == 3:
            try:
                return "descender"
            finally:
                while True:
                    pass
        return "descender"''')
LOOP_IN_INIT = DECIDE_OK.replace('''        self.branch_depth = branch_depth
''', '''        self.branch_depth = branch_depth
        while True:
            pass
''', 1)


@pytest.mark.parametrize("source, what", [(LOOP_AT_IMPORT, "timed out"), (BIG_AT_IMPORT, "MemoryError")])
def test_an_import_that_never_ends_or_hoards_memory_is_refused_within_seconds(tmp_path, source, what):
    _write(tmp_path, 6, source)
    start = time.monotonic()
    outcome = _load_and_drive(tmp_path, 6, import_timeout_s=2.0)
    assert isinstance(outcome, str) and what in outcome and "execution.py" in outcome, outcome
    assert time.monotonic() - start < 15


def test_loops_that_catch_the_alarm_or_hide_in_finally_are_killed_and_the_policy_goes_on(tmp_path, caplog):
    _write(tmp_path, 7, CATCHING)
    policy = meta_policy.load("gnomish", 7, root=tmp_path, config=meta_policy.MetaPolicyConfig(call_timeout_s=0.5))
    restarts = policy.host.restarts
    for depth in (2, 3):
        start = time.monotonic()
        assert policy.next_skill("discoverer", depth, 0, False, False) == "discoverer"  # the fallback
        assert time.monotonic() - start < 10
    assert policy.host.restarts == restarts + 2
    assert policy.num_errors == 2 and "timed out" in caplog.text
    # the child was restarted and the player made afresh: the next decision is the module's own
    assert policy.next_skill("discoverer", 1, 0, False, False) == "descender"
    assert policy.num_errors == 2


def test_a_blocking_read_in_the_child_is_killed(target):
    source = "import select\n" + DECIDE_OK.replace('''        return "descender"''', '''        select.select([], [], [])
        return "descender"''')
    host = IsolatedPlayerHost(source, "blocking.py", meta_policy.COLOR_MAP, call_timeout_s=0.5)
    try:
        start = time.monotonic()
        reply = host.request(1, [["new", None], ["next", "discoverer", 1, 0, False, False]])
        assert reply.results is None and reply.restarted and "timed out" in reply.errors[0][1]
        assert time.monotonic() - start < 10
        assert host.request(1, [["new", None]]).results == [{"alive": True, "e": 0}]  # the new child serves
    finally:
        host.close()


def test_a_constructor_that_never_returns_gives_the_fallback_at_every_decision(tmp_path):
    _write(tmp_path, 8, LOOP_IN_INIT)
    policy = meta_policy.load("gnomish", 8, root=tmp_path, config=meta_policy.MetaPolicyConfig(call_timeout_s=0.3))
    assert policy.player is None and policy.num_errors >= 1
    chars = np.zeros((7, 7), np.uint8)
    start = time.monotonic()
    assert policy.step_decisions({}, chars, chars, 0, "discoverer", 1, 1, 1, 0) == ((False, False), True,
                                                                                     "discoverer")
    assert time.monotonic() - start < 10


def test_the_isolated_child_refuses_a_module_that_raises_at_import():
    with pytest.raises(ModuleRefused, match="ZeroDivisionError"):
        IsolatedPlayerHost("X = 1 / 0\n" + DECIDE_OK, "raises.py", meta_policy.COLOR_MAP, call_timeout_s=1.0)


def test_the_static_check_is_an_allow_list():
    from code_generation.sandbox import check_source

    def refused(code: str) -> list[str]:
        return check_source(code, None)

    assert refused("import numpy as np\nx = np.zeros(3)\ny = np.random.randint(3)\n") == []
    assert refused("import math\nfrom collections import deque\nfrom numpy import random as r\nr.choice([1])\n") == []
    for code in ("import numpy as np\nnp.fromregex('f', 'x', [])\n",  # a numpy name off the list
                 "import numpy as np\nnp.mean = len\n",  # assignment to a module's attribute
                 "import numpy as np\nalias = np\n",  # the module as a value
                 "import typing\ntyping.get_type_hints(len)\n",
                 "from typing import get_type_hints\n",
                 "def f(x: 'int'):\n    return x\n",  # a string annotation
                 "from __future__ import annotations\n",
                 "async def f():\n    return 1\n",
                 "class A:\n    def __eq__(self, other):\n        return True\n",
                 "match 1:\n    case int(real=r):\n        pass\n"):
        assert refused(code), code


def test_without_bubblewrap_the_commands_say_what_to_install_and_exit_2(tmp_path, monkeypatch, capsys):
    """A machine without bwrap (or without user namespaces): one line naming what to install or enable, exit 2;
    --trust_generated_code keeps the in-process path."""
    from code_generation import isolation
    from scripts import combine as combine_cli

    monkeypatch.setattr(isolation.shutil, "which", lambda name: None)
    monkeypatch.setattr(isolation, "_PROBE", None)
    monkeypatch.setattr(isolation, "_HOSTS", isolation.weakref.WeakValueDictionary())
    _write(tmp_path, 9, DECIDE_OK)
    with pytest.raises(isolation.IsolationUnavailable, match="apt-get install bubblewrap"):
        meta_policy.load("gnomish", 9, root=tmp_path)
    trusted = meta_policy.load("gnomish", 9, root=tmp_path,
                               config=meta_policy.MetaPolicyConfig(trust_generated_code=True))
    assert trusted.next_skill("discoverer", 1, 0, False, False) == "descender" and not trusted.host.isolated
    status = combine_cli.main(["--task", "gnomish", "--seed", "42", "--reference", "--out_root",
                               str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "bubblewrap (bwrap) is not installed" in err[0], err


def test_requests_carry_windows_and_numpy_values_and_refuse_what_cannot_travel():
    """Requests reach the child in marshal's format: the windows of a precondition arrive as the arrays they were
    (their bytes, shape and type), a numpy number as a Python one; an object that cannot travel is refused in the
    trainer with a TypeError, as the JSON of the requests refused it, and the child goes on serving."""
    source = DECIDE_OK.replace('''        return False, False''', '''        return int(char_ascii_encodings[4][3]) == 64, char_ascii_colors.shape == (7, 7)''')
    host = IsolatedPlayerHost(source, "windows.py", meta_policy.COLOR_MAP, call_timeout_s=1.0)
    try:
        chars = np.full((7, 7), ord("."), np.uint8)
        chars[4, 3] = ord("@")
        reply = host.request(1, [["new", None], ["set", "x", "x", np.int64(3)], ["get", "x"],
                                 ["pre", chars, np.zeros((7, 7), np.uint8), 0]])
        assert reply.results == [{"alive": True, "e": 0}, None, {"value": 3}, [True, True]], reply.errors
        with pytest.raises(TypeError, match="cannot travel"):
            host.request(1, [["set", "x", "x", object()]])
        assert host.request(1, [["get", "x"]]).results == [{"value": 3}]
        assert host.restarts == 0
    finally:
        host.close()
