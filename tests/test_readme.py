"""README.md and docs/*.md hold up: every relative link and anchor resolves (GitHub's anchor rules), and every
`python -m X ...` command they show (in a bash block, or quoted inline in the text) names a module that exists
and passes its flags through that module's own parser, with abbreviations refused (argparse would accept
`--dev` for `--device` today and refuse it once a second `--dev...` flag exists, so the docs spell flags out).

The checkers take a text, so the last tests plant a broken link, a broken anchor, a wrong module and a bad flag
in a made-up page and require each to be reported."""
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import common.cli
from common.skill_files import SKILLS_ENV, skills_from_argv

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]

#: `python -m X` of modules outside this repository that the pages may run (set-up, tests, llama.cpp's server)
EXTERNAL_MODULES = {"venv", "pip", "pytest", "llama_cpp.server"}
#: top-level packages of this repository whose modules the pages run
PROJECT_PACKAGES = {"scripts", "bench", "slurm"}
#: what a page's command may leave to its reader, and the sample value it is checked with: a slurm job's shell
#: variables, and the `{task}` / `{skill}` of a template for a new task or skill (docs/extending.md)
PLACEHOLDERS = {"SLURM_ARRAY_TASK_ID": "0", "SLURM_PROCID": "0"}
TEMPLATE_FIELDS = {"{task}": "gnomish", "{skill}": "descender"}

# ---------------------------------------------------------------------------------------------- links and anchors

FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: the rendered text lowercased, punctuation dropped (letters, digits, `_`,
    `-` and spaces kept), spaces turned into `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor of a Markdown page (headings outside code blocks; a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", text).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = github_anchor(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(page: Path, text: str | None = None) -> list[str]:
    """The relative links of ``page`` (its ``text``, read from the file when None) whose file is missing, or whose
    ``#anchor`` is not a heading of the page it points to."""
    text = page.read_text(encoding="utf-8") if text is None else text
    body = INLINE_CODE.sub("", FENCE.sub("", text))
    broken = []
    for target in LINK.findall(body):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if path and not dest.exists():
            broken.append(f"{page.name}: {target}: no file {path}")
            continue
        if anchor:
            if dest.suffix != ".md":
                broken.append(f"{page.name}: {target}: an anchor into a file that is not a Markdown page")
            elif anchor not in anchors(text if dest == page else dest.read_text(encoding="utf-8")):
                broken.append(f"{page.name}: {target}: no heading with the anchor #{anchor} in {dest.name}")
    return broken


# ------------------------------------------------------------------------------------------------------ commands


@dataclass
class Command:
    where: str
    module: str
    args: list[str]

    def __str__(self) -> str:
        return f"{self.where}: python -m {self.module} {' '.join(self.args)}"


OPERATORS = {"&&", "||", ";", "|", "&"}


def _simple_commands(line: str) -> Iterator[list[str]]:
    """The simple commands of one shell line (split at `&&`, `;`, `|`, `&`; `VAR=value` prefixes dropped)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    argv: list[str] = []
    for token in list(lexer) + [";"]:
        if token in OPERATORS:
            while argv and re.fullmatch(r"\w+=.*", argv[0]):
                argv = argv[1:]
            if argv:
                yield argv
            argv = []
        else:
            argv.append(token)


def _shell_lines(block: str) -> Iterator[str]:
    """The logical lines of a shell block: continuation lines joined, and a quote left open (`python -c "`) runs on
    to the line that closes it."""
    pending = ""
    for line in block.replace("\\\n", " ").splitlines():
        pending = f"{pending}\n{line}" if pending else line
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # no closing quotation yet
            continue
        yield pending
        pending = ""
    if pending:
        yield pending


def _as_module_command(argv: list[str]) -> tuple[str, list[str]] | None:
    """``(module, args)`` of `python -m module args` (any python executable) or `python path/module.py args`."""
    if not argv or not re.fullmatch(r"(\S*/)?python3?(\.\d+)?", argv[0]) or len(argv) < 2:
        return None
    if argv[1] == "-m" and len(argv) > 2:
        return argv[2], argv[3:]
    if re.fullmatch(r"[\w/]+\.py", argv[1]):
        return argv[1][:-3].replace("/", "."), argv[2:]
    return None


def commands_in(text: str, where: str) -> list[Command]:
    """Every `python -m X ...` of a page: in its bash blocks (continuation lines joined; `$VAR`s set earlier in
    the block filled in), and quoted inline in the text (`` `python -m X --flag ...` ``, possibly across a line
    break; a bare module name or `--help` is a mention, not a command)."""
    commands = []
    for block in re.findall(r"^```(?:bash|sh|shell)\n(.*?)^```", text, flags=re.S | re.M):
        values = dict(PLACEHOLDERS)
        for line in _shell_lines(block):
            words = shlex.split(line, comments=True)
            if len(words) == 1 and re.fullmatch(r"\w+=.*", words[0]):  # VAR=value: filled in where $VAR is used
                name, _, value = words[0].partition("=")
                values[name] = value
                continue
            for var, first in re.findall(r"\bfor (\w+) in (\S+?);?\s", line):  # a loop: check its first round
                values[var] = re.sub(r"^\{(-?\d+)\.\.-?\d+\}$", r"\1", first)  # {1000..1014}: 1000
            line = re.sub(r"\$\{?(\w+)\}?", lambda v: values.get(v.group(1), v.group(0)), line)
            for field, value in TEMPLATE_FIELDS.items():
                line = line.replace(field, value)
            for argv in _simple_commands(line):
                if argv[0] in ("do", "then", "else"):
                    argv = argv[1:]
                found = _as_module_command(argv)
                if found:
                    commands.append(Command(where, *found))
    body = FENCE.sub("", text)
    for span in re.findall(r"`(python -m [^`]+)`", body, flags=re.S):
        for field, value in TEMPLATE_FIELDS.items():
            span = span.replace(field, value)
        argv = shlex.split(" ".join(span.split()))
        if len(argv) > 3 and "--help" not in argv:
            commands.append(Command(where, argv[2], argv[3:]))
    return commands


class FlagError(Exception):
    """A parser's refusal, with its message."""


