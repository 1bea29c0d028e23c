"""Joins a policy over skills with the skill functions and initial values into one module.

The policy part is either

* generated: ``{gen_dir}/{task}/_seed{N}/execution.py`` (up to its unit test), written by a
  language model with ``scripts.generate_code``; or
* hand-written (``reference=True``, ``scripts.combine --reference``): the task's
  ``{task}/reference_policy.py`` (without its module docstring). The shipped
  ``rl_baseline/meta_policies/{task}/seed42/execution.py`` modules are exactly this output
  (tests/test_meta_policy_parts.py compares them byte for byte), and their header says they
  are hand-written.

It is joined with the ``skill_precondition`` / ``skill_termination`` methods (from the
generation run's ``_seed{N}/skill_functions.py`` when it produced them; else each method
from ``{task}/skill_functions.py`` when the task defines it there, on purpose; else from the
one shared copy ``parts/skill_functions.py``, whose ``skill_termination`` branches are rendered from the
skill files by :mod:`code_generation.skill_rules`), for a hand-written reference also with the
navigation methods of ``parts/navigation.py`` that the reference does not define itself
(``select_skill``, ``explore_then_move``, ``reach_gnomish_mines``, ``reach_dungeons_of_doom``:
the release's ways of moving through the dungeon, shared by the ten references), and with the task's
``initial_values.txt`` (``set_initial_values``; a ``set_initial_values`` of the
generated class is kept as ``generated_initial_values`` and called first) into
``{out_root}/{task}/seed{N}/execution.py`` (with ``__init__.py`` files so it imports
as a package module). The result is checked with the validator the run-time uses,
its reference unit test runs in the sandbox, and it is imported through
:mod:`code_generation.loader` (as the run-time imports it) and called once before the call returns; a module whose
``skill_termination`` ends a skill of the active set at once is refused there
(:func:`code_generation.loader.refuse_instant_endings`).
"""
from __future__ import annotations

import ast
import logging
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from code_generation.isolation import (
    DEFAULT_ISOLATED_CALL_TIMEOUT_S,
    InProcessPlayerHost,
    IsolatedPlayerHost,
    ModuleRefused,
)
from code_generation.loader import (  # noqa: F401
    COMBINED_FOOTER,
    MetaPolicyError,
    read_checked_source,
    refuse_instant_endings,
)
from code_generation.policy_host import load_player_class
from code_generation.prompts import PROMPT_DIR, harness_text
from code_generation.sandbox import (
    FULL_METHODS,
    PLAYER_CLASS,
    SandboxLimits,
    check_source,
    run_in_sandbox,
    split_unit_test,
)
from code_generation.skill_rules import TemplateError, render_skill_functions
from code_generation.time_bound import DEFAULT_CALL_TIMEOUT_S
from common.atomic_io import atomic_write_text
from common.file_errors import read_text
from common.flag_checks import output_file, output_folder
from common.vocabulary import check_task

logger = logging.getLogger(__name__)


class CombineError(RuntimeError):
    """The parts cannot be joined, or the joined module fails its checks."""


class CombineInputError(CombineError):
    """Bad input: a generated policy or reference part that is not there, or a different module already at the
    output that only ``force`` replaces (the script exits 2, as for a bad flag)."""


@dataclass
class CombineResult:
    path: Path
    written: bool  # False when an identical module was already there
    test_output: str


REFERENCE_PART = "reference_policy.py"
SHARED_SKILL_PART = "parts/skill_functions.py"
NAVIGATION_PART = "parts/navigation.py"
SKILL_METHODS = ("skill_precondition", "skill_termination")
#: joined into hand-written references that do not define them (a reference may override one)
NAVIGATION_METHODS = ("select_skill", "explore_then_move", "reach_gnomish_mines", "reach_dungeons_of_doom")
JOINED_METHODS = SKILL_METHODS + ("set_initial_values",)


def _find_methods(path: Path, text: str | None = None) -> list[tuple[str, str]]:
    """(name, source) of every function defined in ``path`` (or in ``text``, rendered from it), in file order
    (inside a NetHackPlayer class or at top level; methods given inside a class are taken out of it)."""
    if text is None:
        if not path.is_file():
            raise CombineError(f"part not found: {path}")
        text = _read_part(path)
    module_part = split_unit_test(text)[0]
    try:
        tree = ast.parse(module_part)
    except SyntaxError as exc:
        raise CombineError(f"{path}: syntax error at line {exc.lineno}: {exc.msg}") from exc
    lines = module_part.splitlines()
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == PLAYER_CLASS:
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    start = (item.decorator_list[0].lineno if item.decorator_list else item.lineno) - 1
                    found.append((item.name, textwrap.dedent("\n".join(lines[start:item.end_lineno]))))
        elif isinstance(node, ast.FunctionDef):
            found.append((node.name, "\n".join(lines[node.lineno - 1:node.end_lineno])))
    return found


