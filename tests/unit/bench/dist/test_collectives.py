"""Collectives: nccl-tests bus-bandwidth factors, and a real 2- and 4-rank gloo sweep through torchrun."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumatch.bench.dist.launch import launch
from gpumatch.bench.dist.spec import OPS, DistSpec

pytest.importorskip("torch")

from gpumatch.bench.dist.collectives import bandwidths, busbw_factor  # noqa: E402


@pytest.mark.parametrize(("op", "n", "factor"), [
    ("all_reduce", 2, 1.0), ("all_reduce", 4, 1.5), ("all_reduce", 8, 1.75), ("all_reduce", 1, 0.0),
    ("all_gather", 4, 0.75), ("reduce_scatter", 8, 0.875), ("all_to_all", 2, 0.5), ("sendrecv", 8, 1.0),
])
def test_busbw_factor_is_nccl_tests(op: str, n: int, factor: float) -> None:
    assert busbw_factor(op, n) == pytest.approx(factor)


def test_bandwidths() -> None:
    algbw, busbw = bandwidths("all_reduce", 1 << 20, 1e-3, 4)
    assert algbw == pytest.approx(1048576e3)
    assert busbw == pytest.approx(1048576e3 * 1.5)
    with pytest.raises(ValueError):
        busbw_factor("broadcast", 2)


def test_gloo_sweep_four_ranks(tmp_path: Path) -> None:
    n = 4
    spec = DistSpec("collectives", sizes_bytes=(1000, 1 << 14), iters=3, warmup_steps=1)
    res = launch(spec, n, out_dir=tmp_path, device="cpu", timeout_s=60)
    assert (res.nprocs, res.backend, res.device, res.returncode) == (n, "gloo", "cpu", 0)
    assert [r["rank"] for r in res.ranks] == list(range(n))
    head = res.ranks[0]
    assert {k: head[k] for k in ("world_size", "local_rank", "backend", "device", "nccl", "workload")} == {
        "world_size": n, "local_rank": 0, "backend": "gloo", "device": "cpu", "nccl": None, "workload": "collectives"}
    assert head["torch"] and head["hostname"] and DistSpec.from_json(head["spec"]) == spec
    rows = res.ranks[0]["collectives"]
    assert [(r["op"], r["requested_size_bytes"]) for r in rows] == [(o, s) for o in OPS for s in (1000, 1 << 14)]
    for row in rows:
        if not row["supported"]:  # allowed only with the backend's reason
            assert row["reason"]
            continue
        assert row["correct"], row
        assert row["dtype"] == "fp32" and row["size_bytes"] == row["count"] * 4
        assert len(row["time_s"]) == 3 and all(t > 0 for t in row["time_s"])
        assert row["busbw_factor"] == pytest.approx(busbw_factor(row["op"], n))
        assert row["algbw_bytes_per_s"] == pytest.approx(row["size_bytes"] / row["median_time_s"])
        # the recorded time is the max over ranks, so never below this rank's own
        assert all(m >= own for m, own in zip(row["time_s"], row["rank_time_s"], strict=True))
    ag = next(r for r in rows if r["op"] == "all_gather" and r["requested_size_bytes"] == 1000)
    assert ag["count"] % n == 0
    # every rank saw the same slowest-rank times
    assert all(r["collectives"][0]["time_s"] == rows[0]["time_s"] for r in res.ranks)


def test_all_gather_falls_back_to_the_list_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend without the flat-tensor all-gather gets the list form; one without an op says why."""
    import torch.distributed as dist

    from gpumatch.bench.dist import collectives
    from gpumatch.bench.dist.common import Rank

    def refuse(*_: object, **__: object) -> None:
        raise RuntimeError("no allgather_into_tensor on this backend\nmore")

    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        monkeypatch.setattr(dist, "all_gather_into_tensor", refuse)
        monkeypatch.setattr(dist, "all_to_all_single", refuse)
        import torch

        rank = Rank(rank=0, world=1, local_rank=0, device=torch.device("cpu"), backend="gloo")
        spec = DistSpec("collectives", sizes_bytes=(64,), iters=2, warmup_steps=0)
        ag = collectives.measure_op("all_gather", 64, rank, spec)
        assert ag["supported"] and ag["correct"] and ag["api"] == "all_gather"
        a2a = collectives.measure_op("all_to_all", 64, rank, spec)
        assert a2a == {**a2a, "supported": False, "reason": "RuntimeError: no allgather_into_tensor on this backend"}
        assert "time_s" not in a2a
        sr = collectives.measure_op("sendrecv", 64, rank, spec)
        assert not sr["supported"] and "2 or more ranks" in sr["reason"]
    finally:
        dist.destroy_process_group()
