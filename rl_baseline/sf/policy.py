"""A trained skill policy outside sample-factory's workers: loading it, and acting with it.

Evaluation, the forced-skill evaluation, the skill report and the on-policy reward agreement
all step environments in this process with one of three policies, each with the interface
``act(obs_list) -> actions`` and ``episode_ended(i)``:

* :class:`TorchPolicy` -- the actor-critic loaded from the experiment's newest checkpoint
  (:func:`load_policy`), or the same network freshly initialised (``untrained=True``: the
  baseline "the network before any training");
* :class:`UniformRandomPolicy` -- uniformly random actions from the env's action set.

The experiment's configuration comes from :func:`rl_baseline.sf.cfg.resolve_experiment_cfg`.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from rl_baseline.sf.checkpoints import CheckpointError, checkpoint_dir, load_newest

logger = logging.getLogger(__name__)


class TorchPolicy:
    """The actor-critic with one recurrent state per game."""

    def __init__(self, actor_critic: Any, rnn_size: int, n_envs: int, device: Any, deterministic: bool) -> None:
        import torch  # lazy: torch only once a policy is loaded

        self.model = actor_critic
        self.device = device
        self.deterministic = deterministic
        self.rnn = torch.zeros([n_envs, rnn_size], dtype=torch.float32, device=device)

    def act(self, obs: list[dict], rows: Optional[np.ndarray] = None) -> np.ndarray:
        """Actions for ``obs``: one per game, or (``rows``) for those games only, ``obs[j]`` being game
        ``rows[j]``'s (the other games' recurrent states are left as they are)."""
        import torch  # lazy: torch only once a policy is loaded
        from sample_factory.algo.utils.action_distributions import argmax_actions  # lazy: sample-factory, as torch
        from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs  # lazy: sample-factory, as torch

        with torch.no_grad():
            batch = {k: torch.from_numpy(np.stack([np.asarray(o[k]) for o in obs])).to(self.device) for k in obs[0]}
            index = None if rows is None else torch.as_tensor(np.asarray(rows), dtype=torch.long, device=self.device)
            rnn = self.rnn if index is None else self.rnn[index]
            out = self.model(prepare_and_normalize_obs(self.model, batch), rnn)
            actions = out["actions"]
            if self.deterministic:
                actions = argmax_actions(self.model.action_distribution())
            if index is None:
                self.rnn = out["new_rnn_states"]
            else:
                self.rnn[index] = out["new_rnn_states"]
            return actions.reshape(len(obs), -1)[:, 0].cpu().numpy()

    def episode_ended(self, i: int) -> None:
        self.rnn[i].zero_()


class UniformRandomPolicy:
    """Uniformly random actions: the baseline that knows nothing."""

    def __init__(self, n_actions: int, seed: int = 0) -> None:
        self.n_actions = int(n_actions)
        self.rng = np.random.default_rng(seed)

    def act(self, obs: list[dict]) -> np.ndarray:
        return self.rng.integers(self.n_actions, size=len(obs))

    def episode_ended(self, i: int) -> None:
        pass


@dataclass
class LoadedPolicy:
    """An actor-critic ready to act, and where its weights came from."""

    actor_critic: Any
    rnn_size: int
    device: Any
    checkpoint: Optional[Path]  # None for the untrained network
    env_steps: int

    def acting(self, n_envs: int, deterministic: bool = False) -> TorchPolicy:
        return TorchPolicy(self.actor_critic, self.rnn_size, n_envs, self.device, deterministic)


def load_policy(cfg: Any, observation_space: Any, action_space: Any, untrained: bool = False,
                init_seed: int = 0) -> LoadedPolicy:
    """The experiment's actor-critic with the newest ``--load_checkpoint_kind`` checkpoint, or
    (``untrained``) the same network with its initial weights (seeded by ``init_seed``).

    The checkpoint must load and match the network: evaluation results must belong to the
    checkpoint the user asked for, so there is no fallback to an older file.
    """
    import torch  # lazy: torch only once a policy is loaded
    from sample_factory.model.actor_critic import create_actor_critic  # lazy: sample-factory, as torch
    from sample_factory.model.model_utils import get_rnn_size  # lazy: sample-factory, as torch

    device = torch.device("cuda" if cfg.device == "gpu" and torch.cuda.is_available() else "cpu")
    if untrained:
        torch.manual_seed(int(init_seed))
    actor_critic = create_actor_critic(cfg, observation_space, action_space)
    actor_critic.eval()
    actor_critic.model_to_device(device)
    rnn_size = get_rnn_size(cfg)
    if untrained:
        return LoadedPolicy(actor_critic, rnn_size, device, None, 0)
    ckpt_dir = checkpoint_dir(cfg.train_dir, cfg.experiment)
    loaded = load_newest(ckpt_dir, cfg.load_checkpoint_kind, device, fallback=False)
    if loaded is None:
        prefix = "checkpoint" if cfg.load_checkpoint_kind == "latest" else "best"
        raise FileNotFoundError(f"no {prefix}_*.pth under {ckpt_dir} (--load_checkpoint_kind "
                                f"{cfg.load_checkpoint_kind}); train first")
    try:
        actor_critic.load_state_dict(loaded.state["model"])
    except RuntimeError as exc:
        raise CheckpointError(f"{loaded.path}: its network does not match this experiment's configuration "
                              f"({str(exc).splitlines()[0]})") from exc
    return LoadedPolicy(actor_critic, rnn_size, device, loaded.path, int(loaded.state.get("env_steps", 0) or 0))