def _read_part(path: Path) -> str:
    return read_text(path, "Python source file", "Generate it again (python -m scripts.generate_code) or restore it",
                     CombineError)


def _methods(path: Path, names: tuple[str, ...]) -> str:
    """The source of the methods ``names`` defined in ``path``, in file order."""
    pieces = [source for name, source in _find_methods(path) if name in names]
    if len(pieces) < len(names):
        raise CombineError(f"{path}: expected the methods {', '.join(names)}")
    return "\n\n".join(pieces)


def shared_skill_functions(prompt_dir: str | Path | None = None) -> str:
    """``parts/skill_functions.py`` with ``skill_termination``'s branches rendered from the skill files
    (:mod:`code_generation.skill_rules`); for the designed five, the text the file held before it was a template."""
    path = (Path(prompt_dir) if prompt_dir is not None else PROMPT_DIR) / SHARED_SKILL_PART
    if not path.is_file():
        raise CombineError(f"part not found: {path}")
    try:
        return render_skill_functions(_read_part(path), where=str(path))
    except TemplateError as exc:
        raise CombineError(str(exc)) from None


def _part_skill_functions(base: Path, task: str) -> tuple[str, dict[str, str]]:
    """The skill functions taken from the parts, and for each method the part it came from.

    A method comes from ``{task}/skill_functions.py`` when the task defines it there (its skill
    functions differ on purpose), else from the one shared copy ``parts/skill_functions.py``, rendered for the
    active skill set (:func:`shared_skill_functions`).
    """
    task_part = base / task / "skill_functions.py"
    own = dict(_find_methods(task_part)) if task_part.is_file() else {}
    shared = dict(_find_methods(base / SHARED_SKILL_PART, shared_skill_functions(base)))
    pieces, origin = [], {}
    for name in SKILL_METHODS:
        if name in own:
            pieces.append(own[name])
            origin[name] = f"code_generation/{task}/skill_functions.py"
        elif name in shared:
            pieces.append(shared[name])
            origin[name] = f"code_generation/{SHARED_SKILL_PART}"
        else:
            raise CombineError(f"{base / SHARED_SKILL_PART}: expected the methods {', '.join(SKILL_METHODS)}")
    return "\n\n".join(pieces), origin


def _strip_docstring(text: str, tree: ast.Module) -> str:
    """``text`` without its module docstring (it describes the part file, not the joined module)."""
    first = tree.body[0] if tree.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return text
    return "\n".join(text.splitlines()[first.end_lineno:]).lstrip("\n") + "\n"


def _generated_header(task: str, seed: int, label: str) -> str:
    return (f"# Policy over skills for the \"{task}\" task, seed {seed}.\n"
            f"# Written by a language model with `python -m scripts.generate_code --task {task} --seed {seed}`,\n"
            f"# joined with the {label} and the task's initial values by\n"
            f"# `python -m scripts.combine`. Interface: see rl_baseline/skills/meta_policy.py.\n\n")


def _reference_header(task: str, seed: int, origin: dict[str, str], navigation: tuple[str, ...]) -> str:
    # the project's rule: a hand-written meta-policy is labelled as such wherever it is used
    if len(set(origin.values())) == 1:
        skills = [f"#   skill functions     {next(iter(origin.values()))}"]
    else:
        skills = [f"#   {name:19s} {path}" for name, path in origin.items()]
    if navigation == NAVIGATION_METHODS:
        skills.append(f"#   navigation          code_generation/{NAVIGATION_PART}")
    elif navigation:
        skills.append(f"#   {', '.join(navigation)}  code_generation/{NAVIGATION_PART}")
    return "\n".join([
        f"# Policy over skills for the \"{task}\" task, seed {seed}.",
        "# HAND-WRITTEN REFERENCE, not written by a language model. Built from these parts",
        f"#   policy              code_generation/{task}/{REFERENCE_PART}",
        *skills,
        f"#   set_initial_values  code_generation/{task}/initial_values.txt",
        "# by",
        f"#   python -m scripts.combine --task {task} --seed {seed} --reference --force",
        "# Do not edit this file: edit the parts and run that command (tests/test_meta_policy_parts.py",
        "# checks that the shipped modules are exactly its output). A language model writes a policy",
        "# of the same shape with",
        f"#   python -m scripts.generate_code --task {task} --seed N",
        f"#   python -m scripts.combine --task {task} --seed N",
        "# Interface: see rl_baseline/skills/meta_policy.py.",
    ]) + "\n\n"


