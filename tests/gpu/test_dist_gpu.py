"""The distributed bench on this machine's GPUs through torchrun and NCCL (skipped without CUDA).

Runs on every visible GPU (1 to 8): NCCL collectives give correct results, DDP and FSDP train in bf16, TP decode
equals the unsharded model within bf16 tolerance, and the topology reads from NVML."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumatch.bench.dist.launch import launch
from gpumatch.bench.dist.spec import DistSpec
from gpumatch.bench.shapes import tiny_shape
from gpumatch.telemetry.topology import gpu_topology

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (NCCL backend)"),
]


def _gpus() -> int:
    return int(torch.cuda.device_count())


def test_nccl_collectives(tmp_path: Path) -> None:
    n = _gpus()
    res = launch(DistSpec("collectives", sizes_bytes=(1 << 10, 1 << 24), iters=5), n, out_dir=tmp_path,
                 device="cuda", timeout_s=300)
    assert res.backend == "nccl" and res.ranks[0]["nccl"]
    assert len({r["device_uuid"] for r in res.ranks}) == n  # one GPU per rank
    for row in res.ranks[0]["collectives"]:
        if row["op"] == "sendrecv" and n == 1:
            assert not row["supported"]
            continue
        assert row["supported"] and row["correct"] and row["dtype"] == "bf16", row


@pytest.mark.parametrize("workload", ["ddp", "fsdp"])
def test_training_bf16(tmp_path: Path, workload: str) -> None:
    spec = DistSpec(workload, tiny_shape(layers=4), batch_per_rank=4, seq_len=128, steps=5)
    steps = launch(spec, _gpus(), out_dir=tmp_path, device="cuda", timeout_s=300).ranks[0]["steps"]
    assert steps["precision"].startswith("bf16-")
    assert steps["peak_memory_bytes"] > 0 and steps["loss"][-1] < steps["loss"][0]


def test_tp_decode(tmp_path: Path) -> None:
    n = max(k for k in (1, 2, 4, 8) if k <= _gpus())
    shape = {**tiny_shape(layers=4), "heads": 8, "kv_heads": 8, "ffn": 256}
    spec = DistSpec("tp-decode", shape, batch_per_rank=4, seq_len=256, steps=5)
    steps = launch(spec, n, out_dir=tmp_path, device="cuda", timeout_s=300).ranks[0]["steps"]
    assert steps["check"]["matches_single_rank"], steps["check"]
    assert steps["peak_memory_bytes"] > 0


def test_topology_from_nvml() -> None:
    pytest.importorskip("pynvml")
    topo = gpu_topology()
    assert topo["available"], topo
    assert topo["gpu_count"] >= _gpus() and len(topo["matrix"]) == topo["gpu_count"]
