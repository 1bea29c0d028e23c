"""Reward training end to end on small synthetic descender data: meaning, files, resume, bad input."""
from __future__ import annotations

import csv
import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from common.estimates import MIN_VALIDATION_PAIRS
from common.nethack.messages import encode_message
from rlaif.dataset import ObservationDataset, save_dataset
from rlaif.preferences import save_preferences
from rlaif.reward_model import RewardModelConfig, list_checkpoints, load_skill_reward
from rlaif.train_reward import QUANTILES, RewardTrainingConfig, reward_labels_meta, split_pairs, train_reward

EXPERIMENT = "llama3_descender_default"
SMALL = RewardModelConfig(embed_dim=16, conv_channels=(32, 32), kernel_sizes=(5, 3), pool_sizes=(4, 1), hidden_dim=32)

DESCEND = ["You climb down the stairs.", "You fall through a trap door!", "You fly down the stairs."]
ASCEND = ["You climb up the stairs."]
STAIRS = ["There is a staircase down here.", "There is a staircase down here.  You see here a scroll labeled FOOBIE."]
ORDINARY = [
    "", "You see here a lichen corpse.", "You hit the newt.", "The newt bites!", "You kill the newt!",
    "It's a wall.", "You find a hidden passage.", "12 gold pieces.", "You are beginning to feel hungry.",
    "There is a doorway here.", "The door opens.", "This door is locked.", "You miss the jackal.",
    "The grid bug bites!", "You see here 3 gold pieces.", "There is an open door here.", "In what direction?",
    "Never mind.", "You kill the sewer rat!", "The jackal misses!",
]


def make_descender_data(pairs: int, seed: int, noise: float = 0.05, unknown: float = 0.05
                        ) -> tuple[ObservationDataset, np.ndarray]:
    """Samples are descents (message + depth +1), ascents (depth -1), 'staircase down here' or
    ordinary moves. Labels follow descend > stairs found > ordinary > ascend, with a few
    flipped labels and some unknowns."""
    rng = np.random.default_rng(seed)
    n = 2 * pairs
    messages = np.zeros((n, 2, 256), dtype=np.uint8)
    stats = np.zeros((n, 2, 6), dtype=np.int32)
    score = np.zeros(n)
    for i in range(n):
        depth = int(rng.integers(1, 6))
        u = rng.random()
        if u < 0.15:
            text, change, s = DESCEND[rng.integers(len(DESCEND))], 1, 2
        elif u < 0.2:
            text, change, s = ASCEND[0], -1, -1
        elif u < 0.3:
            text, change, s = STAIRS[rng.integers(len(STAIRS))], 0, 1
        else:
            text, change, s = ORDINARY[rng.integers(len(ORDINARY))], 0, 0
        messages[i, 0] = encode_message(ORDINARY[rng.integers(len(ORDINARY))])
        messages[i, 1] = encode_message(text)
        stats[i, :] = [depth, 10, 12, 12, 1, 1]
        stats[i, 1, 0] = depth + change
        score[i] = s
    a, b = score[0::2], score[1::2]
    labels = np.where(a > b, 0, np.where(b > a, 1, 2)).astype(np.int32)
    flip = (rng.random(pairs) < noise) & (labels < 2)
    labels[flip] = 1 - labels[flip]
    labels[rng.random(pairs) < unknown] = 3
    return ObservationDataset(messages, stats, {"source": "synthetic descender test data"}), labels


def write_inputs(root: Path, pairs: int, seed: int = 0, **kw) -> tuple[ObservationDataset, np.ndarray]:
    dataset, labels = make_descender_data(pairs, seed, **kw)
    save_dataset(root / "og_dataset" / "descender.npz", dataset)
    save_preferences(root / "preference" / f"{EXPERIMENT}.npy", labels)
    return dataset, labels


def config(root: Path, **kw) -> RewardTrainingConfig:
    base = dict(experiment=EXPERIMENT, dataset_dir=str(root / "og_dataset"), preference_dir=str(root / "preference"),
                train_dir=str(root / "skill_rewards"), batch_size=32, num_epochs=2, reward_lr=3e-3, seed=777,
                val_fraction=0.1, device="cpu", model=SMALL, progress=False)
    base.update(kw)
    return RewardTrainingConfig(**base)


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)["model"]


def _assert_same_weights(a: Path, b: Path) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], atol=1e-6, rtol=1e-5)


