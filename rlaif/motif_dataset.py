"""Motif's dataset layout (facebookresearch/motif), read in place, and written from this project's datasets.

The layout Motif's ``PairsDataset`` reads (one folder, e.g. ``motif_dataset/``)::

    data/message.npy       uint8  [N, 2, L, 256]      the message of each observation, zero padded
    data/blstats.npy       int    [N, 2, L, 27]       NLE's bottom-line stats (26 in NLE before 0.9)
    data/tty_chars.npy     uint8  [N, 2, L, 24, 80]   the terminal
    data/tty_colors.npy    int8   [N, 2, L, 24, 80]   its colours
    data/rewards.npy       float  [N, 2, L]           optional here: the game reward of each step
    info/{key}.npy         [N, 2]                     per pair member (Motif's: score, turns, experience_level, ...)
    preference/{annotator}.npy  int8 [N]              0 first better, 1 second, 2 tie, 3 unknown

Axis 0 is the pair, axis 1 (size 2) its two members, axis 2 the ``L`` consecutive observations
of a member (Motif's reward training reads ``L = 1``; its annotator joins the messages of longer
members). Pairs labelled 3 (unknown) are masked out of reward training, as Motif's loader does.

Reading is safe and lazy: every array is opened with ``np.load(mmap_mode="r", allow_pickle=False)``,
so nothing is loaded until it is indexed and nothing is ever unpickled; only the files of the
named keys are opened (Motif's own tools leave a ``train_split_info/sorted_messages.pkl`` pickle
in the folder; it is never read here). An array Motif's layout expects that is missing, cut short
or of the wrong shape raises :class:`MotifLayoutError` naming the file.

:func:`export_motif_layout` writes any dataset this project collects (``og_dataset/{skill}.npz``)
with its preference files into the layout: ``L = 1``, each sample's current message; the stats
this project records (depth, gold, hit points, maximum hit points, experience level, hunger) in
their NLE blstats slots, every other slot 0; a blank terminal with the message on its top line
(the project's datasets hold no screens); ``info/experience_level``. ``data/rewards.npy`` and
Motif's other ``info`` keys (score, turns, character) are not written: the project does not
record them.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from tqdm import tqdm

from common.atomic_io import atomic_save_npy
from common.flag_checks import output_folder
from common.nethack import blstats as B
from common.nethack.messages import MESSAGE_LEN
from rlaif.dataset import STAT_INDEX, ObservationDataset
from rlaif.preferences import TIE, UNKNOWN, PreferenceError, label_counts, load_preferences, validate_preferences

logger = logging.getLogger(__name__)

DATA_DIR, INFO_DIR, PREFERENCE_DIR = "data", "info", "preference"
#: the observation arrays Motif's reward training and annotation read (its ``data_keys``)
DATA_KEYS: tuple[str, ...] = ("blstats", "message", "tty_chars", "tty_colors")
OPTIONAL_DATA_KEYS: tuple[str, ...] = ("rewards",)
TTY_SHAPE = (24, 80)
#: NLE's blstats length (NLE >= 0.9: 27; Motif's env declared 26, the older length)
BLSTATS_LENGTHS = (26, 27)
NUM_BLSTATS = 27
#: where this project's stats go in NLE's blstats
_BLSTATS_SLOT = {"depth": B.BL_DEPTH, "gold": B.BL_GOLD, "hp": B.BL_HP, "hpmax": B.BL_HPMAX,
                 "xp_level": B.BL_XP_LEVEL, "hunger": B.BL_HUNGER}
EXPORT_MANIFEST = "export.json"
_FINGERPRINT_BLOCK = 65536  # pairs hashed per read, so a large memory-mapped array is never loaded whole


class MotifLayoutError(ValueError):
    """A Motif-layout folder that cannot be read: a missing key, a wrong shape, an unsafe file."""


def is_motif_layout(directory: str | os.PathLike) -> bool:
    """The folder holds Motif's layout (a ``data/`` folder), not this project's ``{skill}.npz`` files."""
    return (Path(directory) / DATA_DIR).is_dir()


def open_array(path: Path) -> np.ndarray:
    """One ``.npy`` file, memory mapped, without pickles; :class:`MotifLayoutError` naming the file."""
    if not path.is_file():
        raise MotifLayoutError(f"{path}: missing")
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        # an object array needs unpickling: refused (numpy says "Python objects in dtype" / "allow_pickle")
        raise MotifLayoutError(f"{path}: cannot be read as a plain .npy array without unpickling ({exc}); "
                               "refusing it") from exc


def _check_shape(path: Path, array: np.ndarray, tail: tuple[int, ...] | None, rank: int) -> None:
    if array.ndim != rank or array.shape[1] != 2 or (tail is not None and array.shape[3:] != tail):
        want = ["N", "2", "L", *map(str, tail or ())][:rank]
        raise MotifLayoutError(f"{path}: shape {tuple(array.shape)}, expected [{', '.join(want)}] "
                               "(pairs on axis 0, the two members of a pair on axis 1)")


@dataclass
class MotifLayout:
    """An opened Motif-layout folder: its observation arrays and info arrays, memory mapped."""

    directory: Path
    data: dict[str, np.ndarray]
    info: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def num_pairs(self) -> int:
        return int(self.data["message"].shape[0])

    @property
    def seq_len(self) -> int:
        """``L``: observations per pair member."""
        return int(self.data["message"].shape[2])

    @property
    def messages(self) -> np.ndarray:
        return self.data["message"]

    def preference_path(self, annotator: str) -> Path:
        return preference_path(self.directory, annotator)


def open_motif_layout(directory: str | os.PathLike, data_keys: Sequence[str] = DATA_KEYS,
                      info_keys: Sequence[str] = ()) -> MotifLayout:
    """Opens ``data/{key}.npy`` for every key of ``data_keys`` (all of :data:`DATA_KEYS` by default,
    as Motif's loader needs them; ``rewards`` when asked) and ``info/{key}.npy`` for ``info_keys``,
    and checks that they agree: ``[N, 2, L, ...]`` with the shapes of the module docstring."""
    directory = Path(directory)
    if not directory.is_dir():
        raise MotifLayoutError(f"{directory}: no such folder (expected Motif's dataset layout: data/, info/, "
                               "preference/)")
    if not is_motif_layout(directory):
        raise MotifLayoutError(
            f"{directory}: not Motif's dataset layout (no {DATA_DIR}/ folder); unpack the release "
            "(cat motif_dataset_zipped/motif_dataset_part_* > motif_dataset.zip; unzip motif_dataset.zip) or export a "
            "dataset of this project with python -m scripts.export_dataset --format motif"
        )
    keys = list(dict.fromkeys(["message", *data_keys]))
    unknown = [k for k in keys if k not in DATA_KEYS + OPTIONAL_DATA_KEYS]
    if unknown:
        raise MotifLayoutError(f"unknown data keys {unknown}; Motif's layout has {', '.join(DATA_KEYS + OPTIONAL_DATA_KEYS)}")
    missing = [k for k in keys if not (directory / DATA_DIR / f"{k}.npy").is_file()]
    if missing:
        raise MotifLayoutError(
            f"{directory}: Motif's layout lacks {', '.join(f'{DATA_DIR}/{k}.npy' for k in missing)} "
            f"(it needs {', '.join(f'{DATA_DIR}/{k}.npy' for k in keys)})"
        )
    data: dict[str, np.ndarray] = {}
    for key in keys:
        path = directory / DATA_DIR / f"{key}.npy"
        arr = open_array(path)
        if key == "message":
            _check_shape(path, arr, (MESSAGE_LEN,), 4)
            if not np.issubdtype(arr.dtype, np.integer):
                raise MotifLayoutError(f"{path}: dtype {arr.dtype}, expected message bytes (uint8)")
        elif key == "blstats":
            _check_shape(path, arr, None, 4)
            if arr.shape[3] not in BLSTATS_LENGTHS:
                raise MotifLayoutError(f"{path}: {arr.shape[3]} stats per observation, expected one of "
                                       f"{BLSTATS_LENGTHS} (NLE's blstats)")
        elif key in ("tty_chars", "tty_colors"):
            _check_shape(path, arr, TTY_SHAPE, 5)
        else:  # rewards
            _check_shape(path, arr, (), 3)
        data[key] = arr
    n, seq = data["message"].shape[0], data["message"].shape[2]
    for key, arr in data.items():
        if arr.shape[0] != n or arr.shape[2] != seq:
            raise MotifLayoutError(
                f"{directory / DATA_DIR / (key + '.npy')}: {arr.shape[0]} pairs of {arr.shape[2]} observations, but "
                f"{DATA_DIR}/message.npy has {n} pairs of {seq}"
            )
    if n == 0 or seq == 0:
        raise MotifLayoutError(f"{directory / DATA_DIR / 'message.npy'}: no pairs")
    info: dict[str, np.ndarray] = {}
    for key in info_keys:
        path = directory / INFO_DIR / f"{key}.npy"
        if not path.is_file():
            raise MotifLayoutError(f"{directory}: Motif's layout lacks {INFO_DIR}/{key}.npy")
        arr = open_array(path)
        if arr.ndim < 2 or arr.shape[0] != n or arr.shape[1] != 2:
            raise MotifLayoutError(f"{path}: shape {tuple(arr.shape)}, expected [{n}, 2] (one value per pair member)")
        info[key] = arr
    return MotifLayout(directory, data, info)


def preference_path(directory: str | os.PathLike, annotator: str) -> Path:
    check_annotator_name(annotator)
    return Path(directory) / PREFERENCE_DIR / f"{annotator}.npy"


def check_annotator_name(annotator: str) -> str:
    """An annotator string is a file name, not a path (and never a hidden or relative one)."""
    if not annotator or "/" in annotator or "\\" in annotator or annotator.startswith(".") or "." in annotator:
        raise MotifLayoutError(f"annotator {annotator!r}: expected a plain name such as llama70b_msg_defaultgoal_default "
                               "(the file preference/{annotator}.npy)")
    return annotator


def list_annotators(directory: str | os.PathLike) -> list[str]:
    """Annotator strings with a preference file in the folder (names only; nothing is opened)."""
    pdir = Path(directory) / PREFERENCE_DIR
    if not pdir.is_dir():
        return []
    return sorted(p.stem for p in pdir.glob("*.npy") if "." not in p.stem and not p.name.startswith("."))


def load_motif_preferences(directory: str | os.PathLike, annotator: str, num_pairs: int) -> np.ndarray:
    """``preference/{annotator}.npy`` as int labels [num_pairs] (codes 0-3), checked against the pairs."""
    path = preference_path(directory, annotator)
    if not path.is_file():
        found = list_annotators(directory)
        raise MotifLayoutError(
            f"--annotator {annotator}: {path} not found; preference files in {path.parent}: "
            f"{', '.join(found) if found else 'none'} (annotate first: python -m scripts.annotate_pairs_dataset)"
        )
    labels = np.asarray(open_array(path))
    try:
        return validate_preferences(labels, num_pairs, str(path), remedy="Annotate the dataset again (python -m "
                                    "scripts.annotate_pairs_dataset ... --ignore-existing)")
    except PreferenceError as exc:
        raise MotifLayoutError(str(exc)) from exc


def labelled_mask(labels: np.ndarray) -> np.ndarray:
    """Pairs a reward model learns from: every label but 3 (unknown), as Motif's loader masks them."""
    return np.asarray(labels) != UNKNOWN


def layout_fingerprint(layout: MotifLayout, keys: Sequence[str] = ("message",)) -> str:
    """Short hash of the arrays ``keys``: tells whether annotation chunk files belong to this dataset.

    Read block by block, so a large memory-mapped array is never loaded whole."""
    h = hashlib.blake2b(digest_size=12)
    h.update(np.int64(layout.num_pairs).tobytes())
    h.update(np.int64(layout.seq_len).tobytes())
    for key in keys:
        arr = layout.data[key]
        h.update(key.encode())
        for start in range(0, len(arr), _FINGERPRINT_BLOCK):
            h.update(np.ascontiguousarray(arr[start:start + _FINGERPRINT_BLOCK]).tobytes())
    return h.hexdigest()


def member_messages(layout: MotifLayout, pairs: np.ndarray) -> np.ndarray:
    """Message bytes of the members of ``pairs``: uint8 [len(pairs), 2, L, 256], read from the memory map."""
    return np.asarray(layout.messages[np.asarray(pairs)], dtype=np.uint8)


def rule_preferences(directory: str | os.PathLike, kind: str, name: str | None = None,
                     ignore_existing: bool = False) -> tuple[Path, dict[str, int]]:
    """Motif's rule annotators (``--annotator-type score|return``): the member with the higher
    ``info/score`` (``score``) or the higher sum of ``data/rewards`` (``return``) is preferred; equal
    values are a tie. Labels 0-2 of an existing file are kept unless ``ignore_existing``; the file
    ``preference/{name or kind}.npy`` (int8) is written whole or not at all."""
    if kind == "score":
        layout = open_motif_layout(directory, info_keys=("score",))
        values = np.asarray(layout.info["score"], dtype=np.float64).reshape(layout.num_pairs, 2, -1).sum(axis=2)
    elif kind == "return":
        layout = open_motif_layout(directory, data_keys=("message", "rewards"))
        values = np.asarray(layout.data["rewards"], dtype=np.float64).sum(axis=2)
    else:
        raise MotifLayoutError(f"--annotator-type {kind!r}: expected llama, score or return")
    labels = np.where(values[:, 0] > values[:, 1], 0, 1).astype(np.int8)
    labels[values[:, 0] == values[:, 1]] = TIE
    path = preference_path(directory, name or kind)
    if path.is_file() and not ignore_existing:
        old = load_motif_preferences(directory, name or kind, layout.num_pairs)
        keep = old != UNKNOWN
        labels[keep] = old[keep]
    atomic_save_npy(path, labels)
    return path, label_counts(labels)


# --------------------------------------------------------------------------- export


def blstats_from_stats(stats: np.ndarray) -> np.ndarray:
    """NLE blstats int64 [..., 27] from this project's stats [..., 6]: the six known slots filled, the rest 0."""
    stats = np.asarray(stats)
    out = np.zeros(stats.shape[:-1] + (NUM_BLSTATS,), dtype=np.int64)
    for name, slot in _BLSTATS_SLOT.items():
        out[..., slot] = stats[..., STAT_INDEX[name]]
    return out


def skill_preferences(preference_dir: str | os.PathLike, skill: str, num_pairs: int,
                      annotators: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """The preference files to export with a skill's dataset: ``annotators`` (each must exist and fit),
    or every ``{preference_dir}/*.npy`` with ``skill`` as a ``_``-separated part of its name and
    ``num_pairs`` labels (others of the skill are skipped with a warning)."""
    pdir = Path(preference_dir)
    out: dict[str, np.ndarray] = {}
    if annotators:
        for name in annotators:
            path = pdir / f"{check_annotator_name(name)}.npy"
            try:
                out[name] = load_preferences(path, num_pairs)
            except PreferenceError as exc:
                raise MotifLayoutError(f"--annotator {name}: {exc}") from exc
        return out
    for path in sorted(pdir.glob("*.npy")) if pdir.is_dir() else []:
        name = path.stem
        if skill not in name.split("_") or "." in name:  # chunk files (name.chunk0of2) are not final labels
            continue
        try:
            out[name] = load_preferences(path, num_pairs)
        except PreferenceError as exc:
            logger.warning("not exported: %s", exc)
    return out


# what an export writes, and nothing else: --overwrite replaces a folder only when it holds no more than these
_EXPORT_FILES = {DATA_DIR: {"message.npy", "blstats.npy", "tty_chars.npy", "tty_colors.npy"},
                 INFO_DIR: {"experience_level.npy"}}


def _not_of_an_export(out: Path) -> list[str]:
    """What ``out`` holds that an export did not write (``preference/`` may hold any ``*.npy``)."""
    others: list[str] = []
    for entry in sorted(out.iterdir()):
        if entry.name == EXPORT_MANIFEST and entry.is_file():
            continue
        if entry.name in _EXPORT_FILES and entry.is_dir():
            others += [f"{entry.name}/{p.name}" for p in sorted(entry.iterdir())
                       if p.name not in _EXPORT_FILES[entry.name] or not p.is_file()]
        elif entry.name == PREFERENCE_DIR and entry.is_dir():
            others += [f"{entry.name}/{p.name}" for p in sorted(entry.iterdir()) if p.suffix != ".npy" or not p.is_file()]
        else:
            others.append(entry.name + ("/" if entry.is_dir() else ""))
    return others


def check_export_target(out: str | os.PathLike, overwrite: bool = False) -> Path:
    """``out`` as :func:`export_motif_layout` writes it (checked before the dataset is read): a folder that can be
    written, and one that is not there yet unless ``overwrite``; else :class:`MotifLayoutError`.

    ``overwrite`` replaces only an earlier export: a folder with this command's manifest and no file it does not
    write. Anything else there (another run's folder, the datasets an export reads) is refused, named."""
    out = output_folder("--out", out, MotifLayoutError)
    if out.exists() and not overwrite:
        raise MotifLayoutError(f"{out} exists; pass --overwrite to replace it (or choose another --out)")
    if out.exists():
        if not out.is_dir():
            raise MotifLayoutError(f"--out {out} is a file, not an earlier export; --overwrite replaces only a folder "
                                   "scripts.export_dataset wrote: choose another --out")
        if not (out / EXPORT_MANIFEST).is_file():
            held = ", ".join(p.name for p in sorted(out.iterdir())[:5]) or "nothing"
            raise MotifLayoutError(f"--out {out} is not an earlier export (no {EXPORT_MANIFEST}; it holds {held}); "
                                   "--overwrite replaces only a folder scripts.export_dataset wrote, and deletes "
                                   "nothing else: choose another --out")
        others = _not_of_an_export(out)
        if others:
            shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
            raise MotifLayoutError(f"--out {out} holds files an export does not write ({shown}); --overwrite would "
                                   "delete them: move them, or choose another --out")
    return out


def export_motif_layout(
    dataset: ObservationDataset,
    preferences: Mapping[str, np.ndarray],
    out: str | os.PathLike,
    meta: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    progress: bool = True,
) -> Path:
    """Writes ``dataset`` (pairs = samples ``2k``, ``2k+1``) and its preference labels into Motif's layout
    at ``out`` (see the module docstring for what each array holds).

    Everything is written into a temporary folder next to ``out`` that then takes its place, so a
    failed export leaves nothing half written; an existing ``out`` is only replaced with ``overwrite``.
    """
    out = check_export_target(out, overwrite)
    n = dataset.num_pairs
    if n == 0:
        raise MotifLayoutError("the dataset holds no pair (it needs at least two samples)")
    labels: dict[str, np.ndarray] = {}
    for name, arr in preferences.items():
        check_annotator_name(name)
        try:
            labels[name] = validate_preferences(arr, n, f"preferences {name!r}")
        except PreferenceError as exc:
            raise MotifLayoutError(str(exc)) from exc
    samples = 2 * n  # an odd last sample belongs to no pair
    current = dataset.messages[:samples, 1].reshape(n, 2, 1, MESSAGE_LEN)
    stats_after = dataset.stats[:samples, 1].reshape(n, 2, 1, -1)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.export-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        (tmp / DATA_DIR).mkdir(parents=True)
        (tmp / INFO_DIR).mkdir()
        (tmp / PREFERENCE_DIR).mkdir()
        np.save(tmp / DATA_DIR / "message.npy", np.ascontiguousarray(current, dtype=np.uint8), allow_pickle=False)
        np.save(tmp / DATA_DIR / "blstats.npy", blstats_from_stats(stats_after), allow_pickle=False)
        # The terminal: blank, with the message on its top line, where NetHack shows it. Written in
        # blocks into memory-mapped files (24 x 80 bytes per observation adds up).
        chars = np.lib.format.open_memmap(tmp / DATA_DIR / "tty_chars.npy", mode="w+", dtype=np.uint8,
                                          shape=(n, 2, 1) + TTY_SHAPE)
        colors = np.lib.format.open_memmap(tmp / DATA_DIR / "tty_colors.npy", mode="w+", dtype=np.int8,
                                           shape=(n, 2, 1) + TTY_SHAPE)
        block = 4096
        for start in tqdm(range(0, n, block), desc="export tty", unit="block", disable=not progress):
            stop = min(n, start + block)
            top = current[start:stop, :, :, : TTY_SHAPE[1]]
            screen = np.full((stop - start, 2, 1) + TTY_SHAPE, ord(" "), dtype=np.uint8)
            screen[:, :, :, 0, :] = np.where(top == 0, ord(" "), top)
            chars[start:stop] = screen
            colors[start:stop] = 0
        chars.flush()
        colors.flush()
        del chars, colors
        np.save(tmp / INFO_DIR / "experience_level.npy",
                np.ascontiguousarray(stats_after[:, :, 0, STAT_INDEX["xp_level"]], dtype=np.int64), allow_pickle=False)
        for name, arr in labels.items():
            np.save(tmp / PREFERENCE_DIR / f"{name}.npy", arr.astype(np.int8), allow_pickle=False)
        manifest = {
            "format": "motif", "num_pairs": n, "seq_len": 1, "source": dict(meta or {}),
            "annotators": {name: {"pairs": int(len(a)), "unknown": int((a == UNKNOWN).sum())} for name, a in labels.items()},
            "note": ("exported by python -m scripts.export_dataset: each member is one observation (the sample's current "
                     "message; blstats hold depth, gold, hp, hpmax, xp level and hunger, other slots 0; a blank terminal "
                     "with the message on the top line). data/rewards.npy and info/score, turns, character are not "
                     "recorded by this project and not written."),
        }
        (tmp / EXPORT_MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        if out.exists():
            old = out.parent / f".{out.name}.replaced-{os.getpid()}"
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info("exported %d pairs and %d preference file(s) (%s) into Motif's layout at %s", n, len(labels),
                ", ".join(labels) or "none", out)
    return out


__all__ = [
    "DATA_KEYS",
    "MotifLayout",
    "MotifLayoutError",
    "blstats_from_stats",
    "export_motif_layout",
    "is_motif_layout",
    "labelled_mask",
    "layout_fingerprint",
    "list_annotators",
    "load_motif_preferences",
    "member_messages",
    "open_motif_layout",
    "preference_path",
]
