"""The evaluation loop, its two rule sets' summaries and the files they are written to: no sample-factory.

:func:`run_evaluation` steps environments with a policy under one of two protocols (``release``, the
authors' :mod:`rl_baseline.tasks.release_protocol`; ``project``, this project's
:mod:`rl_baseline.tasks.detectors`), :func:`summarize` turns the finished episodes into the evaluation's
JSON and :func:`write_results` writes it with its CSV and PNG. The format is described in
:mod:`rl_baseline.sf.evaluate`, the evaluation of a trained skill policy, which runs this loop on the
skill environments; the LLM policy (:mod:`rl_baseline.baselines.llm_policy.run`) runs the same loop on
Monk games, so both write one format that the report, the baselines and the tests read.

A floor of its own, below the method's entry points (:mod:`rl_baseline.sf`) and the baselines, above
the environments and the tasks: it needs neither sample-factory nor a baseline.

One module on purpose: the episode loop, the two rule sets' summaries and the files they are written
to define one JSON format together; splitting them would spread that format over several files.
"""
from __future__ import annotations

import csv
import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
from tqdm import tqdm

from common.atomic_io import atomic_write_json
from common.estimates import interval_method, mean_interval95
from common.progress import PROGRESS_INTERVAL_S, ProgressLog, format_duration
from rl_baseline.envs.seeding import evaluation_game_seed
from rl_baseline.tasks.detectors import ending_of, make_task_tracker, step_messages
from rl_baseline.tasks.release_protocol import PROTOCOLS, RELEASE_RULES, make_release_tracker, release_window

logger = logging.getLogger(__name__)

@dataclass
class EpisodeResult:
    """One finished episode: the project's definitions (success/count/value) and the release's."""

    success: bool
    count: float
    value: float
    length: int
    skill_share: dict[str, float] = field(default_factory=dict)
    #: :meth:`rl_baseline.tasks.release_protocol.ReleaseTracker.episode_record` (None: not tracked)
    release: Optional[dict] = None
    #: "game" (the game ended), "step_limit", "release" or "project" (that rule said done)
    ended_by: str = "game"
    #: :func:`rl_baseline.tasks.detectors.ending_of`: a death's cause, or how else the episode ended
    ending: str = ""


@dataclass
class RunResult:
    episodes: list[EpisodeResult]
    protocol: str
    num_envs: int
    env_steps_run: int
    #: episodes in progress when the step budget ran out (dropped, as in the release)
    unfinished: int = 0
    env_step_budget: Optional[int] = None
    #: exceptions the task's meta-policy raised (each was caught, logged and replaced by a fallback)
    meta_policy_errors: int = 0


#: env steps per second the start line's time estimate assumes: the learn preset's evaluations ran 300,000 env steps
#: in about 3.5 min with 16 games on 2 CPU cores (two tasks at a time, one torch thread each); other machines and
#: numbers of games differ, so the progress lines give the measured rate
ASSUMED_EVAL_ENV_STEPS_PER_S = 1_400


def evaluation_plan(protocol: str, num_envs: int, episodes: int, env_steps: int, stats_avg: int,
                    max_episode_steps: Optional[int] = None, saved: Optional[dict] = None) -> str:
    """What an evaluation will do, for its start line: the protocol, the games, the env-step budget (or the
    episodes, with the env steps they can take at most), the time that takes at
    :data:`ASSUMED_EVAL_ENV_STEPS_PER_S`, said to be assumed, and which of those flags the run's config.json
    chose (``saved``, as ``rl_baseline.sf.cfg`` lists them)."""
    if protocol == "release":
        text = (f"release protocol, {num_envs} games, {env_steps:,} env steps in all (the mean over the last "
                f"{stats_avg:,} finished episodes)")
        budget, bound = env_steps, "about"
    else:
        budget = episodes * max_episode_steps if max_episode_steps else None
        text = f"project protocol, {episodes} episodes over {num_envs} games"
        if budget:
            text += f" (at most {budget:,} env steps: {max_episode_steps:,} per episode)"
        bound = "at most about"
    if budget:
        text += (f"; {bound} {format_duration(budget / ASSUMED_EVAL_ENV_STEPS_PER_S)} at an assumed "
                 f"{ASSUMED_EVAL_ENV_STEPS_PER_S:,} env steps/s (measured with 16 games on 2 CPU cores; this run's "
                 "own rate follows in its progress)")
    unused = ("eval_episodes",) if protocol == "release" else ("eval_env_steps", "eval_stats_avg")
    chosen = {k: v for k, v in (saved or {}).items() if k not in unused}
    if chosen:
        text += "; as the run's config.json chose: " + " ".join(f"--{k} {v}" for k, v in chosen.items())
    return text