# ------------------------------------------------------------------ meaning

@pytest.fixture(scope="module")
def descender_run(tmp_path_factory) -> tuple[Path, dict, ObservationDataset]:
    root = tmp_path_factory.mktemp("descender")
    dataset, _ = write_inputs(root, pairs=1500, seed=0)
    result = train_reward(config(root, batch_size=64, num_epochs=6, val_fraction=0.2, model=RewardModelConfig()))
    return root, result, dataset


@pytest.mark.slow
def test_descender_reward_ranks_descents_above_ordinary_moves(descender_run) -> None:
    root, result, dataset = descender_run
    assert result["val_pairs"] >= 100
    # 5 % of the decided labels are flipped, so about 0.95 is the best possible accuracy
    assert result["val_acc"] >= 0.9, result
    assert result["train_acc"] >= 0.9, result
    loaded = load_skill_reward(root / "skill_rewards" / EXPERIMENT)
    # the reported validation accuracy agrees with scoring the held-out pairs through the loaded model
    labels = np.load(root / "preference" / f"{EXPERIMENT}.npy")
    _, val = split_pairs(dataset.num_pairs, 0.2, 777)
    val = val[labels[val] < 2]
    change = (dataset.stats[:, 1, 0] - dataset.stats[:, 0, 0]).astype(np.float32)
    r = loaded.score(dataset.messages[:, 1], change).reshape(-1, 2)[val]
    assert len(val) == result["val_pairs"]
    assert np.mean((r[:, 1] > r[:, 0]) == (labels[val] == 1)) == pytest.approx(result["val_acc"])
    # normalization uses the distinct (message, depth change) inputs of the dataset
    keys = np.unique(np.concatenate([dataset.messages[:, 1], change[:, None].astype(np.uint8)], axis=1), axis=0)
    normalized = loaded.score(keys[:, :256], keys[:, 256].astype(np.int8).astype(np.float32))
    assert normalized.mean() == pytest.approx(0.0, abs=1e-4) and normalized.std() == pytest.approx(1.0, abs=1e-3)
    assert loaded.skill == "descender"
    down = loaded.score(np.stack([encode_message(t) for t in DESCEND]), np.ones(len(DESCEND)))
    ordinary = loaded.score(np.stack([encode_message(t) for t in ORDINARY]), np.zeros(len(ORDINARY)))
    up = loaded.score(np.stack([encode_message(ASCEND[0])]), np.array([-1.0]))
    assert down.min() > ordinary.max(), (down, ordinary)
    assert ordinary.min() > up.max(), (ordinary, up)
    # the top quantile of the normalized reward separates descents from ordinary moves
    assert ordinary.max() < loaded.threshold(0.9) <= down.max()


def test_inspect_reward_lists_top_and_bottom(descender_run, capsys) -> None:
    from scripts.inspect_reward import main

    root, _, _ = descender_run
    ranked = main(["--reward_dir", str(root / "skill_rewards" / EXPERIMENT),
                   "--dataset", str(root / "og_dataset" / "descender.npz"), "--top", "3"])
    out = capsys.readouterr().out
    assert ranked[0].depth_change == 1 and ranked[0].message in DESCEND
    assert ranked[-1].message == ASCEND[0] and ranked[-1].depth_change == -1
    assert sum(r.count for r in ranked) == 3000
    top = out.split("top 3:")[1].split("bottom 3:")[0]
    bottom = out.split("bottom 3:")[1]
    assert all(any(d in line for d in DESCEND) for line in top.strip().splitlines())
    assert ASCEND[0] in bottom.strip().splitlines()[0]
    with pytest.raises(SystemExit) as exc:
        main(["--reward_dir", str(root / "missing"), "--dataset", str(root / "og_dataset" / "descender.npz")])
    assert exc.value.code == 2 and "reward directory not found" in capsys.readouterr().err


