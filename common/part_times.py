"""Where a rollout worker's CPU time goes, part by part (``bench.train_throughput --long_run_config``).

Off unless the environment variable :data:`ENV_VAR` names a folder: then each process adds the CPU time of its
thread (``time.thread_time``) spent in each named part and, every :data:`WRITE_EVERY_S` seconds and at exit,
writes ``{folder}/parts_{pid}.json`` (``{"pid": ..., "seconds": {part: s}, "calls": {part: n}}``, replaced
atomically). The skill runtime names its parts ``env`` (the Monk env: NetHack and its Python), ``reward``
(the reward models and their cache) and ``skill_env`` (the whole skill environment's step and reset, those
two included); the bench subtracts. Off, a part costs one attribute test.
"""
from __future__ import annotations

import atexit
import json
import os
import time
from pathlib import Path
from typing import Optional

ENV_VAR = "MAESTROMOTIF_PART_TIMES"
WRITE_EVERY_S = 2.0

now = time.thread_time  # the calling thread's CPU time: a rollout worker steps its games in its main thread


class PartTimes:
    """Process-wide CPU seconds per part (see the module docstring)."""

    def __init__(self, folder: Optional[str]) -> None:
        self.folder = Path(folder) if folder else None
        self.enabled = self.folder is not None
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._next_write = 0.0

    def add(self, part: str, seconds: float) -> None:
        self.seconds[part] = self.seconds.get(part, 0.0) + seconds
        self.calls[part] = self.calls.get(part, 0) + 1

    def tick(self) -> None:
        """Writes the totals when the last write is old enough (called once per step)."""
        wall = time.monotonic()
        if wall >= self._next_write:
            self._next_write = wall + WRITE_EVERY_S
            self.write()

    def write(self) -> None:
        if self.folder is None or not self.seconds:
            return
        pid = os.getpid()  # a forked worker writes its own file (its parent steps no game before the fork)
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"parts_{pid}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": pid, "seconds": self.seconds, "calls": self.calls}))
        os.replace(tmp, path)


PART_TIMES = PartTimes(os.environ.get(ENV_VAR))
if PART_TIMES.enabled:
    atexit.register(PART_TIMES.write)
