"""``bench compare``: the bootstrap interval of B/A from raw timings, and whether a difference is significant."""

from __future__ import annotations

import random
from statistics import median

from gpumatch.report.bench import compare_text
from gpumatch.usecases.stored_bench import _pair, ratio_interval


def _times(mean: float, n: int = 40, seed: int = 1) -> list[float]:
    r = random.Random(seed)
    return [mean * (1.0 + r.gauss(0.0, 0.02)) for _ in range(n)]


def test_a_ten_percent_slower_run_is_significant_and_its_interval_holds_the_ratio() -> None:
    a, b = _times(1.0), _times(1.1, seed=2)
    seen = median(b) / median(a)
    low, high = ratio_interval(a, b, is_time=True) or (0.0, 0.0)
    assert 1.05 < low < seen < high < 1.15
    rate = ratio_interval(a, b, is_time=False)  # a rate computed from the same timings: the inverse
    assert rate is not None and rate[0] < 1 / seen < rate[1] < 0.96


def test_the_same_distribution_is_not_significant() -> None:
    a = _times(1.0)
    shuffled = random.Random(5).sample(a, len(a))
    low, high = ratio_interval(a, shuffled, is_time=True) or (9.0, 9.0)
    assert low <= 1.0 <= high


def test_too_few_timings_give_no_interval() -> None:
    assert ratio_interval([1.0, 1.1], _times(1.0), True) is None
    assert ratio_interval(None, _times(1.0), True) is None


def test_compare_rows_and_text_carry_the_interval() -> None:
    a = {"case": "decode", "metric": "decode_step_s", "key": "k", "unit": "s", "config": {"batch": 1},
         "measured": 1.0, "n": 40, "raw_s": _times(1.0)}
    b = {**a, "measured": 1.1, "raw_s": _times(1.1, seed=2)}
    row = _pair(a, b)
    assert row["significant"] is True and 1.05 < row["b_over_a_low"] < row["b_over_a_high"] < 1.15
    text = compare_text({"run_a": 1, "run_b": 2, "differing_fields": [], "rows": [row]})
    assert " *" in text and "significant" in text