def test_inspect_reward_prints_the_threshold_and_scores_given_messages(descender_run, capsys) -> None:
    """The figures docs/results.md quotes about a reward model (its threshold, the reward of one message) come from
    this command."""
    from rlaif.reward_model import load_skill_reward
    from scripts.inspect_reward import main

    root, _, _ = descender_run
    reward_dir = root / "skill_rewards" / EXPERIMENT
    main(["--reward_dir", str(reward_dir), "--dataset", str(root / "og_dataset" / "descender.npz"), "--top", "1",
          "--quantile", "0.85", "--message", DESCEND[0], "--depth_change", "1", "--message", ASCEND[0]])
    out = capsys.readouterr().out
    loaded = load_skill_reward(reward_dir)
    assert f"threshold at the 0.85 quantile: {loaded.threshold(0.85):+.4f}" in out
    expected = float(loaded.score(encode_message(DESCEND[0]), np.float32(1.0)).reshape(-1)[0])
    assert f"{expected:+8.3f}  depth  +1  (--message) {DESCEND[0]}" in out
    with pytest.raises(SystemExit) as exc:
        main(["--reward_dir", str(reward_dir), "--dataset", str(root / "og_dataset" / "descender.npz"),
              "--quantile", "0.42"])
    assert exc.value.code == 2 and "--quantile: quantile 0.42 is not in" in capsys.readouterr().err


# ------------------------------------------------------------------ files

def test_checkpoint_layout_and_csv_formats(descender_run) -> None:
    root, result, _ = descender_run
    run = root / "skill_rewards" / EXPERIMENT
    ckpts = list_checkpoints(run / "checkpoint_p0")
    # 6 epochs, one save per epoch, keep_checkpoints=2 (default)
    iters_per_epoch = result["num_iters"] // 6
    assert [it for it, _ in ckpts] == [5 * iters_per_epoch, 6 * iters_per_epoch]
    assert [p.name for _, p in ckpts][-1] == f"checkpoint_{result['num_iters']:09d}.pth"
    assert result["checkpoint"] == str(ckpts[-1][1])
    assert not list((run / "checkpoint_p0").glob("*.tmp*"))
    state = torch.load(ckpts[-1][1], weights_only=True)
    for key in ("model", "optimizer", "reward_mean", "reward_var", "tot_num_iter", "model_config", "skill", "seed",
                "dataset"):
        assert key in state, key
    assert state["tot_num_iter"] == result["num_iters"] and state["skill"] == "descender" and state["seed"] == 777
    assert state["dataset"].endswith("descender.npz")
    assert state["reward_var"] == pytest.approx(result["reward_std"] ** 2)

    with (run / "reward_metrics" / "train_norm_quantiles.csv").open() as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == [f"{q:.2f}" for q in QUANTILES] and len(rows[0]) == 19
    assert len(rows) == 1 + 6
    last = [float(v) for v in rows[-1]]
    assert last == sorted(last) and last[0] < 0 < last[-1]

    with (run / "reward_metrics" / "metrics.csv").open() as fh:
        metrics = list(csv.reader(fh))
    assert metrics[0] == ["epoch", "iteration", "train_loss", "train_acc", "val_loss", "val_acc", "val_pairs"]
    assert int(metrics[-1][6]) == result["val_pairs"] > 0
    assert [int(r[1]) for r in metrics[1:]] == [iters_per_epoch * e for e in range(1, 7)]
    assert [float(r[0]) for r in metrics[1:]] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert float(metrics[-1][2]) < float(metrics[1][2]) + 0.2
    png = run / "reward_metrics" / "curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_pairs_are_excluded(tmp_path: Path, caplog) -> None:
    """Changing what the unknown pairs contain must not change the trained weights."""
    dataset, labels = make_descender_data(200, seed=5, unknown=0.3)
    unknown = np.flatnonzero(labels == 3)
    assert len(unknown) > 30
    other = ObservationDataset(dataset.messages.copy(), dataset.stats.copy(), dict(dataset.meta))
    rng = np.random.default_rng(9)
    for k in unknown:
        for s in (2 * k, 2 * k + 1):
            other.messages[s, 1] = encode_message(DESCEND[rng.integers(len(DESCEND))])
            other.stats[s, 1, 0] = other.stats[s, 0, 0] + 1
    results = []
    for name, ds in (("a", dataset), ("b", other)):
        root = tmp_path / name
        save_dataset(root / "og_dataset" / "descender.npz", ds)
        save_preferences(root / "preference" / f"{EXPERIMENT}.npy", labels)
        with caplog.at_level(logging.INFO, logger="rlaif.train_reward"):
            results.append(train_reward(config(root, num_epochs=1)))
    assert f"unknown {len(unknown)} (unknown pairs excluded)" in caplog.text
    a, b = results
    assert a["unknown_excluded"] == len(unknown)
    assert a["train_pairs"] == b["train_pairs"] <= 200 - len(unknown)
    _assert_same_weights(Path(a["checkpoint"]), Path(b["checkpoint"]))
    assert a["val_acc"] == pytest.approx(b["val_acc"])


