"""Phase 0 from human games: observation datasets read from ttyrec recordings.

The recordings are read with NLE's own dataset tools (:mod:`nle.dataset`): a small
sqlite database is populated from the directory (``add_nledata_directory`` for NLE's
``nle_data`` layout — what ``save_ttyrec_every`` writes and the NLD-AA part of the
Dungeons and Data dataset — or ``add_altorg_directory`` for the alt.org layout of
NLD-NAO), then :class:`nle.dataset.TtyrecDataset` replays the games into terminal
frames (``tty_chars`` [24, 80]).

Each frame is read like a player reads the screen:

* the message is the top line (a trailing ``--More--`` removed);
* the stats come from the status line: ``Dlvl:3 $:42 HP:12(15) Pw:.. AC:.. Xp:2/25
  T:830 Hungry`` gives depth 3, gold 42, HP 12, max HP 15, XP level 2 and the hunger
  state named on the line (no word: not hungry).

Frames without a status line (the intro, the tombstone) or with a menu or text window
over the map (inventory, dungeon overview, ...) are skipped, and a
frame that shows the same message, stats and turn as the one before it is not a new
state. Consecutive states form a step; steps are kept with the same probabilities as
in :mod:`rl_baseline.collect.rollouts` and saved in the format of :mod:`rlaif.dataset`.
"""
from __future__ import annotations

import contextlib
import glob
import io
import json
import logging
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import nle.dataset as nld
import numpy as np
from tqdm import tqdm

from common.nethack.messages import MESSAGE_LEN, encode_message
from common.vocabulary import skill_index
from rl_baseline.collect.config import CollectError
from rl_baseline.collect.rollouts import keep_probability
from rlaif.dataset import HUNGER_NAMES, STAT_FIELDS, ObservationDataset

logger = logging.getLogger(__name__)

LAYOUTS: tuple[str, ...] = ("auto", "nledata", "altorg")

_STATUS = re.compile(
    r"Dlvl:\s*(?P<depth>\d+)\s+\S:\s*(?P<gold>\d+)\s+HP:\s*(?P<hp>-?\d+)\((?P<hpmax>\d+)\)"
    r".*?\b(?:Xp|Exp|XP|HD):\s*(?P<xp>\d+)(?:/\d+)?(?P<rest>.*)$"
)
_TURN = re.compile(r"\bT:\s*(\d+)")
_HUNGER_WORDS = {name.capitalize(): i for i, name in enumerate(HUNGER_NAMES) if name != "not hungry"}
_HUNGER = re.compile(r"\b(" + "|".join(sorted(_HUNGER_WORDS, key=len, reverse=True)) + r")\b")
_MORE = re.compile(r"\s*--More--\s*$")
_WINDOW_END = re.compile(r"--More--|\(end\)|\(\d+ of \d+\)")
NOT_HUNGRY = HUNGER_NAMES.index("not hungry")


class TtyrecImportError(CollectError):
    """Bad import settings or unusable recordings."""


@dataclass
class ImportConfig:
    """What :func:`import_ttyrecs` reads and how it samples."""

    skill: str
    num_pairs: int
    ttyrec_dir: Optional[str] = None  # directory to add to the database
    db: Optional[str] = None  # NLE dataset database (created if missing); default: a temporary file
    dataset_name: str = "ttyrecs"
    layout: str = "auto"
    seed: int = 0
    sample_prob: float = 0.1
    uninformative_keep_prob: float = 0.1
    level_change_prob: float = 1.0
    max_samples_per_game: int = 500
    batch_size: int = 8  # games replayed side by side
    seq_length: int = 256  # frames per game per batch
    allow_fewer: bool = False  # save what was found when the games run out
    progress: bool = True

    def validate(self) -> None:
        skill_index(self.skill)
        if int(self.num_pairs) <= 0:
            raise TtyrecImportError(f"--num_pairs must be > 0, got {self.num_pairs}")
        if self.layout not in LAYOUTS:
            raise TtyrecImportError(f"--layout {self.layout!r}: expected one of {', '.join(LAYOUTS)}")
        if not self.ttyrec_dir and not self.db:
            raise TtyrecImportError("give --ttyrec_dir (recordings to read) and/or --db (an existing NLE dataset database)")
        if self.ttyrec_dir and not Path(self.ttyrec_dir).is_dir():
            raise TtyrecImportError(f"--ttyrec_dir {self.ttyrec_dir}: no such directory")
        for name in ("sample_prob", "uninformative_keep_prob", "level_change_prob"):
            value = float(getattr(self, name))
            if not 0.0 <= value <= 1.0:
                raise TtyrecImportError(f"--{name} must be in [0, 1], got {value}")
        if float(self.sample_prob) <= 0:
            raise TtyrecImportError("--sample_prob must be > 0")
        if int(self.batch_size) <= 0 or int(self.seq_length) <= 0 or int(self.max_samples_per_game) <= 0:
            raise TtyrecImportError("--batch_size, --seq_length and --max_samples_per_game must be > 0")


