"""How intervals read in the estimate table and the plan (gpumatch.report.intervals)."""

from __future__ import annotations

from gpumatch.estimate import Request, estimate
from gpumatch.report import human
from gpumatch.report.estimate import field_values
from gpumatch.report.intervals import basis_rows, span


def test_span_names_the_unit_once_when_the_three_share_it() -> None:
    assert span(human.seconds, 0.0184, (0.0169, 0.0201)) == "18.4 ms (16.9–20.1)"
    assert span(human.seconds, 0.00098, (0.00095, 0.00102)) == "980 µs (950 µs–1.02 ms)"
    assert span(human.seconds, 0.0184, None) == "18.4 ms"


def test_the_table_shows_times_and_memory_with_their_interval_and_basis() -> None:
    d = estimate("llama-3.1-8b", "h200", Request(task="infer", concurrency=8)).to_dict()
    view = field_values(d, human=True)
    for key in ("tpot_s", "e2e_s", "ttft_s", "prefill_s", "memory.total"):
        assert "–" in view[key], key
    bases = [v for k, v in view.items() if k.startswith("interval ")]
    assert any(v.startswith("tpot_s: ") for v in bases)
    assert "uncertainty" not in view
    csv_view = field_values(d, human=False)  # the CSV keeps its plain figures
    assert "–" not in str(csv_view["tpot_s"])


def test_basis_rows_group_figures_of_one_basis() -> None:
    d = {"intervals": {"a": [1, 2], "b": [1, 2], "c": [1, 2]}, "interval_basis": {"a": "x", "b": "x", "c": "y"}}
    assert basis_rows(d, ("a", "b", "c", "d")) == {"interval 1": "a, b: x", "interval 2": "c: y"}