def build_module(task: str, seed: int, gen_dir: str | Path = "code_generation",
                 prompt_dir: str | Path | None = None, reference: bool = False) -> str:
    """The text of the combined module (not written anywhere).

    ``reference``: the policy part is the hand-written ``{prompt_dir}/{task}/reference_policy.py``
    (its module docstring left out, ``gen_dir`` unused) instead of the generated
    ``{gen_dir}/{task}/_seed{seed}/execution.py``, and the header says so.
    """
    check_task(task)
    base = Path(prompt_dir) if prompt_dir is not None else PROMPT_DIR
    run_dir = Path(gen_dir) / task / f"_seed{seed}"
    if reference:
        source = base / task / REFERENCE_PART
        if not source.is_file():
            raise CombineInputError(f"no hand-written reference policy at {source}")
    else:
        source = run_dir / "execution.py"
        generate = f"run `python -m scripts.generate_code --task {task} --seed {seed}` first"
        if not Path(gen_dir).is_dir():
            what = "not a folder" if Path(gen_dir).exists() else "no such folder"
            raise CombineInputError(f"--gen_dir {gen_dir}: {what} (it holds {{gen_dir}}/{task}/_seed{seed}/"
                                    f"execution.py); {generate}")
        if not source.is_file():
            raise CombineInputError(f"no generated code at {source}; {generate}")
    policy = split_unit_test(_read_part(source))[0]
    try:
        tree = ast.parse(policy)
    except SyntaxError as exc:
        # the generated file is the command's input: cut short by a copy, or edited by hand (exit 2, not 1)
        raise CombineInputError(f"{source}: syntax error at line {exc.lineno}: {exc.msg} (a file cut short, or "
                                "edited by hand?); run scripts.generate_code again or restore it") from exc
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == PLAYER_CLASS]
    if not classes:
        raise CombineInputError(f"{source}: no class {PLAYER_CLASS}; run scripts.generate_code again or restore it")
    if reference:
        # the joined methods live once, in the parts: a copy here would be silently overridden
        copies = [n.name for c in classes for n in c.body
                  if isinstance(n, ast.FunctionDef) and n.name in JOINED_METHODS]
        if copies:
            raise CombineError(f"{source}: defines {', '.join(copies)}, which the parts provide; remove them")
        policy = _strip_docstring(policy, tree)
        tree = ast.parse(policy)
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == PLAYER_CLASS]
    cls = classes[-1]
    navigation: tuple[str, ...] = ()
    navigation_source = ""
    if reference:
        own = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
        navigation = tuple(name for name in NAVIGATION_METHODS if name not in own)
        if navigation:
            navigation_source = _methods(base / NAVIGATION_PART, navigation) + "\n\n"
    skill_part = run_dir / "skill_functions.py"
    if not reference and skill_part.is_file():
        skill_functions = _methods(skill_part, SKILL_METHODS)
        header = _generated_header(task, seed, "skill functions generated by the same run")
    else:
        skill_functions, origin = _part_skill_functions(base, task)
        if reference:
            header = _reference_header(task, seed, origin, navigation)
        elif len(set(origin.values())) == 1:
            header = _generated_header(task, seed, f"reference skill functions of {next(iter(origin.values()))}")
        else:
            header = _generated_header(task, seed, "reference skill functions of " + " and ".join(
                f"{path} ({name})" for name, path in origin.items()))
    initial = _methods(base / task / "initial_values.txt", ("set_initial_values",))
    lines = policy.splitlines()
    own_initial = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "set_initial_values"]
    if own_initial:
        # keep the generated initial values: renamed, and called first by the task's values
        for node in own_initial:
            row = node.lineno - 1
            lines[row] = lines[row].replace("def set_initial_values(", "def generated_initial_values(", 1)
        head, _, rest = initial.partition("\n")
        initial = head + "\n    self.generated_initial_values()\n" + rest
    added = navigation_source + skill_functions + "\n\n" + initial
    insert_at = cls.end_lineno or len(lines)
    body = textwrap.indent(added, "    ")
    joined = lines[:insert_at] + ["", "    # --- joined by scripts.combine ---", body] + lines[insert_at:]
    if "random." in added and not any(line.strip() == "import random" for line in lines):
        header += "import random  # the task's initial values draw from it\n\n"
    return header + "\n".join(joined).rstrip() + "\n\n" + COMBINED_FOOTER + "\n"