# ----------------------------------------------------------------------------- screen parsing


def parse_status_line(line: str) -> Optional[tuple[np.ndarray, int]]:
    """``(stats, turn)`` from a NetHack bottom status line, or ``None`` if it is not one.

    ``stats`` follows :data:`rlaif.dataset.STAT_FIELDS`; ``turn`` is -1 when the line shows
    no ``T:`` field.
    """
    m = _STATUS.search(line)
    if m is None:
        return None
    rest = m.group("rest")
    hunger = _HUNGER.search(rest)
    turn = _TURN.search(rest)
    stats = np.array(
        [int(m.group("depth")), int(m.group("gold")), int(m.group("hp")), int(m.group("hpmax")),
         int(m.group("xp")), _HUNGER_WORDS[hunger.group(1)] if hunger else NOT_HUNGRY],
        dtype=np.int32,
    )
    return stats, int(turn.group(1)) if turn else -1


def _row_text(row: np.ndarray) -> str:
    return bytes(np.asarray(row, dtype=np.uint8)).replace(b"\0", b" ").decode("latin-1").rstrip()


def top_line_message(tty_chars: np.ndarray) -> str:
    """The message on the top line of a [rows, cols] terminal frame, ``--More--`` removed."""
    return _MORE.sub("", _row_text(tty_chars[0])).strip()


def window_open(tty_chars: np.ndarray) -> bool:
    """Whether a menu or text window covers the map (its lines are not messages).

    tty messages start in the first column; a window is drawn further right and ends
    with ``--More--``, ``(end)`` or ``(n of m)`` below the top line.
    """
    top = _row_text(tty_chars[0])
    if top.strip() and top[0] == " ":
        return True
    for r in range(1, tty_chars.shape[0] - 2):
        if _WINDOW_END.search(_row_text(tty_chars[r])):
            return True
    return False


def read_frame(tty_chars: np.ndarray) -> Optional[tuple[str, np.ndarray, int]]:
    """``(message, stats, turn)`` of a game frame; ``None`` when no status line is visible
    or a window covers the screen."""
    rows = tty_chars.shape[0]
    for r in range(rows - 1, max(rows - 4, 0), -1):
        parsed = parse_status_line(_row_text(tty_chars[r]))
        if parsed is not None:
            if window_open(tty_chars):
                return None
            return top_line_message(tty_chars), parsed[0], parsed[1]
    return None


# ----------------------------------------------------------------------------- database


def detect_layout(ttyrec_dir: str | os.PathLike) -> str:
    """``nledata`` (``*/<name>.xlogfile`` + ``*.ttyrec*.bz2``) or ``altorg`` (``xlogfile.*`` at the top)."""
    d = str(ttyrec_dir)
    if glob.glob(os.path.join(d, "*", "*.xlogfile")):
        return "nledata"
    if glob.glob(os.path.join(d, "xlogfile.*")):
        return "altorg"
    raise TtyrecImportError(
        f"--ttyrec_dir {ttyrec_dir}: no recordings found; expected NLE's layout "
        "(DIR/<run>/nle.<pid>.xlogfile with nle.<pid>.<n>.ttyrec*.bz2 next to it) or the alt.org layout "
        "(DIR/xlogfile.* and DIR/<player>/*.ttyrec.bz2, plus blacklist.txt)"
    )


def populate_database(config: ImportConfig, db_path: str) -> str:
    """Creates/extends the NLE dataset database; returns the dataset name to read."""
    if not os.path.exists(db_path):
        nld.db.create(db_path)
    if config.ttyrec_dir:
        layout = config.layout if config.layout != "auto" else detect_layout(config.ttyrec_dir)
        with nld.db.connect(db_path) as conn:
            names = {row[0] for row in conn.execute("SELECT dataset_name FROM roots")}
        if config.dataset_name in names:
            raise TtyrecImportError(
                f"database {db_path} already has a dataset named {config.dataset_name!r}; "
                "choose another --dataset_name or omit --ttyrec_dir to read it"
            )
        add = nld.add_nledata_directory if layout == "nledata" else nld.add_altorg_directory
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):  # NLE reports its progress with print()
            add(str(config.ttyrec_dir), config.dataset_name, filename=db_path)
        for line in printed.getvalue().splitlines():
            logger.info("nle.dataset: %s", line)
    with nld.db.connect(db_path) as conn:
        count = nld.db.count_games(config.dataset_name, conn=conn)
    if not count:
        raise TtyrecImportError(f"dataset {config.dataset_name!r} in {db_path} has no games")
    return config.dataset_name


# ----------------------------------------------------------------------------- import


