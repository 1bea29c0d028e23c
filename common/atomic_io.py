"""Files written whole or not at all: a temporary file next to the target, then one rename.

A crash, a full disk or a killed job leaves either the old file or the new one, never half a
file; readers of a run directory never see a file being written. Every file the project
writes that another phase or a resumed run reads goes through here.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np


def user_cache_dir() -> Path:
    """This user's folder for files the project derives and can rebuild at any time (the rendered NetHack options
    file, the preloaded clock library): under the temporary folder, keyed by user so users do not share it."""
    return Path(tempfile.gettempdir()) / f"maestromotif-{os.getuid()}"


def current_umask() -> int:
    """The process's umask, read without changing it where Linux shows it (``os.umask`` can only be read
    by setting it, which races with other threads creating files)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, writer: Callable[[Path], None]) -> Path:
    """``writer(tmp)`` writes a temporary file next to ``path``, which then replaces ``path`` in one step.

    The file gets the permissions a plain ``open`` would give it (0666 less the umask), not ``mkstemp``'s
    private 0600, so the rest of a lab group can read a shared run."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # same folder (so the rename is atomic), and a name no reader takes for the file itself
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        writer(Path(tmp))
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _fsynced(write: Callable[[Any], None], mode: str, **open_kwargs: Any) -> Callable[[Path], None]:
    def writer(tmp: Path) -> None:
        with open(tmp, mode, **open_kwargs) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())

    return writer


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return atomic_write(path, _fsynced(lambda fh: fh.write(data), "wb"))


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write(path, _fsynced(lambda fh: fh.write(text), "w", encoding="utf-8"))


def atomic_write_json(path: str | os.PathLike, data: Any, indent: int | None = 1, sort_keys: bool = False,
                      default: Callable[[Any], Any] | None = None) -> Path:
    text = json.dumps(data, indent=indent, sort_keys=sort_keys, default=default)
    return atomic_write_text(path, text)


def atomic_save_npy(path: str | os.PathLike, array: np.ndarray) -> Path:
    """``np.save`` of ``array`` (no pickles) to exactly ``path``."""
    return atomic_write(path, _fsynced(lambda fh: np.save(fh, array, allow_pickle=False), "wb"))
