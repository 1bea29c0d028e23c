"""How a measured number is stated with its uncertainty, in one place so every table names the same method:

* the 95% interval of a mean of per-episode measures (:func:`mean_interval95`): a bootstrap percentile
  interval (seeded, so a report is reproducible) for counts and rates, which stays within the observed
  values and so never goes below zero for a non-negative measure; a Wilson score interval for 0/1 outcomes
  (a task's success), which stays within [0, 1];
* an interval read back from a results file, as it is printed (:func:`recorded_interval`, :func:`held_in_range`):
  files written before these methods hold Student's t intervals (and pages mean +- 1.96 s.e.), which reach below
  zero for a count on a handful of episodes; what is printed never does;
* an accuracy with the number of pairs it rests on (:func:`format_accuracy`), flagged below
  :data:`MIN_VALIDATION_PAIRS`.

Pure Python and numpy: the report, the evaluations and the reward training all read it.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

#: the normal quantile of a two-sided 95% interval
Z95 = 1.959963984540054
#: resamples of the bootstrap and the seed of its generator (the same values give the same interval)
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
BOOTSTRAP_METHOD = f"bootstrap percentile ({BOOTSTRAP_RESAMPLES:,} resamples, seed {BOOTSTRAP_SEED})"
WILSON_METHOD = "Wilson score"
#: what a table's note says of its intervals: of means of counts and rates, of success rates, of both
BOOTSTRAP_NOTE = (f"95% intervals: {BOOTSTRAP_METHOD} of the mean, which stays within the observed values (never "
                  "below zero) but is too narrow with few episodes.")
INTERVAL_NOTE = (f"95% intervals: {BOOTSTRAP_METHOD} for the mean of a count, which stays within the observed "
                 f"values (never below zero) but is too narrow with few episodes; {WILSON_METHOD} for a success "
                 "rate (0/1 per episode), within [0, 1].")
#: validation pairs below which an accuracy is flagged: fewer tell little (30 pairs: a 95% interval of about
#: +-18 points at 50%)
MIN_VALIDATION_PAIRS = 30
TOO_FEW = "too few"
ACCURACY_NOTE = (f"n: the validation pairs with a decided label the accuracy rests on; \"{TOO_FEW}\" marks fewer "
                 f"than {MIN_VALIDATION_PAIRS}, too few to read as the model's accuracy (n=?: a metrics file "
                 "written without the count).")

_CHUNK = 1_000_000  # bootstrap draws per batch: bounded memory whatever the number of episodes


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion of ``successes`` out of ``n`` (NaN bounds when ``n`` is 0)."""
    if n <= 0:
        return math.nan, math.nan
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at 0 or n successes the bound is exactly 0 or 1 (the formula leaves rounding residue)
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