def import_ttyrecs(config: ImportConfig) -> ObservationDataset:
    """Replays the recorded games and returns ``2 * num_pairs`` samples (fewer only with ``allow_fewer``)."""
    config.validate()
    with tempfile.TemporaryDirectory(prefix="ttyrec_db_") as tmp:
        db_path = str(config.db) if config.db else os.path.join(tmp, "ttyrecs.db")
        name = populate_database(config, db_path)
        total = 2 * int(config.num_pairs)
        rng = np.random.default_rng(np.random.SeedSequence([int(config.seed) & 0xFFFFFFFF, 0x545459]))
        with nld.db.connect(db_path) as conn:
            root = nld.db.get_root(name, conn=conn)
            gameids = sorted(int(row[0]) for row in conn.execute(
                "SELECT DISTINCT ttyrecs.gameid FROM ttyrecs INNER JOIN datasets ON ttyrecs.gameid=datasets.gameid "
                "WHERE datasets.dataset_name=?", (name,)))
        if not gameids:
            raise TtyrecImportError(f"dataset {name!r} in {db_path} has no recorded games")
        gameids = [gameids[i] for i in rng.permutation(len(gameids))]  # game order: a function of --seed
        batch = max(1, min(int(config.batch_size), len(gameids)))
        data = nld.TtyrecDataset(name, dbfilename=db_path, batch_size=batch, seq_length=int(config.seq_length),
                                 gameids=gameids, shuffle=False, loop_forever=False)

        messages = np.zeros((total, 2, MESSAGE_LEN), dtype=np.uint8)
        stats = np.zeros((total, 2, len(STAT_FIELDS)), dtype=np.int32)
        kept = 0
        state: list[Optional[tuple]] = [None] * batch  # last (message bytes, stats, turn, game)
        per_game: dict[int, int] = {}
        games_seen: set[int] = set()
        frames = steps = 0
        bar = tqdm(total=total, desc=f"import {config.skill}", unit="sample", disable=not config.progress)
        try:
            for mb in data:
                chars, gids = mb["tty_chars"], mb["gameids"]
                for t in range(chars.shape[1]):  # time-major: the games of a batch are read side by side
                    for b in range(batch):
                        gid = int(gids[b, t])
                        if gid == 0:  # padding after the last game
                            state[b] = None
                            continue
                        frames += 1
                        games_seen.add(gid)
                        parsed = read_frame(chars[b, t])
                        if parsed is None:
                            continue
                        text, st, turn = parsed
                        msg = encode_message(text)
                        prev = state[b]
                        if prev is not None and prev[3] == gid and prev[2] == turn and np.array_equal(prev[1], st) \
                                and np.array_equal(prev[0], msg):
                            continue
                        state[b] = (msg, st, turn, gid)
                        if prev is None or prev[3] != gid:
                            continue
                        steps += 1
                        u = rng.random()
                        p = keep_probability(prev[0], msg, prev[1], st, config.sample_prob,
                                             config.uninformative_keep_prob, config.level_change_prob)
                        if u < p and per_game.get(gid, 0) < config.max_samples_per_game and kept < total:
                            messages[kept, 0], messages[kept, 1] = prev[0], msg
                            stats[kept, 0], stats[kept, 1] = prev[1], st
                            per_game[gid] = per_game.get(gid, 0) + 1
                            kept += 1
                            bar.update(1)
                if kept >= total:
                    break
        finally:
            bar.close()

    if kept < total:
        if not config.allow_fewer or kept < 2:
            raise TtyrecImportError(
                f"the recordings gave only {kept} of {total} samples ({len(games_seen)} games, {steps} steps); "
                "add recordings, raise --sample_prob, lower --num_pairs, or pass --allow_fewer"
            )
        kept -= kept % 2
        logger.warning("only %d samples (%d pairs) found; saving those", kept, kept // 2)
    order = np.random.default_rng(np.random.SeedSequence([int(config.seed) & 0xFFFFFFFF, 0x5348])).permutation(kept)
    meta = {
        "source": "ttyrec",
        "skill": config.skill,
        "ttyrec_root": str(root),  # where the database found the recordings
        "dataset_name": config.dataset_name,
        "games": len(games_seen),
        "games_sampled": len(per_game),
        "frames": frames,
        "steps": steps,
        "seed": int(config.seed),
        "policy": "human",
        "character": "any",
        "sampling": {
            "sample_prob": config.sample_prob,
            "uninformative_keep_prob": config.uninformative_keep_prob,
            "level_change_prob": config.level_change_prob,
            "max_samples_per_game": config.max_samples_per_game,
        },
        "num_pairs": kept // 2,
    }
    logger.info("imported %d samples from %d games (%d frames, %d steps)", kept, len(per_game), frames, steps)
    return ObservationDataset(messages[:kept][order], stats[:kept][order], json.loads(json.dumps(meta)))

