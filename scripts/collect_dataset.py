"""Collect an observation dataset by playing NetHack (phase 0).

Example::

    python -m scripts.collect_dataset --skill discoverer --num_pairs 20000 \\
        --policy_mix explorer:0.8,random:0.2 --num_workers 16 --out og_dataset

Writes ``{out}/{skill}.npz`` (messages [N,2,256] uint8, stats [N,2,6] int32, meta JSON)
atomically; an existing file is only replaced with ``--force``. The same ``--seed`` and
``--num_workers`` give a byte-identical file.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional, Sequence

from common.cli import ScriptParser
from common.interrupts import interrupted_exit, sigterm_raises
from common.skill_files import add_skills_flag
from common.vocabulary import SKILLS
from rl_baseline.collect.config import (
    POLICIES,
    CollectConfig,
    CollectError,
    ExplorerConfig,
    add_dataset_args,
    check_dataset_args,
    parse_policy_mix,
)
from rl_baseline.collect.rollouts import check_output, collect_dataset, output_path, write_dataset


def build_parser() -> argparse.ArgumentParser:
    d = CollectConfig(skill=SKILLS[0], num_pairs=1)
    e = ExplorerConfig()
    p = ScriptParser(
        prog="python -m scripts.collect_dataset",
        description="Play NetHackScoreMonk-v1 with scripted/random/trained policies and save message/stats "
                    "pairs for preference annotation.",
    )
    add_dataset_args(p, d, unit="episode")
    p.add_argument("--policy", choices=POLICIES, default=None,
                   help="a single behaviour policy (shorthand for --policy_mix NAME:1)")
    p.add_argument("--policy_mix", default=None,
                   help="policies and weights, e.g. explorer:0.8,random:0.2; each episode draws one "
                        "(default: explorer:0.8,random:0.2)")
    p.add_argument("--checkpoint", default=None,
                   help="sample-factory experiment folder (train_dir/skill_policy/EXP) for the checkpoint policy")
    p.add_argument("--device", choices=("cpu", "cuda"), default=d.device,
                   help="device of the checkpoint policy's network (default: %(default)s)")
    p.add_argument("--train_dir", default=None,
                   help="train_dir of the checkpoint's experiment (default: the parent folder of --checkpoint)")
    p.add_argument("--seed", type=int, default=d.seed, help="base seed of all randomness (default: %(default)s)")
    p.add_argument("--num_workers", type=int, default=d.num_workers,
                   help="worker processes; part of what determines the result (default: %(default)s)")
    p.add_argument("--max_episode_steps", type=int, default=d.max_episode_steps,
                   help="step limit of a collection episode (default: %(default)s)")
    p.add_argument("--explorer_epsilon", type=float, default=e.epsilon,
                   help="share of random actions of the explorer (default: %(default)s)")
    p.add_argument("--explorer_descend_prob", type=float, default=e.descend_prob,
                   help="probability that the explorer leaves a level downwards (default: %(default)s)")
    p.add_argument("--explorer_level_steps", default=f"{e.min_level_steps},{e.max_level_steps}",
                   help="MIN,MAX steps the explorer spends on a level before taking stairs (default: %(default)s)")
    p.add_argument("--no_progress", action="store_true", help="hide the progress bar")
    p.add_argument("--log_level", default="INFO", help="logging level (default: %(default)s)")
    add_skills_flag(p)
    return p


def config_from_args(args: argparse.Namespace) -> CollectConfig:
    check_dataset_args(args.skill, args.num_pairs)
    if args.policy and args.policy_mix:
        raise CollectError("give either --policy or --policy_mix, not both")
    mix = parse_policy_mix(args.policy_mix or (f"{args.policy}:1" if args.policy else "explorer:0.8,random:0.2"))
    try:
        lo, hi = (int(v) for v in args.explorer_level_steps.split(","))
    except ValueError:
        raise CollectError(f"--explorer_level_steps {args.explorer_level_steps!r}: expected MIN,MAX") from None
    if not 0 < lo <= hi:
        raise CollectError(f"--explorer_level_steps {args.explorer_level_steps!r}: need 0 < MIN <= MAX")
    config = CollectConfig(
        skill=args.skill, num_pairs=args.num_pairs, policy_mix=mix, seed=args.seed, num_workers=args.num_workers,
        checkpoint=args.checkpoint, train_dir=args.train_dir, device=args.device, max_episode_steps=args.max_episode_steps, sample_prob=args.sample_prob,
        uninformative_keep_prob=args.uninformative_keep_prob, level_change_prob=args.level_change_prob,
        max_samples_per_episode=args.max_samples_per_episode, progress=not args.no_progress,
        explorer=ExplorerConfig(epsilon=args.explorer_epsilon, descend_prob=args.explorer_descend_prob,
                                min_level_steps=lo, max_level_steps=hi),
    )
    config.validate()
    return config


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = config_from_args(args)
        path = check_output(output_path(args.out, config.skill), args.force)  # fail before playing
        with sigterm_raises():
            dataset = collect_dataset(config)
            write_dataset(path, dataset, force=args.force)
    except (CollectError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        return interrupted_exit(exc, f"nothing was written ({args.out}/ is as it was: a dataset is written whole at "
                                "the end); run the same command again to collect from the start")
    meta = dataset.meta
    print(f"wrote {path}: {dataset.num_pairs} pairs from {meta['episodes']} episodes "
          f"({meta['steps']} steps, {meta['level_changes']} level changes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