# ------------------------------------------------------------------ resume

def test_resume_matches_an_uninterrupted_run_and_finished_run_is_a_no_op(tmp_path: Path, caplog) -> None:
    write_inputs(tmp_path, pairs=200, seed=1)
    full = train_reward(config(tmp_path, train_dir=str(tmp_path / "full"), num_epochs=3))
    # interrupted run: 2 epochs, then the same command with 3 epochs picks up at the checkpoint
    part = train_reward(config(tmp_path, train_dir=str(tmp_path / "part"), num_epochs=2))
    assert part["num_iters"] * 3 == full["num_iters"] * 2
    with caplog.at_level(logging.INFO, logger="rlaif.train_reward"):
        resumed = train_reward(config(tmp_path, train_dir=str(tmp_path / "part"), num_epochs=3))
    assert "resuming from" in caplog.text and resumed["num_iters"] == full["num_iters"]
    _assert_same_weights(Path(full["checkpoint"]), Path(resumed["checkpoint"]))
    run = tmp_path / "part" / EXPERIMENT
    with (run / "reward_metrics" / "metrics.csv").open() as fh:
        assert len(list(csv.reader(fh))) == 1 + 3

    before = sorted((p.name, p.stat().st_mtime_ns) for p in (run / "checkpoint_p0").iterdir())
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="rlaif.train_reward"):
        again = train_reward(config(tmp_path, train_dir=str(tmp_path / "part"), num_epochs=3))
    assert again["already_finished"] and "already finished" in caplog.text
    assert again["num_iters"] == full["num_iters"] and again["val_acc"] == pytest.approx(resumed["val_acc"])
    assert sorted((p.name, p.stat().st_mtime_ns) for p in (run / "checkpoint_p0").iterdir()) == before


def test_resume_in_the_middle_of_an_epoch_after_a_crash(tmp_path: Path) -> None:
    write_inputs(tmp_path, pairs=200, seed=2)
    cfg = config(tmp_path, num_epochs=2, save_every=2, keep_checkpoints=100)
    done = train_reward(cfg)
    run = tmp_path / "skill_rewards" / EXPERIMENT
    final = run / "final.pth"
    Path(done["checkpoint"]).rename(final)
    ckpts = list_checkpoints(run / "checkpoint_p0")
    iters_per_epoch = done["num_iters"] // 2
    # pretend the run died right after the save at iteration 2 + one epoch (mid-epoch)
    cut = iters_per_epoch + 2
    assert cut % iters_per_epoch != 0
    for it, path in ckpts:
        if it > cut:
            path.unlink()
    resumed = train_reward(cfg)
    assert resumed["num_iters"] == done["num_iters"]
    _assert_same_weights(final, Path(resumed["checkpoint"]))
    with (run / "reward_metrics" / "metrics.csv").open() as fh:
        iterations = [int(r[1]) for r in list(csv.reader(fh))[1:]]
    assert iterations == sorted(set(iterations)) and iterations[-1] == done["num_iters"]
    with (run / "reward_metrics" / "train_norm_quantiles.csv").open() as fh:
        assert len(list(csv.reader(fh))) == 1 + len(iterations)


def test_too_few_validation_pairs_are_counted_and_flagged_and_old_metrics_files_resume(tmp_path: Path, capsys,
                                                                                         caplog) -> None:
    """A validation accuracy on a handful of pairs is said to be one: the count goes into metrics.csv and the final
    line, flagged below the minimum; a metrics.csv written without the count column resumes, its rows unknown."""
    from orchestration.report import load_reward_metrics
    from scripts.train_reward import main

    write_inputs(tmp_path, pairs=120, seed=4)
    with caplog.at_level(logging.WARNING, logger="rlaif.train_reward"):
        result = main(_script_args(tmp_path, "--val_fraction", "0.1"))
    pairs = result["val_pairs"]
    assert 0 < pairs < MIN_VALIDATION_PAIRS
    assert f"on {pairs} non-tie pairs (fewer than {MIN_VALIDATION_PAIRS}: too few to read as the model's " \
           "accuracy)" in capsys.readouterr().out
    assert f"only {pairs} validation pairs with a decided label" in caplog.text
    metrics = tmp_path / "skill_rewards" / EXPERIMENT / "reward_metrics" / "metrics.csv"
    assert load_reward_metrics(metrics).final_val_pairs == pairs
    # the file of an earlier version: no val_pairs column; a resumed run keeps its rows with an empty count
    rows = list(csv.reader(metrics.open()))
    with metrics.open("w", newline="") as fh:
        csv.writer(fh).writerows([r[:6] for r in rows])
    assert load_reward_metrics(metrics).final_val_pairs is None
    main(_script_args(tmp_path, "--val_fraction", "0.1", "--num_epochs", "2"))
    rows = list(csv.reader(metrics.open()))
    assert rows[0][-1] == "val_pairs" and [r[6] for r in rows[1:]] == ["", str(pairs)]
    assert load_reward_metrics(metrics).final_val_pairs == pairs


