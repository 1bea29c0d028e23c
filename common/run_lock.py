"""A lock that one run holds on its output for as long as it works, naming its holder.

A second run that wants the same output is refused at once with who holds it (pid, host, start time), instead
of doing the same costly work beside the first (two annotations of one label file both asking the LLM).

The mechanism is ``fcntl.flock`` on the lock file: the kernel drops the lock when its holder exits, however it
exits, so a killed run never blocks the next one. The file also holds the holder's record (JSON), written once
the lock is held and removed with the file when the run releases it. A run that gets the lock and finds a record
there takes over from a holder that ended without releasing it (killed) and logs whose it was.

On a file system without ``flock`` (some Lustre and FUSE mounts) the record alone decides: a holder on this host
whose pid is gone is taken over; a live one, or one on another host (whose pid cannot be checked from here), is
refused, and the message says to delete the file if that run has ended.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: errors of a file system that has no flock: the record decides then
_NO_FLOCK = (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL)


class LockHeldError(ValueError):
    """Another run holds the lock; the message names it (its pid, host and start time) and the lock file."""


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a lock."""

    pid: int
    host: str
    started: str
    command: str = ""

    @classmethod
    def this_process(cls) -> "Holder":
        return cls(os.getpid(), socket.gethostname(), time.strftime("%Y-%m-%dT%H:%M:%S%z"), " ".join(sys.argv)[:300])

    @classmethod
    def from_text(cls, text: str) -> "Holder | None":
        """The record in a lock file; None when it holds none (an empty file: a holder that is starting)."""
        if not text.strip():
            return None
        try:
            data = json.loads(text)
            return cls(int(data["pid"]), str(data["host"]), str(data["started"]), str(data.get("command", "")))
        except (ValueError, KeyError, TypeError):
            return cls(0, "unknown", "unknown", "")

    def alive(self) -> bool | None:
        """Whether the holder's process still runs: None when that cannot be told from here (another host)."""
        if self.host != socket.gethostname() or self.pid <= 0:
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process of that pid
            return True
        return True

    def __str__(self) -> str:
        return f"pid {self.pid} on host {self.host}, started {self.started}" + (
            f" ({self.command})" if self.command else "")


class RunLock:
    """``with RunLock(path):`` holds the lock on ``path`` (created, with its missing parent folders, and removed
    on release with the folders it created); :class:`LockHeldError` at once when another run holds it."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._made: list[Path] = []

    def acquire(self) -> "RunLock":
        if self._fd is not None:
            raise RuntimeError(f"{self.path}: already held by this object")
        self._make_parents()
        try:
            self._fd = self._locked_fd()
        except BaseException:
            self._remove_made()
            raise
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps(asdict(Holder.this_process())).encode(), 0)
        return self

    def release(self) -> None:
        """Removes the lock file while still holding it (a run that opens it afterwards makes a new one), then
        lets it go."""
        if self._fd is None:
            return
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        finally:
            os.close(self._fd)
            self._fd = None
            self._remove_made()

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()

    @staticmethod
    def _flock(fd: int) -> None:
        """An exclusive flock on ``fd`` without waiting: BlockingIOError when another process holds one."""
        import fcntl  # POSIX only, as the rest of the project

        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _locked_fd(self) -> int:
        """A descriptor of the lock file, locked by this process; takes over a record left by a dead holder."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                self._flock(fd)
                has_flock = True
            except BlockingIOError:
                holder = self._holder(fd)
                os.close(fd)
                raise LockHeldError(f"{self.path} is held by {holder or 'a run that is starting'}") from None
            except OSError as exc:
                if exc.errno not in _NO_FLOCK:
                    os.close(fd)
                    raise
                has_flock = False
                logger.warning("%s: this file system has no flock (%s); the holder's record alone decides", self.path,
                               exc.strerror)
            if has_flock and not self._still_the_file(fd):
                os.close(fd)  # released and removed by its holder between our open and our lock: try again
                continue
            break
        holder = self._holder(fd)
        if holder is not None:
            alive = holder.alive()
            if not has_flock and alive is not False:
                os.close(fd)
                raise LockHeldError(f"{self.path} is held by {holder}" + (
                    "" if alive else f"; if that run has ended, delete {self.path}"))
            logger.warning("%s: taking the lock over from %s, which ended without releasing it%s", self.path, holder,
                           " (no longer running)" if alive is False else "")
        return fd

    def _still_the_file(self, fd: int) -> bool:
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)

    @staticmethod
    def _holder(fd: int) -> Holder | None:
        return Holder.from_text(os.pread(fd, 65536, 0).decode("utf-8", "replace"))

    def _make_parents(self) -> None:
        missing = []
        folder = self.path.parent
        while not folder.exists():
            missing.append(folder)
            folder = folder.parent
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._made = missing  # deepest first

    def _remove_made(self) -> None:
        """The folders this lock made, when nothing else was put there: a refused or failed run leaves no trace."""
        for folder in self._made:
            try:
                folder.rmdir()
            except OSError:
                break
        self._made = []
