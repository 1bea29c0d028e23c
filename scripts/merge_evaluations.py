"""Merge evaluations of one checkpoint on one task, played on other games, into one result.

The evaluation (``scripts.main --evaluation True``) steps its games in one process. To use more cores, run one
evaluation per core, each with its own ``--seed`` (other games) and ``--eval_dir``, then merge them: the
release ran its 480 games as 24 processes of 20. Example (15 processes of 32 games, 3M env steps in all)::

    for seed in {1000..1014}; do
      python -m scripts.main --train_dir train_dir --experiment skills --evaluation True --eval_target gnomish \\
          --eval_num_envs 32 --eval_env_steps 200000 --seed $seed --eval_dir eval_parts/s$seed &
    done; wait
    python -m scripts.merge_evaluations --inputs eval_parts/s*/gnomish_seed42.json --out eval_merged/gnomish_seed42.json

Writes the merged JSON, its CSV and PNG (the evaluation's three files) and prints the headline.
"""
from __future__ import annotations

import argparse
import logging
import sys

from common.cli import ScriptParser
from common.file_errors import load_json
from common.flag_checks import FlagError, output_file
from common.skill_files import add_skills_flag
from rl_baseline.evaluation import MergeError, merge_summaries, write_results


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(prog="python -m scripts.merge_evaluations",
                     description="Merge evaluations of one checkpoint on one task, each on its own games (--seed), "
                                 "into one result, as if their games had run in one evaluation.")
    p.add_argument("--inputs", nargs="+", required=True,
                   help="the evaluations' JSON files ({eval_dir}/{task}_seed{code_seed}.json), two or more")
    p.add_argument("--out", required=True,
                   help="the merged JSON to write (the CSV and PNG go beside it); an existing file is refused")
    p.add_argument("--stats_avg", type=int, default=None,
                   help="the release's window: its statistic over the last this many finished episodes (default: "
                        "the inputs' own, which must agree)")
    add_skills_flag(p)
    return p


def main(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        out = output_file("--out", args.out, overwrite=False, remedy="give another --out or remove it")
        if out.suffix != ".json":
            raise FlagError(f"--out {out}: name a .json file (the CSV and PNG take its stem)")
        if args.stats_avg is not None and args.stats_avg < 1:
            raise FlagError(f"--stats_avg must be >= 1, got {args.stats_avg}")
        summaries = [load_json(p, "evaluation JSON", "Give the JSON an evaluation wrote.", error=MergeError)
                     for p in args.inputs]
        merged = merge_summaries(summaries, list(args.inputs), args.stats_avg)
    except (FlagError, MergeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    paths = write_results(out.with_suffix(""), merged, tuple(merged.get("skill_time_share") or ()))
    run = merged["run"]
    ci = merged.get("ci95") or [float("nan")] * 2
    print(f"{merged['task']} ({merged['protocol']} protocol, {len(summaries)} evaluations, {run['num_envs']} games, "
          f"{run['env_steps_run']:,} env steps, {run['finished_episodes']:,} finished episodes): {merged['measure']} "
          f"{merged['mean']:.4g} [{ci[0]:.3g}, {ci[1]:.3g}] ({merged.get('ci_method')}) over {merged['episodes']} "
          f"episodes; wrote {', '.join(map(str, paths))}")
    return merged


if __name__ == "__main__":
    main()
