"""The learner's arithmetic on made-up batches (bench.learner_step): the release's advantage normalisation."""
from __future__ import annotations

import pytest
import torch
from sample_factory.utils.attr_dict import AttrDict

from bench.learner_step import build_learner, synthetic_batch
from rl_baseline.sf.learner import ADVANTAGE_STD_FLOOR, release_normalised_advantages

SMALL = ["--batch_size", "64", "--rollout", "16", "--encoder_arch", "project", "--rnn_size", "64"]


def _losses(learner, batch) -> tuple:
    """``_calculate_losses`` on the whole batch as one minibatch, as ``Learner.train`` runs it."""
    buff, _, num_invalids = learner._prepare_batch(batch)
    return learner._calculate_losses(AttrDict(learner._get_minibatch(buff, None)), num_invalids)


@pytest.mark.parametrize("std", [0.0, 1e-9, 1e-5, 9e-4, 1e-3, 0.37])
def test_release_normalised_advantages_divide_by_the_releases_floor(std):
    """(adv - mean) / max(std, 1e-3), the release's learner, from sample-factory's (adv - mean) / max(std, 1e-7)."""
    adv = torch.linspace(-1.0, 1.0, 11)
    adv = adv / adv.std() * std + 0.2
    mean, sd = adv.mean(), adv.std()
    sf = (adv - mean) / torch.clamp_min(sd, 1e-7)
    release = (adv - mean) / max(1e-3, float(sd))
    assert torch.allclose(release_normalised_advantages(sf, sd), release, rtol=1e-5, atol=1e-12)


def test_nearly_equal_advantages_keep_their_small_size(tmp_path):
    """A batch whose V-trace advantages are all about 1e-6 (rewards of 1e-6, a critic that says 0): the policy
    loss sees them divided by the release's floor 1e-3 (advantages of about 1e-3), not scaled up to unit
    standard deviation as sample-factory 2.1.1's floor of 1e-7 would."""
    learner = build_learner(SMALL, tmp_path)
    with torch.no_grad():
        learner.actor_critic.critic_linear.weight.zero_()
        learner.actor_critic.critic_linear.bias.zero_()
    _, policy_loss, _, _, _, _, summaries = _losses(learner, synthetic_batch(learner, reward_scale=1e-6))
    adv_std = float(summaries["adv_std"])
    assert 0.0 < adv_std < 1e-4
    adv = summaries["adv"]
    assert float(adv.std()) == pytest.approx(adv_std / ADVANTAGE_STD_FLOOR, rel=1e-3)
    assert float(adv.abs().max()) < 0.1
    valids = torch.ones(adv.shape[0], dtype=torch.bool)  # synthetic_batch: every step valid
    expected = learner._policy_loss(summaries["ratio"], adv, summaries["clip_ratio_low"],
                                    summaries["clip_ratio_high"], valids, 0)
    assert torch.allclose(policy_loss, expected)
    assert abs(float(policy_loss)) < 0.05


def test_advantages_above_the_floor_are_normalised_to_unit_deviation(tmp_path):
    learner = build_learner(SMALL, tmp_path)
    _, _, _, _, _, _, summaries = _losses(learner, synthetic_batch(learner, reward_scale=0.1))
    assert float(summaries["adv_std"]) > ADVANTAGE_STD_FLOOR
    assert float(summaries["adv"].std()) == pytest.approx(1.0, rel=1e-4)
