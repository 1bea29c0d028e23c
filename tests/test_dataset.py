"""Dataset files: .npz round trip, the authors' .pkl layout, and refusal of unsafe pickles."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from rlaif.dataset import (
    DatasetError,
    ObservationDataset,
    encode_message,
    load_dataset,
    save_dataset,
)


def _dataset(n: int = 4) -> ObservationDataset:
    messages = np.zeros((n, 2, 256), dtype=np.uint8)
    for i in range(n):
        messages[i, 0] = encode_message(f"before {i}")
        messages[i, 1] = encode_message(f"after {i}")
    stats = np.arange(n * 2 * 6, dtype=np.int32).reshape(n, 2, 6)
    return ObservationDataset(messages, stats, {"source": "test"})


def test_npz_round_trip_without_pickles(tmp_path):
    path = tmp_path / "descender.npz"
    save_dataset(path, _dataset())
    loaded = load_dataset(path)
    assert loaded.num_pairs == 2
    assert loaded.message_text(3, 1) == "after 3"
    assert np.array_equal(loaded.stats, _dataset().stats)
    with np.load(path, allow_pickle=False) as data:  # readable without allowing pickles
        assert set(data.files) == {"messages", "stats", "meta"}


def test_authors_pickle_layout_loads(tmp_path):
    records = [
        {"msg_strs": ["You see here a newt corpse.", "You kill the newt!"],
         "stats_list": [np.array([1, 0, 12, 14, 1, 1, 99]), np.array([1, 0, 12, 14, 1, 1, 99])]},
        {"msg_strs": [b"", "Welcome to experience level 2."], "stats_list": [[1, 5, 3, 14, 1, 1], [1, 5, 3, 16, 2, 1]]},
    ]
    path = tmp_path / "discoverer.pkl"
    path.write_bytes(pickle.dumps(records))
    loaded = load_dataset(path)
    assert len(loaded) == 2
    assert loaded.message_text(0, 1) == "You kill the newt!"
    assert loaded.stats[1, 1, 4] == 2


class _RunsACommand:
    """Unpickling this would run a shell command."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "merchant.pkl"
    path.write_bytes(pickle.dumps([{"msg_strs": ["a", "b"], "stats_list": [_RunsACommand(str(marker))] * 2}]))
    with pytest.raises(DatasetError, match="refusing to unpickle (posix|os).system"):
        load_dataset(path)
    assert not marker.exists()


def test_pickle_with_an_arbitrary_class_is_refused(tmp_path):
    path = tmp_path / "ascender.pkl"
    path.write_bytes(pickle.dumps([{"msg_strs": ["a", "b"], "stats_list": [[0] * 6, [0] * 6], "x": subprocess.Popen}]))
    with pytest.raises(DatasetError, match="subprocess.Popen"):
        load_dataset(path)


def test_cli_reports_unsafe_pickle_with_non_zero_exit(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "worshipper.pkl").write_bytes(pickle.dumps([_RunsACommand(str(marker))]))
    proc = subprocess.run(
        [sys.executable, "-m", "scripts.annotate_pairs", "--directory", str(tmp_path), "--goal_key", "worshipper",
         "--backend", "heuristic", "--preference_dir", str(tmp_path / "pref"), "--logdir", str(tmp_path / "logs"),
         "--no_progress"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode != 0
    assert "refusing to unpickle" in proc.stderr + proc.stdout
    assert not marker.exists()
    assert not (tmp_path / "pref" / "llama3_worshipper_default.npy").exists()


def test_bad_files_are_clear_errors(tmp_path):
    with pytest.raises(DatasetError, match="not found"):
        load_dataset(tmp_path / "missing.npz")
    np.savez(tmp_path / "partial.npz", messages=np.zeros((2, 2, 256), np.uint8))
    with pytest.raises(DatasetError, match=r"partial.npz: not a readable observation dataset .*no array stats; it has messages"):
        load_dataset(tmp_path / "partial.npz")
    (tmp_path / "data.csv").write_text("x")
    with pytest.raises(DatasetError, match="unsupported"):
        load_dataset(tmp_path / "data.csv")
