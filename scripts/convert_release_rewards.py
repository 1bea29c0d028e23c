"""Convert the authors' released skill reward checkpoints into reward directories of ours.

Examples::

    # every skill of the release's train_dir/skill_rewards (llama3_{skill}_default/...)
    python -m scripts.convert_release_rewards --release_dir release/train_dir/skill_rewards \\
        --out_dir train_dir/skill_rewards --name_template llama3_{skill}_default
    # one file
    python -m scripts.convert_release_rewards --checkpoint path/checkpoint_3600.pth --skill descender \\
        --out_dir train_dir/release_rewards

Writes ``{out_dir}/{name}/checkpoint_p0/checkpoint_{iter:09d}.pth`` (the ``release`` reward
architecture) and ``{out_dir}/{name}/reward_metrics/train_norm_quantiles.csv`` (from the release
run's ``reward_metrics`` folder when present); pass these folders to ``--reward_dir``. Exits 2
with a message naming the file when an input is not a release reward checkpoint; nothing is
written then. See :mod:`rlaif.release_reward`.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from common.cli import ScriptParser
from common.flag_checks import output_folder
from common.skill_files import add_skills_flag
from common.vocabulary import SKILLS
from rlaif.release_reward import DEFAULT_NAME_TEMPLATE, convert_release_rewards
from rlaif.reward_model import RewardCheckpointError


def _skill_list(text: str) -> list[str]:
    names = [s.strip() for s in text.replace("[", "").replace("]", "").split(",") if s.strip()]
    bad = [n for n in names if n not in SKILLS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown skill(s) {', '.join(bad) or text!r}; valid: {', '.join(SKILLS)}")
    return names


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(
        prog="python -m scripts.convert_release_rewards",
        description="Convert the authors' released reward-model checkpoints (their train_dir/skill_rewards) into "
                    "reward directories that --reward_dir reads (reward architecture 'release').",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--release_dir",
                     help="the release's skill_rewards folder, holding llama3_{skill}_default/checkpoint_p0/"
                          "checkpoint_*.pth (and reward_metrics/train_norm_quantiles.csv); every skill found is "
                          "converted")
    src.add_argument("--checkpoint",
                     help="a single release checkpoint file to convert instead (needs --skill unless it sits in a "
                          "llama3_{skill}_default/checkpoint_p0 folder)")
    p.add_argument("--skill", choices=SKILLS, default=None,
                   help="skill of the --checkpoint file (default: read from its run folder name)")
    # not --skills, which chooses the skill set (common.skill_files)
    p.add_argument("--skill_names", type=_skill_list, default=None,
                   help="with --release_dir: only these skills, comma separated (default: all found)")
    p.add_argument("--checkpoint_num", type=int, default=0,
                   help="with --release_dir: the iteration N of checkpoint_N.pth to take; 0 takes each run's "
                        "latest, as the release's learner does (default: %(default)s)")
    p.add_argument("--out_dir", required=True,
                   help="root of our reward directories; writes {out_dir}/{name}/checkpoint_p0/ and "
                        "{out_dir}/{name}/reward_metrics/")
    p.add_argument("--name_template", default=DEFAULT_NAME_TEMPLATE,
                   help="folder name per skill under --out_dir; must contain {skill} (default: %(default)s, "
                        "the --reward_dir paths of docs/phases.md)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace existing outputs (their older checkpoints and quantile CSV are removed); "
                        "without it an existing output is an error and nothing is written")
    p.add_argument("--no_progress", action="store_true", help="hide the progress bar")
    add_skills_flag(p)
    return p


def main(argv: list[str] | None = None) -> list[Path]:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.checkpoint is not None and (args.skill_names or args.checkpoint_num):
        parser.error("--skill_names and --checkpoint_num apply to --release_dir; use --skill with --checkpoint")
    if args.release_dir is not None and args.skill is not None:
        parser.error("--skill applies to --checkpoint; use --skill_names with --release_dir")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        output_folder("--out_dir", args.out_dir)
        written = convert_release_rewards(
            args.out_dir, release_dir=args.release_dir, checkpoint=args.checkpoint, skill=args.skill,
            checkpoint_num=args.checkpoint_num, skills=args.skill_names, overwrite=args.overwrite,
            name_template=args.name_template, progress=not args.no_progress,
        )
    except (RewardCheckpointError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    dirs = sorted({str(p.parent.parent) for p in written})
    print(f"wrote {len(written)} file(s) in {len(dirs)} reward director{'y' if len(dirs) == 1 else 'ies'}: "
          + ", ".join(dirs))
    return written


if __name__ == "__main__":
    main()
