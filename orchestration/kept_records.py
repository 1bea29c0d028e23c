"""The figures the pages quote, rebuilt from the records kept in the repository (``docs/records/``).

A figure a page quotes from a run is only as good as the file behind it. Each such figure is an entry of
``docs/records/figures.toml``: the record it comes from (a skill report or an evaluation summary, with its
per-episode values), what to read from it, and the pages that quote it. :func:`rebuild_all` computes every figure
again from the per-episode values (not from the mean the file recorded), with the tools' own intervals (a bootstrap
percentile interval for a mean, Wilson's for a success rate); :func:`render_blocks` writes the tables; and
:func:`check_pages` says where a page differs from what the records give (``scripts.results_tables --check``; the
test suite runs it).

Kinds of figure:

* ``held_alone``: a skill held alone (:mod:`scripts.skill_report`'s JSON): the mean of ``measure`` over the
  episodes of ``policy`` on ``skill``, per episode.
* ``composed``: a task composed zero-shot under the release's protocol (an evaluation's JSON, merged or not): the
  share of episodes that reached the task's goal over the release's window, with the count over all episodes
  beside it where more episodes finished than the window holds.
* ``composed_mean``: the mean of one per-episode value of such an evaluation (``field``, a dotted path into an
  episode's record: ``release.descents``) over the release's window, with its bootstrap interval.
* ``composed_share``: the share of the window's episodes whose ``field`` equals ``equals`` (``release.max_depth``
  1: never left level 1; ``ending`` "killed by a monster"), with Wilson's interval.

A page's sections named in the manifest (``[[quoted_section]]``: ``page`` and ``heading``, the heading's line as
written) quote no interval that is not a kept figure's: :func:`check_sections` reads every ``mean [lo, hi]`` in them
and every count over all episodes (``N of M over all episodes: Y%``) in them (the verdict, the table of figures to
quote), so a figure whose record was not kept cannot stand there.

Figures of one ``group`` with a ``seed`` and a ``role`` make a table of seeds with their spread (the method at
several training seeds): :func:`seeds_table`.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from common.estimates import bootstrap_interval, format_mean_interval, format_percent, wilson_interval

MANIFEST_NAME = "figures.toml"
KINDS = ("held_alone", "composed", "composed_mean", "composed_share")
#: the fields of an entry of the manifest, by kind (beside the common ones)
KIND_FIELDS = {"held_alone": ("skill", "policy", "measure"), "composed": (), "composed_mean": ("field",),
               "composed_share": ("field", "equals")}
#: an interval as the pages print one: ``0.225 [0.15, 0.31]``, ``2.3% [1.5%, 3.4%]`` (the figure before it included)
INTERVAL = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?%?\s\[-?\d[\d,]*(?:\.\d+)?%?,\s-?\d[\d,]*(?:\.\d+)?%?\]")
#: a count over all episodes as the pages put it beside a rate over the release's window
BESIDE = re.compile(r"\d[\d,]* of [\d,]+ over all episodes: \d[\d.]*%")
COMMON_FIELDS = ("id", "quantity", "kind", "record", "pages")
OPTIONAL_FIELDS = ("group", "seed", "role", "note", "quoted_in")
#: the roles of a figure in a table of seeds, in the table's column order, with the column's heading
SEED_ROLES = {
    "descender_alone": "descender held alone: new deepest levels per episode",
    "descender_alone_random": "random play on the same games",
    "gnomish_composed": "gnomish composed: reached, over the release's window",
}

BLOCK_BEGIN = "<!-- rebuilt by `python -m scripts.results_tables --write` from docs/records: {name}; edit the records, not this table -->"
BLOCK_END = "<!-- end of {name} -->"


class RecordError(ValueError):
    """A manifest entry or a record that cannot give its figure (the message names the file and the entry)."""


@dataclass(frozen=True)
class FigureSpec:
    id: str
    quantity: str
    kind: str
    record: str  # relative to the records folder
    pages: tuple[str, ...]  # relative to the repository root; each holds the generated tables
    params: dict = field(default_factory=dict)
    quoted_in: tuple[str, ...] = ()  # pages that quote the figure in their text only, with no generated table
    group: Optional[str] = None
    seed: Optional[int] = None
    role: Optional[str] = None
    note: str = ""


@dataclass(frozen=True)
class Figure:
    spec: FigureSpec
    text: str  # as the pages quote it: "0.015 [0, 0.035]", "0.1% [0.018%, 0.56%]"
    mean: float
    episodes: int
    basis: str  # what the figure is over: "per episode, 200 episodes", "over the release's window of ..."
    env_steps: Optional[int] = None  # the checkpoint's, where the record gives it
    beside: str = ""  # the count over all episodes, for a success rate whose window holds fewer


@dataclass(frozen=True)
class QuotedSection:
    """A page's section that quotes kept figures only (its heading's line as written, ``## Verdict``)."""
    page: str
    heading: str


