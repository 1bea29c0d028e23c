"""What the readers and tables of the report share: :class:`ReportError` (nothing to report, or an
unreadable input file) and the helpers that read a number leniently (``_float``) and format one
(``_pct``, ``_num``); they are private to the package, imported by its modules only."""
from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Iterator

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


def _float(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _pct(x: float) -> str:
    return "n/a" if x != x else f"{100.0 * x:.1f}%"


def _num(x: float) -> str:
    return "n/a" if x != x else f"{x:.4g}"
