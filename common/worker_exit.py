"""A worker process (sample-factory's, or a collection worker) ends without the interpreter's last full garbage
collection.

Each worker (learner, inference, rollout) holds a heap of torch, NLE and sample-factory objects; at exit the
interpreter scans all of it once more for reference cycles, a second or more per process. The runner joins the
workers one after another, so every training run, however short, ended several seconds after its last step
(about 6 s of an 8 s shutdown on 2 cores). Freezing the heap at exit skips that scan: objects are still freed by
reference counting as modules are torn down; only cyclic garbage is left to the operating system. Workers write
nothing that waits for a collection (the learner's checkpoints and the stats files are closed explicitly), and the
main process, which owns the summaries and the report files, is left as it is.
"""
from __future__ import annotations

import atexit
import gc
import multiprocessing
import os
import threading
import time

_registered = False


def skip_final_collection_in_worker() -> None:
    """In a child process (a worker), freeze the heap at exit; in the main process, nothing.
    Safe to call repeatedly (registers once per process)."""
    global _registered
    if _registered or multiprocessing.parent_process() is None:
        return
    atexit.register(gc.freeze)
    _registered = True


_watching = False


def exit_with_parent(poll_s: float = 1.0) -> None:
    """In a child process (a worker), end it within ``poll_s`` seconds of its parent's death, whatever killed the
    parent (SIGKILL included: no handler runs there). A worker orphaned by a killed trainer ran on for minutes,
    at 10-50% of a core each, and ignored SIGTERM. A daemon thread watches the parent's pid (a dead parent's
    children are handed to init or a subreaper, so ``os.getppid()`` changes) and ends the process with
    ``os._exit`` (no cleanup runs: the parent that would read it is gone). In the main process, nothing."""
    global _watching
    if _watching or multiprocessing.parent_process() is None:
        return
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
    _watching = True
