"""Every `python -m scripts.X ...` (or `python scripts/X.py ...`) command shown in README.md parses with
that script's own parser, so the documentation cannot drift from the flags the scripts take."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.test_slurm import parse

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_commands() -> list[list[str]]:
    """The README's shell commands that run one of our scripts, as argv (continuations joined)."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            if argv and argv[-1] == "&":  # started in the background: the shell's, not an argument
                argv = argv[:-1]
            if argv[:2] == ["python", "-m"] and argv[2].startswith("scripts."):
                commands.append(argv)
            elif len(argv) > 1 and argv[0] == "python" and re.fullmatch(r"scripts/\w+\.py", argv[1]):
                # `python scripts/main.py ...` (ONI's spelling) runs the same module
                commands.append(["python", "-m", argv[1][:-3].replace("/", ".")] + argv[2:])
    return commands


def readme_inline_commands() -> list[list[str]]:
    """The full commands quoted inline in the text (`` `python -m scripts.X --flag ...` ``, possibly across a line
    break), outside fenced blocks; a bare module name or ``--help`` is a mention, not a command."""
    body = re.sub(r"```.*?```", "", README.read_text(), flags=re.S)
    commands = []
    for span in re.findall(r"`(python -m scripts\.[^`]+)`", body, flags=re.S):
        argv = shlex.split(" ".join(span.split()))
        if len(argv) > 3 and "--help" not in argv:
            commands.append(argv)
    return commands


COMMANDS = readme_commands() + readme_inline_commands()


def test_readme_shows_every_phase():
    shown = {argv[2] for argv in COMMANDS}
    for script in ("scripts.pipeline", "scripts.collect_dataset", "scripts.import_ttyrecs", "scripts.annotate_pairs",
                   "scripts.train_reward", "scripts.inspect_reward", "scripts.generate_code", "scripts.combine",
                   "scripts.main", "scripts.report", "scripts.annotate_pairs_dataset", "scripts.export_dataset"):
        assert script in shown, f"README.md shows no `python -m {script}` command"


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a[2:5]) for a in COMMANDS])
def test_readme_command_parses(argv):
    cfg = parse(argv)
    if argv[2] == "scripts.main" and "--env" not in argv and "--reward_dir" in argv:
        # the release's training command: five reward models, one per skill, in skill order
        assert len(cfg.reward_dirs) == 5 and cfg.reward_dirs[0].endswith("llama3_discoverer_default")
