"""Skill-policy checkpoints: which files count, how they are read, what resume loads.

sample-factory 2.1.1 writes ``checkpoint_p0/checkpoint_{train_step:09d}_{env_steps}.pth``
(and ``best_{train_step:09d}_{env_steps}_{metric}_{value}.pth``) with ``torch.save``. Three
of its habits break long runs, and this module is where they are handled:

* once a best model has been saved, ``best_performance`` is a ``numpy.float64`` (the mean
  of the episode rewards) and every later checkpoint carries it; torch's default loader
  (``weights_only=True`` since torch 2.6) refuses numpy scalars, so evaluation failed and
  resume started from step 0. Our learner (:mod:`rl_baseline.sf.learner`) now stores plain
  Python numbers; files written before that fix are read by allowing exactly numpy's scalar
  reconstructor and ``numpy.dtype`` (:data:`common.torch_files.NUMPY_SCALAR_GLOBALS`), never ``weights_only=False``;
* a save interrupted by a kill leaves ``checkpoint_temp``, which sample-factory's
  ``checkpoint_*`` glob sorts after every real checkpoint and tries to load first; only
  names matching :data:`CHECKPOINT_NAME` count here;
* when the newest file cannot be read, sample-factory logs "Could not load from checkpoint"
  and trains from scratch; here resume falls back to the newest checkpoint that loads (with
  a warning naming each skipped file, which is left in place) or stops with
  :class:`CheckpointError` naming them. Starting over in a folder that holds checkpoints
  takes sample-factory's explicit ``--restart_behavior restart`` (the old folder is moved
  to ``{experiment}_old0001``) or ``overwrite``.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from common.torch_files import load_error_reason, plain_numbers, safe_load

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = {
    "latest": re.compile(r"^checkpoint_(\d{9})_(\d+)\.pth$"),
    "best": re.compile(r"^best_(\d{9})_(\d+)(_.*)?\.pth$"),
}
KINDS = tuple(CHECKPOINT_NAME)
REQUIRED_KEYS = ("model", "env_steps", "train_step")


class CheckpointError(RuntimeError):
    """A skill-policy checkpoint that cannot be used; the message names the file(s) and what to do."""


def checkpoint_dir(train_dir: str | Path, experiment: str, policy_id: int = 0) -> Path:
    return Path(train_dir) / experiment / f"checkpoint_p{policy_id}"


def list_checkpoints(ckpt_dir: str | Path, kind: str = "latest") -> list[Path]:
    """Checkpoint files of ``kind`` (``latest``: ``checkpoint_*``, ``best``: ``best_*``), oldest first.

    Ordered by (train step, env steps) read from the name; temporary files of an interrupted
    save and anything else in the folder are ignored.
    """
    if kind not in CHECKPOINT_NAME:
        raise ValueError(f"checkpoint kind {kind!r}: expected one of {', '.join(KINDS)}")
    ckpt_dir = Path(ckpt_dir)
    if not ckpt_dir.is_dir():
        return []
    found = []
    for path in ckpt_dir.iterdir():
        match = CHECKPOINT_NAME[kind].match(path.name)
        if match and path.is_file():
            found.append(((int(match.group(1)), int(match.group(2))), path))
    return [path for _, path in sorted(found)]


def load_checkpoint_file(path: str | Path, device: Any = "cpu") -> dict[str, Any]:
    """Reads one policy checkpoint with torch's safe loader; raises :class:`CheckpointError`.

    Files written before numbers were stored as plain Python values (they hold
    ``numpy.float64``) are read too, and their numpy scalars come back as Python numbers.
    """
    path = Path(path)
    try:
        state = safe_load(path, device)
    except FileNotFoundError as exc:
        raise CheckpointError(f"{path}: checkpoint not found") from exc
    except Exception as exc:
        raise CheckpointError(
            f"{path}: cannot be read as a skill-policy checkpoint ({type(exc).__name__}: {load_error_reason(exc)}); "
            "the file is damaged (e.g. a save cut short) or not a checkpoint written by scripts.main"
        ) from exc
    if not isinstance(state, dict) or any(key not in state for key in REQUIRED_KEYS):
        keys = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(
            f"{path}: not a skill-policy checkpoint (expected the keys {', '.join(REQUIRED_KEYS)}, found {keys})"
        )
    return plain_numbers(state)



@dataclass
class LoadedCheckpoint:
    path: Path
    state: dict[str, Any]
    skipped: list[tuple[Path, str]] = field(default_factory=list)

    @property
    def env_steps(self) -> int:
        return int(self.state["env_steps"])


def load_newest(ckpt_dir: str | Path, kind: str = "latest", device: Any = "cpu",
                fallback: bool = True) -> Optional[LoadedCheckpoint]:
    """The newest checkpoint of ``kind`` that loads, or None when the folder holds none.

    With ``fallback`` an unreadable newer file is skipped with a warning (it is left where it
    is) and the next older one is tried; if none loads, :class:`CheckpointError` names every
    file. Without ``fallback`` (evaluation: results must belong to the checkpoint the user
    expects) the newest file either loads or raises.
    """
    paths = list_checkpoints(ckpt_dir, kind)
    if not paths:
        return None
    skipped: list[tuple[Path, str]] = []
    for path in reversed(paths):
        try:
            state = load_checkpoint_file(path, device)
        except CheckpointError as exc:
            if not fallback:
                raise
            skipped.append((path, str(exc)))
            logger.warning("skipping unreadable checkpoint %s", exc)
            continue
        if skipped:
            logger.warning("resuming from %s (env steps %s), the newest checkpoint that loads; %d newer file(s) "
                           "skipped and left in place: %s", path, state.get("env_steps"), len(skipped),
                           ", ".join(p.name for p, _ in skipped))
        return LoadedCheckpoint(path, state, skipped)
    raise CheckpointError(
        f"none of the {len(paths)} checkpoint(s) in {ckpt_dir} can be read:\n  "
        + "\n  ".join(reason for _, reason in skipped)
        + "\nTo keep these files and start a new run, pass --restart_behavior restart (the experiment folder is "
          "moved to {experiment}_old0001) or use another --experiment."
    )
