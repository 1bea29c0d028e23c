"""What the readers and tables of the report share: :class:`ReportError` (nothing to report, or an
unreadable input file) and the helpers that read a number leniently (``_float``) and format one
(``_pct``, ``_num``); they are private to the package, imported by its modules only."""
from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Iterator

from orchestration.baselines import available

logger = logging.getLogger("orchestration.report")


class ReportError(ValueError):
    """Nothing to report, or an unreadable input file."""


#: input files a report run could not read (damaged, of another kind): skipped, and listed at the end of
#: results.md so that a missing row is explained (cleared by each build_report)
SKIPPED: list[str] = []


def skip(path: object, reason: object) -> None:
    """Leaves out an unreadable input file, with a warning naming it."""
    text = str(reason) if str(path) in str(reason) else f"{path}: {reason}"
    logger.warning("skipped: %s", text)
    SKIPPED.append(text)


def find_inputs(root: str | Path, pattern: str) -> Iterator[Path]:
    """``root.rglob(pattern)`` outside hidden folders below ``root`` (the pipeline keeps its phase
    records in ``.pipeline/``, sample-factory its summaries in ``.summary/``: neither holds results)."""
    root = Path(root)
    for path in sorted(root.rglob(pattern)):
        if not any(part.startswith(".") for part in path.relative_to(root).parts[:-1]):
            yield path


#: the folder of the baselines' runs: {root}/.../baselines/{name}/ (orchestration.baseline_registry.BASELINES_DIR)
BASELINES_DIR = "baselines"
#: what a baseline wrote about its cost (orchestration.baseline_cost, rl_baseline.baselines.llm_policy.cost)
COST_FILE = "cost.json"
#: folders of a baseline's run that are layout, not a run's name
STRUCTURE_FOLDERS = frozenset({"policy", "policies", "skill_policy", "train", "rewards", "eval", "runs"})


def baseline_folder(path: Path, root: str | Path) -> "Path | None":
    """``{root}/.../baselines/{name}`` when ``path`` lies inside a baseline's folder, else None."""
    parts = Path(path).relative_to(root).parts
    for i, part in enumerate(parts[:-1]):
        if part == BASELINES_DIR and i + 1 < len(parts) - 1:
            return Path(root).joinpath(*parts[: i + 2])
    return None


def baseline_of(path: Path, root: str | Path) -> "str | None":
    """The baseline a file under ``baselines/{name}/`` belongs to (None for MaestroMotif's own)."""
    folder = baseline_folder(path, root)
    return folder.name if folder is not None else None


def run_name(folder: Path, root: str | Path) -> str:
    """The name a training run goes by in the report: its experiment folder, prefixed for a baseline's
    run with the baseline and the folders that tell its runs apart (``ablation_annotator_scale/8b/ci``)."""
    base = baseline_folder(folder / "_", root)
    if base is None:
        return folder.name
    inner = [p for p in folder.relative_to(base).parts if p not in STRUCTURE_FOLDERS]
    return "/".join([base.name, *inner]) if inner else base.name


def baseline_title(name: str) -> str:
    """A baseline's short name (its registry description up to the colon), or ``name`` when unknown."""
    try:
        desc = available().get(name)
    except Exception:  # noqa: BLE001 - a report must not fail on the registry; the folder name will do
        desc = None
    return desc.split(":", 1)[0].strip() if desc else name


def read_cost(path: Path) -> "dict | None":
    """A baseline's ``cost.json`` (None when absent; skipped with a warning when unreadable)."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        skip(path, f"not a readable cost file ({type(exc).__name__})")
        return None
    if not isinstance(data, dict):
        skip(path, "not a readable cost file (not a JSON object)")
        return None
    return data


def _float(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _pct(x: float) -> str:
    return "n/a" if x != x else f"{100.0 * x:.1f}%"


def _num(x: float) -> str:
    return "n/a" if x != x else f"{x:.4g}"
