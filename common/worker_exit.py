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

_registered = False


def skip_final_collection_in_worker() -> None:
    """In a child process (a worker), freeze the heap at exit; in the main process, nothing.
    Safe to call repeatedly (registers once per process)."""
    global _registered
    if _registered or multiprocessing.parent_process() is None:
        return
    atexit.register(gc.freeze)
    _registered = True
