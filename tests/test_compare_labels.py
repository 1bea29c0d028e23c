"""Two annotators' labels of the same pairs compared (rlaif.label_comparison, scripts.compare_labels)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rlaif.dataset import ObservationDataset, save_dataset
from rlaif.label_comparison import compare_labels, first_share, level_change_picks
from rlaif.preferences import FIRST, SECOND, TIE, UNKNOWN, save_preferences
from scripts import compare_labels as cli


def _dataset(depth_changes: list[tuple[int, int]]) -> ObservationDataset:
    """One pair per entry: the two samples' depth changes (before: level 3)."""
    n = 2 * len(depth_changes)
    stats = np.zeros((n, 2, 6), np.int32)
    stats[:, 0, 0] = 3
    stats[:, 1, 0] = 3 + np.asarray(depth_changes).reshape(-1)
    return ObservationDataset(np.zeros((n, 2, 256), np.uint8), stats, {"source": "test"})


# pairs: (down, stay), (stay, down), (up, stay), (stay, stay), (down, down)
CHANGES = [(1, 0), (0, 1), (-1, 0), (0, 0), (1, 1)]


def test_level_change_picks_count_only_pairs_where_one_moment_moved() -> None:
    change = np.asarray(CHANGES).reshape(-1)
    labels = np.array([FIRST, TIE, SECOND, FIRST, SECOND])
    # descents: pairs 0 (picked) and 1 (a tie: not picked); pair 4 moved on both sides and does not count
    assert level_change_picks(labels, change, 1) == {"pairs": 2, "picked": 0.5}
    # ascents: pair 2 only, labelled for the other moment
    assert level_change_picks(labels, change, -1) == {"pairs": 1, "picked": 0.0}
    assert math.isnan(level_change_picks(labels[:1], change[:2], -1)["picked"])
    with pytest.raises(ValueError, match="5 labels for 1 pairs"):
        level_change_picks(labels, change[:2])
    assert first_share(np.array([FIRST, FIRST, SECOND, TIE, UNKNOWN])) == pytest.approx(2 / 3)


def test_compare_labels_reports_shares_agreement_and_picks() -> None:
    ds = _dataset(CHANGES)
    llm = np.array([FIRST, FIRST, FIRST, FIRST, FIRST])  # always the first moment: an order bias
    rules = np.array([FIRST, SECOND, SECOND, TIE, TIE])
    c = compare_labels(ds, llm, rules)
    assert c.pairs == 5 and c.shares_a["first"] == 1.0 and c.shares_b["tie"] == 0.4
    assert c.agreement["compared"] == 5 and c.agreement["agreement"] == 0.2
    assert c.agreement["decisive"] == 3 and c.agreement["decisive_agreement"] == pytest.approx(1 / 3)
    assert c.first_share_a == 1.0 and c.first_share_b == pytest.approx(1 / 3)
    assert c.descents_a == {"pairs": 2, "picked": 0.5} and c.descents_b == {"pairs": 2, "picked": 1.0}
    with pytest.raises(ValueError, match="the second labels hold 4 pairs, the dataset 5"):
        compare_labels(ds, llm, rules[:4])


def test_the_script_prints_the_table_writes_json_and_refuses_bad_input(tmp_path, capsys) -> None:
    save_dataset(tmp_path / "data" / "descender.npz", _dataset(CHANGES))
    save_preferences(tmp_path / "a" / "llama3_descender_default.npy", np.array([FIRST] * 5))
    save_preferences(tmp_path / "b" / "llama3_descender_default.npy", np.array([FIRST, SECOND, SECOND, TIE, TIE]))
    args = ["--dataset_dir", str(tmp_path / "data"), "--labels_dir", str(tmp_path / "a"),
            "--against_dir", str(tmp_path / "b"), "--names", "SmolLM2,stand-in"]
    assert cli.main(args + ["--out", str(tmp_path / "cmp.json")]) == 0
    out = capsys.readouterr().out
    assert "discoverer: skipped, no" in out  # the other skills have no files
    assert "| picks the descent: SmolLM2, stand-in (pairs) |" in out
    assert ("| descender | 5 | 100%/0%/0%/0% | 20%/40%/40%/0% | 46%/48%/6%/0% | 20% of 5 | 33% of 3 | 100%, 33% | "
            "50%, 100% (2) | 100%, 0% (1) |") in out
    saved = json.loads((tmp_path / "cmp.json").read_text())
    assert saved["names"] == ["SmolLM2", "stand-in"] and saved["skills"]["descender"]["pairs"] == 5
    # a label file of another length, bad names, no skill with files: exit 2 naming the problem
    save_preferences(tmp_path / "b" / "llama3_descender_default.npy", np.array([FIRST] * 4))
    assert cli.main(args) == 2
    assert "descender" in capsys.readouterr().err
    assert cli.main(args[:-2] + ["--names", "one"]) == 2
    assert cli.main(args[:-2] + ["--skill_names", "discoverer"]) == 2
    assert "no skill has a dataset and both label files" in capsys.readouterr().err


def test_the_json_has_null_for_no_pairs_and_out_must_name_a_file(tmp_path, capsys) -> None:
    """No pair went up a level: the shares over none were written as bare NaN, which is not JSON; --out naming a
    folder ended in an IsADirectoryError after the table was printed."""
    save_dataset(tmp_path / "data" / "descender.npz", _dataset([(0, 0), (1, 0)]))
    save_preferences(tmp_path / "a" / "llama3_descender_default.npy", np.array([FIRST, FIRST]))
    save_preferences(tmp_path / "b" / "llama3_descender_default.npy", np.array([TIE, FIRST]))
    args = ["--dataset_dir", str(tmp_path / "data"), "--labels_dir", str(tmp_path / "a"),
            "--against_dir", str(tmp_path / "b"), "--skill_names", "descender"]
    assert cli.main(args + ["--out", str(tmp_path / "cmp.json")]) == 0
    text = (tmp_path / "cmp.json").read_text()
    assert "NaN" not in text
    assert json.loads(text)["skills"]["descender"]["ascents_a"] == {"pairs": 0, "picked": None}
    capsys.readouterr()
    assert cli.main(args + ["--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: --out {tmp_path} is a folder") and "| skill |" not in captured.out


def test_a_label_file_of_another_length_gives_the_advice_once(tmp_path, capsys) -> None:
    save_dataset(tmp_path / "data" / "descender.npz", _dataset(CHANGES))
    save_preferences(tmp_path / "a" / "llama3_descender_default.npy", np.array([FIRST] * 5))
    save_preferences(tmp_path / "b" / "llama3_descender_default.npy", np.array([FIRST] * 4))
    assert cli.main(["--dataset_dir", str(tmp_path / "data"), "--labels_dir", str(tmp_path / "a"),
                     "--against_dir", str(tmp_path / "b"), "--skill_names", "descender"]) == 2
    err = capsys.readouterr().err
    assert "has 4 labels but the dataset has 5 pairs" in err
    assert err.count(" again") == 1  # it said "annotate this dataset again (...). Annotate the dataset again (...)"
