"""Checks and runs untrusted policy-over-skills code.

Two layers, both used before generated code is accepted:

1. :func:`validate_source` parses the code and walks its AST: imports only from
   :data:`ALLOWED_IMPORTS`, of each module only the maths in :data:`ALLOWED_MODULE_ATTRIBUTES`, the module
   only as ``module.name`` and never assigned to; no string annotations, no ``async``, no dunder method
   but ``__init__``, no class pattern with keyword attributes; none of the names in :data:`FORBIDDEN_NAMES`
   (``open``, ``exec``, ``eval``, ``__import__``, ``getattr`` ...), no dunder
   attribute access (``().__class__.__bases__``), no private attribute except on
   ``self`` (``random._os``), none of the attributes in :data:`FORBIDDEN_ATTRIBUTES`
   (numpy file helpers, modules re-exported by allowed modules such as ``typing.sys``),
   and the ``NetHackPlayer`` class with the required methods and arities.
   The run-time loader (``rl_baseline.skills.meta_policy``) uses the same check.
2. :func:`run_in_sandbox` runs code (the module plus its unit test) in a bubblewrap sandbox
   (:mod:`code_generation.isolation`: no network, a read-only view of the interpreter and numpy, a fresh
   scratch folder as the only writable place, an empty environment), with a wall-clock limit and
   CPU / address-space / file-size rlimits.

The static check is an allow-list: imports from :data:`ALLOWED_IMPORTS`, and of each module only the names in
:data:`ALLOWED_MODULE_ATTRIBUTES`; plus a deny list for names and attributes on other objects. It is a first
filter, not the barrier: a check over Python cannot be made complete, the operating system's isolation is the
barrier, for the unit tests and at run time alike. Pure Python: no NLE, no sample-factory.
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

from code_generation import isolation

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

# What may be used of each allowed module: the maths the policies need, nothing else. ``np.random`` and
# ``np.linalg`` are submodules with lists of their own; any other name of a module (its re-exports, its
# private helpers, numpy's file and C helpers) is refused.
_NUMPY = (
    "array asarray zeros ones full empty zeros_like ones_like full_like arange linspace where argwhere nonzero any "
    "all sum mean median std var min max amin amax argmin argmax abs absolute sqrt square exp log log2 log10 clip "
    "round around floor ceil sign maximum minimum cumsum cumprod prod diff unique isin count_nonzero sort argsort "
    "concatenate stack vstack hstack reshape transpose flip roll pad equal not_equal greater greater_equal less "
    "less_equal logical_and logical_or logical_not logical_xor bitwise_and bitwise_or isnan isinf isfinite nan inf pi "
    "e newaxis dot matmul outer array_equal allclose isclose ndarray uint8 uint16 uint32 uint64 int8 int16 int32 "
    "int64 float16 float32 float64 bool_ int_ intc float_ ravel tile repeat expand_dims squeeze delete insert append "
    "meshgrid indices unravel_index ravel_multi_index bincount digitize searchsorted percentile quantile nanmean "
    "nansum nanmax nanmin argpartition partition take copy interp hypot mod floor_divide add subtract multiply divide "
    "power random linalg")
ALLOWED_MODULE_ATTRIBUTES: dict[str, frozenset[str]] = {
    name: frozenset(words.split()) for name, words in {
        "numpy": _NUMPY,
        "numpy.random": "randint choice random rand randn shuffle permutation uniform normal seed default_rng",
        "numpy.linalg": "norm",
        "math": "sqrt isqrt floor ceil trunc log log2 log10 log1p exp expm1 pow fabs hypot dist inf nan pi e tau "
                "isfinite isinf isnan isclose copysign fmod modf remainder sin cos tan asin acos atan atan2 sinh cosh "
                "tanh degrees radians factorial gcd lcm comb perm prod fsum",
        "random": "random randint randrange choice choices shuffle sample uniform gauss normalvariate triangular "
                  "betavariate expovariate getrandbits seed Random",
        "collections": "deque defaultdict Counter OrderedDict namedtuple ChainMap",
        "itertools": "product permutations combinations combinations_with_replacement chain islice count cycle "
                     "repeat accumulate groupby zip_longest starmap takewhile dropwhile filterfalse compress tee "
                     "pairwise",
        "functools": "reduce partial cmp_to_key lru_cache cache",
        "heapq": "heappush heappop heapify heappushpop heapreplace nlargest nsmallest merge",
        "copy": "copy deepcopy",
        "typing": "Any Optional Union List Dict Tuple Set FrozenSet Sequence Iterable Iterator Mapping Callable "
                  "DefaultDict Deque",
    }.items()
}
_SUBMODULES = {("numpy", "random"): "numpy.random", ("numpy", "linalg"): "numpy.linalg"}

# Attribute names refused on any object: files, processes and native code through what the module's own values
# lead to (numpy arrays, classes), and the interpreter's internals (frames, code objects).
FORBIDDEN_ATTRIBUTES: frozenset[str] = frozenset(
    {"load", "loads", "save", "savez", "savez_compressed", "savetxt", "loadtxt", "genfromtxt",
     "fromfile", "tofile", "dump", "dumps", "memmap", "ctypes", "ctypeslib", "lib", "f2py", "distutils", "testing",
     "DataSource", "system", "popen", "f_globals", "f_locals", "f_back", "f_builtins", "f_code", "f_trace",
     "gi_frame", "gi_code", "gi_yieldfrom", "ag_frame", "ag_code", "ag_await", "cr_frame", "cr_code", "cr_await",
     "co_code", "tb_frame", "tb_next", "func_globals", "mro", "os", "sys", "subprocess", "shutil", "builtins",
     "compat", "core", "inspect", "importlib", "pathlib", "io", "socket", "modules", "operator", "attrgetter",
     "methodcaller", "get_type_hints", "format_map"}
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


def _module_aliases(tree: ast.Module) -> dict[str, str]:
    """Names bound to allowed modules by the code's imports -> the module's dotted name."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                sub = _SUBMODULES.get((node.module, alias.name))
                if sub:
                    aliases[alias.asname or alias.name] = sub
    return aliases


