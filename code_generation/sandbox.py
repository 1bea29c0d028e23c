"""Checks and runs untrusted policy-over-skills code.

Two layers, both used before generated code is accepted:

1. :func:`validate_source` parses the code and walks its AST: imports only from
   :data:`ALLOWED_IMPORTS`, none of the names in :data:`FORBIDDEN_NAMES`
   (``open``, ``exec``, ``eval``, ``__import__``, ``getattr`` ...), no dunder
   attribute access (``().__class__.__bases__``), no private attribute except on
   ``self`` (``random._os``), none of the attributes in :data:`FORBIDDEN_ATTRIBUTES`
   (numpy file helpers, modules re-exported by allowed modules such as ``typing.sys``),
   and the ``NetHackPlayer`` class with the required methods and arities.
   The run-time loader (``rl_baseline.skills.meta_policy``) uses the same check.
2. :func:`run_in_sandbox` runs code (the module plus its unit test) in a separate
   ``python -I`` process, in a fresh temporary directory, with a minimal
   environment (no inherited variables, so no tokens), a wall-clock limit and
   CPU / address-space / file-size rlimits.

The static check is a deny-by-default filter for imports and a deny list for
names and attributes; it is defence in depth, the process limits of the sandbox
are the barrier for the unit tests. Pure Python: no NLE, no sample-factory.
"""
from __future__ import annotations

import ast
import logging
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Iterable, Mapping

logger = logging.getLogger(__name__)

PLAYER_CLASS = "NetHackPlayer"

ALLOWED_IMPORTS: frozenset[str] = frozenset(
    {"random", "math", "collections", "itertools", "functools", "numpy", "typing", "heapq", "copy",
     "__future__"}
)

FORBIDDEN_NAMES: frozenset[str] = frozenset(
    {"open", "exec", "eval", "compile", "__import__", "getattr", "setattr", "delattr",
     "globals", "locals", "vars", "input", "breakpoint", "help", "memoryview", "exit",
     "quit", "__builtins__", "__loader__", "__spec__", "classmethod_descriptor"}
)

# Attribute names that reach files, processes or native code through allowed modules
# (mostly numpy) or the interpreter's internals.
FORBIDDEN_ATTRIBUTES: frozenset[str] = frozenset(
    {"load", "loads", "save", "savez", "savez_compressed", "savetxt", "loadtxt", "genfromtxt",
     "fromfile", "tofile", "memmap", "ctypeslib", "lib", "f2py", "distutils", "testing",
     "DataSource", "system", "popen", "f_globals", "f_locals", "f_back", "gi_frame",
     "cr_frame", "tb_frame", "func_globals", "mro", "os", "sys", "subprocess", "shutil", "builtins",
     "compat", "core", "ctypes", "inspect", "importlib", "pathlib", "io", "socket", "modules"}
)

# Dunder names that may appear: ``__init__`` (methods, ``super().__init__()``) and
# ``__name__`` (the usual ``if __name__ == "__main__":`` guard).
ALLOWED_DUNDERS: frozenset[str] = frozenset({"__init__", "__name__"})

# Required methods of NetHackPlayer and their positional arity (without ``self``).
POLICY_METHODS: dict[str, int] = {"__init__": 2, "perform_task": 5}
FULL_METHODS: dict[str, int] = {
    "__init__": 2,
    "set_initial_values": 0,
    "skill_precondition": 4,
    "skill_termination": 5,
    "perform_task": 5,
}
# Optional state hooks of composite tasks (see rl_baseline/skills/meta_policy.py).
HOOK_METHODS: dict[str, int] = {
    "update_gold": 1,
    "defeat_monster": 0,
    "update_xp_level": 1,
    "update_hunger": 1,
    "update_position": 2,
}

UNIT_TEST_MARKER = "# === UNIT TEST ==="


class SandboxViolation(ValueError):
    """Code refused by the static check; ``problems`` lists every finding."""

    def __init__(self, problems: list[str], source_name: str = "<generated code>") -> None:
        self.problems = list(problems)
        self.source_name = source_name
        super().__init__(f"{source_name}: rejected by the code check:\n" + "\n".join(f"- {p}" for p in problems))


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def _bad_submodule(parts: list[str]) -> bool:
    return any(p.startswith("_") or p in FORBIDDEN_ATTRIBUTES for p in parts[1:])


