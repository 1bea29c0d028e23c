"""Export one of this project's datasets (with its preferences) into Motif's dataset layout.

Example::

    python -m scripts.export_dataset --format motif --dataset_dir og_dataset --skill descender --out motif_dataset

Reads ``{dataset_dir}/{skill}.npz`` (or ``.pkl``) and its preference files, and writes ``{out}/data/``,
``{out}/info/`` and ``{out}/preference/{annotator}.npy`` as Motif's tools read them (see
:mod:`rlaif.motif_dataset`). The preference files are those named with ``--annotator`` (repeatable),
or by default every ``{preference_dir}/*.npy`` whose name has the skill as a ``_``-separated part
(``llama3_descender_default``) and whose length is the dataset's number of pairs. Nothing is
written when an input is wrong; an existing ``--out`` is replaced only with ``--overwrite``.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from common.cli import FAILED, USAGE, ScriptParser, error
from common.skill_files import add_skills_flag
from common.vocabulary import SKILLS

FORMATS = ("motif",)


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(
        prog="python -m scripts.export_dataset",
        description="Write a dataset of this project (og_dataset/{skill}.npz and its preference files) in Motif's "
                    "dataset layout (data/, info/, preference/), for Motif's commands and tools.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--format", default="motif", choices=FORMATS, help="layout to write")
    p.add_argument("--dataset_dir", "--dataset-dir", dest="dataset_dir", default="og_dataset",
                   help="folder with {skill}.npz or {skill}.pkl")
    p.add_argument("--dataset", default=None, help="explicit dataset file; overrides --dataset_dir")
    p.add_argument("--skill", required=True, choices=SKILLS, help="whose dataset to export")
    p.add_argument("--preference_dir", "--preference-dir", dest="preference_dir", default="preference",
                   help="folder with the preference files {annotator}.npy")
    p.add_argument("--annotator", action="append", default=None,
                   help="preference file to export (repeatable); default: every {preference_dir}/*.npy named with "
                        "the skill whose length matches the dataset")
    p.add_argument("--out", default="motif_dataset", help="the folder to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--no_progress", "--no-progress", dest="progress", action="store_false", help="hide the progress bar")
    add_skills_flag(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from rlaif.dataset import DatasetError, find_dataset, load_dataset  # lazy: pulls in numpy; --help stays light
    from rlaif.motif_dataset import (  # lazy: numpy, as above
        MotifLayoutError,
        check_export_target,
        export_motif_layout,
        skill_preferences,
    )

    try:
        check_export_target(args.out, args.overwrite)  # before the dataset is read
        path = Path(args.dataset) if args.dataset else find_dataset(args.dataset_dir, args.skill)
        dataset = load_dataset(path)
        prefs = skill_preferences(args.preference_dir, args.skill, dataset.num_pairs, args.annotator)
        out = export_motif_layout(dataset, prefs, args.out,
                                  meta={"dataset": str(path), "skill": args.skill, **dataset.meta},
                                  overwrite=args.overwrite, progress=args.progress)
    except (DatasetError, MotifLayoutError) as exc:  # bad input: a flag's file or folder
        return error(exc, USAGE)
    except OSError as exc:  # the run failed: a full disk, no permission
        return error(exc, FAILED)
    print(f"exported {dataset.num_pairs} pairs of {path} with {len(prefs)} preference file(s) "
          f"({', '.join(prefs) or 'none'}) to {out} (Motif's layout)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
