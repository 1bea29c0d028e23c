"""The skill report: what each skill does when held, for a trained policy and two baselines.

For every skill the policy was trained with, :mod:`rl_baseline.sf.skill_eval` holds the skill
for ``episodes`` episodes with three policies:

* ``trained`` -- the experiment's newest checkpoint;
* ``untrained`` -- the same network with freshly initialised weights (what training started from);
* ``random`` -- uniformly random actions from the env's action set;
* optionally ``progress-trained`` -- the newest checkpoint of another experiment trained with
  ``--skill_reward progress`` (each skill paid its own measure: a privileged diagnostic and upper
  bound, not the method), held on the same games, in a column of its own.

Each episode is scored with the skill's measures (:mod:`rl_baseline.tasks.skill_measures`);
the report gives the mean and 95% interval of each (:func:`common.estimates.mean_interval95`: a bootstrap
percentile interval, which never goes below zero for these non-negative measures), and whether the
trained policy beats the random one on the skill's main measure with non-overlapping
intervals. Writes ``skill_report.md``, ``skill_report.json`` and ``skill_report.png`` into
the policy folder.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from common.atomic_io import atomic_write_json, atomic_write_text
from common.estimates import BOOTSTRAP_NOTE, interval_method, recorded_interval_method
from common.nethack.game_clock import active_game_clock
from common.vocabulary import SKILLS
from rl_baseline.sf.cfg import resolve_experiment_cfg
from rl_baseline.sf.checkpoints import checkpoint_dir, list_checkpoints
from rl_baseline.sf.skill_eval import POLICY_KINDS, evaluate_skill_with, format_measure
from rl_baseline.tasks.skill_measures import MAIN_MEASURE, SKILL_MEASURES

logger = logging.getLogger(__name__)

REPORT_MD, REPORT_JSON, REPORT_PNG = "skill_report.md", "skill_report.json", "skill_report.png"


@dataclass
class SkillReportConfig:
    policy_dir: str
    episodes: int = 10
    num_envs: int = 10
    skills: tuple[str, ...] = ()  # () = every skill the policy was trained with
    policies: tuple[str, ...] = POLICY_KINDS
    seed: int = 0
    max_episode_steps: Optional[int] = None  # None = the experiment's own
    progress: bool = True
    # an experiment trained with --skill_reward progress, reported as the column PROGRESS_COLUMN
    progress_policy_dir: Optional[str] = None
    # where the three files go (None: policy_dir, where the pipeline's report looks for them)
    out_dir: Optional[str] = None


#: the column of the policy trained on the skills' own progress measures (--skill_reward progress)
PROGRESS_COLUMN = "progress-trained"
#: what a policy trained with --skill_reward progress is
PROGRESS_NOTE = "the privileged progress diagnostic (each skill paid its own measure), not the method"


def beats(a: dict, b: dict) -> Optional[bool]:
    """Whether measure ``a`` is above ``b`` with non-overlapping 95% intervals (None: no interval)."""
    lo_a, hi_b = a["ci95"][0], b["ci95"][1]
    if not (np.isfinite(lo_a) and np.isfinite(hi_b)):
        return None
    return bool(lo_a > hi_b)


def build_skill_report(config: SkillReportConfig) -> dict[str, Any]:
    """Runs every (skill, policy) evaluation and writes the three report files into ``config.out_dir`` (default:
    the policy's folder)."""
    policy_dir = Path(config.policy_dir)
    base = resolve_experiment_cfg(policy_dir, ["--eval_skill", SKILLS[0]], files=False)
    trained_with = SKILLS[: int(base.num_skills)]
    skills = tuple(config.skills) or trained_with
    for s in skills:
        if s not in SKILLS:
            raise ValueError(f"--skill_names: unknown skill {s!r}; expected some of {', '.join(SKILLS)}")
        if s not in trained_with:
            raise ValueError(f"--skill_names: the policy in {policy_dir} was trained with {', '.join(trained_with)}, "
                             f"not with {s}")
    progress_dir = Path(config.progress_policy_dir) if config.progress_policy_dir else None
    if progress_dir is not None:
        progress_cfg = resolve_experiment_cfg(progress_dir, ["--eval_skill", SKILLS[0]], files=False)
        if getattr(progress_cfg, "skill_reward", "llm") != "progress":
            raise ValueError(f"--progress_policy_dir {progress_dir}: that experiment was trained with --skill_reward "
                             f"{getattr(progress_cfg, 'skill_reward', 'llm')}, not progress")
        missing = [s for s in skills if s not in SKILLS[: int(progress_cfg.num_skills)]]
        if missing:
            raise ValueError(f"--progress_policy_dir {progress_dir}: not trained with {', '.join(missing)}")
    columns = list(config.policies) + ([PROGRESS_COLUMN] if progress_dir is not None else [])
    report: dict[str, Any] = {"policy_dir": str(policy_dir), "episodes": int(config.episodes),
                              "seed": int(config.seed), "game_clock": active_game_clock(), "policies": columns,
                              "interval_method": interval_method(False), "skills": {}}
    if progress_dir is not None:
        report["progress_policy_dir"] = str(progress_dir)
    if getattr(base, "skill_reward", "llm") == "progress":  # the policy itself is the diagnostic: say so
        report["trained_skill_reward"] = "progress"
    for skill in skills:
        overrides = ["--eval_skill", skill]
        if config.max_episode_steps:
            overrides += ["--max_episode_steps", str(int(config.max_episode_steps))]
        cfg = resolve_experiment_cfg(policy_dir, overrides)
        entry: dict[str, Any] = {"main_measure": MAIN_MEASURE[skill], "policies": {}}
        for kind in config.policies:
            result, info = evaluate_skill_with(cfg, kind, config.episodes, config.num_envs, seed=config.seed,
                                               progress=config.progress, init_seed=config.seed)
            summary = result.summary()
            summary.update(info)
            entry["policies"][kind] = summary
            entry["start_depth"] = info["start_depth"]
            main = summary["measures"][MAIN_MEASURE[skill]]
            logger.info("%s, %s policy: %s %s", skill, kind, MAIN_MEASURE[skill], format_measure(main))
        if progress_dir is not None:
            result, info = evaluate_skill_with(resolve_experiment_cfg(progress_dir, overrides), "trained",
                                               config.episodes, config.num_envs, seed=config.seed,
                                               progress=config.progress, init_seed=config.seed)
            summary = result.summary()
            summary.update(info)
            entry["policies"][PROGRESS_COLUMN] = summary
        pols = entry["policies"]
        if "trained" in pols and "random" in pols:
            entry["trained_beats_random"] = beats(pols["trained"]["measures"][MAIN_MEASURE[skill]],
                                                  pols["random"]["measures"][MAIN_MEASURE[skill]])
        if "trained" in pols and "untrained" in pols:
            entry["trained_beats_untrained"] = beats(pols["trained"]["measures"][MAIN_MEASURE[skill]],
                                                     pols["untrained"]["measures"][MAIN_MEASURE[skill]])
        report["skills"][skill] = entry
        trained = pols.get("trained") or {}
        report.setdefault("checkpoint", trained.get("checkpoint"))
        report.setdefault("env_steps", trained.get("env_steps"))
    out = Path(config.out_dir) if config.out_dir else policy_dir
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / REPORT_JSON, report)
    atomic_write_text(out / REPORT_MD, report_markdown(report))
    plot_skill_report(report, out / REPORT_PNG)
    return report