def combine(task: str, seed: int, gen_dir: str | Path = "code_generation",
            out_root: str | Path = "rl_baseline/meta_policies", force: bool = False,
            prompt_dir: str | Path | None = None, run_test: bool = True,
            limits: SandboxLimits | None = None, reference: bool = False,
            call_budget_s: float | None = None, trust_generated_code: bool = False) -> CombineResult:
    """Builds, checks, tests, writes and loads ``{out_root}/{task}/seed{seed}/execution.py``.

    ``reference``: from the hand-written reference part (see :func:`build_module`). The module is loaded as the
    runtime loads it: in the isolated child (:mod:`code_generation.isolation`), or in-process with
    ``trust_generated_code``; ``call_budget_s`` bounds each call (default: the runtime's, for that path).
    """
    base = Path(prompt_dir) if prompt_dir is not None else PROMPT_DIR
    output_folder("--out_root", out_root, CombineInputError)
    target = output_file("--out_root", Path(out_root) / task / f"seed{seed}" / "execution.py",
                         error=CombineInputError)
    text = build_module(task, seed, gen_dir, prompt_dir, reference=reference)
    # a module edited by hand is refused before the checks and the sandboxed test, not after them
    written = not target.exists() or target.read_bytes() != text.encode("utf-8")
    if written and target.exists() and not force:
        raise CombineInputError(f"{target} exists and differs from the new module; pass --force to replace it")
    problems = check_source(text, FULL_METHODS)
    if problems:
        raise CombineError(f"combined module for {task} seed {seed} refused by the code check:\n"
                           + "\n".join(f"- {p}" for p in problems))
    output = ""
    if run_test:
        test = (base / task / "reference_check.py").read_text(encoding="utf-8")
        result = run_in_sandbox(text, limits, required_methods=FULL_METHODS, prelude=[harness_text(base)],
                                extra_sources=[test], trust_generated_code=trust_generated_code)
        output = result.feedback()
        if not result.ok and not force:
            source = Path(gen_dir) / task / f"_seed{seed}" / "execution.py"
            raise CombineError(f"combined module for {task} seed {seed} (from {source}) fails its unit test "
                               f"(use --force to write it anyway):\n{output[-3000:]}")
    for folder in (Path(out_root), Path(out_root) / task, target.parent):
        folder.mkdir(parents=True, exist_ok=True)
        init = folder / "__init__.py"
        if not init.exists():
            init.write_text("", encoding="utf-8")
    if written:
        atomic_write_text(target, text)
    first = _start_as_an_episode(target, call_budget_s, trust_generated_code)
    logger.info("combined %s seed %d -> %s (first skill %s)", task, seed, target, first)
    return CombineResult(target, written, output)


def _start_as_an_episode(target: Path, call_budget_s: float | None, trust_generated_code: bool) -> str:
    """The written module started as an episode starts it (constructor, ``set_initial_values``, a first
    ``perform_task``), where the runtime runs it; its first skill. A module that loops forever was written with
    --force after its unit test flagged it: the bound per call keeps it from hanging this command. A module that
    would end a skill at once is refused (:func:`code_generation.loader.refuse_instant_endings`)."""
    source = read_checked_source(target)
    budget = call_budget_s if call_budget_s is not None else (
        DEFAULT_CALL_TIMEOUT_S if trust_generated_code else DEFAULT_ISOLATED_CALL_TIMEOUT_S)
    try:
        if trust_generated_code:
            host: Any = InProcessPlayerHost(load_player_class(source, str(target)), {}, budget)
        else:
            host = IsolatedPlayerHost(source, str(target), {}, budget)
    except ModuleRefused as exc:
        raise CombineError(f"{target}: refused where it runs: {exc}") from None
    except Exception as exc:  # in-process: the module's own import failed
        raise CombineError(f"{target}: importing the module failed: {exc!r}") from exc
    try:
        reply = host.request(1, [["new", None], ["peek", "skill"]])
        first = None
        if reply.results is not None and not reply.errors:
            peeked = reply.results[1]
            skill = peeked.get("value") if isinstance(peeked, dict) else None
            reply = host.request(1, [["next", skill, 1, 0, False, False]])
            first = reply.results[0] if reply.results is not None else None
        if not reply.errors:  # (a module whose calls fail is named for that below)
            try:
                refuse_instant_endings(host, target)
            except MetaPolicyError as exc:
                raise CombineError(f"{exc} (the module was written)") from None
    finally:
        host.close()
    for what, text in reply.errors:
        if text == "timed out":
            raise CombineError(f"{target}: a call into the module ({what}) took longer than {budget:g} s, the "
                               "runtime's bound per call (it loops or waits); the module was written but every such "
                               "call would fall back at run time")
        raise CombineError(f"{target}: the module raised {text} when called ({what})")
    return str(first)
