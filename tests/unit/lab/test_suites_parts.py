"""Pieces of the lab without children: percentiles by n, thermal steady state, manifest diffs, OOM class."""

from __future__ import annotations

from gpumatch.bench.stats import thermal_steady
from gpumatch.lab.child import classify
from gpumatch.lab.suites import SuiteSpec, build_cases
from gpumatch.stats import reported_percentiles as percentiles


def test_percentiles_only_with_enough_samples() -> None:
    assert set(percentiles([1.0] * 9)) == {"n", "p50_s"}
    assert set(percentiles([1.0] * 99)) == {"n", "p50_s", "p90_s"}
    assert set(percentiles([1.0] * 100)) == {"n", "p50_s", "p90_s", "p99_s"}


def test_thermal_steady_after_the_slope_falls() -> None:
    t = [float(i) for i in range(0, 181)]
    rising = [40 + 0.1 * x for x in t]  # 6 °C/min
    assert not thermal_steady(t, rising)
    flat = [40 + min(x, 100) * 0.1 for x in t]  # flat over the last 80 s
    assert thermal_steady(t, flat)
    assert not thermal_steady(t[:30], flat[:30])  # less than 60 s of samples


def test_classify_oom() -> None:
    assert classify(MemoryError()) == "oom"
    assert classify(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")) == "oom"
    assert classify(ValueError("bad")) == "error"


def test_manifest_performance_fields_differ() -> None:
    from gpumatch.telemetry.manifest import Manifest, differing_fields

    a = Manifest({"gpu.name": "NVIDIA H200", "software.torch": "2.11", "gpu.uuid": "GPU-1"})
    b = Manifest({"gpu.name": "NVIDIA H200", "software.torch": "2.13", "gpu.uuid": "GPU-2"})
    assert differing_fields(a.fields, b.fields) == ["software.torch"]  # the UUID is not performance-relevant
    assert a.sha256 != b.sha256 and len(a.sha256) == 64


def test_suites_as_data() -> None:
    model = {"name": "m", "hidden": 4096, "ffn": 14336}
    quick = build_cases(SuiteSpec("quick", model, model))
    ids = [c.case_id for c in quick]
    assert ids[:5] == ["gemm-bf16", "gemm-fp16", "gemm-tf32", "gemm-fp32", "gemm-fp8"]
    assert {"copy", "pinned", "launch", "decode-b1", "decode-b16", "prefill", "train"} <= set(ids)
    assert sum(c.expected_s for c in quick) < 300  # quick: at most 5 minutes (docs/bench.md, Suites)
    assert len(build_cases(SuiteSpec("standard", model, model))) > len(quick)
    soak = build_cases(SuiteSpec("soak", model, model, duration_s=600))
    assert soak[0].params["duration_s"] == 600 and soak[0].timeout_s > 600


def test_a_device_run_without_predictions_gets_them_when_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A store written on a GPU machine without pydantic (no catalog: no predictions stored) shows them on read."""
    from gpumatch.bench import shapes
    from gpumatch.cli.app import main
    from gpumatch.record import Recording
    from gpumatch.usecases.stored_bench import load_run

    manifest = {"device.kind": "cuda", "gpu.name": "NVIDIA H200", "model.architecture": shapes.LLAMA_3_8B,
                "model.train_architecture": shapes.LLAMA_3_2_1B}
    store = tmp_path / "dev.sqlite"
    with Recording("bench", "quick llama-3-8b", manifest, {}, store_path=store) as rec:
        rec.add_result("decode_step_s", 0.0062, "s", config={"case": "decode-b1", "model": "llama-3-8b", "batch": 1,
                                                             "context": 2048, "variant": "graph"}, extra={"n": 100})
        rec.add_result("gemm_flops_per_s", 7.1e14, "flop/s", config={"case": "gemm-bf16", "m": 8192, "n": 8192,
                                                                     "k": 8192, "precision": "bf16"}, extra={"n": 30})
    rows = {r["metric"]: r for r in load_run(store, 1)["results"]}
    assert rows["decode_step_s"]["predicted"] > 0 and 0.5 < rows["decode_step_s"]["ratio"] < 2
    assert rows["gemm_flops_per_s"]["datasheet"] == 989.5e12
    assert main(["bench", "show", "1", "--store", str(store)]) == 0


def test_a_decode_ladder_keeps_going_past_a_batch_that_does_not_fit() -> None:
    from gpumatch.bench.cases import run_case
    from gpumatch.bench.shapes import tiny_shape

    out = run_case({"id": "d", "kind": "decode", "params": {"model": tiny_shape(), "batches": [1, 10**9, 2],
                                                              "context": 16, "variant": "eager", "iters": 3}})
    assert out["status"] == "ok"
    assert [r["config"]["batch"] for r in out["results"] if r["metric"] == "decode_step_s"] == [1, 2]
    assert [(f["config"]["batch"], f["error_class"]) for f in out["failures"]] == [(10**9, "oom")]


def test_manifest_reads_nvidia_smi_field_by_field_when_the_query_is_refused(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from gpumatch.telemetry.smi import smi_gpu_fields

    smi = tmp_path / "nvidia-smi"
    smi.write_text('#!/bin/sh\ncase "$1" in\n  --query-gpu=ecc.mode.current) echo Enabled; exit 0;;\n'
                   '  *ecc.mode.current*) exit 2;;\n  --query-gpu=driver_version) echo 580.10; exit 0;;\nesac\n'
                   'q=${1#--query-gpu=}; echo "$q" | sed "s/[^,]*/700/g"\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    got = smi_gpu_fields()
    assert got["gpu.count"] == 1 and got["gpu.ecc_mode"] == "Enabled"
    assert got["gpu.driver"] == "580.10" and got["gpu.power_enforced_limit_w"] == 700
