"""Zero-shot evaluation of a trained skill policy on one task, in-process.

The newest checkpoint of ``{train_dir}/{experiment}`` (``--load_checkpoint_kind latest``,
the default, or ``best``) is loaded into sample-factory's
actor-critic; ``--eval_num_envs`` environments (the task's meta-policy composing the
skills) are stepped together in this process, without training. The task tracker of
:mod:`rl_baseline.tasks.detectors` decides success/counts; an episode stops when the
game ends or the tracker says the task is over.

Writes ``{train_dir}/{experiment}/eval/{task}_seed{code_seed}.{json,csv,png}`` (and a
``.gif`` of the first episode with ``--save_video True``).
"""
from __future__ import annotations

import csv
import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
from tqdm import tqdm

from rl_baseline.sf.cfg import SkillEnvConfig, finalize_cfg, validate_cfg
from rl_baseline.sf.checkpoints import CheckpointError, checkpoint_dir, load_newest

logger = logging.getLogger(__name__)


@dataclass
class EpisodeResult:
    success: bool
    count: float
    value: float
    length: int
    skill_share: dict[str, float] = field(default_factory=dict)


def mean_stderr(values: list[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    arr = np.asarray(values, dtype=np.float64)
    stderr = float(arr.std(ddof=1) / math.sqrt(len(arr))) if len(arr) > 1 else 0.0
    return float(arr.mean()), stderr


def eval_dir(cfg: Any) -> Path:
    return Path(cfg.train_dir) / cfg.experiment / "eval"


def _action_names() -> Optional[list[str]]:
    try:
        from rl_baseline.nethack.actions import ACTIONS
    except ImportError:
        return None
    return [getattr(a, "name", str(a)) for a in ACTIONS]


def summarize(task: str, measure: str, episodes: list[EpisodeResult], skill_names: tuple[str, ...]) -> dict:
    per_episode = [float(e.success) if measure == "success" else float(e.count) for e in episodes]
    mean, stderr = mean_stderr(per_episode)
    lengths = [e.length for e in episodes]
    shares = {s: float(np.mean([e.skill_share.get(s, 0.0) for e in episodes])) if episodes else 0.0 for s in skill_names}
    return {
        "task": task,
        "measure": measure,
        "episodes": len(episodes),
        "mean": mean,
        "stderr": stderr,
        "success_rate": float(np.mean([e.success for e in episodes])) if episodes else math.nan,
        "mean_count": float(np.mean([e.count for e in episodes])) if episodes else math.nan,
        "episode_lengths": lengths,
        "mean_length": float(np.mean(lengths)) if lengths else math.nan,
        "skill_time_share": shares,
        "per_episode": [
            {"success": bool(e.success), "count": e.count, "value": e.value, "length": e.length, "skill_share": e.skill_share}
            for e in episodes
        ],
    }


def write_results(out_stem: Path, summary: dict, skill_names: tuple[str, ...]) -> list[Path]:
    """JSON (summary + per-episode), CSV (one row per episode, then mean and stderr rows), PNG."""
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    json_path = out_stem.with_suffix(".json")
    tmp = json_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=1))
    os.replace(tmp, json_path)

    csv_path = out_stem.with_suffix(".csv")
    header = ["episode", "success", "count", "value", "length"] + [f"share_{s}" for s in skill_names]
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for i, e in enumerate(summary["per_episode"]):
            w.writerow([i, int(e["success"]), e["count"], e["value"], e["length"]]
                       + [e["skill_share"].get(s, 0.0) for s in skill_names])
        lengths = summary["episode_lengths"]
        w.writerow(["mean", summary["success_rate"], summary["mean_count"], "", summary["mean_length"]]
                   + [summary["skill_time_share"][s] for s in skill_names])
        w.writerow(["stderr", summary["stderr"] if summary["measure"] == "success" else "",
                    summary["stderr"] if summary["measure"] == "count" else "", "",
                    mean_stderr([float(x) for x in lengths])[1]] + ["" for _ in skill_names])

    png_path = out_stem.with_suffix(".png")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 3.5))
    label = "success rate" if summary["measure"] == "success" else "count per episode"
    ax0.bar([summary["task"]], [summary["mean"]], yerr=[summary["stderr"]], capsize=6, color="tab:blue")
    ax0.set_ylabel(label)
    ax0.set_title(f"{summary['task']} ({summary['episodes']} episodes)")
    ax1.bar(list(skill_names), [summary["skill_time_share"][s] for s in skill_names], color="tab:orange")
    ax1.set_ylabel("share of episode steps")
    ax1.set_title("skill time share")
    ax1.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(png_path)
    plt.close(fig)
    return [json_path, csv_path, png_path]


def _save_gif(frames: list[np.ndarray], path: Path) -> None:
    from PIL import Image

    images = [Image.fromarray(f) for f in frames]
    if images:
        images[0].save(path, save_all=True, append_images=images[1:], duration=80, loop=0)