def _read_manifest(records_dir: str | Path) -> tuple[Path, dict]:
    path = Path(records_dir) / MANIFEST_NAME
    try:
        return path, tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise RecordError(f"{path}: no manifest of kept figures") from exc
    except tomllib.TOMLDecodeError as exc:
        raise RecordError(f"{path}: not valid TOML: {exc}") from exc


def load_quoted_sections(records_dir: str | Path) -> list[QuotedSection]:
    """The ``[[quoted_section]]`` entries of ``{records_dir}/figures.toml`` (none is allowed)."""
    path, data = _read_manifest(records_dir)
    sections = []
    for n, entry in enumerate(data.get("quoted_section", []), start=1):
        if not isinstance(entry, dict) or set(entry) != {"page", "heading"} or not all(
                isinstance(v, str) for v in entry.values()):
            raise RecordError(f"{path}: [[quoted_section]] {n} needs page and heading (text), and nothing else")
        if not entry["heading"].startswith("#"):
            raise RecordError(f"{path}: [[quoted_section]] {n}: heading {entry['heading']!r} is not a heading "
                              "line (it starts with #)")
        sections.append(QuotedSection(entry["page"], entry["heading"]))
    return sections


def load_manifest(records_dir: str | Path) -> list[FigureSpec]:
    """The entries of ``{records_dir}/figures.toml``; a :class:`RecordError` names the file and the entry."""
    path, data = _read_manifest(records_dir)
    entries = data.get("figure")
    if not isinstance(entries, list) or not entries:
        raise RecordError(f"{path}: no [[figure]] entries")
    specs: list[FigureSpec] = []
    for n, entry in enumerate(entries, start=1):
        where = f"{path}: [[figure]] {n} ({entry.get('id', 'no id')})"
        missing = [k for k in COMMON_FIELDS if k not in entry]
        if missing:
            raise RecordError(f"{where}: missing {', '.join(missing)}")
        kind = entry["kind"]
        if kind not in KINDS:
            raise RecordError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
        missing = [k for k in KIND_FIELDS[kind] if k not in entry]
        if missing:
            raise RecordError(f"{where}: a {kind} figure needs {', '.join(missing)}")
        unknown = sorted(set(entry) - set(COMMON_FIELDS) - set(OPTIONAL_FIELDS) - set(KIND_FIELDS[kind]))
        if unknown:
            raise RecordError(f"{where}: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
        role = entry.get("role")
        if role is not None and role not in SEED_ROLES:
            raise RecordError(f"{where}: role {role!r} is not one of {', '.join(SEED_ROLES)}")
        if (role is None) != (entry.get("seed") is None) or (role is not None and not entry.get("group")):
            raise RecordError(f"{where}: a figure of a table of seeds needs group, seed and role together")
        for key in ("pages", "quoted_in"):
            if not isinstance(entry.get(key, []), list) or not all(isinstance(p, str) for p in entry.get(key, [])):
                raise RecordError(f"{where}: {key} must be a list of page paths")
        specs.append(FigureSpec(
            id=str(entry["id"]), quantity=str(entry["quantity"]), kind=kind, record=str(entry["record"]),
            pages=tuple(entry["pages"]), params={k: entry[k] for k in KIND_FIELDS[kind]},
            quoted_in=tuple(entry.get("quoted_in", [])),
            group=entry.get("group"), seed=entry.get("seed"), role=role, note=str(entry.get("note", ""))))
    ids = [s.id for s in specs]
    doubled = sorted({i for i in ids if ids.count(i) > 1})
    if doubled:
        raise RecordError(f"{path}: the id{'s' if len(doubled) > 1 else ''} {', '.join(doubled)} "
                          "appear more than once")
    return specs


def read_record(path: Path) -> dict:
    """A kept record: JSON, gzipped where its name ends in ``.gz``."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        return json.loads(raw)
    except FileNotFoundError as exc:
        raise RecordError(f"{path}: the record is missing") from exc
    except (OSError, EOFError, json.JSONDecodeError) as exc:
        raise RecordError(f"{path}: cannot be read as a record: {exc}") from exc


def _held_alone(spec: FigureSpec, record: dict, path: Path) -> Figure:
    skill, policy, measure = spec.params["skill"], spec.params["policy"], spec.params["measure"]
    try:
        entry = record["skills"][skill]["policies"][policy]
        values = [float(e["measures"][measure]) for e in entry["per_episode"]]
    except (KeyError, TypeError) as exc:
        raise RecordError(f"{path}: no per-episode {measure!r} of the {policy} policy on {skill} "
                          f"(figure {spec.id})") from exc
    if not values:
        raise RecordError(f"{path}: no episodes of the {policy} policy on {skill} (figure {spec.id})")
    mean = float(np.mean(values))
    lo, hi = bootstrap_interval(values)
    steps = record.get("env_steps") if policy == "trained" else None
    return Figure(spec, format_mean_interval(mean, lo, hi), mean, len(values),
                  f"per episode, {len(values):,} episodes", int(steps) if steps is not None else None)


def _composed(spec: FigureSpec, record: dict, path: Path) -> Figure:
    window, finished = _window(spec, record, path)
    try:
        k = sum(bool(e["release"]["reached"]) for e in window)
        reached_all = sum(bool(e["release"]["reached"]) for e in record["per_episode"])
    except (KeyError, TypeError) as exc:
        raise RecordError(f"{path}: no per-episode release records (figure {spec.id})") from exc
    n = len(window)
    lo, hi = wilson_interval(k, n)
    text = f"{format_percent(k / n)} [{format_percent(lo)}, {format_percent(hi)}]"
    beside = ""
    if n < finished:
        overall = reached_all / finished
        printed = format_percent(overall)
        if printed == format_percent(k / n) and overall != k / n:
            # two rates that differ are not printed alike (the pages tell the two bases apart by their values)
            printed = f"{100.0 * overall:.3g}%"
        beside = f"({reached_all} of {finished:,} over all episodes: {printed})"
    steps = record.get("env_steps")
    return Figure(spec, text, k / n, n, _window_basis(n, finished), int(steps) if steps is not None else None, beside)


def _field(episode: dict, dotted: str) -> object:
    value: object = episode
    for key in dotted.split("."):
        value = value[key]  # type: ignore[index]
    return value


def _window(spec: FigureSpec, record: dict, path: Path) -> tuple[list[dict], int]:
    """The episodes of the release's window (all of them where fewer finished), and how many finished."""
    try:
        episodes = record["per_episode"]
        window = [e for e in episodes if e.get("in_window", True)]
    except (KeyError, TypeError, AttributeError) as exc:
        raise RecordError(f"{path}: no per-episode release records (figure {spec.id})") from exc
    if not window:
        raise RecordError(f"{path}: no finished episodes (figure {spec.id})")
    return window, len(episodes)


def _window_basis(n: int, finished: int) -> str:
    return (f"over the release's window of the last {n:,} episodes" if n < finished
            else f"over the window of all {n:,} episodes")


def _composed_mean(spec: FigureSpec, record: dict, path: Path) -> Figure:
    window, finished = _window(spec, record, path)
    try:
        values = [float(_field(e, spec.params["field"])) for e in window]
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"{path}: no per-episode {spec.params['field']!r} (figure {spec.id})") from exc
    mean = float(np.mean(values))
    lo, hi = bootstrap_interval(values)
    steps = record.get("env_steps")
    return Figure(spec, format_mean_interval(mean, lo, hi), mean, len(values), _window_basis(len(values), finished),
                  int(steps) if steps is not None else None)


