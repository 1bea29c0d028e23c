"""Reading files that may be damaged: any failure becomes one clear error naming the file.

Runs live for days on shared filesystems; files get cut short by full disks and preempted copies,
replaced by files of another version or kind, or edited by hand. Every reader of the project goes
through :func:`reading` (or the helpers built on it), so what a user sees is always::

    {path}: not a readable {what} ({reason}). {what to do}

and never a traceback from deep inside numpy, zipfile, pickle or torch. The error type is the
caller's (``DatasetError``, ``PreferenceError``, ...), so each command's existing handling applies.
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np


class FileReadError(ValueError):
    """A file that cannot be used: damaged, of another kind or version, or not there."""


def reason(exc: BaseException) -> str:
    """A short reason for a low-level read failure, in words a user can act on."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    if name in ("BadZipFile", "EOFError", "UnpicklingError") or "truncated" in text or "No data left" in text:
        return f"cut short or not this kind of file: {name}{': ' + text[:120] if text else ''}"
    if isinstance(exc, UnicodeDecodeError):
        return "not text (binary or damaged bytes)"
    return f"{name}: {text[:200]}" if text else name


@contextlib.contextmanager
def reading(path: str | os.PathLike, what: str, remedy: str, error: type[Exception] = FileReadError) -> Iterator[None]:
    """Turns any exception raised while reading ``path`` into ``error`` naming it (``error`` itself passes)."""
    try:
        yield
    except error:
        raise
    except FileNotFoundError:
        raise error(f"{path}: {what} not found. {remedy}") from None
    except Exception as exc:  # noqa: BLE001 - every failure of a damaged file ends here, named
        raise error(f"{path}: not a readable {what} ({reason(exc)}). {remedy}") from exc


def load_npy(path: str | os.PathLike, what: str, remedy: str, error: type[Exception] = FileReadError,
             mmap: bool = False) -> np.ndarray:
    """``np.load`` of one array (never a pickle; memory-mapped when ``mmap``)."""
    with reading(path, what, remedy, error):
        array = np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)
        if not isinstance(array, np.ndarray):
            raise error(f"{path}: not a readable {what} (an .npz archive, not one .npy array). {remedy}")
        return array


def load_npz(path: str | os.PathLike, keys: tuple[str, ...], what: str, remedy: str,
             error: type[Exception] = FileReadError) -> dict[str, np.ndarray]:
    """The arrays ``keys`` (all required) of an ``.npz`` archive, read whole (no pickles)."""
    with reading(path, what, remedy, error):
        data = np.load(path, allow_pickle=False)
        if not hasattr(data, "files"):
            raise error(f"{path}: not a readable {what} (one .npy array, not an .npz archive). {remedy}")
        with data:
            missing = [k for k in keys if k not in data.files]
            if missing:
                raise error(f"{path}: not a readable {what} (no array {', '.join(missing)}; it has "
                            f"{', '.join(data.files) or 'none'}). {remedy}")
            return {k: data[k] for k in data.files}


def load_json(path: str | os.PathLike, what: str, remedy: str, error: type[Exception] = FileReadError,
              kind: type = dict) -> Any:
    """A JSON file whose top level is a ``kind`` (a dict by default)."""
    with reading(path, what, remedy, error):
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, kind):
        raise error(f"{path}: not a readable {what} (expected a JSON {kind.__name__}, found "
                    f"{type(data).__name__}). {remedy}")
    return data


def read_text(path: str | os.PathLike, what: str, remedy: str, error: type[Exception] = FileReadError) -> str:
    with reading(path, what, remedy, error):
        return Path(path).read_text(encoding="utf-8")


def check_array(array: np.ndarray, path: str | os.PathLike, what: str, remedy: str, error: type[Exception],
                dtype_kind: Optional[str] = None, shape: Optional[tuple[Optional[int], ...]] = None) -> np.ndarray:
    """``array`` as ``what`` expects it: its dtype kind (``"u"``, ``"i"``, ``"iu"``, ``"f"``) and shape
    (``None`` entries are free); else ``error`` naming the file, expected and found."""
    if dtype_kind is not None and array.dtype.kind not in dtype_kind:
        raise error(f"{path}: not a readable {what} (dtype {array.dtype}, expected "
                    f"{'integers' if set(dtype_kind) <= set('iu') else dtype_kind}). {remedy}")
    if shape is not None and (array.ndim != len(shape)
                              or any(s is not None and s != a for s, a in zip(shape, array.shape))):
        wanted = "[" + ", ".join("N" if s is None else str(s) for s in shape) + "]"
        raise error(f"{path}: not a readable {what} (shape {list(array.shape)}, expected {wanted}). {remedy}")
    return array
