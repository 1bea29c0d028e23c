"""Compare two annotators' labels of the same pairs, skill by skill (e.g. a language model against the
rule-based stand-in): label shares next to the release's, agreement, order bias, and on the pairs where exactly
one moment went down (or up) a level, how often each picked that moment.

Example::

    python -m scripts.compare_labels --dataset_dir og_dataset --labels_dir preference_smollm2 \\
        --against_dir preference --names "SmolLM2-135M,stand-in" --out label_comparison.json

Each folder holds ``llama3_{skill}_default.npy`` (``--annotator`` names another file) with one label per pair of
``{dataset_dir}/{skill}.npz``; a skill without both files is skipped with a note.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from common.atomic_io import atomic_write_json
from common.cli import ScriptParser, error
from common.flag_checks import FlagError, output_file
from common.skill_files import add_skills_flag
from common.vocabulary import SKILLS
from rlaif.dataset import DatasetError, load_dataset
from rlaif.label_comparison import LabelComparison, compare_labels
from rlaif.preferences import RELEASE_LABEL_SHARES, PreferenceError, load_preferences

_ORDER = ("first", "second", "tie", "unknown")


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(prog="python -m scripts.compare_labels", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset_dir", "--dataset-dir", dest="dataset_dir", required=True,
                   help="folder of the annotated datasets {skill}.npz")
    p.add_argument("--labels_dir", "--labels-dir", dest="labels_dir", required=True,
                   help="folder of the first annotator's labels")
    p.add_argument("--against_dir", "--against-dir", dest="against_dir", required=True,
                   help="folder of the second annotator's labels")
    p.add_argument("--annotator", default="llama3_{skill}_default",
                   help="file name (without .npy) of a skill's labels in both folders (default: %(default)s)")
    # not --skills, which chooses the skill set (common.skill_files)
    p.add_argument("--skill_names", default=",".join(SKILLS),
                   help="comma-separated skills to compare (default: every skill of the set)")
    add_skills_flag(p)
    p.add_argument("--names", default="labels,against",
                   help="the two annotators' names in the table, comma-separated (default: %(default)s)")
    p.add_argument("--out", default=None, help="also write the comparison as JSON here")
    return p


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:.0f}%"


def _shares(d: dict[str, float]) -> str:
    return "/".join(_pct(d[k]) for k in _ORDER)


def _picks(d: dict[str, float]) -> str:
    return "no such pair" if not d["pairs"] else _pct(d["picked"])


def format_table(results: dict[str, LabelComparison], names: tuple[str, str]) -> str:
    a, b = names
    lines = [
        f"| skill | pairs | shares first/second/tie/unknown: {a} | {b} | release's files | agreement (both "
        f"decided) | same choice (both chose) | first among choices: {a}, {b} | picks the descent: {a}, {b} "
        f"(pairs) | picks the ascent: {a}, {b} (pairs) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for skill, c in results.items():
        release = RELEASE_LABEL_SHARES.get(skill)
        lines.append(
            f"| {skill} | {c.pairs} | {_shares(c.shares_a)} | {_shares(c.shares_b)} | "
            f"{_shares(dict(zip(_ORDER, release))) if release else 'n/a'} | "
            f"{_pct(c.agreement['agreement'])} of {c.agreement['compared']} | "
            f"{_pct(c.agreement['decisive_agreement'])} of {c.agreement['decisive']} | "
            f"{_pct(c.first_share_a)}, {_pct(c.first_share_b)} | "
            f"{_picks(c.descents_a)}, {_picks(c.descents_b)} ({c.descents_a['pairs']}) | "
            f"{_picks(c.ascents_a)}, {_picks(c.ascents_b)} ({c.ascents_a['pairs']}) |"
        )
    return "\n".join(lines)


def json_safe(value: Any) -> Any:
    """``value`` with every NaN or infinity as None: JSON has no NaN (``json.dumps`` writes a bare ``NaN`` that
    strict readers refuse), and a share over no pairs is "none", not a number."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.out and Path(args.out).is_dir():  # found before the work, not after the table is printed
        return error(f"--out {args.out} is a folder; give the JSON file to write, e.g. "
                     f"{Path(args.out) / 'label_comparison.json'}")
    try:
        if args.out:
            output_file("--out", args.out)
    except FlagError as exc:
        return error(exc)
    names = tuple(n.strip() for n in args.names.split(","))
    if len(names) != 2 or not all(names):
        print(f"error: --names needs two names, got {args.names!r}", file=sys.stderr)
        return 2
    skills = [s.strip() for s in args.skill_names.split(",") if s.strip()]
    bad = [s for s in skills if s not in SKILLS]
    if bad or not skills:
        print(f"error: --skill_names {args.skill_names!r}: expected skills among {', '.join(SKILLS)}",
              file=sys.stderr)
        return 2
    results: dict[str, LabelComparison] = {}
    for skill in skills:
        file = args.annotator.format(skill=skill) + ".npy"
        paths = [Path(args.labels_dir) / file, Path(args.against_dir) / file]
        dataset_path = Path(args.dataset_dir) / f"{skill}.npz"
        missing = [str(p) for p in (*paths, dataset_path) if not p.exists()]
        if missing:
            print(f"{skill}: skipped, no {' and no '.join(missing)}")
            continue
        try:
            dataset = load_dataset(dataset_path)
            a, b = (load_preferences(p, len(dataset.messages) // 2) for p in paths)
            results[skill] = compare_labels(dataset, a, b)
        except (DatasetError, PreferenceError, ValueError) as exc:
            print(f"error: {skill}: {exc}", file=sys.stderr)
            return 2
    if not results:
        print("error: no skill has a dataset and both label files", file=sys.stderr)
        return 2
    print(format_table(results, names))
    if args.out:
        atomic_write_json(args.out, json_safe({"names": list(names), "labels_dir": args.labels_dir,
                                               "against_dir": args.against_dir, "dataset_dir": args.dataset_dir,
                                               "skills": {s: c.as_dict() for s, c in results.items()}}))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
