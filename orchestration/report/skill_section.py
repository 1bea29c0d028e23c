"""The forced-skill evaluation section: an experiment's ``skill_report.md`` copied with its
explanations (headings moved down, image links left out) or, without it, a table built from
``skill_report.json`` (:func:`skill_report_section`); :func:`find_skill_reports` finds them.

Every measure of a skill report is non-negative, and no interval printed here goes below zero: a report written
before the bootstrap intervals holds Student's t ones (``251 [-517, 1.02e+03]`` on 3 episodes). From its JSON the
interval is recomputed from the per-episode values it keeps (:func:`common.estimates.recorded_interval`); in its
Markdown a bound below zero is printed as 0 (:func:`hold_table_intervals`)."""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from common.estimates import RECOMPUTED_METHOD, recorded_interval, recorded_interval_method
from rl_baseline.tasks.skill_measures import MAIN_MEASURE

from .shared import _float, _num, find_inputs, skip

# the package's logger: log lines keep the name they had before the package was split
logger = logging.getLogger(__package__)

SKILL_REPORT_MD = "skill_report.md"
SKILL_REPORT_JSON = "skill_report.json"
SKILL_REPORT_PNG = "skill_report.png"
SKILL_REPORT_HEADING = "Skills held one at a time (forced-skill evaluation)"


@dataclass
class SkillReport:
    """The forced-skill evaluation files of one trained experiment (any may be missing)."""

    experiment: str
    folder: Path

    @property
    def md(self) -> Optional[Path]:
        return self._file(SKILL_REPORT_MD)

    @property
    def json(self) -> Optional[Path]:
        return self._file(SKILL_REPORT_JSON)

    @property
    def png(self) -> Optional[Path]:
        return self._file(SKILL_REPORT_PNG)

    def _file(self, name: str) -> Optional[Path]:
        path = self.folder / name
        return path if path.is_file() else None


def find_skill_reports(root: str | Path) -> list[SkillReport]:
    """Experiments below ``root`` with a ``skill_report.md`` or ``skill_report.json``."""
    folders = {p.parent for name in (SKILL_REPORT_MD, SKILL_REPORT_JSON) for p in find_inputs(root, name)}
    return [SkillReport(folder.name, folder) for folder in sorted(folders)]


def markdown_tables(text: str) -> list[str]:
    """The Markdown tables (runs of lines starting with ``|``) of ``text``."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.lstrip().startswith("|"):
            current.append(line.strip())
        elif current:
            tables.append("\n".join(current))
            current = []
    return tables


#: an interval in a table cell of a skill report: ``[lo, hi]``, each bound as ``format_measure`` or ``_num`` wrote it
_NUMBER = r"-?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?"
_CELL_INTERVAL = re.compile(rf"\[(\s*)({_NUMBER})(\s*,\s*)({_NUMBER})(\s*)\]")
#: said under a copied report whose table had a bound below zero
HELD_NOTE = ("Intervals of this report that reached below zero (Student's t, the method of the tools that wrote it) "
             "are printed from 0: every measure here is non-negative.")


def hold_table_intervals(line: str) -> tuple[str, bool]:
    """A table line of a skill report with every interval bound below zero printed as 0 (the measures are
    non-negative), and whether one was."""
    held = False

    def hold(m: re.Match) -> str:
        nonlocal held
        lo, hi = m.group(2), m.group(4)
        if lo.startswith("-"):
            lo, held = "0", True
        if hi.startswith("-"):
            hi, held = "0", True
        return f"[{m.group(1)}{lo}{m.group(3)}{hi}{m.group(5)}]"

    return _CELL_INTERVAL.sub(hold, line), held


def skill_report_body(text: str) -> str:
    """``skill_report.md`` to go under this report's heading: its tables with the text that
    explains them (CI, policies, verdict), headings moved two levels down, and without its
    image links (relative to the experiment folder; the image is linked from the report folder).
    An interval bound below zero in its tables (a report of the Student's t intervals) is printed as 0, and a
    line under it says so (:func:`hold_table_intervals`)."""
    lines = []
    any_held = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("![") and stripped.endswith(")"):
            continue
        if stripped.startswith("#"):
            line = "##" + stripped
        elif stripped.startswith("|"):
            line, held = hold_table_intervals(line)
            any_held = any_held or held
        lines.append(line)
    if any_held:
        lines += ["", HELD_NOTE]
    return "\n".join(lines).strip()


def _ci_cell(entry: object) -> str:
    """``mean [lo, hi]`` of one measure of ``skill_report.json``: the interval as
    :func:`common.estimates.recorded_interval` gives it (recomputed from the per-episode values of a file of the
    Student's t intervals, never below zero)."""
    if not isinstance(entry, dict):
        return "n/a"
    mean = _float(entry.get("mean"))
    ci = entry.get("ci95")
    text = _num(mean)
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        lo, hi = recorded_interval(entry)
        text += f" [{_num(lo)}, {_num(hi)}]"
    return text


def json_interval_method(data: object) -> str:
    """How the intervals of :func:`skill_report_json_table` were made: the file's method where it records one,
    else :data:`common.estimates.RECOMPUTED_METHOD` (a file of the Student's t intervals)."""
    if isinstance(data, dict) and data.get("interval_method"):
        return recorded_interval_method(data)
    return RECOMPUTED_METHOD


def skill_report_json_table(data: dict) -> Optional[str]:
    """The main measure of each skill per policy (mean [95% interval]) from ``skill_report.json``."""
    skills = data.get("skills") if isinstance(data, dict) else None
    if not isinstance(skills, dict) or not skills:
        return None
    policies = ("trained", "untrained", "random")
    lines = ["| skill | main measure | " + " | ".join(policies) + " |", "|---|---|" + "---|" * len(policies)]
    for skill, entry in skills.items():
        if not isinstance(entry, dict):
            continue
        measure = str(entry.get("main_measure") or MAIN_MEASURE.get(skill, "?"))
        per_policy = entry.get("policies") if isinstance(entry.get("policies"), dict) else {}
        cells = [_ci_cell(((per_policy.get(p) or {}).get("measures") or {}).get(measure)) for p in policies]
        lines.append(f"| {skill} | {measure} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def skill_report_section(report: SkillReport) -> list[str]:
    """Markdown lines of one experiment's forced-skill evaluation (no image link)."""
    parts: list[str] = []
    episodes, data = None, None
    if report.json is not None:
        try:
            data = json.loads(report.json.read_text())
            episodes = data.get("episodes") if isinstance(data, dict) else None
        except Exception as exc:  # noqa: BLE001 - a damaged file: skipped, named
            skip(report.json, f"not a readable skill report ({type(exc).__name__})")
            data = None
    text = ""
    if report.md is not None:
        try:
            text = report.md.read_text()
        except Exception as exc:  # noqa: BLE001 - a damaged file: skipped, named
            skip(report.md, f"not a readable skill report ({type(exc).__name__})")
    if markdown_tables(text):
        parts += [f"From `{report.md}`:", "", skill_report_body(text), ""]
        return parts
    table = skill_report_json_table(data) if data is not None else None
    if table:
        if isinstance(episodes, (int, float)):
            parts += [f"{int(episodes)} episodes per skill and policy; main measure, mean [95% interval: "
                      f"{json_interval_method(data)}] per episode (from `{report.json}`).", ""]
        parts += [table, ""]
    else:
        parts += [f"(no table in {report.md or report.json})", ""]
    return parts