def _composed_share(spec: FigureSpec, record: dict, path: Path) -> Figure:
    window, finished = _window(spec, record, path)
    try:
        hits = sum(_field(e, spec.params["field"]) == spec.params["equals"] for e in window)
    except (KeyError, TypeError) as exc:
        raise RecordError(f"{path}: no per-episode {spec.params['field']!r} (figure {spec.id})") from exc
    n = len(window)
    lo, hi = wilson_interval(hits, n)
    steps = record.get("env_steps")
    return Figure(spec, f"{format_percent(hits / n)} [{format_percent(lo)}, {format_percent(hi)}]", hits / n, n,
                  _window_basis(n, finished), int(steps) if steps is not None else None)


_BUILDERS = {"held_alone": _held_alone, "composed": _composed, "composed_mean": _composed_mean,
             "composed_share": _composed_share}


def rebuild(spec: FigureSpec, records_dir: str | Path) -> Figure:
    """One figure, computed again from its record's per-episode values."""
    path = Path(records_dir) / spec.record
    return _BUILDERS[spec.kind](spec, read_record(path), path)


def rebuild_all(records_dir: str | Path) -> list[Figure]:
    return [rebuild(spec, records_dir) for spec in load_manifest(records_dir)]


def _record_link(spec: FigureSpec, page: str, records_dir: Path, repo: Path) -> str:
    """A link from ``page`` to the figure's record."""
    target = os.path.relpath((records_dir / spec.record).resolve(), (repo / page).resolve().parent)
    return f"[{Path(spec.record).name}]({Path(target).as_posix()})"


