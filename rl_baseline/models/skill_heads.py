"""Separate policy heads per skill on one network (the paper's ablation; ``scripts.main --policy_heads per_skill``).

The paper trains one network for all skills, which sees the active skill as a one-hot input, and reports
that separate heads per skill trained worse. :class:`PerSkillHeadsActorCritic` is that variant on
sample-factory 2's shared-weights actor-critic: the encoder (CDGPT5, which still reads the one-hot) and
the recurrent core are shared, and instead of one action head and one value head there is one of each
per skill. The active skill's one-hot (observation key ``skill_onehot``) picks which head's logits and
value are used for a sample, so a head only gets gradients from its own skill's steps.

Which skill a row belongs to is read in :meth:`forward_head` and used in :meth:`forward_tail`: sample-
factory never passes observations to the tail, but every caller (the inference worker and
:meth:`forward` in one go, the learner head -> core -> tail on one minibatch, with the core's output put
back in the head's row order) runs the tail on the rows the head just saw. The tail checks the row count
and refuses a mismatch rather than pairing rows with the wrong skill.

A network variant, not a baseline, so it stays with the networks rather than in the baselines' wing
(:mod:`rl_baseline.baselines`): it changes only the heads of the method's own actor-critic, keeps its
encoder, core, observations, skills and rewards, and is chosen by the model factory
(:func:`rl_baseline.models.cdgpt5.make_cdgpt5_actor_critic`, ``--policy_heads``) as any architecture choice is.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import torch
from sample_factory.algo.utils.action_distributions import calc_num_action_parameters, get_action_distribution
from sample_factory.algo.utils.tensor_dict import TensorDict
from sample_factory.model.actor_critic import ActorCriticSharedWeights
from torch import Tensor, nn

SKILL_KEY = "skill_onehot"


class PerSkillHeadsActorCritic(ActorCriticSharedWeights):
    """Shared encoder and core; one action head and one value head per skill (module docstring)."""

    def __init__(self, model_factory: Any, obs_space: Any, action_space: Any, cfg: Any) -> None:
        super().__init__(model_factory, obs_space, action_space, cfg)
        if SKILL_KEY not in obs_space.keys():
            raise ValueError(f"--policy_heads per_skill needs the observation key {SKILL_KEY!r} (the skill environment)")
        self.num_skills = int(obs_space[SKILL_KEY].shape[0])
        out = self.decoder.get_out_size()
        self.num_action_params = int(calc_num_action_parameters(action_space))
        # the shared heads the parent built are replaced: one value and one set of action logits per skill
        self.critic_linear = nn.Linear(out, self.num_skills)
        del self.action_parameterization
        self.action_heads = nn.Linear(out, self.num_skills * self.num_action_params)
        self.critic_linear.apply(self.initialize_weights)
        self.action_heads.apply(self.initialize_weights)
        self._skill: Optional[Tensor] = None

    def forward_head(self, normalized_obs_dict: Dict[str, Tensor]) -> Tensor:
        self._skill = normalized_obs_dict[SKILL_KEY].argmax(dim=-1).long()
        return super().forward_head(normalized_obs_dict)

    def _skill_rows(self, rows: int) -> Tensor:
        skill = self._skill
        if skill is None or skill.shape[0] != rows:
            raise RuntimeError(f"per-skill heads: the tail got {rows} rows but the head last saw "
                               f"{None if skill is None else skill.shape[0]}; run forward_head on the same batch first")
        return skill

    def forward_tail(self, core_output: Tensor, values_only: bool, sample_actions: bool) -> TensorDict:
        decoder_output = self.decoder(core_output)
        rows = decoder_output.shape[0]
        skill = self._skill_rows(rows).to(decoder_output.device)
        index = torch.arange(rows, device=decoder_output.device)
        values = self.critic_linear(decoder_output)[index, skill].squeeze()
        result = TensorDict(values=values)
        if values_only:
            return result
        logits = self.action_heads(decoder_output).view(rows, self.num_skills, self.num_action_params)[index, skill]
        self.last_action_distribution = get_action_distribution(self.action_space, raw_logits=logits)
        result["action_logits"] = logits
        self._maybe_sample_actions(sample_actions, result)
        return result
