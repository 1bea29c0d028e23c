"""A worker process ends without the interpreter's last full garbage collection (common.worker_exit)."""
from __future__ import annotations

import multiprocessing as mp
import time

import pytest

from common import worker_exit


def _child(hook: bool, queue) -> None:
    if hook:
        worker_exit.skip_final_collection_in_worker()
    # a heap like a worker's: a million objects in reference cycles, which only a collection frees
    heap = []
    for _ in range(500_000):
        a: list = []
        b = [a]
        a.append(b)
        heap.append(a)
    queue.put(worker_exit._registered)
    # the reference kept to the end, as a worker keeps its envs and model until its process exits
    globals()["_heap"] = heap


def _exit_seconds(hook: bool) -> tuple[float, bool]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(hook, queue))
    proc.start()
    registered = queue.get(timeout=60)
    start = time.monotonic()  # the child has built its heap; from here on it only exits
    proc.join(60)
    assert proc.exitcode == 0
    return time.monotonic() - start, registered


def test_the_main_process_is_left_as_it_is():
    worker_exit.skip_final_collection_in_worker()
    assert worker_exit._registered is False  # no parent process: nothing registered


@pytest.mark.slow
def test_a_worker_exits_without_scanning_its_heap():
    slow, registered_without = _exit_seconds(hook=False)
    fast, registered_with = _exit_seconds(hook=True)
    assert (registered_without, registered_with) == (False, True)
    # the collection of a million cyclic objects is most of the exit without the hook
    assert fast < slow / 2, (fast, slow)