# ------------------------------------------------------------------ the script and bad input

def _script_args(root: Path, *extra: str) -> list[str]:
    return ["--batch_size", "32", "--num_workers", "40", "--reward_lr", "3e-3", "--num_epochs", "1", "--seed", "777",
            "--dataset_dir", str(root / "og_dataset"), "--experiment", EXPERIMENT,
            "--train_dir", str(root / "skill_rewards"), "--preference_dir", str(root / "preference"),
            "--device", "cpu", "--conv_channels", "16,16", "--embed_dim", "8", "--hidden_dim", "16",
            "--no_progress", *extra]


@pytest.mark.slow
def test_script_runs_with_the_original_flags(tmp_path: Path, capsys) -> None:
    from scripts.train_reward import main

    write_inputs(tmp_path, pairs=120, seed=3)
    result = main(_script_args(tmp_path))
    assert result["num_iters"] > 0 and Path(result["checkpoint"]).is_file()
    assert "val acc" in capsys.readouterr().out
    main(_script_args(tmp_path))
    assert "already trained" in capsys.readouterr().out
    # --annotator picks another preference file; --skill overrides the experiment name
    save_preferences(tmp_path / "preference" / "other_labels.npy", np.full(120, 2, dtype=np.int32))
    result = main(_script_args(tmp_path, "--annotator", "other_labels", "--skill", "descender",
                               "--experiment", "custom_run"))
    assert (tmp_path / "skill_rewards" / "custom_run" / "checkpoint_p0").is_dir()
    assert torch.load(result["checkpoint"], weights_only=True)["preferences"].endswith("other_labels.npy")


@pytest.mark.parametrize("case", ["length", "codes", "all_unknown", "batch", "no_dataset", "no_skill"])
def test_script_bad_input_exits_with_a_clear_message(tmp_path: Path, capsys, case: str) -> None:
    from scripts.train_reward import main

    write_inputs(tmp_path, pairs=60, seed=4)
    pref = tmp_path / "preference" / f"{EXPERIMENT}.npy"
    args = _script_args(tmp_path)
    if case == "length":
        np.save(pref, np.zeros(59, dtype=np.int32))
        expected = [str(pref), "59 labels", "60 pairs", "descender.npz"]
    elif case == "codes":
        labels = np.zeros(60, dtype=np.int32)
        labels[7] = 5
        np.save(pref, labels)
        expected = [str(pref), "outside 0-3"]
    elif case == "all_unknown":
        np.save(pref, np.full(60, 3, dtype=np.int32))
        expected = ["no training pairs", str(pref), "60 unknown"]
    elif case == "batch":
        args = args + ["--batch_size", "1000"]
        expected = ["batch size 1000", "training pairs", "descender.npz"]
    elif case == "no_dataset":
        (tmp_path / "og_dataset" / "descender.npz").unlink()
        expected = ["no dataset for skill 'descender'", "descender.npz"]
    else:
        args = args + ["--experiment", "my_run"]
        expected = ["cannot read a skill", "my_run"]
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code not in (0, None)
    err = capsys.readouterr().err
    for text in expected:
        assert text in err, (text, err)
    assert not (tmp_path / "skill_rewards").exists(), "bad input must not create outputs"


# ------------------------------------------------------------------ with the annotation phase

