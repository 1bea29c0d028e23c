"""Write a baseline's ``cost.json`` from the phases that ran (the last phase of every baseline in the pipeline).

Example::

    python -m scripts.baseline_cost --out_dir train_dir/pipeline_smoke --name motif_task \\
        --label "Motif task-specific, heuristic stand-in annotator, 40,000 env steps per task" --llm stand_in \\
        --phase annotate/gnomish=cpu --phase train/gnomish=gpu:1

Writes ``{out_dir}/baselines/{name}/cost.json``: ``method``, ``label``, ``llm_tokens``, ``cpu_hours``,
``gpu_hours``, ``env_steps`` and how each was measured (see :mod:`orchestration.baseline_cost`).
"""
from __future__ import annotations

import argparse
import logging
import sys

from common.cli import ScriptParser
from common.flag_checks import FlagError, output_folder
from common.skill_files import add_skills_flag
from orchestration.baseline_cost import LLM_MODES, CostError, parse_phase_spec, write_cost


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(prog="python -m scripts.baseline_cost",
                     description="Measure what a baseline's phases cost and write cost.json.",
                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--out_dir", required=True, help="the pipeline's output folder (holds .pipeline/ and baselines/)")
    p.add_argument("--name", required=True, help="the baseline's name (its folder under {out_dir}/baselines/)")
    p.add_argument("--label", required=True, help="an honest one-line label of what ran (annotator, scale)")
    p.add_argument("--llm", default="none", choices=LLM_MODES,
                   help="none: the method calls no LLM (0 tokens); stand_in: a rule-based stand-in played the LLM "
                        "(null); logs: estimate the tokens from the annotation logs under the baseline's folder")
    p.add_argument("--phase", action="append", default=[], metavar="NAME=DEVICE",
                   help="a phase of the baseline, named within it (train/gnomish for the pipeline's phase "
                        "baselines/{name}/train/gnomish), and its device (cpu or gpu:N); repeatable")
    add_skills_flag(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        output_folder("--out_dir", args.out_dir)
        phases = [(f"baselines/{args.name}/{phase}", device) for phase, device in map(parse_phase_spec, args.phase)]
        path = write_cost(args.out_dir, args.name, args.label, phases, args.llm)
    except (CostError, FlagError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