def figures_table(figures: Sequence[Figure], page: str, records_dir: Path, repo: Path) -> str:
    """Every kept figure: what it measures, its value, its basis and its record."""
    lines = ["| figure | value [95% interval] | basis | record |", "|---|---|---|---|"]
    for f in figures:
        basis = f.basis + (f" {f.beside}" if f.beside else "")
        steps = f"; checkpoint at {f.env_steps:,} env steps" if f.env_steps is not None else ""
        lines.append(f"| {f.spec.quantity} | {f.text} | {basis}{steps} | "
                     f"{_record_link(f.spec, page, records_dir, repo)} |")
    return "\n".join(lines)


def spread(values: Sequence[float], unit: str = "") -> str:
    """The spread over seeds: their mean and range, ``mean 0.0217 (range 0.015 to 0.03, 3 seeds)``."""
    if not values:
        return "no seed yet"
    if len(values) == 1:
        return f"{values[0]:.3g}{unit} (1 seed: no spread yet)"
    return (f"mean {float(np.mean(values)):.3g}{unit} (range {min(values):.3g}{unit} to {max(values):.3g}{unit}, "
            f"{len(values)} seeds)")


def seeds_table(figures: Sequence[Figure], group: str, planned: int = 3) -> str:
    """The figures of ``group`` by training seed, one column per role, and their spread over the seeds."""
    members = [f for f in figures if f.spec.group == group]
    seeds = sorted({int(f.spec.seed) for f in members})
    roles = [r for r in SEED_ROLES if any(f.spec.role == r for f in members)]
    lines = ["| training seed | checkpoint (env steps) | " + " | ".join(SEED_ROLES[r] for r in roles) + " |",
             "|---" * (2 + len(roles)) + "|"]
    for seed in seeds:
        cells, steps = [], None
        for role in roles:
            found = [f for f in members if f.spec.seed == seed and f.spec.role == role]
            if found:
                f = found[0]
                steps = steps if steps is not None else f.env_steps
                cells.append(f.text + (f" {f.beside}" if f.beside else ""))
            else:
                cells.append("not measured yet")
        lines.append(f"| {seed} | {f'{steps:,}' if steps is not None else 'n/a'} | " + " | ".join(cells) + " |")
    spread_cells = []
    for role in roles:
        values = [f.mean for f in members if f.spec.role == role]
        rate = role == "gnomish_composed"  # a success rate, in percent as the pages print it
        spread_cells.append(spread([100.0 * v for v in values], "%") if rate else spread(values))
    lines.append(f"| over the seeds ({len(seeds)} of {planned}) | | " + " | ".join(spread_cells) + " |")
    return "\n".join(lines)


def render_blocks(figures: Sequence[Figure], page: str, records_dir: Path, repo: Path) -> dict[str, str]:
    """The generated tables of ``page``, by block name."""
    blocks = {"kept_figures": figures_table([f for f in figures if page in f.spec.pages], page, records_dir, repo)}
    for group in sorted({f.spec.group for f in figures if f.spec.group and page in f.spec.pages}):
        blocks[f"seeds:{group}"] = seeds_table(figures, group)
    return blocks


def _markers(name: str) -> tuple[str, str]:
    return BLOCK_BEGIN.format(name=name), BLOCK_END.format(name=name)


def _block_pattern() -> "re.Pattern[str]":
    begin, end = (re.escape(m).replace(re.escape("{name}"), "(?P<name%s>[^\\n]+?)" % i)
                  for i, m in enumerate((BLOCK_BEGIN, BLOCK_END)))
    return re.compile(begin + r"\n(?P<body>.*?)\n?" + end, re.S)


def split_blocks(text: str) -> tuple[str, dict[str, str]]:
    """``(the page without its generated tables, the tables by name)``; a table whose end marker names another
    is left in the page's text."""
    blocks, outside, last = {}, [], 0
    for m in _block_pattern().finditer(text):
        if m.group("name0") != m.group("name1"):
            continue
        blocks[m.group("name0")] = m.group("body").strip("\n")
        outside.append(text[last:m.start()])
        last = m.end()
    outside.append(text[last:])
    return "".join(outside), blocks