def _string_in(node: ast.AST | None) -> bool:
    return node is not None and any(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in ast.walk(node))


def _check_module_use(tree: ast.Module, problems: list[str]) -> None:
    """Modules are used as ``module.name`` with a name from :data:`ALLOWED_MODULE_ATTRIBUTES`, read only."""
    aliases = _module_aliases(tree)
    if not aliases:
        return
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Name) and node.id in aliases):
            continue
        line = getattr(node, "lineno", "?")
        module = aliases[node.id]
        parent = parents.get(node)
        if not (isinstance(parent, ast.Attribute) and parent.value is node):
            if not isinstance(node.ctx, ast.Load) or parent is not None:
                problems.append(f"line {line}: the module {node.id!r} may only be used as {node.id}.<name>")
            continue
        while isinstance(parent, ast.Attribute) and module is not None:
            allowed = ALLOWED_MODULE_ATTRIBUTES.get(module, frozenset())
            if parent.attr not in allowed:
                problems.append(f"line {line}: {module}.{parent.attr} is not allowed (the policies may use of "
                                f"{module}: {', '.join(sorted(allowed)) or 'nothing'})")
                break
            if not isinstance(parent.ctx, ast.Load):
                problems.append(f"line {line}: assigning to or deleting {module}.{parent.attr} is not allowed")
                break
            module = _SUBMODULES.get((module, parent.attr))
            parent = parents.get(parent) if module is not None else None


