"""The trained experiment an agreement run reads: its saved settings (``config.json``), the
check that the policy was trained with the skill, its sample-factory configuration for the
collection mode (:func:`load_experiment`: forced skill or the training meta-policy, the
checkpoint, the skill's reward dir) and the skill's reward model (:func:`load_reward`)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from common.vocabulary import NUM_SKILLS, SKILLS
from rl_baseline.sf.cfg import (
    MOTIF_ENV,
    ConfigError,
    check_files,
    meta_policy_task,
    resolve_experiment_cfg,
    uses_meta_policy,
)
from rl_baseline.sf.checkpoints import checkpoint_dir, list_checkpoints

from .config import AgreementConfig, AgreementError


@dataclass
class Experiment:
    """The trained experiment, configured for collection."""

    cfg: Any  # the sample-factory config (argparse namespace)
    skill_id: int  # index of the skill in the policy's skills
    reward_dir: Path
    mode_note: str  # how the episodes were played, in words


def saved_setting(policy_dir: str | Path, key: str) -> Any:
    """One value of the experiment's saved ``config.json`` (None when absent or unreadable)."""
    try:
        saved = json.loads((Path(policy_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return saved.get(key) if isinstance(saved, dict) else None


def saved_num_skills(policy_dir: str | Path) -> Optional[int]:
    """The skill count in the experiment's ``config.json`` (None when it does not say)."""
    try:
        saved = json.loads((Path(policy_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return None  # resolve_experiment_cfg reports an unreadable file
    if not isinstance(saved, dict):
        return None
    if saved.get("num_skills") is not None:
        return int(saved["num_skills"])
    return 1 if saved.get("env") == MOTIF_ENV else (NUM_SKILLS if "env" in saved else None)


def check_trained_skill(policy_dir: str | Path, skill: str, num_skills: Optional[int]) -> None:
    """:class:`AgreementError` naming ``--skill`` when the policy has no such skill."""
    if num_skills is not None and SKILLS.index(skill) >= int(num_skills):
        raise AgreementError(f"--skill {skill}: the policy in {policy_dir} was trained with {num_skills} "
                             f"skill(s) ({', '.join(SKILLS[:int(num_skills)])}), not with {skill}")


def load_experiment(cfg: AgreementConfig) -> Experiment:
    """The experiment's configuration for ``cfg.collect_mode``, checked against ``cfg.skill``.

    Raises :class:`AgreementError` naming the flag or file."""
    skill_id = SKILLS.index(cfg.skill)
    check_trained_skill(cfg.policy_dir, cfg.skill, saved_num_skills(cfg.policy_dir))
    overrides: list[str] = []
    if cfg.device != "auto":
        overrides += ["--device", cfg.device]
    if cfg.max_steps is not None:
        saved_max = saved_setting(cfg.policy_dir, "max_episode_steps")
        limit = int(cfg.max_steps) if saved_max is None else min(int(saved_max), int(cfg.max_steps))
        overrides += ["--max_episode_steps", str(limit)]
    if cfg.collect_mode == "exploration":
        # the training environment: the exploration meta-policy
        overrides += ["--eval_skill", "none"]
    else:
        overrides += ["--eval_skill", cfg.skill]
    try:
        exp = resolve_experiment_cfg(cfg.policy_dir, overrides, evaluation=cfg.collect_mode != "exploration",
                                     files=False)
    except ConfigError as exc:
        raise AgreementError(str(exc)) from exc
    check_trained_skill(cfg.policy_dir, cfg.skill, int(exp.num_skills))
    kind = getattr(exp, "load_checkpoint_kind", "latest")
    ckpt_dir = checkpoint_dir(exp.train_dir, exp.experiment)
    if not list_checkpoints(ckpt_dir, kind):
        prefix = "checkpoint" if kind == "latest" else "best"
        raise AgreementError(f"--policy_dir {cfg.policy_dir}: no {prefix}_*.pth under {ckpt_dir}; train first")
    try:
        exp.reward_thresholds = check_files(exp)
    except ConfigError as exc:
        raise AgreementError(f"--policy_dir {cfg.policy_dir}: {exc}") from exc
    exp.resolved = True
    if cfg.reward_dir:
        reward_dir = Path(cfg.reward_dir)
    else:
        dirs = list(exp.reward_dirs)
        if len(dirs) <= skill_id:
            raise AgreementError(f"the experiment in {cfg.policy_dir} has {len(dirs)} reward dir(s) "
                                 f"(--reward_dir {exp.reward_dir!r}), none for {cfg.skill}; pass --reward_dir")
        reward_dir = Path(dirs[skill_id])
    if cfg.collect_mode == "skill":
        note = f"policy held on {cfg.skill} for whole episodes (forced skill, no meta-policy)"
    elif uses_meta_policy(exp):
        note = f"training meta-policy ({meta_policy_task(exp)}, code seed {exp.code_seed}) composing the skills"
    else:
        note = f"no meta-policy in this experiment: {SKILLS[0]} held for whole episodes"
    return Experiment(exp, skill_id, reward_dir, note)


def load_reward(reward_dir: Path, device: str) -> Any:
    """The skill's reward model; :class:`AgreementError` naming the folder when it cannot load."""
    from rlaif.reward_model import RewardCheckpointError, load_skill_reward  # lazy: pulls in torch

    try:
        return load_skill_reward(reward_dir, device=device)
    except (FileNotFoundError, RewardCheckpointError, ValueError) as exc:
        raise AgreementError(f"reward model of the skill (--reward_dir {reward_dir}): {exc}") from exc
