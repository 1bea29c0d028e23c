"""Convert the release's skill policy (sample-factory 1 checkpoint) into an experiment of this project.

Example::

    python -m scripts.convert_release_policy \\
        --checkpoint maestromotif/train_dir/skill_policy/default/checkpoint_p0/checkpoint_000976563_4000002048.pth \\
        --train_dir train_dir/skill_policy --experiment release

    python -m scripts.main --evaluation True --eval_target gnomish \\
        --train_dir train_dir/skill_policy --experiment release --reward_dir "[...]"

Flags after the converter's own (e.g. ``--reward_dir "[...]"``) are training flags of
``scripts.main``: they are stored in the experiment's ``config.json`` with ``--encoder_arch release``.
See :mod:`rl_baseline.sf.release_policy`.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional, Sequence

from common.cli import ScriptParser
from common.skill_files import add_skills_flag
from rl_baseline.sf.release_policy import RELEASE_CHECKPOINT, ReleaseConversionError, convert_release_checkpoint


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(
        prog="python -m scripts.convert_release_policy",
        description="Convert the release's sample-factory-1 skill-policy checkpoint into this project's "
                    "sample-factory-2 format (--encoder_arch release): writes "
                    "{train_dir}/{experiment}/checkpoint_p0/checkpoint_*.pth and {train_dir}/{experiment}/config.json. "
                    "A wrong file is reported with the first mismatching tensor and nothing is written.",
        epilog="Any further flags are scripts.main training flags (e.g. --reward_dir \"[...]\" --num_skills 5); "
               "they are saved in config.json together with --encoder_arch release.",
    )
    p.add_argument("--checkpoint", required=True, metavar="FILE",
                   help=f"the release's checkpoint file (in its repository: {RELEASE_CHECKPOINT})")
    p.add_argument("--train_dir", default="train_dir/skill_policy",
                   help="folder of experiments to write into (default: %(default)s)")
    p.add_argument("--experiment", default="release",
                   help="experiment name; the converted policy goes to {train_dir}/{experiment} (default: %(default)s)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the experiment's existing config.json and checkpoints (without it, an experiment "
                        "folder that holds either is left alone and the conversion fails)")
    add_skills_flag(p)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args, extra = build_parser().parse_known_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        result = convert_release_checkpoint(args.checkpoint, args.train_dir, args.experiment, args.overwrite, extra)
    except ReleaseConversionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {result.checkpoint} (train step {result.train_step}, env steps {result.env_steps}; Adam moments "
          f"{'carried over' if result.optimizer_carried else 'fresh'}) and {result.config}")
    for old in result.removed:
        print(f"removed {old}")
    print(f"evaluate with: python -m scripts.main --evaluation True --eval_target gnomish --train_dir {args.train_dir} "
          f"--experiment {args.experiment} (add --reward_dir \"[...]\" unless it was given here, or --llm_reward 0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
