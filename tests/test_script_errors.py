"""Every entry point stops the same way (common.cli): one ``error: ...`` line on stderr naming the flag or
file, exit status 2 for bad input and missing optional packages, 1 for a run that failed."""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from common.cli import FAILED, USAGE, ScriptParser, error, one_line_errors

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.stem for p in (REPO / "scripts").glob("*.py") if p.stem != "__init__")


def test_error_is_one_line_and_returns_the_status(capsys) -> None:
    assert error("--x 3: must be\n  at most 2") == USAGE == 2
    assert capsys.readouterr().err == "error: --x 3: must be at most 2\n"
    assert error("the server exited", FAILED, detail="--- log ---\nlast line") == FAILED == 1
    assert capsys.readouterr().err == "error: the server exited\n--- log ---\nlast line\n"


def test_parsers_refuse_in_one_line(capsys) -> None:
    p = ScriptParser(prog="python -m scripts.x")
    p.add_argument("--n", type=int, required=True)
    with pytest.raises(SystemExit) as exc:
        p.parse_args(["--n", "two"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err == "error: argument --n: invalid int value: 'two' (python -m scripts.x --help lists the flags)\n"
    other = one_line_errors(argparse.ArgumentParser(prog="elsewhere"))
    with pytest.raises(SystemExit):
        other.parse_args(["--what"])
    assert capsys.readouterr().err.startswith("error: unrecognized arguments: --what (elsewhere --help")


def test_every_script_refuses_an_unknown_flag_with_one_error_line() -> None:
    """They printed argparse's usage block (up to 140 lines for scripts.main) under "main.py: error:",
    "serve_local_llm.py: error:" or "python -m scripts.X: error:"; all run at once, as --help stays light."""
    procs = {name: subprocess.Popen([sys.executable, "-m", f"scripts.{name}", "--no_such_flag"], cwd=REPO,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in SCRIPTS}
    wrong = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        lines = err.strip().splitlines()
        if proc.returncode != 2 or len(lines) != 1 or not lines[0].startswith("error: ") \
                or f"python -m scripts.{name} --help" not in lines[0]:
            wrong[name] = (proc.returncode, err[-600:])
    assert not wrong, wrong
    assert len(procs) >= 24
