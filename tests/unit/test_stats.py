"""gpumatch.stats: numpy's linear percentile and the one minimum-sample rule (p50 from 2, p90 from 10, p99
from 100)."""

from __future__ import annotations

import numpy as np
import pytest

from gpumatch import stats


def test_min_samples_rule() -> None:
    assert [stats.min_samples(q) for q in (50, 90, 99, 99.9)] == [2, 10, 100, 1000]
    assert stats.reported_percentile(list(range(99)), 99) is None
    assert stats.reported_percentile(list(range(100)), 99) == pytest.approx(np.percentile(range(100), 99))
    assert stats.reported_percentile([4.0], 50) is None
    assert stats.reported_percentile([4.0, 6.0], 50) == 5.0


def test_percentile_is_numpy_linear() -> None:
    assert stats.percentile([1, 2, 3, 4], 50) == 2.5
    assert stats.percentile([5.0], 90) == 5.0
    assert stats.percentile([3.0, 1.0, 2.0], 50) == stats.median([1.0, 2.0, 3.0]) == 2.0
    rng = np.random.default_rng(7)
    xs = rng.lognormal(size=37).tolist()
    for q in (0.0, 5.0, 33.3, 90.0, 99.0, 100.0):
        assert stats.percentile(xs, q) == float(np.percentile(xs, q))
    # type 7 by hand: rank (n - 1) q / 100 = 0.15 of the way from 1 to 3
    assert stats.percentile([3.0, 1.0], 15) == pytest.approx(1.3)
    with pytest.raises(ValueError, match="no values"):
        stats.percentile([], 50)


def test_reported_percentiles_leave_out_what_n_does_not_support() -> None:
    assert stats.reported_percentiles([1.0]) == {"n": 1}
    assert set(stats.reported_percentiles([1.0] * 9)) == {"n", "p50_s"}
    assert set(stats.reported_percentiles([1.0] * 99)) == {"n", "p50_s", "p90_s"}
    assert set(stats.reported_percentiles([1.0] * 100, "_flops_per_s")) == {
        "n", "p50_flops_per_s", "p90_flops_per_s", "p99_flops_per_s"}
    assert stats.percentile_name(99.9) == "p99_9"
