"""common.estimates: the 95% intervals every results table uses (bootstrap percentile for non-negative means,
Wilson for 0/1 outcomes) and an accuracy stated with its pair count."""
from __future__ import annotations

import math

import numpy as np
import pytest

from common.estimates import (
    MIN_VALIDATION_PAIRS,
    bootstrap_interval,
    format_accuracy,
    mean_interval95,
    recorded_interval_method,
    wilson_interval,
)


def test_wilson_interval_matches_its_formula_and_stays_in_0_1():
    # 3 of 4: the textbook Wilson score interval at z = 1.96
    lo, hi = wilson_interval(3, 4)
    assert lo == pytest.approx(0.3006, abs=1e-4) and hi == pytest.approx(0.9544, abs=1e-4)
    assert wilson_interval(0, 6)[0] == 0.0 and 0.0 < wilson_interval(0, 6)[1] < 0.5
    assert wilson_interval(6, 6)[1] == 1.0 and 0.5 < wilson_interval(6, 6)[0] < 1.0
    assert all(math.isnan(b) for b in wilson_interval(0, 0))


def test_bootstrap_interval_of_a_small_non_negative_sample_never_goes_below_zero():
    values = [0.0, 0.0, 753.0]  # Student's t on these three: [-829, 1331]
    lo, hi = bootstrap_interval(values)
    assert 0.0 <= lo <= np.mean(values) <= hi <= 753.0
    assert bootstrap_interval(values) == (lo, hi)  # seeded: a report is reproducible
    assert bootstrap_interval([2.0, 2.0, 2.0]) == (2.0, 2.0)
    assert all(math.isnan(b) for b in bootstrap_interval([1.0]))
    # many values: the interval narrows around the mean (and the draws are made in bounded batches)
    rng = np.random.default_rng(1)
    big = rng.poisson(3.0, size=5000).astype(float)
    lo, hi = bootstrap_interval(big)
    assert lo < big.mean() < hi and hi - lo < 0.2


def test_mean_interval95_picks_wilson_for_0_1_outcomes():
    mean, lo, hi = mean_interval95([1.0, 0.0, 0.0, 0.0, 0.0, 0.0], binary=True)
    assert mean == pytest.approx(1 / 6) and (lo, hi) == wilson_interval(1, 6)
    assert all(math.isnan(v) for v in mean_interval95([]))


def test_accuracy_is_stated_with_its_pair_count_and_flagged_below_the_minimum():
    assert format_accuracy(1.0, 2) == "100.0% (n=2, too few)"
    assert format_accuracy(0.85, MIN_VALIDATION_PAIRS) == f"85.0% (n={MIN_VALIDATION_PAIRS})"
    assert format_accuracy(0.8, None) == "80.0% (n=?)"
    assert format_accuracy(float("nan"), 0) == "n/a (n=0, too few)"


def test_a_file_without_a_recorded_method_was_written_with_students_t():
    assert recorded_interval_method({"interval_method": "Wilson score"}) == "Wilson score"
    assert recorded_interval_method({}) == "Student's t"
