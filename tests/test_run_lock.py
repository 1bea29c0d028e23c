"""The lock a run holds on its output (common.run_lock): a second holder is refused at once, naming the first; a
record left by a killed holder is taken over; the lock file and the folders it made go when it is released."""
from __future__ import annotations

import errno
import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from common.run_lock import LockHeldError, RunLock

REPO = Path(__file__).resolve().parents[1]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _record(pid: int, host: str | None = None) -> str:
    return json.dumps({"pid": pid, "host": host or socket.gethostname(), "started": "2026-01-01T00:00:00+0000",
                       "command": "python -m scripts.annotate_pairs"})


def test_a_second_holder_is_refused_naming_the_first_and_the_file_goes_on_release(tmp_path) -> None:
    path = tmp_path / "new" / "deeper" / "labels.lock"
    with RunLock(path):
        record = json.loads(path.read_text())
        assert (record["pid"], record["host"]) == (os.getpid(), socket.gethostname())
        with pytest.raises(LockHeldError, match=f"{path} is held by pid {os.getpid()} on host "
                                                f"{socket.gethostname()}, started "):
            RunLock(path).acquire()
        assert path.exists()  # the refused one left the holder's file alone
    assert not (tmp_path / "new").exists()  # the file, and the folders the lock made for it
    with RunLock(path):  # free again
        assert path.exists()


def test_another_process_is_refused_while_the_first_holds_the_lock(tmp_path) -> None:
    path = tmp_path / "labels.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys
            from common.run_lock import RunLock
            with RunLock({str(path)!r}):
                print("held", flush=True)
                sys.stdin.read()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        assert holder.stdout.readline().strip() == "held"  # type: ignore[union-attr]
        with pytest.raises(LockHeldError, match=f"held by pid {holder.pid} on host "):
            RunLock(path).acquire()
    finally:
        holder.communicate("", timeout=30)
    assert holder.returncode == 0 and not path.exists()
    with RunLock(path):
        pass


def test_a_record_left_by_a_killed_holder_is_taken_over_with_a_log_line(tmp_path, caplog) -> None:
    path = tmp_path / "labels.lock"
    pid = _dead_pid()
    path.write_text(_record(pid))  # a holder killed before it could remove its file: the kernel dropped its flock
    with caplog.at_level(logging.WARNING, logger="common.run_lock"), RunLock(path):
        assert json.loads(path.read_text())["pid"] == os.getpid()
    assert f"taking the lock over from pid {pid} on host {socket.gethostname()}" in caplog.text
    assert "(no longer running)" in caplog.text
    assert not path.exists()


class _NoFlock(RunLock):
    """A file system without flock (some Lustre and FUSE mounts)."""

    @staticmethod
    def _flock(fd: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")


def test_without_flock_the_record_decides(tmp_path, caplog) -> None:
    path = tmp_path / "labels.lock"
    path.write_text(_record(os.getpid()))  # a live holder on this host
    with pytest.raises(LockHeldError, match=f"held by pid {os.getpid()}"):
        _NoFlock(path).acquire()
    path.write_text(_record(4242, host="another-node"))  # its pid cannot be checked from here
    with pytest.raises(LockHeldError, match=f"on host another-node.*if that run has ended, delete {path}"):
        _NoFlock(path).acquire()
    dead = _dead_pid()
    path.write_text(_record(dead))
    with caplog.at_level(logging.WARNING, logger="common.run_lock"), _NoFlock(path):
        assert json.loads(path.read_text())["pid"] == os.getpid()
    assert f"taking the lock over from pid {dead}" in caplog.text and "has no flock" in caplog.text
    assert not path.exists()
    with _NoFlock(path):  # no record: free
        with pytest.raises(LockHeldError):
            _NoFlock(path).acquire()

