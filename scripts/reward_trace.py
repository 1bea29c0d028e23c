"""Each skill's return on a seeded trace under both reward timings (--skill_reward_timing).

    python -m scripts.reward_trace \
        --reward_dir "['train_dir/skill_rewards/llama3_discoverer_default', ..., 'train_dir/skill_rewards/llama3_merchant_default']" \
        --episodes 20 --out train_dir/reward_trace

Plays the same seeded games with the same actions (the dataset collection's explorer, which takes the stairs
it finds, or --policy random: uniform actions without prayer) through the skill environment of training,
once per timing, and prints a table: each skill's return per episode, the reward paid for the
observations that arrived a level deeper by the stairs, the share of steps whose message is empty or
a wall message, and what pays each skill: the --top_messages messages its model paid the most in all
(orchestration/reward_trace.py). With --out, writes reward_trace.{md,json} there.
Exit status 2 on bad input (a missing reward directory, a quantile list of the wrong length).
"""
from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Optional, Sequence

from common.cli import ScriptParser, error
from common.flag_checks import output_folder
from common.skill_files import add_skills_flag
from common.vocabulary import NUM_SKILLS, SKILLS
from rl_baseline.sf.cfg import (
    DEFAULT_QUANTILES,
    ConfigError,
    SkillEnvConfig,
    parse_quantiles,
    parse_reward_dirs,
    reward_thresholds,
)

logger = logging.getLogger("scripts.reward_trace")


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(prog="python -m scripts.reward_trace", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reward_dir", required=True,
                   help="the five reward model directories in skill order, as a list literal (as scripts.main)")
    p.add_argument("--eps_threshold_quantile", default=DEFAULT_QUANTILES,
                   help="per-skill threshold quantiles (as scripts.main)")
    p.add_argument("--episodes", type=int, default=20, help="episodes per timing")
    p.add_argument("--max_episode_steps", type=int, default=1000, help="episode step limit")
    p.add_argument("--seed", type=int, default=0, help="seed of the games and the actions")
    p.add_argument("--policy", choices=("explorer", "random"), default="explorer",
                   help="who acts: the dataset collection's explorer or uniformly random actions without prayer")
    p.add_argument("--top_messages", type=int, default=5,
                   help="per timing and skill, list the messages that paid the skill the most in all (0: none)")
    p.add_argument("--out", default=None, help="folder for reward_trace.md and reward_trace.json (default: print only)")
    p.add_argument("--no_progress", action="store_true", help="no progress bars")
    add_skills_flag(p)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s] %(message)s")
    from orchestration.reward_trace import (  # lazy: pulls in NLE and torch
        compare_timings,
        markdown_table,
        paid_messages_table,
    )

    for flag in ("episodes", "max_episode_steps"):
        if getattr(args, flag) < 1:
            return error(f"--{flag} must be at least 1, got {getattr(args, flag)}")
    if args.top_messages < 0:
        return error(f"--top_messages must be 0 or more, got {args.top_messages}")
    try:
        if args.out:
            output_folder("--out", args.out, ConfigError)  # before the games are played
        dirs = parse_reward_dirs(args.reward_dir)
        if len(dirs) != NUM_SKILLS:
            raise ConfigError(f"--reward_dir: {NUM_SKILLS} reward directories needed, one per skill in skill order "
                              f"({', '.join(SKILLS)}); got {len(dirs)}")
        missing = [d for d in dirs if not Path(d).is_dir()]
        if missing:
            raise ConfigError(f"--reward_dir: {len(missing)} of the {NUM_SKILLS} reward directories not found: "
                              f"{', '.join(missing)}")
        quantiles = parse_quantiles(args.eps_threshold_quantile, NUM_SKILLS)
        # each model loads, has its quantile and is its slot's skill's: a flag's error, not a traceback
        reward_thresholds(dirs, quantiles, SKILLS)
        config = SkillEnvConfig(max_episode_steps=args.max_episode_steps, reward_dirs=tuple(dirs),
                                quantiles=tuple(quantiles))
        results = compare_timings(config, args.episodes, args.seed, show_progress=not args.no_progress,
                                  policy=args.policy)
    except ConfigError as exc:
        return error(exc)
    table = markdown_table(results)
    if args.top_messages:
        table += f"\n\nWhat pays each skill: its {args.top_messages} messages that paid it the most in all\n\n" + \
            paid_messages_table(results, args.top_messages)
    print(table)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "reward_trace.md").write_text(table + "\n")
        (out / "reward_trace.json").write_text(json.dumps(
            {"policy": args.policy, "episodes": args.episodes, "seed": args.seed, "max_episode_steps": args.max_episode_steps,
             "reward_dirs": dirs, "results": [r.as_dict(args.top_messages) for r in results]}, indent=2))
        logger.info("wrote %s", out / "reward_trace.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