def mean_stderr(values: Sequence[float]) -> tuple[float, float]:
    if len(values) == 0:
        return math.nan, math.nan
    arr = np.asarray(values, dtype=np.float64)
    stderr = float(arr.std(ddof=1) / math.sqrt(len(arr))) if len(arr) > 1 else 0.0
    return float(arr.mean()), stderr


# ----------------------------------------------------------------------------- the loop


def _skill_share(env: Any, skill_names: Sequence[str]) -> dict[str, float]:
    stats = getattr(env, "stats", None)
    if stats is None:
        return {}
    cache = getattr(getattr(env, "reward_fn", None), "cache", None)
    share = stats.summary(tuple(skill_names), getattr(cache, "hit_rate", 0.0))
    return {s: float(share.get(f"skills/{s}_share", 0.0)) for s in skill_names}


def run_evaluation(
    envs: Sequence[Any],
    policy: Any,
    task: str,
    protocol: str = "release",
    episodes: int = 100,
    env_steps: int = 3_000_000,
    action_names: Optional[Sequence[str]] = None,
    seed: int = 0,
    skill_names: Sequence[str] = (),
    frame_fn: Optional[Callable[[Any], None]] = None,
    progress: bool = True,
    progress_interval_s: float = PROGRESS_INTERVAL_S,
) -> RunResult:
    """Steps ``envs`` with ``policy`` (``act(obs_list) -> actions``, ``episode_ended(i)``; a policy with
    ``takes_active_mask = True`` gets ``act(obs_list, active)``, the games still running) under
    ``protocol``: "release" runs ``env_steps`` env steps in all, resetting games as their
    episodes end; "project" runs until ``episodes`` episodes have finished. Both trackers
    follow every episode; the protocol's own decides when an episode ends. Episode ``k`` plays the
    game of seed ``seed * 100_003 + k`` (:mod:`rl_baseline.envs.seeding`).

    ``frame_fn(env)`` is called after every step of the first episode of game 0 (video). With ``progress``, a
    bar on a terminal, else a logging line every ``progress_interval_s`` seconds
    (:class:`common.progress.ProgressLog`)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}")
    n = len(envs)
    budget = int(env_steps) if protocol == "release" else None
    target = int(episodes) if protocol == "project" else None
    project = [make_task_tracker(task) for _ in range(n)]
    release = [make_release_tracker(task) for _ in range(n)]

    def start(i: int, info: dict) -> None:
        project[i].reset(info)
        release[i].reset(info)

    obs: list[Any] = []
    for i, env in enumerate(envs):
        o, info = env.reset(seed=evaluation_game_seed(seed, i))
        start(i, info)
        obs.append(o)
    lengths = np.zeros(n, dtype=np.int64)
    active = np.ones(n, dtype=bool)
    started = n
    steps_run = 0
    last_messages: list[list[str]] = [[] for _ in range(n)]  # each game's last few, for how it ended
    results: list[EpisodeResult] = []
    recording = frame_fn is not None
    bar = tqdm(total=budget if budget is not None else target, desc=f"eval {task} ({protocol})",
               disable=None if progress else True)
    # tqdm is silent without a terminal (a batch job, a pipeline's log file): lines every few seconds instead
    log = ProgressLog(logger, f"eval {task} ({protocol})", budget if budget is not None else target,
                      "env steps" if budget is not None else "episodes", enabled=progress,
                      interval_s=progress_interval_s)

    def out_of_budget() -> bool:
        return budget is not None and steps_run >= budget

    # a policy that pays per question (the LLM policy) is told which games still run
    with_mask = bool(getattr(policy, "takes_active_mask", False))
    while active.any() and not out_of_budget() and (target is None or len(results) < target):
        actions = policy.act(obs, active.copy()) if with_mask else policy.act(obs)
        steps_before = steps_run
        for i, env in enumerate(envs):
            if not active[i]:
                continue
            if out_of_budget():
                break
            a = int(actions[i])
            name = action_names[a] if action_names is not None and 0 <= a < len(action_names) else None
            o, _, terminated, truncated, info = env.step(a)
            steps_run += 1
            lengths[i] += 1
            pre = getattr(env, "preconds", None)
            if pre is not None:
                info["skill_preconditions"] = tuple(bool(p) for p in pre)
            project[i].update(info, name)
            release[i].update(info, name)
            messages = step_messages(info)
            if messages:
                last_messages[i] = (last_messages[i] + messages)[-4:]
            if recording and i == 0:
                frame_fn(env)
            ended_by = None
            if truncated or (terminated and _aborted(info)):
                ended_by = "step_limit"
            elif terminated:
                ended_by = "game"
            elif protocol == "release" and release[i].done:
                ended_by = "release"
            elif protocol == "project" and project[i].done:
                ended_by = "project"
            if ended_by is not None:
                tr = project[i]
                results.append(EpisodeResult(
                    success=bool(tr.success), count=float(tr.count), value=float(tr.value),
                    length=int(lengths[i]), skill_share=_skill_share(env, skill_names),
                    release=release[i].episode_record(), ended_by=ended_by,
                    ending=ending_of(last_messages[i], ended_by),
                ))
                last_messages[i] = []
                if target is not None:
                    bar.update(1)
                if i == 0:
                    recording = False
                lengths[i] = 0
                policy.episode_ended(i)
                if target is None or started < target:
                    o, info = env.reset(seed=evaluation_game_seed(seed, started))
                    started += 1
                    start(i, info)
                else:
                    active[i] = False
            obs[i] = o
        if budget is not None:
            bar.update(steps_run - steps_before)
        log.update(steps_run if budget is not None else len(results), len(results), env_steps=steps_run)
    bar.close()
    unfinished = int(np.count_nonzero(active & (lengths > 0))) if budget is not None else 0
    if target is not None:
        results = results[:target]
    errors = sum(int(getattr(getattr(env, "meta_policy", None), "num_errors", 0) or 0) for env in envs)
    return RunResult(episodes=results, protocol=protocol, num_envs=n, env_steps_run=steps_run,
                     unfinished=unfinished, env_step_budget=budget, meta_policy_errors=errors)


def _aborted(info: dict) -> bool:
    """NLE's end status ABORTED (-1): the step limit ended the episode. The Monk environment reports it as
    ``terminated`` on the step that reaches ``max_episode_steps`` (it quits the game then), so ``truncated``
    alone misses it; the forced-skill evaluation reads the status the same way."""
    status = info.get("end_status")
    return status is not None and int(status) == -1


# ----------------------------------------------------------------------------- summaries


def _interval(values: Sequence[float], binary: bool) -> dict:
    """The 95% interval of a section's mean: Wilson for 0/1 values, a bootstrap percentile interval for counts."""
    _, lo, hi = mean_interval95(values, binary=binary)
    return {"ci95": [lo, hi], "ci_method": interval_method(binary)}