def bootstrap_interval(values: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """The 95% bootstrap percentile interval of the mean of ``values`` (NaN bounds for fewer than two)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    per_chunk = max(1, _CHUNK // x.size)
    means = []
    for start in range(0, resamples, per_chunk):
        draws = rng.integers(0, x.size, size=(min(per_chunk, resamples - start), x.size))
        means.append(x[draws].mean(axis=1))
    lo, hi = np.percentile(np.concatenate(means), [2.5, 97.5])
    return float(lo), float(hi)


def mean_interval95(values: Sequence[float], binary: bool = False) -> tuple[float, float, float]:
    """``(mean, low, high)``: a Wilson interval for 0/1 ``values`` (``binary``), else a bootstrap percentile
    interval (NaN bounds for a single value); all NaN without values."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if binary:
        lo, hi = wilson_interval(int(np.count_nonzero(x)), int(x.size))
    else:
        lo, hi = bootstrap_interval(x)
    return mean, lo, hi


def interval_method(binary: bool) -> str:
    """The name of the interval :func:`mean_interval95` gives."""
    return WILSON_METHOD if binary else BOOTSTRAP_METHOD


def recorded_interval_method(data: object) -> str:
    """The interval method a results file records under ``interval_method``; a file that records none was
    written with Student's t intervals."""
    method = data.get("interval_method") if isinstance(data, dict) else None
    return str(method) if method else "Student's t"


#: how a table names the intervals of a file that records no method (Student's t), as :func:`recorded_interval`
#: prints them
RECOMPUTED_METHOD = (f"{BOOTSTRAP_METHOD}, recomputed from the per-episode values the file keeps (its own were "
                     "Student's t; where it keeps fewer than two values, its own, held at 0)")


def held_in_range(lo: float, hi: float, low: float = 0.0, high: float = math.inf) -> tuple[float, float]:
    """The bounds of an interval of a quantity that cannot leave ``[low, high]`` (a count or a rate: [0, inf); a
    success rate: [0, 1]) held inside it; a NaN bound stays NaN. Every printed interval of a non-negative quantity
    goes through it, so that one read back from an older file (Student's t, mean +- 1.96 s.e.) never shows a
    bound below zero."""
    def hold(x: float) -> float:
        return x if x != x else float(min(max(x, low), high))

    return hold(float(lo)), hold(float(hi))


def format_mean_interval(mean: float, lo: float, hi: float) -> str:
    """``mean [lo, hi]`` of a non-negative quantity, three significant digits, the bounds held within [0, ...]
    (:func:`held_in_range`); ``mean`` alone without bounds, ``n/a`` without a mean. What the skill reports print
    and what the kept records' figures are rebuilt with."""
    lo, hi = held_in_range(lo, hi)
    if not math.isfinite(mean):
        return "n/a"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{mean:.3g}"
    return f"{mean:.3g} [{lo:.3g}, {hi:.3g}]"


def format_percent(rate: float) -> str:
    """A rate as the pages print it: two significant digits (``2.3%``, ``0.018%``, ``0%``)."""
    if not math.isfinite(rate):
        return "n/a"
    percent = 100.0 * rate
    return f"{percent:.0f}%" if percent >= 10.0 else f"{percent:.2g}%"


def recorded_interval(entry: object, binary: bool = False) -> tuple[float, float]:
    """The 95% interval to print for one measure of a results file (``{"mean", "ci95"}``, with ``ci_method`` and
    the per-episode ``values`` in files of the current tools): the recorded bounds when the entry names its method;
    for an entry that names none (written with Student's t) the interval :func:`mean_interval95` gives on its
    ``values`` where it keeps two or more; in every case :func:`held_in_range` (within [0, 1] for a success rate,
    ``binary``). NaN bounds when there is none."""
    if not isinstance(entry, dict):
        return math.nan, math.nan
    ci = entry.get("ci95")
    lo, hi = (ci[0], ci[1]) if isinstance(ci, (list, tuple)) and len(ci) == 2 else (math.nan, math.nan)
    values = entry.get("values")
    if not entry.get("ci_method") and isinstance(values, (list, tuple)) and len(values) >= 2:
        try:
            _, lo, hi = mean_interval95([float(v) for v in values], binary=binary)
        except (TypeError, ValueError):  # a damaged file: its own bounds, held in range
            pass
    try:
        lo, hi = float(lo), float(hi)
    except (TypeError, ValueError):
        return math.nan, math.nan
    return held_in_range(lo, hi, 0.0, 1.0 if binary else math.inf)


def too_few_pairs(pairs: Optional[int]) -> bool:
    """Whether an accuracy over ``pairs`` validation pairs is flagged (an unknown count is not)."""
    return pairs is not None and pairs < MIN_VALIDATION_PAIRS


def pair_count(pairs: Optional[int]) -> str:
    """``n=120``; ``n=2, too few`` below :data:`MIN_VALIDATION_PAIRS`; ``n=?`` when the count is unknown."""
    if pairs is None:
        return "n=?"
    return f"n={pairs}, {TOO_FEW}" if too_few_pairs(pairs) else f"n={pairs}"


def format_accuracy(accuracy: float, pairs: Optional[int]) -> str:
    """``85.0% (n=120)``, ``100.0% (n=2, too few)``, ``80.0% (n=?)`` (:func:`pair_count`)."""
    text = "n/a" if accuracy != accuracy else f"{100.0 * accuracy:.1f}%"
    return f"{text} ({pair_count(pairs)})"
