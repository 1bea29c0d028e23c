"""What the readers and tables of the report share: :class:`ReportError` (nothing to report, or an
unreadable input file) and the helpers that read a number leniently (``_float``) and format one
(``_pct``, ``_num``); they are private to the package, imported by its modules only."""
from __future__ import annotations

import math


class ReportError(ValueError):
    """Nothing to report, or an unreadable input file."""


def _float(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _pct(x: float) -> str:
    return "n/a" if x != x else f"{100.0 * x:.1f}%"


def _num(x: float) -> str:
    return "n/a" if x != x else f"{x:.4g}"