def _episode_dict(e: EpisodeResult, in_window: bool) -> dict:
    return {"success": bool(e.success), "count": e.count, "value": e.value, "length": e.length,
            "skill_share": e.skill_share, "ended_by": e.ended_by, "ending": e.ending, "release": e.release,
            "in_window": bool(in_window)}


def project_section(task: str, measure: str, episodes: Sequence[EpisodeResult]) -> dict:
    """The project's definitions over ``episodes``."""
    per_episode = [float(e.success) if measure == "success" else float(e.count) for e in episodes]
    mean, stderr = mean_stderr(per_episode)
    return {
        "definitions": "rl_baseline.tasks.detectors",
        "measure": measure,
        "episodes": len(episodes),
        "mean": mean,
        "stderr": stderr,
        **_interval(per_episode, binary=measure == "success"),
        "success_rate": float(np.mean([e.success for e in episodes])) if episodes else math.nan,
        "mean_count": float(np.mean([e.count for e in episodes])) if episodes else math.nan,
    }


def release_section(task: str, episodes: Sequence[EpisodeResult], stats_avg: int) -> tuple[dict, list[int]]:
    """The release's statistic over ``episodes`` (in the order they finished); also returns the
    indices of the episodes whose value is in the metric's window."""
    rule = RELEASE_RULES[task]
    records = [e.release for e in episodes if e.release is not None]
    if len(records) != len(episodes):
        return {"rule": rule.summary, "metric": rule.metric, "episodes": 0, "mean": math.nan,
                "stderr": math.nan}, []
    win = release_window(task, records, stats_avg)
    mean, stderr = mean_stderr(win.values)
    last = records[-win.stats_avg:] if records else []
    section = {
        "definitions": "rl_baseline.tasks.release_protocol",
        "rule": rule.summary,
        "metric": rule.metric,
        "stats_avg": win.stats_avg,
        "finished_episodes": win.finished,
        "episodes": len(win.values),
        "mean": mean,
        "stderr": stderr,
        **_interval(win.values, binary=rule.count_key is None),  # reached (0/1) or a count
        "reached_rate": win.reached_rate,
        "reached_episodes": len(win.reached),
    }
    if rule.every_step:
        # where the release's "#overview" keys, typed on every checking step, would have answered a prompt
        records = [r for r in last if "overview_keys_into_prompt" in r]
        section["overview_keys_into_prompt_episodes"] = sum(1 for r in records if r["overview_keys_into_prompt"])
        section["overview_keys_into_prompt_steps"] = int(sum(r["overview_keys_into_prompt"] for r in records))
    if rule.count_key is not None:
        section["seen_key"] = rule.seen_key
        section["seen_rate"] = float(np.mean([bool(r[rule.seen_key]) for r in last])) if last else math.nan
        section["mean_count_all"] = (float(np.mean([r["counts"][rule.count_key] for r in last]))
                                     if last else math.nan)
    return section, win.indices


