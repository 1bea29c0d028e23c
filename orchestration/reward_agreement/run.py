"""The whole run (:func:`run_agreement`): check the flags, load the experiment and the reward model,
play the episodes and form the pairs (:func:`collect`), label them, score the on-policy and
offline sections, and write ``{skill}_{backend}.json`` (:func:`summary_dict`),
``{skill}_{backend}.md`` (:func:`markdown_table`) and the data folder."""
from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from common.atomic_io import atomic_write_text
from common.estimates import pair_count
from common.vocabulary import SKILLS
from rl_baseline.sf.cfg import SkillEnvConfig
from rl_baseline.sf.checkpoints import CheckpointError
from rl_baseline.sf.policy import load_policy
from rlaif.dataset import ObservationDataset
from rlaif.preferences import label_counts, label_shares

from .annotation import annotate, backend_info
from .config import AgreementConfig, AgreementError, check_config
from .experiment import Experiment, load_experiment, load_reward
from .offline import offline_section, offline_split
from .pairs import form_pairs, sample_weights
from .rollouts import Rollouts, collect_rollouts, select_skill_steps
from .scoring import _mean, agreement_stats, one_step_depth_change, pair_scores, score_samples

# the package's logger: log lines keep the name they had before the package was split
logger = logging.getLogger(__package__)


@dataclass
class CollectedData:
    """What the episodes gave: the skill's steps and the pairs formed from them."""

    rollouts: Rollouts  # every step played
    selected: Rollouts  # the steps scored (the skill's, or all: see used_all_steps)
    used_all_steps: bool
    order: np.ndarray  # indices into ``selected``: samples 2k, 2k+1 are pair k
    checkpoint: str
    env_steps: int


def collect(cfg: AgreementConfig, exp: Experiment) -> CollectedData:
    """Plays the episodes with the experiment's policy and forms the pairs."""
    import torch  # lazy: only when episodes are played; the package imports without torch

    from rl_baseline.sf.env import build_skill_env, register_envs  # lazy: pulls in NLE and torch

    register_envs()
    torch.manual_seed(int(cfg.seed))
    env_cfg = SkillEnvConfig.from_cfg(exp.cfg)
    n_envs = max(1, min(int(cfg.num_envs), int(cfg.episodes)))
    envs = [build_skill_env(env_cfg) for _ in range(n_envs)]
    try:
        try:
            loaded = load_policy(exp.cfg, envs[0].observation_space, envs[0].action_space)
        except (FileNotFoundError, CheckpointError) as exc:
            raise AgreementError(f"--policy_dir {cfg.policy_dir}: {exc}") from exc
        logger.info("collecting %d episode(s) over %d game(s) with %s (%s)", cfg.episodes, n_envs, loaded.checkpoint,
                    exp.mode_note)
        rollouts = collect_rollouts(envs, loaded.acting(n_envs, deterministic=cfg.deterministic), cfg.episodes,
                                    seed=cfg.seed, progress=cfg.progress)
    finally:
        for env in envs:
            env.close()
    selected, used_all = select_skill_steps(rollouts, exp.skill_id, cfg.collect_mode)
    if used_all:
        logger.warning("%s was never active in %d exploration episode(s) (%d steps): using all steps", cfg.skill,
                       rollouts.episodes, rollouts.steps)
    if selected.steps < 2:
        raise AgreementError(
            f"{selected.steps} observation(s) of {cfg.skill} collected in {rollouts.episodes} episode(s) of "
            f"{rollouts.steps} steps; play more with --episodes or --max_steps"
        )
    order = form_pairs(selected.steps, cfg.num_pairs, cfg.seed, sample_weights(selected, cfg.pair_sampling))
    return CollectedData(rollouts, selected, used_all, order, str(loaded.checkpoint), loaded.env_steps)


def on_policy_section(reward: Any, data: CollectedData, labels: np.ndarray) -> dict[str, Any]:
    """Agreement (training's inputs and the runtime's), label shares and mean scores on-policy."""
    sel, order = data.selected, data.order
    scores = score_samples(reward, sel.messages[:, 1], one_step_depth_change(sel.stats))
    rl_scores = score_samples(reward, sel.messages[:, 1], sel.rl_depth_change)
    main = agreement_stats(scores[order[0::2]], scores[order[1::2]], labels)
    rl = agreement_stats(rl_scores[order[0::2]], rl_scores[order[1::2]], labels)
    return {
        **main.to_dict(),
        "agreement_rl_input": rl.to_dict(),
        "label_counts": label_counts(labels),
        "label_shares": label_shares(labels),
        "mean_score": _mean(scores[order]),
        "mean_score_all_steps": _mean(scores),
        "mean_score_rl_input_all_steps": _mean(rl_scores),
        "distinct_messages": int(len({bytes(m) for m in sel.messages[:, 1]})),
    }


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.{digits}f}"
    return str(value)


