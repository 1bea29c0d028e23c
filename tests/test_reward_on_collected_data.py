"""Phases 0 -> 1a -> 1b on real game data: a dataset played by the explorer policy,
labelled by the heuristic backend (the rule-based stand-in for the LLM), and a descender
reward model trained with the original command's flags (smaller batch and fewer epochs,
so it fits a CI run). The trained reward must put descents above ordinary moves."""
from __future__ import annotations

import numpy as np
import pytest

from rlaif.dataset import load_dataset

# a real collection, annotation and reward training: about 12 s
pytestmark = pytest.mark.slow

SEED = 3


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    from scripts.annotate_pairs import main as annotate_main
    from scripts.collect_dataset import main as collect_main
    from scripts.train_reward import main as train_main

    root = tmp_path_factory.mktemp("descender")
    data = root / "og_dataset"
    assert collect_main([
        "--skill", "descender", "--num_pairs", "300", "--policy", "explorer", "--out", str(data),
        "--seed", str(SEED), "--sample_prob", "0.04", "--max_episode_steps", "3000", "--no_progress",
    ]) == 0
    assert annotate_main([
        "--directory", str(data), "--goal_key", "descender", "--n-annotation-chunks", "1", "--chunk-number", "0",
        "--backend", "heuristic", "--preference_dir", str(root / "preference"), "--logdir", str(root / "logs"),
        "--no_progress",
    ]) == 0
    result = train_main([
        "--batch_size", "100", "--num_workers", "2", "--reward_lr", "1e-3", "--num_epochs", "15", "--seed", "777",
        "--dataset_dir", str(data), "--experiment", "llama3_descender_default",
        "--train_dir", str(root / "skill_rewards"), "--preference_dir", str(root / "preference"),
        "--val_fraction", "0.3", "--no_progress",
    ])
    return root, result


def test_collected_data_has_descents(pipeline):
    root, _ = pipeline
    dataset = load_dataset(root / "og_dataset" / "descender.npz")
    change = dataset.stats[:, 1, 0] - dataset.stats[:, 0, 0]
    assert dataset.num_pairs == 300
    assert (change > 0).sum() >= 10


def test_heuristic_labels_prefer_descents(pipeline):
    root, _ = pipeline
    dataset = load_dataset(root / "og_dataset" / "descender.npz")
    labels = np.load(root / "preference" / "llama3_descender_default.npy")
    change = (dataset.stats[:, 1, 0] - dataset.stats[:, 0, 0]).reshape(-1, 2)
    only_second = (change[:, 1] > 0) & (change[:, 0] <= 0)
    assert only_second.any()
    assert (labels[only_second] == 1).mean() > 0.9


def test_trained_reward_ranks_descents_above_ordinary_moves(pipeline):
    from rlaif.reward_model import load_skill_reward

    root, result = pipeline
    print(f"\ndescender reward on explorer data: val_acc={result['val_acc']:.3f} over {result['val_pairs']} "
          f"decided held-out pairs, train_acc={result['train_acc']:.3f}")
    # Well above chance on held-out pairs with a decided (non-tie) label.
    assert result["val_pairs"] >= 5, result
    assert result["val_acc"] >= 0.8, result
    reward = load_skill_reward(root / "skill_rewards" / "llama3_descender_default")
    dataset = load_dataset(root / "og_dataset" / "descender.npz")
    change = (dataset.stats[:, 1, 0] - dataset.stats[:, 0, 0]).astype(np.float32)
    scores = reward.score(dataset.messages[:, 1], change)
    assert scores[change > 0].mean() > scores[change == 0].mean() + 1.0
    assert (root / "skill_rewards" / "llama3_descender_default" / "reward_metrics" / "train_norm_quantiles.csv").is_file()


def test_the_stand_in_descender_pays_the_descent_and_no_fight_or_hunger(pipeline):
    """What the descender's model pays at RL time (normalised, zero below the 0.85 quantile of the dataset's
    distinct inputs, as the skill runtime applies it): the descent pays; fights and hunger, which keep the hero on
    its level, pay nothing, as the release's two-valued descender model pays nearly nothing but the top group.
    Before, the stand-in ranked same-level messages alike and its threshold fell inside that plateau: "You hit the
    jackal." and "The jackal bites!" were paid."""
    from common.nethack.messages import encode_message
    from rl_baseline.skills.intrinsic_reward import build_intrinsic_reward

    root, _ = pipeline
    reward = build_intrinsic_reward([str(root / "skill_rewards" / "llama3_descender_default")], [0.85], beta=3.0,
                                    llm_coef=0.1, extrinsic_coef=0.0)

    def paid(message: str, depth_change: int) -> float:
        return reward.thresholded_score(0, encode_message(message), depth_change)

    assert paid("You descend the stairs.", 1) > 0
    busy = ("You hit the jackal.", "The jackal bites!", "You kill the jackal!", "You miss the newt.",
            "You are beginning to feel hungry.")
    dataset = load_dataset(root / "og_dataset" / "descender.npz")
    played = {bytes(m).rstrip(b"\0").decode("latin-1") for m in dataset.messages[:, 1]}
    fights = sorted(m for m in played if any(w in m for w in ("You hit", "You miss", "You kill", " hits!", " bites!",
                                                             " misses!", "hungry")))
    assert len(fights) >= 5  # the explorer fights on most levels
    paid_fights = [m for m in (*busy, *fights) if paid(m, 0) > 0]
    assert not paid_fights, paid_fights
    assert paid("You climb up the stairs.", -1) == 0.0