def replace_blocks(text: str, blocks: dict[str, str], page: str) -> str:
    """``text`` with each block's content between its markers replaced; a block without its markers is a
    :class:`RecordError` naming the page (the markers are placed by hand, where the table belongs)."""
    for name, content in blocks.items():
        begin, end = _markers(name)
        start = text.find(begin)
        stop = text.find(end, start + len(begin)) if start >= 0 else -1
        if start < 0 or stop < 0:
            raise RecordError(f"{page}: no place for the table {name!r}: put the two lines\n{begin}\n{end}\n"
                              "where it belongs")
        text = text[:start + len(begin)] + "\n" + content + "\n" + text[stop:]
    return text


def pages_of(figures: Sequence[Figure]) -> list[str]:
    return sorted({p for f in figures for p in f.spec.pages})


def _one_line(text: str) -> str:
    """``text`` with each run of white space (a line break and the next line's indent) read as one space."""
    return re.sub(r"\s+", " ", text)


def section_text(text: str, heading: str) -> Optional[str]:
    """The lines under ``heading`` up to the next heading of its level or above (``None`` without the heading)."""
    lines = text.split("\n")
    try:
        start = lines.index(heading)
    except ValueError:
        return None
    level = len(heading) - len(heading.lstrip("#"))
    body = []
    fenced = False
    for line in lines[start + 1:]:
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("#") and len(line) - len(line.lstrip("#")) <= level:
            break
        body.append(line)
    return "\n".join(body)


def check_sections(repo: str | Path, records_dir: str | Path, figures: Sequence[Figure]) -> list[str]:
    """Intervals in the quoted sections that no kept figure of that page gives (each names page, section and the
    interval): a figure there whose record was not kept, or one edited by hand."""
    repo = Path(repo)
    problems = []
    for section in load_quoted_sections(records_dir):
        path = repo / section.page
        if not path.exists():
            problems.append(f"{section.page}: the page is missing (a quoted section of {MANIFEST_NAME})")
            continue
        body = section_text(split_blocks(path.read_text(encoding="utf-8"))[0], section.heading)
        if body is None:
            problems.append(f"{section.page}: no heading {section.heading!r} (a quoted section of {MANIFEST_NAME})")
            continue
        mine = [f for f in figures if section.page in f.spec.pages + f.spec.quoted_in]
        kept = {f.text for f in mine}
        body = _one_line(body)  # a figure wrapped across two lines is read as one
        for found in dict.fromkeys(m.group(0) for m in INTERVAL.finditer(body)):
            if found not in kept:
                problems.append(f"{section.page}, {section.heading!r}: {found!r} is not a kept figure of this page "
                                f"(keep its record and add it to {MANIFEST_NAME}, or take it out of this section)")
        counts = {m.group(0) for f in mine for m in BESIDE.finditer(f.beside)}
        for found in dict.fromkeys(m.group(0) for m in BESIDE.finditer(body)):
            if found not in counts:
                problems.append(f"{section.page}, {section.heading!r}: {found!r} is not the count over all episodes "
                                f"of a kept figure of this page")
    return problems


def check_pages(repo: str | Path, records_dir: Optional[str | Path] = None,
                figures: Optional[Sequence[Figure]] = None) -> list[str]:
    """What differs between the pages and the records: a generated table that is not what the records give, or a
    figure a page is said to quote that it does not hold (each problem names the page and the figure)."""
    repo = Path(repo)
    records_dir = Path(records_dir) if records_dir is not None else repo / "docs" / "records"
    figures = list(figures) if figures is not None else rebuild_all(records_dir)
    problems = []
    for page in pages_of(figures):
        path = repo / page
        if not path.exists():
            problems.append(f"{page}: the page is missing")
            continue
        outside, held = split_blocks(path.read_text(encoding="utf-8"))
        outside = _one_line(outside)
        for name, content in render_blocks(figures, page, records_dir, repo).items():
            if name not in held:
                problems.append(f"{page}: no table {name!r} (run python -m scripts.results_tables --write)")
            elif held[name] != content:
                problems.append(f"{page}: the table {name!r} is not what the records give (run python -m "
                                "scripts.results_tables --write)")
        for f in figures:
            if page in f.spec.pages and f.text not in outside:
                problems.append(f"{page}: quotes no {f.text!r} for {f.spec.id} ({f.spec.quantity}) outside the "
                                "generated tables: the records give that figure")
    for page in sorted({p for f in figures for p in f.spec.quoted_in}):
        path = repo / page
        if not path.exists():
            problems.append(f"{page}: the page is missing")
            continue
        outside = _one_line(split_blocks(path.read_text(encoding="utf-8"))[0])
        for f in figures:
            if page in f.spec.quoted_in and f.text not in outside:
                problems.append(f"{page}: quotes no {f.text!r} for {f.spec.id} ({f.spec.quantity}): the records "
                                "give that figure")
    return problems + check_sections(repo, records_dir, figures)