def _agreement_cell(section: dict[str, Any]) -> str:
    if section.get("source") == "metrics_csv":
        return f"{_fmt(section.get('agreement'))} (metrics.csv val_acc, {pair_count(section.get('val_pairs'))})"
    text = _fmt(section.get("agreement"))
    if text != "-" and not math.isnan(section.get("stderr", math.nan)):
        text += f" ± {_fmt(section['stderr'])}"
    return text


def markdown_table(summary: dict[str, Any]) -> str:
    """The results as a small Markdown table (printed and written as ``{skill}_{backend}.md``)."""
    on, off = summary["on_policy"], summary["offline"]
    backend = summary["backend"]
    columns = [("on-policy", on), ("offline validation", off)]
    relabel = off.get("relabelled")
    if relabel:
        columns.append((f"offline validation, {backend['name']} labels", relabel))

    def row(name: str, cells: list[str]) -> str:
        return f"| {name} | " + " | ".join(cells) + " |"

    def get(sec: dict, key: str, sub: Optional[str] = None) -> str:
        value = sec.get(key)
        if sub is not None:
            value = (value or {}).get(sub)
        return _fmt(value)

    off_annotator = f"{off.get('annotator', '-')} (training labels)" if off.get("source") == "validation_split" else "-"
    annotators = [f"{backend['name']}" + ("" if backend["is_llm"] else " (stand-in, not an LLM)"), off_annotator]
    if relabel:
        annotators.append(annotators[0])
    lines = [
        f"## Reward-model agreement: {summary['skill']} ({backend['description']})",
        "",
        f"policy `{summary['policy']['policy_dir']}` ({summary['policy']['env_steps']} env steps); "
        f"{summary['collection']['mode_note']}; {summary['collection']['episodes']} episode(s), "
        f"{summary['collection']['skill_steps']} {summary['skill']} step(s) of {summary['collection']['env_steps']}"
        + (" (the skill was never active: ALL steps used)" if summary["collection"]["used_all_steps"] else ""),
        f"reward model `{summary['reward_model']['reward_dir']}`; offline: {off.get('source')}",
        "",
        "| | " + " | ".join(name for name, _ in columns) + " |",
        "|---|" + "---|" * len(columns),
        row("annotator", annotators),
        row("pairs", [get(sec, "pairs") for _, sec in columns]),
        row("decided pairs", [get(sec, "decided") for _, sec in columns]),
        row("agreement", [_agreement_cell(sec) for _, sec in columns]),
    ]
    for label in ("first", "second", "tie", "unknown"):
        lines.append(row(f"share {label}", [get(sec, "label_shares", label) for _, sec in columns]))
    lines.append(row("mean RM score", [get(sec, "mean_score") for _, sec in columns]))
    rl = on.get("agreement_rl_input", {})
    lines += ["", f"agreement with the runtime's depth input (depth since the skill started): "
                  f"{_agreement_cell(rl)}; mean RM score over all "
                  f"{'' if summary['collection']['used_all_steps'] else summary['skill'] + ' '}steps: "
                  f"{_fmt(on.get('mean_score_all_steps'))}"]
    if not backend["is_llm"]:
        lines.append(f"NOTE: {backend['note']}.")
    return "\n".join(lines) + "\n"