def _arity_ok(fn: ast.FunctionDef | ast.AsyncFunctionDef, n: int) -> bool:
    args = fn.args
    positional = list(args.posonlyargs) + list(args.args)
    if positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    elif positional:
        positional = positional[1:]  # the instance, whatever its name
    else:
        return args.vararg is not None
    required = len(positional) - len(args.defaults)
    if args.vararg is not None:
        return required <= n
    return required <= n <= len(positional)


def _check_class(tree: ast.Module, methods: Mapping[str, int], problems: list[str]) -> None:
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == PLAYER_CLASS]
    if not classes:
        problems.append(f"no top-level class {PLAYER_CLASS} defined")
        return
    cls = classes[-1]
    defined: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined[node.name] = node  # the last definition wins, as in Python
    for name, n in methods.items():
        fn = defined.get(name)
        if fn is None:
            problems.append(f"{PLAYER_CLASS} has no method {name}() (it must take {n} arguments besides self)")
        elif not _arity_ok(fn, n):
            problems.append(f"{PLAYER_CLASS}.{name}() must take {n} arguments besides self")
    for name, n in HOOK_METHODS.items():
        fn = defined.get(name)
        if fn is not None and not _arity_ok(fn, n):
            problems.append(f"{PLAYER_CLASS}.{name}() must take {n} arguments besides self")


def check_source(source: str, required_methods: Mapping[str, int] | None = FULL_METHODS) -> list[str]:
    """Every problem found in ``source`` (empty list: accepted).

    ``required_methods`` maps method name -> positional arity without ``self``;
    ``None`` skips the class check (for snippets such as a unit test alone).
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"syntax error at line {exc.lineno}: {exc.msg}"]
    problems: list[str] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] not in ALLOWED_IMPORTS or _bad_submodule(parts):
                    problems.append(f"line {line}: import of {alias.name!r} is not allowed "
                                    f"(allowed: {', '.join(sorted(ALLOWED_IMPORTS - {'__future__'}))})")
        elif isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".")
            if node.level or parts[0] not in ALLOWED_IMPORTS or _bad_submodule(parts):
                problems.append(f"line {line}: import from {node.module!r} is not allowed "
                                f"(allowed: {', '.join(sorted(ALLOWED_IMPORTS - {'__future__'}))})")
            for alias in node.names:
                if alias.name == "*" or alias.name.startswith("_") or alias.name in FORBIDDEN_ATTRIBUTES:
                    if node.module != "__future__":
                        problems.append(f"line {line}: importing {alias.name!r} is not allowed")
        elif isinstance(node, ast.Name):
            if node.id in FORBIDDEN_NAMES:
                problems.append(f"line {line}: use of {node.id!r} is not allowed")
            elif _is_dunder(node.id) and node.id not in ALLOWED_DUNDERS:
                problems.append(f"line {line}: use of the name {node.id!r} is not allowed")
        elif isinstance(node, ast.Attribute):
            if _is_dunder(node.attr) and node.attr not in ALLOWED_DUNDERS:
                problems.append(f"line {line}: access to the attribute {node.attr!r} is not allowed")
            elif node.attr in FORBIDDEN_ATTRIBUTES:
                problems.append(f"line {line}: access to the attribute {node.attr!r} is not allowed")
            elif node.attr.startswith("_") and not (isinstance(node.value, ast.Name)
                                                     and node.value.id in ("self", "cls")):
                # private names of modules (random._os) and other objects; self._x is fine
                problems.append(f"line {line}: access to the private attribute {node.attr!r} is only "
                                "allowed on self")
        elif isinstance(node, ast.ExceptHandler):
            caught = node.type
            names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
            if caught is None or any(isinstance(n, ast.Name) and n.id in ("BaseException", "SystemExit",
                                                                           "KeyboardInterrupt") for n in names):
                problems.append(f"line {line}: bare 'except:' and catching BaseException/SystemExit/"
                                "KeyboardInterrupt are not allowed (catch Exception or narrower)")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if _is_dunder(node.name) and node.name not in ALLOWED_DUNDERS and isinstance(node, ast.ClassDef):
                problems.append(f"line {line}: class name {node.name!r} is not allowed")
            for deco in node.decorator_list:
                if not (isinstance(deco, ast.Name) and deco.id in ("staticmethod", "property", "classmethod")):
                    if not (isinstance(deco, ast.Attribute) and deco.attr == "setter"):
                        problems.append(f"line {line}: decorators other than staticmethod/property are not allowed")
    if required_methods is not None:
        _check_class(tree, required_methods, problems)
    return problems


def validate_source(source: str, required_methods: Mapping[str, int] | None = FULL_METHODS,
                    source_name: str = "<generated code>") -> ast.Module:
    """Raises :class:`SandboxViolation` listing every problem; returns the parsed tree."""
    problems = check_source(source, required_methods)
    if problems:
        raise SandboxViolation(problems, source_name)
    return ast.parse(source)


@dataclass
class SandboxLimits:
    """Limits of one sandboxed run."""

    wall_seconds: float = 10.0
    cpu_seconds: int = 10
    memory_bytes: int = 1 << 30  # address space (RLIMIT_AS)
    file_bytes: int = 1 << 20  # largest file the code may write (RLIMIT_FSIZE)
    max_output_chars: int = 20000


@dataclass
class SandboxResult:
    """Outcome of :func:`run_in_sandbox`. ``output`` is what the model is shown."""

    ok: bool
    output: str
    returncode: int | None = None
    timed_out: bool = False
    violation: bool = False
    problems: list[str] = field(default_factory=list)

    def feedback(self) -> str:
        """Text fed back to the model as the unit test's output."""
        if self.violation:
            return "The code was REJECTED before running by the safety check:\n" + "\n".join(
                f"- {p}" for p in self.problems)
        head = ""
        if self.timed_out:
            head = "The unit test was STOPPED: it ran past the time limit (an endless loop?).\n"
        elif self.returncode not in (0, None):
            head = f"The unit test FAILED with exit status {self.returncode}.\n"
        return head + self.output


