"""Hold each skill of a trained policy and compare it with the untrained network and a random policy.

    python -m scripts.skill_report --policy_dir train_dir/skill_policy/default --episodes 10

For every skill the policy was trained with, runs ``--episodes`` episodes per policy
(trained, untrained, uniform random) with the skill held (no meta-policy) and scores them
with the skill's measures (rl_baseline/tasks/skill_measures.py). Writes
``skill_report.md`` (a table of mean and 95% CI per measure), ``skill_report.json`` and
``skill_report.png`` into ``--out`` (default: ``--policy_dir``, where the pipeline writes its own report
and ``scripts.report`` looks for it; a note says when a report already there is replaced). The ascender
starts on level 3 (wizard-mode level teleport). The games are played on NetHack's clock pinned at
``--game_clock`` (default a fixed Wednesday noon), so reports made on other dates and hours play the same games;
the command runs itself again under the pinned clock (libfaketime). Exit status 2 on bad input (unknown skill, no
checkpoint, a malformed --game_clock).
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional, Sequence

from common.cli import FAILED, MissingPackageError, ScriptParser, error
from common.flag_checks import FlagError, output_folder
from common.nethack import game_clock
from common.skill_files import add_skills_flag
from common.vocabulary import SKILLS
from rl_baseline.sf.cfg import ConfigError, check_run_skill_set


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(prog="python -m scripts.skill_report", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policy_dir", required=True,
                   help="the trained experiment's folder, {train_dir}/{experiment} (holds config.json and "
                        "checkpoint_p0/)")
    p.add_argument("--episodes", type=int, default=10, help="episodes per skill and policy")
    p.add_argument("--num_envs", type=int, default=10, help="games stepped together (at most --episodes)")
    # not --skills, which chooses the skill set (common.skill_files)
    p.add_argument("--skill_names", default="",
                   help=f"comma-separated skills to hold (default: every skill the policy was trained with; "
                        f"of {', '.join(SKILLS)})")
    p.add_argument("--policies", default="trained,untrained,random",
                   help="comma-separated policies to compare: trained, untrained (same network, initial "
                        "weights), random (uniform actions)")
    p.add_argument("--progress_policy_dir", default=None,
                   help="another experiment folder, trained with --skill_reward progress (a privileged diagnostic: "
                        "each skill paid its own measure), reported in a column of its own on the same games")
    p.add_argument("--max_episode_steps", type=int, default=None,
                   help="episode step limit (default: the experiment's own)")
    p.add_argument("--seed", type=int, default=0, help="seed of the games, the random policy and the untrained weights")
    p.add_argument("--out", default=None,
                   help="folder for skill_report.{md,json,png} (default: --policy_dir; a report already there is "
                        "replaced, with a note)")
    p.add_argument("--game_clock", default=game_clock.DEFAULT_PINNED,
                   help=game_clock.FLAG_HELP + " (default: "
                        f"{game_clock.describe(game_clock.parse_game_clock(game_clock.DEFAULT_PINNED))})")
    p.add_argument("--no_progress", action="store_true", help="no progress bars")
    add_skills_flag(p)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s] %(message)s")
    args = build_parser().parse_args(argv)
    from orchestration.skill_report import (  # lazy: pulls in NLE; --help stays light
        REPORT_JSON,
        REPORT_MD,
        REPORT_PNG,
        SkillReportConfig,
        build_skill_report,
        check_policy_dir,
        existing_report,
    )
    from rl_baseline.sf.checkpoints import CheckpointError  # lazy: pulls in numpy
    from rl_baseline.sf.skill_eval import POLICY_KINDS  # lazy: pulls in NLE

    try:
        pinned = game_clock.parse_game_clock(args.game_clock)
    except ValueError as exc:
        return error(exc)
    skills = tuple(s for s in args.skill_names.split(",") if s)
    policies = tuple(p for p in args.policies.split(",") if p)
    bad = [p for p in policies if p not in POLICY_KINDS]
    if bad or not policies:
        return error(f"--policies {args.policies}: expected some of {', '.join(POLICY_KINDS)}")
    bad = [s for s in skills if s not in SKILLS]
    if bad:
        return error(f"--skill_names: unknown skill(s) {', '.join(bad)}; expected some of {', '.join(SKILLS)}")
    for flag in ("episodes", "num_envs"):
        if getattr(args, flag) < 1:
            return error(f"--{flag} must be at least 1, got {getattr(args, flag)}")
    try:
        policy_dir = check_policy_dir(args.policy_dir)
        progress_dir = str(check_policy_dir(args.progress_policy_dir)) if args.progress_policy_dir else None
        for run_dir in (policy_dir, progress_dir):  # made with this skill set: refused before the games start
            if run_dir is not None:
                check_run_skill_set(run_dir)
    except (FileNotFoundError, ConfigError) as exc:
        return error(exc)
    try:
        out = output_folder("--out", args.out if args.out else policy_dir)
    except FlagError as exc:
        return error(exc)
    try:
        if pinned is not None and not game_clock.runs_under(pinned):
            return game_clock.rerun_under(pinned, "scripts.skill_report", argv)
    except MissingPackageError as exc:
        return error(exc)
    except RuntimeError as exc:
        return error(exc, FAILED)
    replaced = existing_report(out)
    if replaced:  # the pipeline's report lives in the policy's folder: say so before it goes
        print(f"note: {out} already holds a skill report ({', '.join(replaced)}); this run replaces it "
              "(--out DIR writes it elsewhere)", flush=True)
    try:
        config = SkillReportConfig(str(policy_dir), args.episodes, args.num_envs, skills, policies, args.seed,
                                   args.max_episode_steps, progress=not args.no_progress,
                                   progress_policy_dir=progress_dir, out_dir=args.out)
        build_skill_report(config)
    except (ConfigError, CheckpointError, FileNotFoundError, ValueError) as exc:
        return error(exc)
    print((out / REPORT_MD).read_text())
    print(f"wrote {', '.join(str(out / name) for name in (REPORT_MD, REPORT_JSON, REPORT_PNG))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
