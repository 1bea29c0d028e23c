"""The forced-skill evaluation section: an experiment's ``skill_report.md`` copied with its
explanations (headings moved down, image links left out) or, without it, a table built from
``skill_report.json`` (:func:`skill_report_section`); :func:`find_skill_reports` finds them."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from common.estimates import recorded_interval_method
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


def skill_report_body(text: str) -> str:
    """``skill_report.md`` to go under this report's heading: its tables with the text that
    explains them (CI, policies, verdict), headings moved two levels down, and without its
    image links (relative to the experiment folder; the image is linked from the report folder)."""
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("![") and stripped.endswith(")"):
            continue
        if stripped.startswith("#"):
            line = "##" + stripped
        lines.append(line)
    return "\n".join(lines).strip()


def _ci_cell(entry: object) -> str:
    if not isinstance(entry, dict):
        return "n/a"
    mean = _float(entry.get("mean"))
    ci = entry.get("ci95")
    text = _num(mean)
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        text += f" [{_num(_float(ci[0]))}, {_num(_float(ci[1]))}]"
    return text


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
                      f"{recorded_interval_method(data)}] per episode (from `{report.json}`).", ""]
        parts += [table, ""]
    else:
        parts += [f"(no table in {report.md or report.json})", ""]
    return parts
