"""A trained skill policy as a behaviour policy of phase 0 (collection on the agent's own states)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

import gymnasium as gym
import numpy as np

from common.nethack.actions import ACTIONS
from common.vocabulary import NUM_SKILLS, skill_index
from rl_baseline.collect.config import CollectError
from rl_baseline.collect.policies import Policy
from rl_baseline.models.obs import model_observation, model_observation_space
from rl_baseline.sf.cfg import ConfigError, resolve_experiment_cfg
from rl_baseline.sf.checkpoints import CheckpointError, load_newest

logger = logging.getLogger(__name__)


class CheckpointPolicy(Policy):
    """A trained skill policy from a sample-factory checkpoint (``train_dir/skill_policy/EXP``).

    The network sees the model observation of :mod:`rl_baseline.models.obs` with the
    collected skill's one-hot; its LSTM state is carried through the episode.
    """

    name = "checkpoint"

    def __init__(self, checkpoint_dir: str, skill: str, train_dir: Optional[str] = None,
                 rng: Optional[np.random.Generator] = None, device: str = "cpu") -> None:
        self.skill_id = skill_index(skill)
        self.num_skills = NUM_SKILLS
        self.rng = rng
        self.device_name = device
        self._load(checkpoint_dir, train_dir)
        self.reset()

    def _load(self, checkpoint_dir: str, train_dir: Optional[str]) -> None:
        path = Path(checkpoint_dir)
        if not path.is_dir():
            raise CollectError(f"--checkpoint {checkpoint_dir}: no such directory")
        if not (path / "config.json").exists():
            raise CollectError(f"--checkpoint {checkpoint_dir}: no config.json (not a sample-factory experiment)")
        try:
            import torch  # lazy: optional; without torch this policy is a CollectError
            from sample_factory.model.actor_critic import create_actor_critic  # lazy: optional (sample-factory)
            from sample_factory.model.model_utils import get_rnn_size  # lazy: optional (sample-factory)

            from rl_baseline.sf.env import register_envs  # lazy: optional; imports torch (reward models)
        except ImportError as exc:
            raise CollectError(
                f"policy 'checkpoint' is not available: the skill-policy code cannot be imported ({exc})"
            ) from exc

        # the saved network layout (no reward model or meta-policy is needed to act), then the latest checkpoint
        try:
            cfg = resolve_experiment_cfg(Path(train_dir or path.parent) / path.name, ["--device", "cpu"],
                                         evaluation=False, files=False)
        except ConfigError as exc:
            raise CollectError(f"--checkpoint {checkpoint_dir}: {exc}") from exc
        register_envs()
        self.num_skills = int(cfg.num_skills)
        if self.skill_id >= self.num_skills:
            raise CollectError(
                f"--checkpoint {checkpoint_dir}: the policy knows {self.num_skills} skill(s), "
                f"skill index {self.skill_id} is out of range"
            )
        self.torch = torch
        if self.device_name == "cuda" and not torch.cuda.is_available():
            raise CollectError("--device cuda: no CUDA device is available")
        self.device = torch.device(self.device_name)
        obs_space = model_observation_space(self.num_skills)
        self.actor_critic = create_actor_critic(cfg, obs_space, gym.spaces.Discrete(len(ACTIONS)))
        self.actor_critic.eval()
        try:
            loaded = load_newest(path / "checkpoint_p0", "latest", self.device, fallback=False)
        except CheckpointError as exc:
            raise CollectError(f"--checkpoint {checkpoint_dir}: {exc}") from exc
        if loaded is None:
            raise CollectError(f"--checkpoint {checkpoint_dir}: no checkpoint_*.pth under checkpoint_p0/")
        self.actor_critic.load_state_dict(loaded.state["model"])
        self.actor_critic.model_to_device(self.device)
        self.rnn_size = get_rnn_size(cfg)
        logger.info("checkpoint policy: %s", loaded.path)

    def reset(self) -> None:
        self.rnn = self.torch.zeros([1, self.rnn_size], dtype=self.torch.float32, device=self.device)
        if self.rng is not None:  # actions are sampled with torch's generator: seed it per episode
            self.torch.manual_seed(int(self.rng.integers(2**62)))

    def act(self, obs: dict) -> int:
        from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs  # lazy: optional (sample-factory)

        model_obs = model_observation(obs, self.skill_id, self.num_skills)
        torch = self.torch
        with torch.no_grad():
            batch = {k: torch.from_numpy(np.asarray(v)[None].copy()).to(self.device) for k, v in model_obs.items()}
            out = self.actor_critic(prepare_and_normalize_obs(self.actor_critic, batch), self.rnn)
            self.rnn = out["new_rnn_states"]
            return int(out["actions"].reshape(-1)[0].item())
