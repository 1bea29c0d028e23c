"""No file-level import circles in the project's packages, imports inside functions included.

import-linter checks the layers between packages; this test checks the files. A circle between two
files hides which one is the lower: an import inside a function or under ``TYPE_CHECKING`` only
postpones it, so every ``import`` statement anywhere in a file counts.

How an import becomes an edge between files:

* relative imports are resolved against the importing file's package;
* ``import a.b.c`` depends on the file of ``a.b.c`` only. The ``__init__.py`` files of ``a`` and ``a.b``
  run too, but they are the packages' doors, not the file's dependency; counting them would tie every
  submodule that a package's ``__init__`` imports into a circle with its siblings;
* ``from pkg import name`` depends on ``pkg/name.py`` (or ``pkg/name/__init__.py``) when ``name`` is a
  submodule; else, when ``pkg/__init__.py`` only re-exports ``name`` from one of its submodules, on that
  submodule (a re-exporting ``__init__`` stands for the package, not for a file of its own: following it
  to where the name is defined keeps a door from making a circle the files do not have); else on
  ``pkg/__init__.py`` itself, which then is a file like any other;
* imports of anything outside the project's packages are ignored.
"""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "rlaif", "code_generation", "rl_baseline", "orchestration", "scripts", "slurm", "bench")

#: circles allowed to stay; each would be a sorted tuple of the files in it. Empty: no circle is allowed,
#: and none may be added to make a new circle pass (a module of its own below both files opens it).
ALLOWED_CYCLES: set[tuple[str, ...]] = set()


def _module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the project's packages."""
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _module_files()


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The absolute module name of ``from <node.module> import ...`` written in ``module``."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if _is_package(module) else module.split(".")[:-1]
    base = package[:len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(source: str) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of ``source``: top level, in functions, under ``if``/``try``."""
    return [node for node in ast.walk(ast.parse(source)) if isinstance(node, (ast.Import, ast.ImportFrom))]


@lru_cache(maxsize=None)
def _reexports(package: str) -> dict[str, str]:
    """What ``package/__init__.py`` imports at its top level from its own submodules: name -> submodule."""
    tree = ast.parse(MODULES[package].read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            source = _absolute(package, node)
            if source.startswith(package + ".") and source in MODULES:
                for alias in node.names:
                    out[alias.asname or alias.name] = _name_home(source, alias.name)
    return out


def _name_home(package: str, name: str) -> str:
    """The file that ``from package import name`` depends on (see the module docstring)."""
    if f"{package}.{name}" in MODULES:
        return f"{package}.{name}"
    if _is_package(package) and name in _reexports(package):
        return _reexports(package)[name]
    return package


def _dependencies(module: str, source: str | None = None) -> set[str]:
    """The files ``module`` depends on (its own file's text unless ``source`` is given)."""
    deps: set[str] = set()
    for node in _imports(MODULES[module].read_text(encoding="utf-8") if source is None else source):
        if isinstance(node, ast.Import):
            deps.update(alias.name for alias in node.names if alias.name in MODULES)
            continue
        source = _absolute(module, node)
        if source not in MODULES:
            continue
        if _is_package(source):
            deps.update(_name_home(source, alias.name) for alias in node.names)
        else:
            deps.add(source)
    deps.discard(module)
    return deps


def _graph() -> dict[str, set[str]]:
    return {module: _dependencies(module) for module in MODULES}


def _cycles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """The strongly connected components of more than one file (Tarjan), as sorted tuples of paths."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[tuple[str, ...]] = set()

    def visit(root: str) -> None:
        # iterative, so that deep import chains do not meet Python's recursion limit
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.add(tuple(sorted(str(MODULES[m].relative_to(REPO)) for m in component)))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_file_level_import_cycles():
    cycles = _cycles(_graph())
    new = sorted(cycles - ALLOWED_CYCLES)
    assert not new, "import circles between files (a module of its own below both opens one):\n" + "\n".join(
        " <-> ".join(cycle) for cycle in new)
    gone = sorted(ALLOWED_CYCLES - cycles)
    assert not gone, f"these circles are gone: remove them from ALLOWED_CYCLES: {gone}"


def test_imports_inside_functions_and_relative_imports_count():
    """The graph sees an import in a function body, resolves relative imports and follows re-exports."""
    source = (
        "import numpy\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from .phases import Phase\n"
        "def f():\n"
        "    from . import slurm\n"
        "    from rl_baseline.envs import NetHackScoreMonk, make_monk_env\n"
        "    import common.nethack.blstats\n"
    )
    assert _dependencies("orchestration.pipeline", source) == {
        "orchestration.phases", "orchestration.slurm",
        "rl_baseline.envs.monk_env",  # re-exported by rl_baseline/envs/__init__.py: where it is defined
        "rl_baseline.envs",  # defined in rl_baseline/envs/__init__.py itself
        "common.nethack.blstats",
    }
    assert "rl_baseline.envs.monk_env" in _graph()["rl_baseline.envs"]


def test_a_new_circle_is_found():
    graph = {module: set(deps) for module, deps in _graph().items()}
    graph["common.vocabulary"].add("orchestration.pipeline")
    assert any("common/vocabulary.py" in cycle and "orchestration/pipeline.py" in cycle
               for cycle in _cycles(graph) - ALLOWED_CYCLES)


# ------------------------------------------------------------------ imports at the top of files

#: third-party packages whose import inside a function must say why, like the project's own
HEAVY = {"torch", "sample_factory", "nle", "numpy", "vllm", "transformers", "llama_cpp", "sentence_transformers",
         "matplotlib", "imageio", "PIL", "gymnasium"}


def _function_imports_without_a_reason() -> list[str]:
    """Imports of the project's modules (or of HEAVY packages) inside a function whose first line does not end
    with a ``# lazy: <why>`` comment."""
    bad = []
    for module, path in MODULES.items():
        source = path.read_text()
        lines = source.splitlines()
        for fn in ast.walk(ast.parse(source)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [_absolute(module, node)]
                else:
                    continue
                tops = {n.split(".")[0] for n in names}
                if not tops & (set(PACKAGES) | HEAVY):
                    continue
                comment = lines[node.lineno - 1].partition("#")[2]
                if "lazy:" not in comment or not comment.split("lazy:", 1)[1].strip():
                    bad.append(f"{path.relative_to(REPO)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return bad


def test_every_import_inside_a_function_says_why_it_is_not_at_the_top() -> None:
    """Imports sit at the top of a file, where a reader sees what the file depends on; one kept in a function
    (an expensive or optional package, a --help kept light) carries ``# lazy: <why>`` on its line."""
    bad = _function_imports_without_a_reason()
    assert not bad, "imports inside functions without a '# lazy: <why>' comment:\n" + "\n".join(bad)