def depth_section(episodes: Sequence[EpisodeResult]) -> dict:
    """Where the episodes got to (from the release tracker, which follows every step of every task): the
    deepest level's mean and distribution, the share that entered the Gnomish Mines, stair descents per
    episode. A navigation task that scores 0 is read here: how many episodes got near its level at all."""
    records = [e.release for e in episodes if e.release is not None and "max_depth" in e.release]
    if not records:
        return {"episodes": 0}
    deepest = [int(r["max_depth"]) for r in records]
    return {
        "episodes": len(records),
        "mean_max_depth": float(np.mean(deepest)),
        "max_depth_counts": {str(d): deepest.count(d) for d in sorted(set(deepest))},
        "entered_mines_rate": float(np.mean([bool(r["entered_mines"]) for r in records])),
        "descents_per_episode": float(np.mean([int(r["descents"]) for r in records])),
        # steps that end with a question, a text prompt or a --More-- open for the agent's next key
        "prompt_open_share": (float(sum(int(r.get("prompt_open_steps", 0)) for r in records)
                                    / max(1, sum(int(r.get("steps", 0)) for r in records)))),
    }


def summarize(task: str, measure: str, episodes: list[EpisodeResult], skill_names: tuple[str, ...],
              protocol: str = "project", stats_avg: int = 1000, run: Optional[RunResult] = None) -> dict:
    """The evaluation summary (the JSON's content, see the module docstring).

    Under "project" the headline is the project's definitions over all episodes; under
    "release" it is the release's statistic, and the project's definitions are given over the
    same last ``stats_avg`` finished episodes."""
    release, window_idx = release_section(task, episodes, stats_avg)
    in_window = set(window_idx)
    if protocol == "release":
        recent = list(episodes[-int(stats_avg):])
        project = project_section(task, measure, recent)
        project["over"] = f"the last {len(recent)} finished episodes"
        head = release
        success_rate = release.get("reached_rate", math.nan)
        mean_count = release["mean"] if measure == "count" else math.nan
        shown = recent
    else:
        project = project_section(task, measure, episodes)
        project["over"] = f"all {len(episodes)} episodes"
        head = project
        success_rate, mean_count = project["success_rate"], project["mean_count"]
        shown = list(episodes)
    lengths = [e.length for e in shown]
    depth = depth_section(shown)
    shares = {s: float(np.mean([e.skill_share.get(s, 0.0) for e in shown])) if shown else 0.0 for s in skill_names}
    summary = {
        "task": task,
        "measure": measure,
        "protocol": protocol,
        "episodes_ended_by": protocol,
        "episodes": head["episodes"],
        "mean": head["mean"],
        "stderr": head["stderr"],
        "ci95": head.get("ci95", [math.nan, math.nan]),
        "ci_method": head.get("ci_method"),
        "success_rate": success_rate,
        "mean_count": mean_count,
        "episode_lengths": lengths,
        "mean_length": float(np.mean(lengths)) if lengths else math.nan,
        # how the headline's episodes ended: a task's rule, the step limit, or a death and its cause
        # (an episode read back from a JSON of before has no ending: its cause is then unknown)
        "endings": dict(Counter(e.ending or ending_of([], e.ended_by) for e in shown).most_common()),
        "skill_time_share": shares,
        "depth": depth,
        "release": release,
        "project": project,
        "per_episode": [_episode_dict(e, i in in_window) for i, e in enumerate(episodes)],
    }
    if run is not None:
        summary["run"] = {
            "num_envs": run.num_envs,
            "env_step_budget": run.env_step_budget,
            "env_steps_run": run.env_steps_run,
            "finished_episodes": len(run.episodes),
            "unfinished_episodes": run.unfinished,
        }
        summary["meta_policy_errors"] = int(run.meta_policy_errors)
    return summary