def existing_report(folder: str | Path) -> list[str]:
    """The skill report's files already in ``folder`` (a new report there replaces them)."""
    return [name for name in (REPORT_MD, REPORT_JSON, REPORT_PNG) if (Path(folder) / name).exists()]


def _verdict(value: Optional[bool]) -> str:
    return "n/a" if value is None else ("yes" if value else "no")


def report_markdown(report: dict[str, Any]) -> str:
    pols = report["policies"]
    # a report of the references alone (--policies untrained,random) has no trained checkpoint and no verdict
    verdict_column = "trained" in pols and "random" in pols
    columns = [*pols, "trained > random"] if verdict_column else list(pols)
    checkpoint = (f"checkpoint at {report.get('env_steps')} env steps" if report.get("env_steps") is not None
                  else "its trained network not evaluated here: --policies " + ",".join(
                      k for k in pols if k != PROGRESS_COLUMN))
    lines = [
        f"Policy `{report['policy_dir']}` ({checkpoint}); each skill held "
        f"for {report['episodes']} episodes per policy; mean [95% interval] per episode "
        f"({recorded_interval_method(report)}). `untrained`: the same network with initial weights; `random`: uniformly random actions. Main measure in **bold**."
        + (f" Games of seed {report.get('seed', 0)}; NetHack's clock {report['game_clock']}."
           if report.get("game_clock") else "")
        + (f" `{PROGRESS_COLUMN}`: `{report['progress_policy_dir']}`, trained with `--skill_reward progress` (each "
           "skill paid its own measure: a privileged diagnostic and upper bound, not the method)."
           if report.get("progress_policy_dir") else "")
        + (f" This policy was trained with `--skill_reward progress`: its `trained` column is {PROGRESS_NOTE}."
           if report.get("trained_skill_reward") == "progress" and "trained" in pols else ""),
        "",
        "| skill | measure | " + " | ".join(columns) + " |",
        "|---" * (2 + len(columns)) + "|",
    ]
    for skill, entry in report["skills"].items():
        for m in SKILL_MEASURES[skill]:
            main = m == entry["main_measure"]
            cells = [format_measure(entry["policies"][k]["measures"][m]) for k in pols]
            verdict = _verdict(entry.get("trained_beats_random")) if main else ""
            name = f"**{m}**" if main else m
            cells += [verdict] if verdict_column else []
            lines.append(f"| {skill} | {name} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += behaviour_table(report)
    starts = {s: e.get("start_depth", 1) for s, e in report["skills"].items() if e.get("start_depth", 1) > 1}
    if starts:
        lines.append("Episodes of " + ", ".join(f"{s} start on level {d}" for s, d in starts.items())
                     + " (wizard-mode level teleport after reset; death stays final).")
    if verdict_column:
        lines.append("`trained > random`: the trained policy's interval lies above the random policy's "
                     "(non-overlapping 95% intervals) on the main measure.")
    if report.get("interval_method"):
        lines.append(BOOTSTRAP_NOTE)
    return "\n".join(lines) + "\n"


def behaviour_table(report: dict[str, Any], top: int = 3) -> list[str]:
    """How the held episodes went, per skill and policy: median length, the most taken actions and
    how the games ended (read from their last messages), for telling why a measure stays at zero."""
    rows = []
    for skill, entry in report["skills"].items():
        for kind, summary in entry["policies"].items():
            shares = summary.get("action_shares")
            if shares is None:  # a report written before these were recorded
                continue
            acts = ", ".join(f"{a} {100 * v:.0f}%" for a, v in list(shares.items())[:top])
            n = max(1, int(summary.get("episodes") or 0))
            ends = ", ".join(f"{e} {c}/{n}" for e, c in list((summary.get("endings") or {}).items())[:top])
            median = summary.get("median_length")
            rows.append(f"| {skill} | {kind} | {_num(median)} | {acts} | {ends} |")
    if not rows:
        return []
    return ["How the episodes went (median length in steps; the most taken actions; how the episodes ended, "
            "read from their last messages):", "",
            "| skill | policy | median length | most taken actions | endings |", "|---|---|---|---|---|",
            *rows, ""]


def _num(x: Any) -> str:
    return "n/a" if not isinstance(x, (int, float)) or x != x else f"{x:.0f}"


def plot_skill_report(report: dict[str, Any], path: Path) -> None:
    import matplotlib  # lazy: slow to import; only when the plot is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: only once the Agg backend is chosen

    skills = list(report["skills"])
    pols = report["policies"]
    fig, axes = plt.subplots(1, max(1, len(skills)), figsize=(3.2 * max(1, len(skills)), 3.4), squeeze=False)
    colours = {"trained": "tab:blue", "untrained": "tab:gray", "random": "tab:orange", PROGRESS_COLUMN: "tab:purple"}
    for ax, skill in zip(axes[0], skills):
        entry = report["skills"][skill]
        m = entry["main_measure"]
        means, errs = [], [[], []]
        for k in pols:
            st = entry["policies"][k]["measures"][m]
            mean, (lo, hi) = st["mean"], st["ci95"]
            means.append(mean if np.isfinite(mean) else 0.0)
            errs[0].append(mean - lo if np.isfinite(lo) else 0.0)
            errs[1].append(hi - mean if np.isfinite(hi) else 0.0)
        ax.bar(pols, means, yerr=errs, capsize=5, color=[colours.get(k, "tab:green") for k in pols])
        ax.set_title(skill)
        ax.set_ylabel(m.replace("_", " "))
        ax.tick_params(axis="x", rotation=20)
    title = f"skills held one at a time ({report['episodes']} episodes each, 95% interval)"
    if report.get("trained_skill_reward") == "progress":
        title += "\ntrained: --skill_reward progress (a privileged diagnostic, not the method)"
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def check_policy_dir(policy_dir: str | Path) -> Path:
    """The policy folder, or :class:`FileNotFoundError` saying what is missing."""
    path = Path(policy_dir)
    if not path.is_dir():
        raise FileNotFoundError(f"--policy_dir {path}: no such folder")
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"--policy_dir {path}: no config.json; expected a folder {{train_dir}}/{{experiment}} "
                                "written by scripts.main")
    if not list_checkpoints(checkpoint_dir(path.parent, path.name)):
        raise FileNotFoundError(f"--policy_dir {path}: no checkpoint_p0/checkpoint_*.pth; train first")
    return path


__all__: Sequence[str] = ("SkillReportConfig", "build_skill_report", "report_markdown", "plot_skill_report",
                          "check_policy_dir", "beats", "existing_report")