def _limit_child(limits: SandboxLimits):
    def apply() -> None:  # runs in the child between fork and exec
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def minimal_env(home: str) -> dict[str, str]:
    """The whole environment of a sandboxed run: nothing inherited (no tokens, no proxies)."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def run_in_sandbox(source: str, limits: SandboxLimits | None = None,
                   required_methods: Mapping[str, int] | None = POLICY_METHODS,
                   extra_sources: Iterable[str] = (), prelude: Iterable[str] = ()) -> SandboxResult:
    """Checks ``source`` and runs it in a child process.

    ``prelude`` pieces (the unit-test harness) are placed before the code and
    ``extra_sources`` (a task's reference test) after it; they are checked too
    (without the class check) so the whole program obeys the same rules.
    """
    limits = limits or SandboxLimits()
    problems = check_source(source, required_methods)
    before = list(prelude)
    extras = list(extra_sources)
    for label, parts in (("prelude", before), ("test part", extras)):
        for i, part in enumerate(parts):
            problems += [f"({label} {i + 1}) {p}" for p in check_source(part, None)]
    if problems:
        logger.info("code rejected by the static check: %s", "; ".join(problems))
        return SandboxResult(ok=False, output="", violation=True, problems=problems)
    program = "\n\n".join(before + [source] + extras) + "\n"
    with tempfile.TemporaryDirectory(prefix="mm_sandbox_") as scratch:
        path = os.path.join(scratch, "program.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(program)
        proc = subprocess.Popen(
            [sys.executable, "-I", "program.py"],
            cwd=scratch,
            env=minimal_env(scratch),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=_limit_child(limits),
            start_new_session=True,
        )
        timed_out = False
        try:
            raw, _ = proc.communicate(timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            raw, _ = proc.communicate()
    text = raw.decode("utf-8", errors="replace")
    if len(text) > limits.max_output_chars:
        half = limits.max_output_chars // 2
        text = text[:half] + "\n...[output truncated]...\n" + text[-half:]
    rc = proc.returncode
    if rc is not None and rc < 0 and not timed_out:
        sig = -rc
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            text += f"\n[stopped by signal {sig}: CPU time limit of {limits.cpu_seconds}s]"
    ok = (not timed_out) and rc == 0
    return SandboxResult(ok=ok, output=text, returncode=rc, timed_out=timed_out)


def split_unit_test(source: str) -> tuple[str, str]:
    """Splits generated code into (module part, unit-test part).

    The unit test starts at :data:`UNIT_TEST_MARKER` when present; otherwise at the
    first top-level statement that is not an import, a class/function definition,
    a docstring or a plain constant assignment.
    """
    if UNIT_TEST_MARKER in source:
        head, tail = source.split(UNIT_TEST_MARKER, 1)
        return head.rstrip() + "\n", UNIT_TEST_MARKER + tail
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source, ""
    lines = source.splitlines(keepends=True)
    for node in tree.body:
        keep = isinstance(node, (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        keep = keep or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and all(
                isinstance(t, ast.Name) and t.id.isupper() for t in node.targets):
            keep = True
        if not keep:
            start = node.lineno - 1
            return "".join(lines[:start]).rstrip() + "\n", "".join(lines[start:])
    return source, ""
