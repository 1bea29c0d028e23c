"""Collect evaluation results, skill-training summaries and reward-model metrics into one report.

Example::

    python -m scripts.report --train_dir train_dir/pipeline_smoke
    python -m scripts.report --train_dir train_dir/skill_policy --train_dir train_dir/skill_rewards \\
        --out train_dir/report

Prints the Markdown tables; writes ``{out}/results.md`` and PNG plots (success per task
with error bars, per-skill intrinsic reward and skill share over training, reward-model
validation accuracy per skill, and the training curves ``curves_intrinsic_return.png``,
``curves_skill_share.png``, ``curves_nonzero_fraction.png``, ``curves_episode_length.png``,
``curves_skill_measures.png``). results.md also lists the final value of every skill measure
(``measures/{skill}/{measure}``), the meta-policy errors of each evaluation (with a warning
naming the tasks whose generated meta-policy raised), the first-against-last window table of each training
run (``--window``) and, when an experiment has a
``skill_report.md`` (:mod:`scripts.skill_report`), its forced-skill evaluation table and plot. The
reference evaluations of ``scripts.main --eval_policy untrained|random`` (``eval_untrained/``,
``eval_random/`` beside ``eval/``) are columns of their own, never the method's.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from common.cli import ScriptParser
from common.flag_checks import output_folder
from common.skill_files import add_skills_flag
from orchestration.report import DEFAULT_WINDOW, ReportError, build_report


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(
        prog="python -m scripts.report",
        description="Collect */eval/*_seed*.json (and the references of --eval_policy untrained/random in "
                    "*/eval_untrained/, */eval_random/, each a column of its own), sample-factory summaries / skill_stats.json, "
                    "*/skill_report.md and */reward_metrics/metrics.csv below the given folders into "
                    "results.md and PNG plots.",
    )
    p.add_argument("--train_dir", action="append", default=None,
                   help="folder searched recursively (repeat the flag for several; default: train_dir)")
    p.add_argument("--out", default=None,
                   help="folder for results.md and the plots (default: {first --train_dir}/report)")
    p.add_argument("--no_paper", action="store_true",
                   help="leave out the paper's MaestroMotif column")
    p.add_argument("--no_plots", action="store_true", help="write results.md only")
    p.add_argument("--window", type=int, default=DEFAULT_WINDOW,
                   help="env steps at the start and at the end of each skill-training run compared in the "
                        "'first and last window' table (a run shorter than four windows uses a quarter of its "
                        "length; default: %(default)s, the 'over training' figures of docs/results.md)")
    add_skills_flag(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.window < 1:
        print(f"error: --window must be at least 1, got {args.window}", file=sys.stderr)
        return 2
    roots = args.train_dir or ["train_dir"]
    out = Path(args.out) if args.out else Path(roots[0]) / "report"
    try:
        output_folder("--out", out, ReportError)  # before the results are read and plotted
        report = build_report(roots, out, paper=not args.no_paper, plots=not args.no_plots, window=args.window)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.markdown)
    print("wrote " + ", ".join(str(p) for p in report.files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