def test_train_on_heuristic_annotations(tmp_path: Path) -> None:
    from rlaif import annotate
    dataset, _ = make_descender_data(300, seed=6)
    save_dataset(tmp_path / "og_dataset" / "descender.npz", dataset)
    labels = annotate.run_annotation(annotate.AnnotationConfig(
        goal_key="descender", directory=str(tmp_path / "og_dataset"), preference_dir=str(tmp_path / "preference"),
        logdir=str(tmp_path / "logs"), backend="heuristic", batch_size=64, progress=False, log_conversations=False,
    ))
    assert labels is not None and len(labels) == 300
    assert (tmp_path / "preference" / f"{EXPERIMENT}.npy").is_file()
    result = train_reward(config(tmp_path, num_epochs=3, val_fraction=0.2))
    assert result["val_acc"] >= 0.8, result
    loaded = load_skill_reward(tmp_path / "skill_rewards" / EXPERIMENT)
    down = loaded.score(np.stack([encode_message(DESCEND[0])]), np.array([1.0]))
    ordinary = loaded.score(np.stack([encode_message(t) for t in ORDINARY]), np.zeros(len(ORDINARY)))
    assert down[0] > ordinary.max()


# ------------------------------------------------------------------ --reward_arch


def test_reward_arch_flag_default_release_size_flags_small_and_bad_values(tmp_path: Path, capsys) -> None:
    from scripts.train_reward import build_parser, config_from_args, main

    def arch(*argv: str) -> RewardModelConfig:
        return config_from_args(build_parser().parse_args(list(argv))).model

    assert arch() == RewardModelConfig(arch="release")
    assert arch("--reward_arch", "small") == RewardModelConfig()
    small = arch("--conv_channels", "16,16", "--embed_dim", "8")  # size flags alone pick the small model
    assert small.arch == "small" and small.conv_channels == (16, 16) and small.embed_dim == 8
    for bad, text in ((["--reward_arch", "big"], "invalid choice: 'big'"),
                      (["--reward_arch", "release", "--hidden_dim", "16"], "--hidden_dim apply only to --reward_arch small")):
        with pytest.raises(SystemExit) as exc:
            main(_script_args(tmp_path, *bad))
        assert exc.value.code == 2 and text in capsys.readouterr().err
    assert not (tmp_path / "skill_rewards").exists()
    # the default trains the release architecture and records it in the checkpoint
    write_inputs(tmp_path, pairs=40, seed=8)
    args = _script_args(tmp_path)
    start = args.index("--conv_channels")
    assert args[start:start + 6] == ["--conv_channels", "16,16", "--embed_dim", "8", "--hidden_dim", "16"]
    del args[start:start + 6]
    result = main(args)
    assert torch.load(result["checkpoint"], weights_only=True)["model_config"]["arch"] == "release"


def test_training_says_how_much_of_its_labels_came_from_a_stand_in(tmp_path: Path, caplog) -> None:
    """Any share of stand-in labels is named with its size (the metadata of a mixed annotation)."""
    import json

    write_inputs(tmp_path, 60)
    meta = tmp_path / "preference" / f"{EXPERIMENT}.meta.json"
    meta.write_text(json.dumps({"backend": "mixed", "stand_in": True, "stand_in_share": 0.25, "sources": [
        {"backend": "heuristic", "model": "m", "stand_in": True, "pairs": [[0, 15]]},
        {"backend": "openai", "model": "llama", "stand_in": False, "pairs": [[15, 60]]}]}))
    with caplog.at_level(logging.WARNING, logger="rlaif.train_reward"):
        train_reward(config(tmp_path, num_epochs=1))
    assert "25.0% of the labels in" in caplog.text and "came from the heuristic backend, a stand-in" in caplog.text
    caplog.clear()
    meta.write_text(json.dumps({"backend": "heuristic", "stand_in": True, "stand_in_share": 1.0}))
    with caplog.at_level(logging.WARNING, logger="rlaif.train_reward"):
        result = train_reward(config(tmp_path / "again", dataset_dir=str(tmp_path / "og_dataset"),
                                     preference_dir=str(tmp_path / "preference"), num_epochs=1))
    assert "holds labels of the heuristic backend, a stand-in for the LLM" in caplog.text
    # the trained model leads back to who labelled its pairs (what scripts.report heads a run's column with)
    reward_dir = Path(result["checkpoint"]).parent.parent
    assert reward_labels_meta(reward_dir) == {"backend": "heuristic", "stand_in": True, "stand_in_share": 1.0}
    meta.unlink()
    assert reward_labels_meta(reward_dir) is None and reward_labels_meta(tmp_path / "nowhere") is None
