"""Hold each skill of a trained policy and compare it with the untrained network and a random policy.

    python -m scripts.skill_report --policy_dir train_dir/skill_policy/default --episodes 10

For every skill the policy was trained with, runs ``--episodes`` episodes per policy
(trained, untrained, uniform random) with the skill held (no meta-policy) and scores them
with the skill's measures (rl_baseline/tasks/skill_measures.py). Writes
``skill_report.md`` (a table of mean and 95% CI per measure), ``skill_report.json`` and
``skill_report.png`` into ``--policy_dir``. The ascender starts on level 3 (wizard-mode
level teleport). Exit status 2 on bad input (unknown skill, no checkpoint).
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional, Sequence

from common.cli import ScriptParser
from common.vocabulary import SKILLS
from rl_baseline.sf.cfg import ConfigError

logger = logging.getLogger("scripts.skill_report")


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(prog="python -m scripts.skill_report", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policy_dir", required=True,
                   help="the trained experiment's folder, {train_dir}/{experiment} (holds config.json and "
                        "checkpoint_p0/)")
    p.add_argument("--episodes", type=int, default=10, help="episodes per skill and policy")
    p.add_argument("--num_envs", type=int, default=10, help="games stepped together (at most --episodes)")
    p.add_argument("--skills", default="",
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
    p.add_argument("--no_progress", action="store_true", help="no progress bars")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s] %(message)s")
    args = build_parser().parse_args(argv)
    from orchestration.skill_report import (  # lazy: pulls in NLE; --help stays light
        REPORT_MD,
        SkillReportConfig,
        build_skill_report,
        check_policy_dir,
    )
    from rl_baseline.sf.checkpoints import CheckpointError  # lazy: pulls in numpy
    from rl_baseline.sf.skill_eval import POLICY_KINDS  # lazy: pulls in NLE

    skills = tuple(s for s in args.skills.split(",") if s)
    policies = tuple(p for p in args.policies.split(",") if p)
    bad = [p for p in policies if p not in POLICY_KINDS]
    if bad or not policies:
        logger.error("--policies %s: expected some of %s", args.policies, ", ".join(POLICY_KINDS))
        return 2
    bad = [s for s in skills if s not in SKILLS]
    if bad:
        logger.error("--skills: unknown skill(s) %s; expected some of %s", ", ".join(bad), ", ".join(SKILLS))
        return 2
    if args.episodes < 1 or args.num_envs < 1:
        logger.error("--episodes and --num_envs must be at least 1")
        return 2
    try:
        policy_dir = check_policy_dir(args.policy_dir)
        progress_dir = str(check_policy_dir(args.progress_policy_dir)) if args.progress_policy_dir else None
        config = SkillReportConfig(str(policy_dir), args.episodes, args.num_envs, skills, policies, args.seed,
                                   args.max_episode_steps, progress=not args.no_progress,
                                   progress_policy_dir=progress_dir)
        build_skill_report(config)
    except (ConfigError, CheckpointError, FileNotFoundError, ValueError) as exc:
        logger.error("%s", exc)
        return 2
    print((policy_dir / REPORT_MD).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
