"""Hands the project's NetHack options file to NLE.

NLE builds NetHack's ``NETHACKOPTIONS`` by joining its ``options`` with commas and
appending ``name:<player>`` (and ``playmode:debug`` in wizard mode). NetHack reads a
``NETHACKOPTIONS`` value that starts with ``/`` as the path of a configuration file, which is
the only way to use configuration-file directives (``MSGTYPE``, ``AUTOPICKUP_EXCEPTION``)
without changing NLE. So the options file is rendered, together with the name and play
mode NLE will append, into a file whose path is exactly the string NLE ends up passing.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from common.atomic_io import atomic_write_text, user_cache_dir

OPTIONS_FILE = Path(__file__).with_name("nethackrc")

# NetHack ignores a configuration-file path of BUFSZ/2 characters or more.
MAX_PATH_CHARS = 127

_DIRECTIVES = ("OPTIONS", "AUTOPICKUP_EXCEPTION", "MSGTYPE")
_LINE = re.compile(r"^(?P<key>[A-Z_]+)\s*=\s*(?P<value>.+)$")


class OptionsFileError(ValueError):
    """The options file has a line NetHack would not accept."""


def read_options_file(path: str | os.PathLike = OPTIONS_FILE) -> list[str]:
    """The directive lines of an options file; raises :class:`OptionsFileError` on bad lines.

    Only the three directives this project uses are allowed: a typo such as ``OPTION=``
    would otherwise make NetHack stop at a "Hit return to continue" screen.
    """
    path = Path(path)
    if not path.is_file():
        raise OptionsFileError(f"NetHack options file not found: {path}")
    lines = []
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None or match["key"] not in _DIRECTIVES:
            raise OptionsFileError(
                f"{path}:{number}: expected one of {', '.join(d + '=' for d in _DIRECTIVES)}, "
                f"got {raw!r}"
            )
        if match["key"] == "OPTIONS" and re.search(
                r"(^|,)\s*(name|playmode|role|race|align|gender)\s*:", match["value"]):
            raise OptionsFileError(
                f"{path}:{number}: name, playmode and the character are set by the environment")
        lines.append(line)
    return lines


_ROLE_WORDS = {"role": 0, "race": 1, "align": 2, "gender": 3}


def nle_options(playername: str, wizard: bool = False,
                path: str | os.PathLike = OPTIONS_FILE,
                cache_dir: str | os.PathLike | None = None) -> tuple[str]:
    """The ``options`` argument for ``nle.env.base.NLE`` that makes NetHack read ``path``.

    The rendered file lives in a per-user cache directory keyed by its content, so
    concurrent workers write the same bytes to the same place (atomically).
    """
    lines = read_options_file(path)
    lines.append(f"OPTIONS=name:{playername}")
    # The name ``Agent-mon-hum-neu-mal`` selects the character, except in wizard mode where
    # NetHack renames the hero "wizard": the character is also given explicitly.
    parts = playername.split("-")[1:]
    if len(parts) == 4:
        lines.append("OPTIONS=" + ",".join(f"{word}:{parts[i]}" for word, i in _ROLE_WORDS.items()))
    if wizard:
        lines.append("OPTIONS=playmode:debug")
    content = "\n".join(lines) + "\n"
    digest = hashlib.sha1(content.encode()).hexdigest()[:10]
    root = Path(cache_dir) if cache_dir else user_cache_dir()
    directory = root / digest
    stem = str(directory / "rc")
    # The exact string NLE will hand to NetHack after joining its own additions.
    full = stem + f",name:{playername}" + (",playmode:debug" if wizard else "")
    if len(full) > MAX_PATH_CHARS:
        raise OptionsFileError(
            f"NetHack options path {full!r} is longer than {MAX_PATH_CHARS} characters; "
            "set TMPDIR to a shorter directory"
        )
    target = Path(full)
    if not target.is_file() or target.read_text() != content:
        atomic_write_text(target, content)
    return (stem,)