def check_source(source: str, required_methods: Mapping[str, int] | None = FULL_METHODS) -> list[str]:
    """Every problem found in ``source`` (empty list: accepted).

    ``required_methods`` maps method name -> positional arity without ``self``;
    ``None`` skips the class check (for snippets such as a unit test alone).
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"syntax error at line {exc.lineno}: {exc.msg}"]
    except ValueError as exc:  # a NUL byte, say
        return [f"not parseable: {exc}"]
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
            elif node.module == "__future__":
                if any(alias.name == "annotations" for alias in node.names):
                    problems.append(f"line {line}: 'from __future__ import annotations' is not allowed (it makes "
                                    "every annotation a string)")
            else:
                allowed = ALLOWED_MODULE_ATTRIBUTES.get(node.module or "", frozenset())
                for alias in node.names:
                    if alias.name not in allowed:
                        problems.append(f"line {line}: importing {alias.name!r} from {node.module} is not allowed")
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
        elif isinstance(node, (ast.AsyncFunctionDef, ast.AsyncFor, ast.AsyncWith, ast.Await)) or (
                isinstance(node, ast.comprehension) and node.is_async):
            problems.append(f"line {line}: async code is not allowed")
        elif isinstance(node, ast.MatchClass) and node.kwd_attrs:
            problems.append(f"line {line}: class patterns with keyword attributes "
                            f"({', '.join(node.kwd_attrs)}) are not allowed")
        elif isinstance(node, ast.arg) and _string_in(node.annotation):
            problems.append(f"line {line}: string annotations are not allowed (argument {node.arg!r})")
        elif isinstance(node, ast.AnnAssign) and _string_in(node.annotation):
            problems.append(f"line {line}: string annotations are not allowed")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if _is_dunder(node.name) and node.name != "__init__":
                kind = "class name" if isinstance(node, ast.ClassDef) else "method or function name"
                problems.append(f"line {line}: {kind} {node.name!r} is not allowed (of the dunder methods only "
                                "__init__ may be defined)")
            if not isinstance(node, ast.ClassDef) and _string_in(node.returns):
                problems.append(f"line {line}: string annotations are not allowed (the return of {node.name!r})")
            for deco in node.decorator_list:
                if not (isinstance(deco, ast.Name) and deco.id in ("staticmethod", "property", "classmethod")):
                    if not (isinstance(deco, ast.Attribute) and deco.attr == "setter"):
                        problems.append(f"line {line}: decorators other than staticmethod/property are not allowed")
    _check_module_use(tree, problems)
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
    # --trust_generated_code: run the unit test unconfined but for the rlimits (no bubblewrap)
    trust_generated_code: bool = False


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


# the isolated run's first lines (python -c): numpy found where bubblewrap binds it, imported with the thread
# settings in place, then the environment emptied, and the program run as __main__ from its own file's text
_RUNNER = ("import os, sys; sys.path.insert(0, '/mm/pkgs'); import numpy; os.environ.clear(); "
           "sys.argv = ['program.py']; "
           "exec(compile(open('program.py', encoding='utf-8').read(), 'program.py', 'exec', dont_inherit=True), "
           "{'__name__': '__main__', '__builtins__': __builtins__})")


def run_in_sandbox(source: str, limits: SandboxLimits | None = None,
                   required_methods: Mapping[str, int] | None = POLICY_METHODS,
                   extra_sources: Iterable[str] = (), prelude: Iterable[str] = (),
                   trust_generated_code: bool | None = None) -> SandboxResult:
    """Checks ``source`` and runs it in a child process.

    ``prelude`` pieces (the unit-test harness) are placed before the code and
    ``extra_sources`` (a task's reference test) after it; they are checked too
    (without the class check) so the whole program obeys the same rules.

    The child runs in a bubblewrap sandbox (:mod:`code_generation.isolation`): no network, a read-only view of
    the interpreter and numpy, its scratch folder as the only writable place, an empty environment, and the
    CPU, address-space and file-size limits of ``limits``. Raises
    :class:`code_generation.isolation.IsolationUnavailable` where bubblewrap cannot run, unless
    ``trust_generated_code`` (``--trust_generated_code``; None: ``limits.trust_generated_code``), which runs
    ``python -I`` unconfined but for the limits.
    """
    limits = limits or SandboxLimits()
    if trust_generated_code is None:
        trust_generated_code = limits.trust_generated_code
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
    if not trust_generated_code:
        isolation.require_isolation()
    with tempfile.TemporaryDirectory(prefix="mm_sandbox_") as scratch:
        path = os.path.join(scratch, "program.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(program)
        if trust_generated_code:
            cmd, cwd, env = [sys.executable, "-I", "program.py"], scratch, minimal_env(scratch)
        else:
            cmd = isolation.bwrap_command(["-c", _RUNNER], binds_rw=[(scratch, "/mm/work")], chdir="/mm/work")
            cwd, env = None, {}
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=isolation.limit_child(limits.memory_bytes, limits.file_bytes, limits.cpu_seconds),
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