def _refusing_parser_errors(self: argparse.ArgumentParser, message: str) -> None:
    raise FlagError(message)


_parse_known_args = argparse.ArgumentParser.parse_known_args


def _parse_known_args_unabbreviated(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
    self.allow_abbrev = False  # spelled out in the docs, as a flag added later cannot make them ambiguous
    return _parse_known_args(self, args, namespace)


@contextlib.contextmanager
def strict_parsers() -> Iterator[None]:
    """Every argparse parser, sample-factory's included, refuses abbreviated flags and raises :class:`FlagError`
    instead of printing and exiting."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(argparse.ArgumentParser, "error", _refusing_parser_errors)
        # the scripts' own parsers (common.cli.ScriptParser, one_line_errors) refuse through common.cli._refuse
        mp.setattr(common.cli, "_refuse", lambda parser, message: _refusing_parser_errors(parser, message))
        mp.setattr(argparse.ArgumentParser, "parse_known_args", _parse_known_args_unabbreviated)
        yield


def _module_exists(module: str) -> bool:
    if module.split(".")[0] in PROJECT_PACKAGES:
        path = REPO.joinpath(*module.split("."))
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()
    return module in EXTERNAL_MODULES


def parse_command(command: Command) -> Any:
    """``command``'s flags through its module's own parser (`scripts.main`: the project's whole configuration,
    parsed and checked without files; others: the module's ``build_parser()``, so no script's main runs).
    Raises :class:`FlagError` naming what is wrong."""
    if not _module_exists(command.module):
        raise FlagError(f"no module {command.module}")
    if command.module.split(".")[0] not in PROJECT_PACKAGES:
        return None  # venv, pip, pytest, llama.cpp's server: not ours to parse
    if any("..." in a for a in command.args):
        raise FlagError("an elided argument ('...'): the command does not run as written")
    paths = skills_from_argv(command.args)
    if paths is not None and os.environ.get(SKILLS_ENV) is None:
        return _parse_with_skill_set(command, paths)
    with strict_parsers():
        if command.module == "scripts.main":
            from rl_baseline.flag_types import ConfigError  # lazy: sample-factory, for this module's commands only
            from rl_baseline.sf.cfg import parse_cfg  # lazy: sample-factory, for this module's commands only

            try:
                return parse_cfg(command.args)
            except ConfigError as exc:
                raise FlagError(str(exc)) from exc
        module = importlib.import_module(command.module)
        build_parser = getattr(module, "build_parser", None)
        if build_parser is None:
            raise FlagError(f"{command.module} has no build_parser(): its flags cannot be checked without running it")
        return build_parser().parse_args(command.args)


def _parse_with_skill_set(command: Command, paths: list[str]) -> None:
    """A command with ``--skills`` parsed in a process of its own, whose vocabulary is that skill set (as the
    entry point's ``scripts/__init__.py`` makes it)."""
    env = {**os.environ, SKILLS_ENV: os.pathsep.join(str(REPO / p) for p in paths)}
    program = ("import sys, json\nfrom tests.test_readme import Command, FlagError, parse_command\n"
               "try:\n    parse_command(Command(*json.loads(sys.argv[1])))\nexcept FlagError as exc:\n"
               "    print(exc)\n    sys.exit(3)\n")
    proc = subprocess.run([sys.executable, "-c", program, json.dumps([command.where, command.module, command.args])],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode == 3:
        raise FlagError(proc.stdout.strip())
    if proc.returncode != 0:
        raise FlagError(f"parsing with its skill set failed: {(proc.stderr or proc.stdout).strip()[-500:]}")


def command_errors(commands: list[Command]) -> list[str]:
    errors = []
    for command in commands:
        try:
            parse_command(command)
        except FlagError as exc:
            errors.append(f"{command}\n    -> {exc}")
    return errors


COMMANDS = [c for page in PAGES for c in commands_in(page.read_text(encoding="utf-8"), page.relative_to(REPO).as_posix())]

# ---------------------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_and_anchor_resolves(page):
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_command_names_a_module_that_exists_with_flags_its_parser_accepts(page):
    where = page.relative_to(REPO).as_posix()
    errors = command_errors([c for c in COMMANDS if c.where == where])
    assert not errors, "\n".join(errors)


def test_the_readme_links_a_page_for_every_phase_and_stays_a_front_door():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    shown = {c.module for c in COMMANDS if c.where == "README.md"}
    assert {"scripts.pipeline", "pytest"} <= shown
    for page in ("docs/phases.md", "docs/results.md", "docs/performance.md", "docs/fidelity.md"):
        assert f"]({page}" in text, f"README.md does not link {page}"


def test_docs_show_every_phase():
    shown = {c.module for c in COMMANDS}
    for script in ("scripts.pipeline", "scripts.collect_dataset", "scripts.import_ttyrecs", "scripts.annotate_pairs",
                   "scripts.train_reward", "scripts.inspect_reward", "scripts.generate_code", "scripts.combine",
                   "scripts.main", "scripts.report", "scripts.annotate_pairs_dataset", "scripts.export_dataset",
                   "scripts.skill_report"):
        assert script in shown, f"no page shows a `python -m {script}` command"


def test_every_docs_page_opens_with_what_it_covers():
    for page in PAGES[1:]:
        title, *rest = page.read_text(encoding="utf-8").splitlines()
        opening = next(line for line in rest if line.strip())
        assert title.startswith("# ") and re.match(r"[A-Za-z`*]", opening), f"{page.name} opens with {opening!r}"


def test_the_release_training_command_names_five_reward_models_in_skill_order():
    # a command with --skills names its own skill set's models (checked against that set's parser above)
    shown = [c for c in COMMANDS if c.module == "scripts.main" and "--env" not in c.args and "--reward_dir" in c.args
             and skills_from_argv(c.args) is None]
    assert shown
    for command in shown:
        with strict_parsers():
            cfg = parse_command(command)
        assert len(cfg.reward_dirs) == 5 and cfg.reward_dirs[0].endswith("llama3_discoverer_default"), str(command)


# ------------------------------------------------------------------- the checkers catch what they are for

PLANTED = """# A page

## Set-up: one command (measured)

[fine](#set-up-one-command-measured) [also fine](README.md) [fine too](docs/stack.md#the-pinned-stack-and-why)
[broken file](docs/no_such_page.md) [broken anchor](#set-up-one-command) [broken anchor elsewhere](docs/stack.md#nope)
Not links: `[x](missing.md)` in code.

```bash
python -m scripts.pipeline --preset smoke
python -m scripts.annotate_pairs --goal_key descender --backend transformers --max_model 8192
python -m scripts.no_such_script --flag 1
python -m scripts.train_reward --experiment llama3_descender_default --num_epoch 3
URL=http://127.0.0.1:8000/v1
python -m scripts.llm_policy --eval_target gnomish --backend openai --base_url $URL --eval_episodes one
python -m scripts.main --experiment x --no_such_flag 1 && python -m bench.message_stream --reward_dir "[...]"
```

Inline: `python -m scripts.skill_report --policy_dir train_dir/x --episode 20`.
"""


def test_the_link_checker_reports_a_missing_file_and_missing_anchors():
    broken = broken_links(REPO / "PLANTED.md", PLANTED)
    assert broken == ["PLANTED.md: docs/no_such_page.md: no file docs/no_such_page.md",
                      "PLANTED.md: #set-up-one-command: no heading with the anchor #set-up-one-command in PLANTED.md",
                      "PLANTED.md: docs/stack.md#nope: no heading with the anchor #nope in stack.md"]


def test_github_anchor_rules():
    assert github_anchor("Phases 2-3: code generation of skill logic") == "phases-2-3-code-generation-of-skill-logic"
    assert github_anchor("What the rewards read: the message stream (measured)") == \
        "what-the-rewards-read-the-message-stream-measured"
    assert github_anchor("The `--eval_skill` flag, and [Motif](x.md)") == "the---eval_skill-flag-and-motif"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}


def test_the_command_checker_reports_a_wrong_module_and_bad_flags():
    commands = commands_in(PLANTED, "PLANTED.md")
    assert [c.module for c in commands] == ["scripts.pipeline", "scripts.annotate_pairs", "scripts.no_such_script",
                                            "scripts.train_reward", "scripts.llm_policy", "scripts.main",
                                            "bench.message_stream", "scripts.skill_report"]
    assert commands[4].args[5] == "http://127.0.0.1:8000/v1"  # the block's $URL filled in
    errors = command_errors(commands)
    assert len(errors) == 7, "\n".join(errors)
    expected = ["unrecognized arguments: --max_model 8192",  # an abbreviation of --max_model_len
                "no module scripts.no_such_script",
                "unrecognized arguments: --num_epoch 3",  # an abbreviation of --num_epochs
                "invalid int value: 'one'",
                "--no_such_flag",
                "elided argument",
                "unrecognized arguments: --episode 20"]  # an abbreviation of --episodes
    for error, words in zip(errors, expected):
        assert words in error, error
    assert not command_errors(commands[:1])
