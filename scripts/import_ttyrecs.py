"""Build an observation dataset from recorded games (ttyrecs), e.g. the Dungeons and Data dataset.

Examples::

    # NLE's layout (what save_ttyrec_every writes; NLD-AA)
    python -m scripts.import_ttyrecs --ttyrec_dir nle_data --skill discoverer --num_pairs 20000

    # the alt.org layout (NLD-NAO), keeping the NLE database for later runs
    python -m scripts.import_ttyrecs --ttyrec_dir nld-nao --layout altorg --db nld.db \\
        --dataset_name nao --skill merchant --num_pairs 20000

    # read a dataset already in an NLE database
    python -m scripts.import_ttyrecs --db nld.db --dataset_name nao --skill descender --num_pairs 20000

Writes ``{out}/{skill}.npz`` in the format of ``scripts.collect_dataset`` (atomically; an
existing file is only replaced with ``--force``).
"""
from __future__ import annotations

import argparse
import logging
import sqlite3
import sys
from pathlib import Path
from typing import Optional, Sequence

from common.cli import ScriptParser
from common.flag_checks import output_file
from common.skill_files import add_skills_flag
from common.vocabulary import SKILLS
from rl_baseline.collect.config import CollectError, add_dataset_args, check_dataset_args
from rl_baseline.collect.rollouts import check_output, output_path, write_dataset
from rl_baseline.collect.ttyrecs import LAYOUTS, ImportConfig, import_ttyrecs


def build_parser() -> argparse.ArgumentParser:
    d = ImportConfig(skill=SKILLS[0], num_pairs=1)
    p = ScriptParser(
        prog="python -m scripts.import_ttyrecs",
        description="Read human (or agent) NetHack recordings with nle.dataset and save message/stats pairs "
                    "for preference annotation.",
    )
    p.add_argument("--ttyrec_dir", default=None,
                   help="directory of recordings to add to the NLE database (NLE or alt.org layout)")
    add_dataset_args(p, d, unit="game")
    p.add_argument("--db", default=None,
                   help="NLE dataset database file to use (created if missing, kept afterwards); "
                        "default: a temporary database")
    p.add_argument("--dataset_name", default=d.dataset_name,
                   help="name of the games in the database (default: %(default)s)")
    p.add_argument("--layout", choices=LAYOUTS, default=d.layout,
                   help="directory layout of --ttyrec_dir: nledata (NLE/NLD-AA), altorg (NLD-NAO) or auto "
                        "(default: %(default)s)")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of the game order and sampling (default: %(default)s)")
    p.add_argument("--batch_size", type=int, default=d.batch_size,
                   help="games replayed side by side by nle.dataset (default: %(default)s)")
    p.add_argument("--seq_length", type=int, default=d.seq_length,
                   help="frames per game per batch (default: %(default)s)")
    p.add_argument("--allow_fewer", action="store_true",
                   help="when the games run out before --num_pairs, save the pairs found instead of failing")
    p.add_argument("--no_progress", action="store_true", help="hide the progress bar")
    p.add_argument("--log_level", default="INFO", help="logging level (default: %(default)s)")
    add_skills_flag(p)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        check_dataset_args(args.skill, args.num_pairs)
        config = ImportConfig(
            skill=args.skill, num_pairs=args.num_pairs, ttyrec_dir=args.ttyrec_dir, db=args.db,
            dataset_name=args.dataset_name, layout=args.layout, seed=args.seed, sample_prob=args.sample_prob,
            uninformative_keep_prob=args.uninformative_keep_prob, level_change_prob=args.level_change_prob,
            max_samples_per_game=args.max_samples_per_game, batch_size=args.batch_size,
            seq_length=args.seq_length, allow_fewer=args.allow_fewer, progress=not args.no_progress,
        )
        config.validate()
        path = check_output(output_path(args.out, config.skill), args.force)
        if config.db and (config.ttyrec_dir or not Path(config.db).exists()):  # recordings are added to it
            output_file("--db", config.db, error=CollectError)
        dataset = import_ttyrecs(config)
        write_dataset(path, dataset, force=args.force)
    except (CollectError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (sqlite3.Error, OSError) as exc:
        print(f"error: cannot read the recordings/database (--ttyrec_dir {args.ttyrec_dir}, --db {args.db}): {exc}",
              file=sys.stderr)
        return 2
    print(f"wrote {path}: {dataset.num_pairs} pairs from {dataset.meta['games_sampled']} games "
          f"({dataset.meta['steps']} steps read)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
