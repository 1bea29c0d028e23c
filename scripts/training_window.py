"""Training statistics averaged over the first and the last env steps of a run (from its tensorboard files).

    python -m scripts.training_window --policy_dir train_dir/pipeline_learn/skill_policy/learn --window 500000 \
        --tags measures/discoverer/cells_per_1000_steps,intrinsic/descender_return,messages/empty_share

For each tag, prints the mean of the summaries written in the first ``--window`` env steps and in the last
``--window`` env steps of the run (each summary is already sample-factory's mean over recent episodes), and
how many summaries each mean covers: the figures docs/results.md quotes "over training". Exit status 2 when the
folder has no tensorboard files or a tag is not in them.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional, Sequence

logger = logging.getLogger("scripts.training_window")

DEFAULT_TAGS = (
    "measures/discoverer/cells_per_1000_steps", "intrinsic/discoverer_return", "measures/descender/levels_descended",
    "measures/descender/down_stairs_reached", "intrinsic/descender_return", "intrinsic/reward_per_descent",
    "skills/descents", "messages/empty_share", "messages/wall_share",
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m scripts.training_window", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policy_dir", required=True, help="the experiment folder, {train_dir}/{experiment}")
    p.add_argument("--window", type=int, default=500_000, help="env steps at the start and at the end of the run")
    p.add_argument("--tags", default=",".join(DEFAULT_TAGS), help="comma-separated tensorboard tags")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s] %(message)s")
    args = build_parser().parse_args(argv)
    from orchestration.report.training import TrainingRun, read_tensorboard_scalars, window_means  # lazy: pulls in NLE

    if args.window < 1:
        logger.error("--window must be at least 1")
        return 2
    tags = [t for t in args.tags.split(",") if t]
    prefixes = tuple(sorted({t.split("/")[0] + "/" for t in tags}))
    scalars = read_tensorboard_scalars(args.policy_dir, prefixes)
    if not scalars:
        logger.error("--policy_dir %s: no tensorboard summaries with the tags' prefixes %s", args.policy_dir,
                     ", ".join(prefixes))
        return 2
    run = TrainingRun(args.policy_dir, args.policy_dir, scalars)
    # the tag as written; where only our observer's `{tag}_mean` was logged, that one
    series = lambda tag: scalars[tag] if tag in scalars else run.get(tag)  # noqa: E731
    missing = [t for t in tags if not series(t)[0]]
    if missing:
        logger.error("not in %s: %s", args.policy_dir, ", ".join(missing))
        return 2
    last = max(series(t)[0][-1] for t in tags)
    print(f"Run `{args.policy_dir}`, {last:,} env steps; means of the summaries in the first and last "
          f"{args.window:,} env steps (summaries counted in brackets).\n")
    print("| tag | first | last |\n|---|---|---|")
    for t in tags:
        a, na, b, nb = window_means(series(t), args.window)
        print(f"| {t} | {a:.4g} ({na}) | {b:.4g} ({nb}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
