"""Intrinsic reward: thresholds, count normalisation, caching; its flags' parsing and validation."""
from __future__ import annotations

import numpy as np
import pytest

from common.nethack.messages import message_bytes
from rl_baseline.sf.cfg import ConfigError, parse_quantiles, parse_reward_dirs, resolve_cfg
from rl_baseline.skills.intrinsic_reward import IntrinsicReward, RewardConfigError, ScoreCache


def msg(text: str) -> np.ndarray:
    out = np.zeros(256, dtype=np.uint8)
    raw = text.encode()
    out[: len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    return out


class LengthModel:
    """Scores a message by its length (plus 10 x depth change); counts forward passes."""

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale
        self.calls = 0

    def score(self, messages: np.ndarray, depth_change: np.ndarray) -> np.ndarray:
        self.calls += 1
        lengths = (messages != 0).sum(axis=1).astype(np.float32)
        return (self.scale * lengths + 10.0 * depth_change).astype(np.float32)

    def threshold(self, q: float) -> float:
        if q not in (0.5, 0.85):
            raise ValueError(f"quantile {q} not in train_norm_quantiles.csv (available: 0.5, 0.85)")
        return 3.0 if q == 0.5 else 5.0


def make_reward(beta: float = 3.0, llm: float = 0.1, ext: float = 0.0) -> tuple[IntrinsicReward, list[LengthModel]]:
    models = [LengthModel(1.0), LengthModel(2.0)]
    return IntrinsicReward(models, [3.0, 5.0], beta=beta, llm_coef=llm, extrinsic_coef=ext, cache=ScoreCache()), models


def test_threshold_zeroes_low_scores_per_skill():
    reward, _ = make_reward()
    # "ab": length 2 -> skill 0 score 2 < 3 -> 0; skill 1 score 4 < 5 -> 0
    assert reward.thresholded_score(0, msg("ab"), 0) == 0.0
    assert reward.thresholded_score(1, msg("ab"), 0) == 0.0
    # "abc": skill 0 score 3 >= 3 kept; skill 1 score 6 >= 5 kept
    assert reward.thresholded_score(0, msg("abc"), 0) == pytest.approx(3.0)
    assert reward.thresholded_score(1, msg("abc"), 0) == pytest.approx(6.0)
    # depth change enters the score
    assert reward.thresholded_score(0, msg("ab"), 1) == pytest.approx(12.0)


def test_count_division_per_episode_and_reset():
    reward, _ = make_reward(beta=2.0)
    values = [reward.intrinsic(0, msg("hello"), 0) for _ in range(3)]
    assert values == pytest.approx([5.0, 5.0 / 4, 5.0 / 9])
    # other messages have their own counts
    assert reward.intrinsic(0, msg("hello!"), 0) == pytest.approx(6.0)
    reward.reset()
    assert reward.intrinsic(0, msg("hello"), 0) == pytest.approx(5.0)


def test_counts_are_shared_across_skills_and_ignore_padding():
    reward, _ = make_reward(beta=1.0)
    assert reward.intrinsic(0, msg("abcd"), 0) == pytest.approx(4.0)
    assert reward.intrinsic(1, msg("abcd"), 0) == pytest.approx(8.0 / 2)
    assert message_bytes(msg("abcd")) == b"abcd"


def test_cache_avoids_forward_passes_and_keys_on_skill_and_depth():
    reward, models = make_reward()
    for _ in range(10):
        reward.intrinsic(0, msg("You kill the newt!"), 0)
    assert models[0].calls == 1
    reward.intrinsic(0, msg("You kill the newt!"), 1)
    reward.intrinsic(1, msg("You kill the newt!"), 0)
    assert models[0].calls == 2 and models[1].calls == 1
    assert reward.cache.hits == 9 and reward.cache.misses == 3
    assert reward.cache.hit_rate == pytest.approx(9 / 12)


def test_empty_message_is_scored_like_any_message():
    reward, models = make_reward()
    # length 0 -> score 0 < threshold -> 0, but the model was asked
    assert reward.intrinsic(0, msg(""), 0) == 0.0
    assert models[0].calls == 1
    # a positive depth change lifts the empty message above the threshold
    assert reward.intrinsic(0, msg(""), 1) == pytest.approx(10.0 / 2**3)


def test_combine_and_disabled_reward():
    reward, _ = make_reward(llm=0.1, ext=0.5)
    assert reward.combine(4.0, 2.0) == pytest.approx(0.5 * 4.0 + 0.1 * 2.0)
    off = IntrinsicReward([], [], llm_coef=0.0, extrinsic_coef=1.0)
    assert off.intrinsic(0, msg("anything"), 0) == 0.0
    assert off.combine(3.0, 0.0) == pytest.approx(3.0)


def test_parse_list_flags():
    text = "['train_dir/a',\n      'train_dir/b']"
    assert parse_reward_dirs(text) == ["train_dir/a", "train_dir/b"]
    assert parse_reward_dirs("[x, y]") == ["x", "y"]
    assert parse_reward_dirs("[]") == []
    assert parse_reward_dirs("single/dir") == ["single/dir"]
    assert parse_quantiles("[0.95,0.85]", 2) == [0.95, 0.85]
    assert parse_quantiles("0.5", 3) == [0.5, 0.5, 0.5]
    with pytest.raises(ConfigError, match="eps_threshold_quantile"):
        parse_quantiles("[1.5]", 1)


def test_validation_errors_name_the_problem(tmp_path):
    def resolve(*flags: str):
        return resolve_cfg(["--train_dir", str(tmp_path), *flags], saved=False)

    with pytest.raises(ConfigError, match="--num_skills is 5"):
        resolve("--reward_dir", "[a, b]")
    with pytest.raises(ConfigError, match="not found"):
        resolve("--reward_dir", str(tmp_path / "missing"), "--num_skills", "1", "--code_seed", "-1")
    with pytest.raises(ConfigError, match="lists no reward model"):
        resolve("--llm_reward", "0.1")
    assert resolve("--llm_reward", "0", "--code_seed", "-1").reward_thresholds == []


# ----------------------------------------------------------------------------- message-count window (--msg_max_keys)

def _others(n: int) -> list[np.ndarray]:
    return [msg(f"other message {i:03d}") for i in range(n)]


def test_a_message_pushed_out_of_the_20_message_window_pays_in_full_again():
    """The release counts over the 20 most recently seen distinct messages: a recurring event (the
    stairs, an altar) pays 1, 1/8, ... while it stays in the window and in full once 20 others passed."""
    reward, _ = make_reward(beta=3.0)
    assert reward.msg_max_keys == 20
    assert reward.intrinsic(0, msg("hello"), 0) == pytest.approx(5.0)
    assert reward.intrinsic(0, msg("hello"), 0) == pytest.approx(5.0 / 8)
    for other in _others(20):
        reward.intrinsic(0, other, 0)
    assert reward.intrinsic(0, msg("hello"), 0) == pytest.approx(5.0), "not evicted after 20 other messages"
    assert len(reward.counts) == 20


def test_a_message_still_in_the_window_keeps_its_count_and_is_refreshed_by_each_sighting():
    reward, _ = make_reward(beta=1.0)
    reward.intrinsic(0, msg("hello"), 0)
    for other in _others(19):
        reward.intrinsic(0, other, 0)
    assert reward.intrinsic(0, msg("hello"), 0) == pytest.approx(5.0 / 2)  # 19 others: still counted
    for other in _others(40)[20:39]:
        reward.intrinsic(0, other, 0)
    # the second sighting made it the most recent again: 19 newer messages do not push it out
    assert reward.intrinsic(0, msg("hello"), 0) == pytest.approx(5.0 / 3)


def test_unlimited_window_counts_over_the_whole_episode():
    models = [LengthModel(1.0)]
    reward = IntrinsicReward(models, [3.0], beta=1.0, llm_coef=0.1, cache=ScoreCache(), msg_max_keys=-1)
    reward.intrinsic(0, msg("hello"), 0)
    for other in _others(100):
        reward.intrinsic(0, other, 0)
    assert reward.intrinsic(0, msg("hello"), 0) == pytest.approx(5.0 / 2)
    assert len(reward.counts) == 101


@pytest.mark.parametrize("bad", [0, -2, -20])
def test_bad_window_sizes_are_refused(bad):
    with pytest.raises(RewardConfigError, match="--msg_max_keys"):
        IntrinsicReward([LengthModel()], [3.0], msg_max_keys=bad)
