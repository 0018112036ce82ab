"""run_scale's recording with a stand-in launcher (fixed rank JSON): failures, Ctrl-C, predictions.

The real torchrun/gloo ladder runs in tests/unit/cli/test_bench_scale.py; here the launcher returns fixed
rank records so the recording rules are checked exactly and fast."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpumatch.bench.dist import launch as launch_mod
from gpumatch.errors import DistLaunchError
from gpumatch.lab import scale
from gpumatch.store import open_existing_store
from gpumatch.usecases.stored_scale import load_scale_run

STEP_S = {1: 0.10, 2: 0.11, 4: 0.125, 8: 0.16}


def _ranks(spec: Any, n: int) -> list[dict[str, Any]]:
    if spec.workload == "collectives":
        return [{"rank": r, "collectives": [{"op": "all_reduce", "size_bytes": s, "dtype": "bf16",
                                             "time_s": [1e-5 + s / 3e11] * 3} for s in (1 << 20, 1 << 24, 1 << 28)]}
                for r in range(n)]
    return [{"rank": r, "hostname": "h", "steps": {"step_time_s": [STEP_S[n]] * 3, "compute_time_s": [0.1] * 3,
                                                   "comm_time_s": [0.02] * 3, "tokens_per_step": 1024,
                                                   "tokens_per_s": 1024 / STEP_S[n], "peak_memory_bytes": 1e9}}
            for r in range(n)]


def _fake(fail_at: int | None = None, interrupt_at: int | None = None) -> Any:
    def launch(spec: Any, nprocs: int, **kw: Any) -> launch_mod.LaunchResult:
        if nprocs == fail_at:
            raise DistLaunchError("distributed ddp on 2 rank(s) failed", "", 1,
                                  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
        if nprocs == interrupt_at:
            raise KeyboardInterrupt
        return launch_mod.LaunchResult(nprocs, "nccl", "cuda", _ranks(spec, nprocs), 0, "", 1.0)
    return launch


@pytest.fixture
def h200(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scale, "_device", lambda req: ("cuda", 8))
    monkeypatch.setattr(scale, "_probe", lambda device: {"gpu.name": "NVIDIA H200", "device.kind": "cuda"})


def test_failed_rung_is_recorded_and_the_ladder_goes_on(h200: None, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch_mod, "launch", _fake(fail_at=2))
    db = tmp_path / "s.sqlite"
    out = scale.run_scale(scale.ScaleRequest(workload="ddp", gpus=(1, 2, 4, 8), store=db, work_dir=tmp_path))
    assert out.status == "completed" and [r["n_gpus"] for r in out.ladder] == [1, 4, 8]
    assert out.failures[0]["n_gpus"] == 2 and out.failures[0]["error_class"] == "OutOfMemoryError"
    row4 = out.ladder[1]
    assert row4["per_added_gpu_tokens_per_s"] == pytest.approx((4096 / 0.125 - 1024 / 0.1) / 3)
    assert row4["scaling_efficiency"] == pytest.approx(4096 / 0.125 / (4 * 1024 / 0.1))
    assert row4["exposed_comm_s"] == pytest.approx(0.025)
    assert row4["predicted_tokens_per_s"] and row4["ratio"] == pytest.approx(
        row4["tokens_per_s"] / row4["predicted_tokens_per_s"])
    with open_existing_store(db) as st:
        data = st.export_run(out.run_id)
    assert data["run"]["manifest"]["scale.launch_env"]["NCCL_NVLS_ENABLE"] == "0"
    assert "scale.topology" in data["run"]["manifest"]
    per_rank = [r for r in data["results"] if r["metric"] == "step_time_s"]
    assert sorted((r["config"]["n_gpus"], r["config"]["rank"]) for r in per_rank) == \
        [(1, 0)] + [(4, r) for r in range(4)] + [(8, r) for r in range(8)]
    assert per_rank[0]["extra"]["step_time_s"] == [STEP_S[1]] * 3
    assert data["failures"][0]["error_class"] == "OutOfMemoryError"
    assert "out of memory" in data["failures"][0]["log_excerpt"]
    shown = load_scale_run(db, out.run_id)
    assert [r["n_gpus"] for r in shown["ladder"]] == [1, 4, 8]
    assert shown["ladder"][2]["delivers_gpus"] == pytest.approx(out.ladder[2]["delivers_gpus"])


def test_ctrl_c_closes_the_run_interrupted_and_reraises(h200: None, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch_mod, "launch", _fake(interrupt_at=4))
    db = tmp_path / "s.sqlite"
    with pytest.raises(KeyboardInterrupt):
        scale.run_scale(scale.ScaleRequest(workload="ddp", gpus=(1, 2, 4), store=db, work_dir=tmp_path))
    with open_existing_store(db) as st:
        (run,) = st.runs("scale")
        data = st.export_run(run.run_id)
    assert run.status == "interrupted"
    assert {r["config"]["n_gpus"] for r in data["results"]} == {1, 2}


def test_collectives_carry_the_comm_model_prediction(h200: None, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch_mod, "launch", _fake())
    out = scale.run_scale(scale.ScaleRequest(workload="collectives", gpus=(1, 8), store=tmp_path / "s.sqlite",
                                             work_dir=tmp_path))
    eight = [r for r in out.collectives if r["n_gpus"] == 8]
    assert len(eight) == 3 and all(r["predicted"] and r["ratio"] == pytest.approx(r["time_s"] / r["predicted"])
                                   for r in eight)
    one = [r for r in out.collectives if r["n_gpus"] == 1]
    assert all(r["predicted"] is None and "one rank" in r["prediction_note"] for r in one)


def test_rungs_only_what_the_machine_has() -> None:
    counts, notes = scale.rungs(scale.ScaleRequest(), "cuda", 4)
    assert counts == [1, 2, 4] and "8 GPUs skipped" in notes[0]


@pytest.mark.parametrize(("text", "sizes"), [("1KiB..8KiB", (1024, 2048, 4096, 8192)), ("1KiB..64KiB:8",
                                             (1024, 8192, 65536)), ("1MiB,4MiB", (1 << 20, 1 << 22))])
def test_parse_sizes(text: str, sizes: tuple[int, ...]) -> None:
    assert scale.parse_sizes(text) == sizes


def test_bad_requests_are_input_errors() -> None:
    from gpumatch.errors import InputError

    for req in (scale.ScaleRequest(workload="pipeline"), scale.ScaleRequest(gpus=(0,)),
                scale.ScaleRequest(nnodes=2)):
        with pytest.raises(InputError):
            scale.check_request(req)
    with pytest.raises(InputError):
        scale.parse_sizes("8KiB..1KiB")