def write_results(out_stem: Path, summary: dict, skill_names: tuple[str, ...]) -> list[Path]:
    """JSON (summary + per-episode), CSV (one row per finished episode, then mean and stderr
    rows of the project's columns over the headline's episodes), PNG."""
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    json_path = out_stem.with_suffix(".json")
    atomic_write_json(json_path, summary)

    release = summary.get("release") or {}
    project = summary.get("project") or {}
    csv_path = out_stem.with_suffix(".csv")
    header = (["episode", "success", "count", "value", "length"] + [f"share_{s}" for s in skill_names]
              + ["ended_by", "ending", "release_reached", "release_count", "release_seen", "in_window"])
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for i, e in enumerate(summary["per_episode"]):
            rel = e.get("release") or {}
            w.writerow([i, int(e["success"]), e["count"], e["value"], e["length"]]
                       + [e["skill_share"].get(s, 0.0) for s in skill_names]
                       + [e.get("ended_by", ""), e.get("ending", ""), int(bool(rel.get("reached"))) if rel else "",
                          "" if rel.get("count") is None else rel.get("count"),
                          "" if rel.get("seen") is None else int(bool(rel.get("seen"))),
                          int(bool(e.get("in_window", True)))])
        lengths = summary["episode_lengths"]
        measure = summary["measure"]
        w.writerow(["mean", project.get("success_rate", summary["success_rate"]),
                    project.get("mean_count", summary["mean_count"]), "", summary["mean_length"]]
                   + [summary["skill_time_share"][s] for s in skill_names]
                   + ["", "", release.get("reached_rate", ""),
                      release.get("mean", "") if measure == "count" else "", "", ""])
        p_stderr = project.get("stderr", summary["stderr"])
        w.writerow(["stderr", p_stderr if measure == "success" else "", p_stderr if measure == "count" else "", "",
                    mean_stderr([float(x) for x in lengths])[1]] + ["" for _ in skill_names]
                   + ["", "", release.get("stderr", "") if measure == "success" else "",
                      release.get("stderr", "") if measure == "count" else "", "", ""])

    png_path = out_stem.with_suffix(".png")
    import matplotlib  # lazy: the plot only; matplotlib takes a second to import, most callers never plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: after matplotlib.use("Agg") picks the backend

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 3.5))
    label = "success rate" if summary["measure"] == "success" else "count per episode"
    bars = [(name, sec) for name, sec in (("release", release), ("project", project)) if sec]
    if not bars:
        bars = [("result", {"mean": summary["mean"], "stderr": summary["stderr"]})]
    names = [f"{n} ({sec.get('episodes', '?')} ep.)" for n, sec in bars]
    means = [0.0 if not np.isfinite(sec.get("mean", math.nan)) else sec["mean"] for _, sec in bars]
    errs = [0.0 if not np.isfinite(sec.get("stderr", math.nan)) else sec["stderr"] for _, sec in bars]
    colours = ["tab:blue" if n.startswith(summary.get("protocol", "")) else "tab:gray" for n in names]
    ax0.bar(names, means, yerr=errs, capsize=6, color=colours)
    ax0.set_ylabel(label)
    ax0.set_title(f"{summary['task']} (episodes ended by {summary.get('episodes_ended_by', 'project')})")
    ax1.bar(list(skill_names), [summary["skill_time_share"][s] for s in skill_names], color="tab:orange")
    ax1.set_ylabel("share of episode steps")
    ax1.set_title("skill time share")
    ax1.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(png_path)
    plt.close(fig)
    return [json_path, csv_path, png_path]


#: what every evaluation merged into one must share (its JSON's keys)
MERGE_MUST_AGREE = ("task", "measure", "protocol", "experiment", "checkpoint", "env_steps", "policy", "code_seed",
                    "game_clock", "deterministic")


class MergeError(ValueError):
    """Evaluations that cannot be merged into one (the message names the file and the key)."""


def _episode_from_dict(e: dict) -> EpisodeResult:
    return EpisodeResult(success=bool(e["success"]), count=e["count"], value=e["value"], length=int(e["length"]),
                         skill_share=dict(e.get("skill_share") or {}), release=e.get("release"),
                         ended_by=e.get("ended_by", "game"), ending=e.get("ending", ""))


