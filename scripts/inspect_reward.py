"""Show which messages of a dataset a trained skill reward model likes most and least.

Example::

    python -m scripts.inspect_reward --reward_dir train_dir/skill_rewards/llama3_descender_default \\
        --dataset og_dataset/descender.npz --top 20 --quantile 0.85 \\
        --message "You finish your prayer.  You feel that Chih Sung-tzu is displeased."
"""
from __future__ import annotations

import argparse
import logging
import sys

import numpy as np

from common.cli import ScriptParser
from common.nethack.messages import encode_message
from common.skill_files import add_skills_flag
from rlaif.dataset import DatasetError, load_dataset
from rlaif.reward_model import load_skill_reward
from rlaif.train_reward import ScoredInput, score_dataset_inputs


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(
        prog="python -m scripts.inspect_reward",
        description="Print the top- and bottom-scored distinct (message, depth change) inputs of a dataset "
                    "with their normalized rewards.",
    )
    p.add_argument("--reward_dir", required=True,
                   help="reward run folder {train_dir}/{experiment} (holds checkpoint_p0/ and reward_metrics/)")
    p.add_argument("--dataset", required=True, help="dataset file, e.g. og_dataset/descender.npz (or .pkl)")
    p.add_argument("--top", type=int, default=20, help="how many inputs to show at each end (default: %(default)s)")
    p.add_argument("--device", default="cpu", help="torch device for scoring (default: %(default)s)")
    p.add_argument("--quantile", type=float, default=None,
                   help="also print the normalized reward at this quantile of the training inputs: the threshold RL "
                        "applies with --eps_threshold_quantile (0.85 for every skill but the discoverer's 0.95)")
    p.add_argument("--message", action="append", default=[],
                   help="also score this message (repeatable), with --depth_change")
    p.add_argument("--depth_change", type=float, default=0.0,
                   help="the depth change scored with each --message (default: %(default)s)")
    add_skills_flag(p)
    return p


def _line(item: ScoredInput) -> str:
    text = item.message if item.message else "<empty message>"
    return f"{item.reward:+8.3f}  depth {item.depth_change:+3.0f}  x{item.count:<7d} {text}"


def main(argv: list[str] | None = None) -> list[ScoredInput]:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.top < 1:
        print(f"error: --top must be >= 1, got {args.top}", file=sys.stderr)
        raise SystemExit(2)
    try:
        loaded = load_skill_reward(args.reward_dir, device=args.device)
        dataset = load_dataset(args.dataset)
        ranked = score_dataset_inputs(loaded, dataset)
    except (FileNotFoundError, DatasetError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    n = min(args.top, len(ranked))
    print(f"{loaded.skill} reward ({loaded.checkpoint_path}) on {args.dataset}: {len(ranked)} distinct "
          f"(message, depth change) inputs; normalized reward = (r - {loaded.reward_mean:.4f}) / {loaded.reward_std:.4f}")
    print(f"top {n}:")
    for item in ranked[:n]:
        print(_line(item))
    print(f"bottom {n}:")
    for item in ranked[::-1][:n]:
        print(_line(item))
    if args.quantile is not None:
        try:
            print(f"threshold at the {args.quantile:.2f} quantile: {loaded.threshold(args.quantile):+.4f}")
        except ValueError as exc:
            print(f"error: --quantile: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
    for text in args.message:
        reward = float(loaded.score(encode_message(text), np.float32(args.depth_change)).reshape(-1)[0])
        print(f"{reward:+8.3f}  depth {args.depth_change:+3.0f}  (--message) {text}")
    return ranked


if __name__ == "__main__":
    main()
