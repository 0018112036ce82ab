"""The derived figures of a scaling ladder on fixed inputs (gpumatch.lab.scale_derive)."""

from __future__ import annotations

import pytest

from gpumatch.lab import scale_derive as d


def test_ladder_per_added_gpu_efficiency_and_k() -> None:
    rows = d.ladder([d.Rung(4, 300.0, 0.4, 0.05), d.Rung(1, 100.0, 0.1, None), d.Rung(2, 180.0, 0.2, 0.01)])
    assert [r["n_gpus"] for r in rows] == [1, 2, 4]
    assert rows[0]["per_added_gpu_tokens_per_s"] is None
    assert rows[1]["per_added_gpu_tokens_per_s"] == pytest.approx(80.0)   # (180 - 100) / (2 - 1)
    assert rows[2]["per_added_gpu_tokens_per_s"] == pytest.approx(60.0)   # (300 - 180) / (4 - 2)
    assert [r["scaling_efficiency"] for r in rows] == pytest.approx([1.0, 0.9, 0.75])
    assert [r["delivers_gpus"] for r in rows] == pytest.approx([1.0, 1.8, 3.0])


def test_ladder_without_one_gpu_rung_has_no_efficiency() -> None:
    rows = d.ladder([d.Rung(2, 180.0, 0.2, None), d.Rung(8, 500.0, 0.4, None)])
    assert rows[1]["per_added_gpu_tokens_per_s"] == pytest.approx(320.0 / 6)
    assert rows[1]["scaling_efficiency"] is None and rows[1]["delivers_gpus"] is None


def test_exposed_comm_is_median_difference_floored_at_zero() -> None:
    assert d.exposed_comm_s([0.30, 0.10, 0.20], [0.05, 0.15, 0.12]) == pytest.approx(0.20 - 0.12)
    assert d.exposed_comm_s([0.1, 0.1], [0.2, 0.2]) == 0.0
    assert d.exposed_comm_s([0.1], []) is None


def test_job_throughput_slowest_rank_and_tp_group() -> None:
    ranks = [{"steps": {"step_time_s": [0.1, 0.1, 0.1], "tokens_per_step": 256}},
             {"steps": {"step_time_s": [0.2, 0.2, 0.3], "tokens_per_step": 256}}]
    x, tokens, step = d.job_throughput(ranks, tensor_parallel=False)
    assert (tokens, step) == (512.0, 0.2) and x == pytest.approx(2560.0)
    x_tp, tokens_tp, _ = d.job_throughput(ranks, tensor_parallel=True)
    assert tokens_tp == 256.0 and x_tp == pytest.approx(1280.0)


@pytest.mark.parametrize(("op", "n", "factor"), [("all_reduce", 4, 1.5), ("all_reduce", 8, 1.75),
                                                 ("all_gather", 4, 0.75), ("reduce_scatter", 2, 0.5),
                                                 ("all_to_all", 8, 0.875), ("sendrecv", 8, 1.0)])
def test_busbw_factor_as_nccl_tests(op: str, n: int, factor: float) -> None:
    assert d.busbw_factor(op, n) == pytest.approx(factor)


def test_collective_rows_take_the_slowest_rank_and_skip_refused_rows() -> None:
    ranks = [{"collectives": [{"op": "all_reduce", "size_bytes": 1000, "dtype": "fp32", "time_s": [1e-3, 2e-3, 3e-3]},
                              {"op": "sendrecv", "size_bytes": 1000, "supported": False, "reason": "no"}]},
             {"collectives": [{"op": "all_reduce", "size_bytes": 1000, "dtype": "fp32", "time_s": [4e-3, 4e-3]}]}]
    (row,) = d.collective_rows(ranks, 4)
    assert row["time_s"] == pytest.approx(4e-3)
    assert row["algbw_bytes_per_s"] == pytest.approx(1000 / 4e-3)
    assert row["busbw_bytes_per_s"] == pytest.approx(1000 / 4e-3 * 1.5)