def _merge_key(key: str, value: Any) -> Any:
    # a pinned game clock must be the same; the machine's clock ("real: <when it started>") differs by the start
    if key == "game_clock" and isinstance(value, str) and value.startswith("real"):
        return "real"
    return value


def merge_summaries(summaries: Sequence[dict], names: Sequence[str], stats_avg: Optional[int] = None) -> dict:
    """One evaluation from several of the same checkpoint and task played on other games (``--seed``), e.g. one
    process per core: the release ran its 480 games in 24 processes. Their finished episodes are put in one
    order, each input's in its own order and the inputs interleaved as if they ran at the same speed (episode
    ``i`` of ``n`` at ``(i + 1) / n``), and summarized as one run (the release's statistic over the last
    ``stats_avg`` of them; by default the inputs' own, which must agree). ``names`` name the inputs in errors and
    in the result's ``merged_from``."""
    if len(summaries) < 2:
        raise MergeError("give two evaluations or more to merge")
    first = summaries[0]
    for name, s in zip(names, summaries):
        missing = [k for k in ("task", "measure", "protocol", "per_episode", "run") if k not in s]
        if missing:
            raise MergeError(f"{name}: not an evaluation JSON of scripts.main --evaluation True (no {missing[0]!r})")
        for key in MERGE_MUST_AGREE:
            if _merge_key(key, s.get(key)) != _merge_key(key, first.get(key)):
                raise MergeError(f"{name}: {key} {s.get(key)!r} differs from {names[0]}'s {first.get(key)!r}; "
                                 "only evaluations of one checkpoint on one task under one protocol merge")
    played_by: dict[Any, str] = {}
    for name, s in zip(names, summaries):
        seed = s.get("seed")
        if seed is None:
            raise MergeError(f"{name}: the JSON does not say which games it played (no 'seed', written by "
                             "evaluations since the games' seed is stored); evaluate again to merge")
        if seed in played_by:
            raise MergeError(f"{name} and {played_by[seed]} played the same games (--seed {seed}); "
                             "give each evaluation its own --seed")
        played_by[seed] = name
    seeds = list(played_by)
    if stats_avg is None:
        windows = {(s.get("release") or {}).get("stats_avg") for s in summaries}
        if len(windows) != 1 or None in windows:
            raise MergeError(f"the inputs' windows differ ({sorted(map(str, windows))}); give --stats_avg")
        stats_avg = int(windows.pop())
    keyed = []
    for j, s in enumerate(summaries):
        n = len(s["per_episode"])
        keyed += [((i + 1) / n, j, i, _episode_from_dict(e)) for i, e in enumerate(s["per_episode"])]
    episodes = [e for *_, e in sorted(keyed, key=lambda k: k[:3])]
    runs = [s["run"] for s in summaries]
    run = RunResult(episodes=episodes, protocol=first["protocol"], num_envs=sum(int(r["num_envs"]) for r in runs),
                    env_steps_run=sum(int(r["env_steps_run"]) for r in runs),
                    unfinished=sum(int(r["unfinished_episodes"]) for r in runs),
                    env_step_budget=sum(int(r["env_step_budget"] or 0) for r in runs) or None,
                    meta_policy_errors=sum(int(s.get("meta_policy_errors", 0)) for s in summaries))
    skill_names = tuple(first.get("skill_time_share") or ())
    merged = summarize(first["task"], first["measure"], episodes, skill_names, protocol=first["protocol"],
                       stats_avg=stats_avg, run=run)
    merged.update({k: first.get(k) for k in MERGE_MUST_AGREE if k in first})
    if _merge_key("game_clock", first.get("game_clock")) == "real":
        merged["game_clock"] = "real: the machine's clock, each evaluation's own (merged_from)"
    if "label" in first:  # a reference's (untrained, random) name
        merged["label"] = first["label"]
    merged["seed"] = seeds
    merged["merged_from"] = [{"file": name, "seed": s["seed"], "num_envs": s["run"]["num_envs"],
                              "env_steps_run": s["run"]["env_steps_run"],
                              "finished_episodes": s["run"]["finished_episodes"], "game_clock": s.get("game_clock")}
                             for name, s in zip(names, summaries)]
    merged["merge_order"] = ("each input's episodes in their own order, the inputs interleaved as if they ran at "
                             "the same speed (episode i of n at (i + 1) / n)")
    return merged