def summary_dict(cfg: AgreementConfig, exp: Experiment, reward: Any, data: CollectedData,
                 on_policy: dict[str, Any], offline: dict[str, Any], annotation: dict[str, Any]) -> dict[str, Any]:
    """The JSON written next to the table."""
    roll = data.rollouts
    share = {s: float(np.mean(roll.skill_ids == k)) if roll.steps else 0.0
             for k, s in enumerate(SKILLS[: int(exp.cfg.num_skills)])}
    return {
        "skill": cfg.skill,
        "backend": backend_info(cfg.annotator.backend),
        "annotation": annotation,
        "policy": {"policy_dir": str(cfg.policy_dir), "checkpoint": data.checkpoint, "env_steps": data.env_steps,
                   "num_skills": int(exp.cfg.num_skills), "deterministic": bool(cfg.deterministic)},
        "reward_model": {"reward_dir": str(exp.reward_dir), "checkpoint": str(reward.checkpoint_path),
                         "arch": getattr(reward.model.config, "arch", None), "trained_skill": reward.skill},
        "collection": {
            "mode": cfg.collect_mode, "mode_note": exp.mode_note, "episodes": roll.episodes,
            "episode_lengths": roll.episode_lengths, "env_steps": roll.steps,
            "max_episode_steps": int(exp.cfg.max_episode_steps), "num_envs": max(1, min(cfg.num_envs, cfg.episodes)),
            "seed": cfg.seed, "skill_steps": int(np.count_nonzero(roll.skill_ids == exp.skill_id)),
            "observations": data.selected.steps, "used_all_steps": data.used_all_steps,
            "note": (f"{cfg.skill} was never active: all steps were used" if data.used_all_steps else ""),
            "skill_time_share": share, "pair_sampling": cfg.pair_sampling,
        },
        "on_policy": on_policy,
        "offline": offline,
        "definition": ("agreement = share of pairs labelled first/second better (ties and unknowns left out) where "
                       "the reward model scores the preferred sample strictly higher (equal scores count as "
                       "'first', as in the reward training's val_acc); samples are scored on their current "
                       "message and one-step depth change, as in reward training"),
    }


def run_agreement(cfg: AgreementConfig) -> dict[str, Any]:
    """The whole run (module docstring); returns the summary and writes the files."""
    check_config(cfg)
    exp = load_experiment(cfg)
    reward = load_reward(exp.reward_dir, cfg.device)
    if reward.skill and reward.skill != cfg.skill:
        logger.warning("%s holds a reward model trained for %s, used here for %s", exp.reward_dir, reward.skill,
                       cfg.skill)
    split, reason = offline_split(reward.checkpoint_path)
    if split is None:
        logger.warning("offline validation split not available (%s); falling back to metrics.csv", reason)
    data = collect(cfg, exp)

    meta = {"source": "on-policy", "policy_dir": str(cfg.policy_dir), "checkpoint": data.checkpoint,
            "collect_mode": cfg.collect_mode, "skill": cfg.skill, "seed": cfg.seed}
    datasets = [data.selected.dataset(data.order, meta)]
    relabel_split = None
    if cfg.relabel_offline and split is not None:
        k = min(cfg.num_pairs, split.dataset.num_pairs)
        chosen = np.sort(np.random.default_rng([int(cfg.seed) & 0xFFFFFFFF, 0x4F46]).choice(
            split.dataset.num_pairs, size=k, replace=False))
        samples = np.stack([2 * chosen, 2 * chosen + 1], axis=1).reshape(-1)
        relabel_split = ObservationDataset(split.dataset.messages[samples], split.dataset.stats[samples],
                                           {"source": str(split.dataset_path)})
        datasets.append(relabel_split)
    elif cfg.relabel_offline:
        logger.warning("--relabel_offline: the offline validation split is not available (%s)", reason)

    out_dir = cfg.output_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{cfg.stem}.", dir=out_dir))
    work.chmod(out_dir.stat().st_mode & 0o777)  # mkdtemp makes it private; it becomes the data folder
    try:
        labels, annotation = annotate(datasets, cfg.skill, cfg.annotator, cfg.seed, work, cfg.progress)
        on_policy = on_policy_section(reward, data, labels[0])
        offline = offline_section(reward, exp.reward_dir, split, reason)
        if relabel_split is not None:
            first, second = pair_scores(reward, relabel_split)
            offline["relabelled"] = {**agreement_stats(first, second, labels[1]).to_dict(),
                                     "label_counts": label_counts(labels[1]),
                                     "label_shares": label_shares(labels[1]),
                                     "mean_score": _mean(np.concatenate([first, second]))}
        summary = summary_dict(cfg, exp, reward, data, on_policy, offline, annotation)
        data_dir = out_dir / f"{cfg.stem}_data"
        if data_dir.exists():
            shutil.rmtree(data_dir)
        os.replace(work, data_dir)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    json_path, md_path = out_dir / f"{cfg.stem}.json", out_dir / f"{cfg.stem}.md"
    summary["files"] = {"json": str(json_path), "markdown": str(md_path), "data": str(data_dir)}
    table = markdown_table(summary)
    summary["table"] = table
    atomic_write_text(json_path, json.dumps(summary, indent=1, default=_json_default))
    atomic_write_text(md_path, table)
    logger.info("wrote %s, %s and %s", json_path, md_path, data_dir)
    return summary


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
