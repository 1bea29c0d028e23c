"""Training statistics averaged over the first and the last env steps of a run (from its tensorboard files).

    python -m scripts.training_window --policy_dir train_dir/pipeline_learn/skill_policy/learn --window 500000 \
        --tags measures/discoverer/cells_per_1000_steps,intrinsic/descender_return,messages/empty_share

For each tag, prints the mean of the summaries written in its first ``--window`` env steps (from its own first
summary) and in the last ``--window`` env steps of the run (each summary is already sample-factory's mean over
recent episodes), and how many summaries each mean covers: the figures docs/results.md quotes "over training". A
run shorter than four windows uses a quarter of its length instead, with a note (as ``scripts.report``). A tag
first logged after the run's first window says where it starts ("first logged at 32,768 env steps"), and a tag
logged over less than two windows, whose windows share summaries, says that they overlap instead of giving a
first mean to compare. Without ``--tags``: those of :data:`DEFAULT_TAGS` that the run has, with a note naming
the others (a skill that never ran, as the descender in a smoke or ci run, logs none of its statistics). Exit
status 2 when the folder has no tensorboard files, when a tag given with ``--tags`` is not in them (the error
lists the tags that are), or when none of the defaults is.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from common.cli import ScriptParser, error
from common.flag_checks import FlagError, output_file
from common.skill_files import add_skills_flag

#: the statistics shown without --tags: the discoverer's and the descender's progress and the message stream
DEFAULT_TAGS = (
    "measures/discoverer/cells_per_1000_steps", "intrinsic/discoverer_return", "measures/descender/levels_descended",
    "measures/descender/down_stairs_reached", "intrinsic/descender_return", "intrinsic/reward_per_descent",
    "skills/descents", "messages/empty_share", "messages/wall_share",
)


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(prog="python -m scripts.training_window", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policy_dir", required=True, help="the experiment folder, {train_dir}/{experiment}")
    p.add_argument("--window", type=int, default=500_000,
                   help="env steps at the start and at the end of the run (a run shorter than four windows uses a "
                        "quarter of its length)")
    p.add_argument("--tags", default=None,
                   help="comma-separated tensorboard tags (default: those of " + ",".join(DEFAULT_TAGS) + " that the "
                        "run has)")
    p.add_argument("--compare", action="append", default=[], metavar="DIR",
                   help="another experiment folder whose same tags are shown beside --policy_dir's (repeatable; "
                        "its own windows, from its own length)")
    p.add_argument("--until", type=int, default=None, metavar="ENV_STEPS",
                   help="read every run as if it had stopped at this many env steps (summaries written later are "
                        "left out, of the tables and the plot): runs of different lengths compared at one budget")
    p.add_argument("--plot", default=None, metavar="PNG",
                   help="also draw the tags over training, one panel per tag and one curve per run, into this PNG")
    add_skills_flag(p)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from orchestration.report.plots import plot_tag_curves  # lazy: pulls in NLE; --help stays light
    from orchestration.report.training import (  # lazy: pulls in NLE; --help stays light
        TB_PREFIXES,
        WINDOW_NOTE,
        TrainingRun,
        fitted_window,
        read_tensorboard_scalars,
        run_extent,
        tag_windows,
    )

    if args.window < 1:
        return error(f"--window must be at least 1, got {args.window}")
    if args.until is not None and args.until < 1:
        return error(f"--until must be at least 1 env step, got {args.until}")
    asked = [t for t in (args.tags or "").split(",") if t]
    if args.plot and not args.plot.lower().endswith(".png"):
        return error(f"--plot {args.plot}: expected a .png path")
    try:
        if args.plot:
            output_file("--plot", args.plot)  # before the summaries are read
    except FlagError as exc:
        return error(exc)
    runs = []
    for folder in [args.policy_dir, *args.compare]:
        flag = "--policy_dir" if folder == args.policy_dir else "--compare"
        prefixes = tuple(sorted(set(TB_PREFIXES) | {t.split("/")[0] + "/" for t in asked}))  # all: a miss lists them
        if not Path(folder).is_dir():
            what = "a file, not a folder" if Path(folder).exists() else "no such folder"
            return error(f"{flag} {folder}: {what}; give a training run's folder ({{train_dir}}/{{experiment}})")
        scalars = read_tensorboard_scalars(folder, prefixes)
        if not scalars:
            return error(f"{flag} {folder}: no tensorboard summaries with the prefixes {', '.join(prefixes)}")
        runs.append((folder, _series_of(scalars, TrainingRun(folder, folder, scalars), args.until), scalars))
    have = sorted({t[:-len("_mean")] if t.endswith("_mean") else t for t in runs[0][2]})
    missing = [t for t in (asked or DEFAULT_TAGS) if not runs[0][1](t)[0]]
    if asked and missing:
        return error(f"--tags: not in {args.policy_dir}: {', '.join(missing)}; its tags: {', '.join(have)}")
    tags = [t for t in (asked or DEFAULT_TAGS) if t not in missing]
    if not tags:
        return error(f"--policy_dir {args.policy_dir}: none of the default tags is there; pass --tags (its tags: "
                     f"{', '.join(have)})")
    if missing:
        print(f"note: not in this run, left out: {', '.join(missing)} (a skill that never ran logs none)")
    for folder, series, scalars in runs:
        # the run's extent over all its tags, not only those shown, so that a tag shown alone is still said to
        # start late
        extent = run_extent(series(tag) for tag in scalars)
        if extent is None or not any(series(tag)[0] for tag in tags):
            print(f"\nRun `{folder}`: none of these tags")
            continue
        first, last = extent
        used = fitted_window(args.window, last - first)
        upto = f" (read up to --until {args.until:,})" if args.until is not None else ""
        print(f"\nRun `{folder}`, {last:,} env steps{upto}; means of the summaries in the first and last "
              f"{used:,} env steps of each tag (summaries counted in brackets).")
        if used < args.window:
            print(f"note: the run spans {last - first:,} env steps, fewer than four --window {args.window:,}: the "
                  f"first and last windows would overlap (and give the same means), so each is a quarter of the "
                  f"run, {used:,} env steps, as in scripts.report")
        print("\n| tag | first | last |\n|---|---|---|")
        windows = {}
        for tag in tags:
            if not series(tag)[0]:
                print(f"| {tag} | not logged | not logged |")
                continue
            windows[tag] = w = tag_windows(series(tag), used, run_start=first)
            print(f"| {tag} | {w.first_cell()} | {w.last_cell()} |")
        if any(w.late or w.shared for w in windows.values()):
            print(f"\nnote: {WINDOW_NOTE}")
    if args.plot:
        plot_tag_curves([(folder, series) for folder, series, _ in runs], tags, Path(args.plot))
        print(f"\nplot: {args.plot}")
    return 0


def _series_of(scalars: dict, run: Any, until: Optional[int] = None) -> Callable[[str], tuple[list[int], list[float]]]:
    """A run's series of a tag: the tag as written; where only our observer's ``{tag}_mean`` was logged, that;
    with ``until``, only the summaries written at or before that many env steps."""
    def series(tag: str) -> tuple[list[int], list[float]]:
        steps, values = scalars[tag] if tag in scalars and scalars[tag][0] else run.get(tag)
        if until is None:
            return steps, values
        kept = [(x, v) for x, v in zip(steps, values) if x <= until]
        return [x for x, _ in kept], [v for _, v in kept]
    return series

if __name__ == "__main__":
    sys.exit(main())