def evaluate(cfg: Any) -> dict:
    """Runs the evaluation described in the module docstring; returns the summary dict."""
    import torch
    from sample_factory.algo.utils.action_distributions import argmax_actions
    from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs
    from sample_factory.cfg.arguments import load_from_checkpoint
    from sample_factory.model.actor_critic import create_actor_critic
    from sample_factory.model.model_utils import get_rnn_size

    from rl_baseline.sf.env import build_skill_env, register_envs
    from rl_baseline.task_names import TASK_MEASURE, check_eval_target
    from rl_baseline.tasks.detectors import make_task_tracker

    task = check_eval_target(cfg.eval_target)
    cfg = load_from_checkpoint(cfg)
    cfg.evaluation = True
    finalize_cfg(cfg)
    validate_cfg(cfg)
    register_envs()

    n_envs = max(1, min(int(cfg.eval_num_envs), int(cfg.eval_episodes)))
    env_cfg = SkillEnvConfig.from_cfg(cfg)
    envs = [build_skill_env(env_cfg) for _ in range(n_envs)]
    skill_names = envs[0].skill_names
    device = torch.device("cuda" if cfg.device == "gpu" and torch.cuda.is_available() else "cpu")
    actor_critic = create_actor_critic(cfg, envs[0].observation_space, envs[0].action_space)
    actor_critic.eval()
    actor_critic.model_to_device(device)
    ckpt_dir = checkpoint_dir(cfg.train_dir, cfg.experiment)
    # the newest checkpoint of --load_checkpoint_kind (latest|best), or an error naming it: results
    # must belong to the checkpoint the user asked for, so no silent fallback to an older one
    loaded = load_newest(ckpt_dir, cfg.load_checkpoint_kind, device, fallback=False)
    if loaded is None:
        prefix = "checkpoint" if cfg.load_checkpoint_kind == "latest" else "best"
        raise FileNotFoundError(f"no {prefix}_*.pth under {ckpt_dir} (--load_checkpoint_kind "
                                f"{cfg.load_checkpoint_kind}); train first")
    state = loaded.state
    try:
        actor_critic.load_state_dict(state["model"])
    except RuntimeError as exc:
        raise CheckpointError(f"{loaded.path}: its network does not match this experiment's configuration "
                              f"({str(exc).splitlines()[0]})") from exc
    logger.info("evaluating %s (env steps %s) on %s", loaded.path, state.get("env_steps"), task)

    action_names = _action_names()
    trackers = [make_task_tracker(task) for _ in range(n_envs)]
    obs = []
    for i, env in enumerate(envs):
        o, info = env.reset(seed=int(cfg.seed or 0) * 100_003 + i)
        trackers[i].reset(info)
        obs.append(o)
    rnn = torch.zeros([n_envs, get_rnn_size(cfg)], dtype=torch.float32, device=device)
    lengths = np.zeros(n_envs, dtype=np.int64)
    active = np.ones(n_envs, dtype=bool)
    started = n_envs
    results: list[EpisodeResult] = []
    frames: list[np.ndarray] = []
    record = bool(cfg.save_video)
    render = None
    if record:
        from rl_baseline.models.render import render_tty_frame as render
    bar = tqdm(total=int(cfg.eval_episodes), desc=f"eval {task}", disable=None)

    with torch.no_grad():
        while len(results) < int(cfg.eval_episodes) and active.any():
            batch = {k: torch.from_numpy(np.stack([np.asarray(o[k]) for o in obs])).to(device) for k in obs[0]}
            normalized = prepare_and_normalize_obs(actor_critic, batch)
            out = actor_critic(normalized, rnn)
            actions = out["actions"]
            if cfg.eval_deterministic_actions:
                actions = argmax_actions(actor_critic.action_distribution())
            rnn = out["new_rnn_states"]
            actions = actions.reshape(n_envs, -1)[:, 0].cpu().numpy()
            for i, env in enumerate(envs):
                if not active[i]:
                    continue
                a = int(actions[i])
                o, _, terminated, truncated, info = env.step(a)
                lengths[i] += 1
                trackers[i].update(info, action_names[a] if action_names else None)
                if record and i == 0 and render is not None:
                    raw = env.last_obs
                    frames.append(np.asarray(render(raw["tty_chars"], raw["tty_colors"])).copy())
                if terminated or truncated or trackers[i].done:
                    tr = trackers[i]
                    share = env.stats.summary(skill_names, env.reward_fn.cache.hit_rate)
                    results.append(EpisodeResult(
                        success=bool(tr.success), count=float(tr.count), value=float(tr.value),
                        length=int(lengths[i]),
                        skill_share={s: share[f"skills/{s}_share"] for s in skill_names},
                    ))
                    bar.update(1)
                    if record and i == 0:
                        record = False
                    lengths[i] = 0
                    rnn[i].zero_()
                    if started < int(cfg.eval_episodes):
                        started += 1
                        o, info = env.reset()
                        tr.reset(info)
                    else:
                        active[i] = False
                obs[i] = o
    bar.close()
    for env in envs:
        env.close()

    summary = summarize(task, TASK_MEASURE[task], results[: int(cfg.eval_episodes)], skill_names)
    summary.update(
        code_seed=int(cfg.code_seed), experiment=cfg.experiment, checkpoint=str(loaded.path),
        env_steps=int(state.get("env_steps", 0) or 0), deterministic=bool(cfg.eval_deterministic_actions),
    )
    stem = eval_dir(cfg) / f"{task}_seed{cfg.code_seed}"
    paths = write_results(stem, summary, skill_names)
    if frames:
        _save_gif(frames, stem.with_suffix(".gif"))
        paths.append(stem.with_suffix(".gif"))
    logger.info("%s: %s %.3f +- %.3f over %d episodes; wrote %s", task, summary["measure"], summary["mean"],
                summary["stderr"], summary["episodes"], ", ".join(str(p) for p in paths))
    return summary
