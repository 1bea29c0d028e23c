"""Rebuild the pages' figures from the records kept in docs/records (no checkpoint, no game: seconds).

    python -m scripts.results_tables            # prints every kept figure and the tables of seeds
    python -m scripts.results_tables --write    # writes the generated tables into the pages that hold them
    python -m scripts.results_tables --check    # exit 1, naming page and figure, where a page differs

Each figure is an entry of ``docs/records/figures.toml`` (what to read from which record, and the pages that
quote it); it is computed again from the record's per-episode values with the tools' intervals (bootstrap
percentile for a mean, Wilson for a success rate): :mod:`orchestration.kept_records`. ``--check`` also finds a
figure a page is said to quote but holds no longer (a page edited by hand). To add a figure: keep its record
(a skill report's JSON, an evaluation's JSON, gzipped), add its entry, put the two marker lines where its table
belongs (``--write`` says which), and run ``--write``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from common.atomic_io import atomic_write_text
from common.cli import ScriptParser, error
from common.flag_checks import FlagError, output_file, output_folder
from common.skill_files import add_skills_flag
from orchestration.kept_records import (
    RecordError,
    check_pages,
    figures_table,
    pages_of,
    rebuild_all,
    render_blocks,
    replace_blocks,
    seeds_table,
)

REPO = Path(__file__).resolve().parents[1]


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(prog="python -m scripts.results_tables", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", default=str(REPO / "docs" / "records"),
                   help="the folder of kept records and their figures.toml (default: this checkout's docs/records)")
    p.add_argument("--repo", default=str(REPO),
                   help="the folder the pages' paths in figures.toml are relative to (default: this checkout)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true",
                      help="write the generated tables into the pages (between their marker lines)")
    what.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 with one line per difference between the pages and the records")
    add_skills_flag(p)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    records, repo = Path(args.records), Path(args.repo)
    try:
        if args.write:
            output_folder("--repo", repo)  # the pages are written in place: a folder that takes files
        figures = rebuild_all(records)
        if args.check:
            problems = check_pages(repo, records, figures)
            for line in problems:
                print(line, file=sys.stderr)
            if problems:
                return 1
            print(f"{len(figures)} kept figures: every page agrees with the records")
            return 0
        if args.write:
            for page in pages_of(figures):  # every page checked before any is written
                if not (repo / page).is_file():
                    return error(f"--repo {repo}: no page {page} (named in {records / 'figures.toml'})")
                output_file("--repo", repo / page)
            for page in pages_of(figures):
                path = repo / page
                text = path.read_text(encoding="utf-8")
                new = replace_blocks(text, render_blocks(figures, page, records, repo), page)
                if new != text:
                    atomic_write_text(path, new)
                    print(f"wrote {page}")
                else:
                    print(f"{page}: unchanged")
            return 0
        print(figures_table(figures, "docs/results.md", records, repo))
        for group in sorted({f.spec.group for f in figures if f.spec.group}):
            print(f"\n{group}:\n" + seeds_table(figures, group))
        return 0
    except (RecordError, FlagError) as exc:
        return error(exc)


if __name__ == "__main__":
    sys.exit(main())
