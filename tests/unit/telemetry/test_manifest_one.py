"""One machine manifest (issue 26, item 3): both older stored shapes read into it, two manifests compare.

Fixtures of each older shape are real files: the nested monitor/doctor manifest of ``gpumatch doctor`` on an
H200 (tests/data/traces/h200-2026-12-02-doctor.json) and the flat bench manifest (schema
``gpumatch.bench.manifest/1``) of a ``bench export`` of another H200 (tests/data/measurements/bench/).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from synth_traces import H200_INFO, SYSTEM, build, make_samples

from gpumatch.errors import InputError
from gpumatch.store import Store, open_store
from gpumatch.telemetry.fake import FakeBackend
from gpumatch.telemetry.manifest import (
    MACHINE_FIELDS,
    Manifest,
    compare_manifests,
    differing_fields,
    from_stored,
    gpu_fields,
    machine_manifest,
    manifest_hash,
)
from gpumatch.telemetry.smi import smi_gpu_fields
from gpumatch.telemetry.stored import trace_from_run

DATA = Path(__file__).resolve().parents[2] / "data"
NESTED = json.loads((DATA / "traces" / "h200-2026-12-02-doctor.json").read_text())["manifest"]
BENCH_EXPORT = DATA / "measurements" / "bench" / "2026-12-04-h200-quick.json"
FLAT = json.loads(BENCH_EXPORT.read_text())["manifest"]


def test_the_older_nested_shape_reads_under_the_current_names() -> None:
    m = from_stored(NESTED)
    assert m.get("gpu.name") == "NVIDIA H200" and m.get("gpu.driver") == "580.159.04"
    assert m.get("gpu.cuda_driver") == "13.0" and m.get("gpu.count") == 1
    assert m.get("gpu.power_enforced_limit_w") == 700 and m.get("gpu.ecc_mode") == "Enabled"
    assert m.get("gpu.memory_total_mib") == 143771  # 150754820096 bytes, as nvidia-smi prints it
    assert m.get("software.cuda") == "13.0" and m.get("software.torch") == "2.11.0"
    assert m.get("host.cpu") == "Intel(R) Xeon(R) Processor" and m.get("software.python") == "3.12.3"
    assert "manifest_hash" not in m.fields and "gpus" not in m.fields
    assert m.devices()[0].uuid == NESTED["gpus"][0]["uuid"]
    assert m.system().cuda_driver_version == NESTED["driver"]["cuda_driver_version"]


def test_the_older_flat_bench_shape_reads_as_it_is() -> None:
    assert from_stored(FLAT).to_dict() == FLAT
    assert from_stored(None).to_dict() == {}


def test_an_nvml_manifest_and_an_nvidia_smi_manifest_of_one_card_compare_equal() -> None:
    """The doctor's (NVML) and the bench's (nvidia-smi) manifests of two H200 machines of one setup: every
    machine field recorded by both is equal; the torch-only fields the doctor never had are unrecorded."""
    diff = compare_manifests(NESTED, FLAT, MACHINE_FIELDS)
    assert diff.comparable, diff
    assert set(diff.unrecorded) == {"software.cudnn", "software.nccl", "software.cublas", "device.kind"}


def test_a_setting_that_differs_is_named() -> None:
    capped = json.loads(json.dumps(NESTED))
    capped["gpus"][0]["power_limit_enforced_w"] = 450.0
    diff = compare_manifests(capped, FLAT, MACHINE_FIELDS)
    assert not diff.comparable and diff.differing == ("gpu.power_enforced_limit_w",)
    assert "gpu.power_enforced_limit_w" in differing_fields(capped, FLAT)


def test_nvidia_smi_and_nvml_give_the_same_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same card through nvidia-smi (a script printing what an H200 prints) and through NVML (a fake)."""
    smi = tmp_path / "nvidia-smi"
    values = {"name": "NVIDIA H200", "uuid": "GPU-test", "vbios_version": "96.00.A5.00.1A",
              "driver_version": "580.159.04", "memory.total": "143771", "power.limit": "700.00",
              "power.default_limit": "700.00", "enforced.power.limit": "700.00", "clocks.max.sm": "1980",
              "clocks.max.mem": "3201", "clocks.applications.graphics": "1980", "persistence_mode": "Enabled",
              "ecc.mode.current": "Enabled", "mig.mode.current": "Disabled", "compute_mode": "Default",
              "pcie.link.gen.max": "5", "pcie.link.width.max": "16", "pcie.link.gen.current": "5",
              "pcie.link.width.current": "16"}
    cases = "".join(f"    {k}) printf '%s' '{v}';;\n" for k, v in values.items())
    smi.write_text('#!/bin/sh\nq=${1#--query-gpu=}\nfirst=1\nfor f in $(echo "$q" | tr , " "); do\n'
                   '  [ $first = 1 ] || printf ", "; first=0\n  case "$f" in\n' + cases + "  esac\ndone\necho\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    from_smi = smi_gpu_fields()
    info = replace(H200_INFO, memory_total_bytes=143771 << 20, persistence_enabled=True, ecc_enabled=True,
                   mig_enabled=False, vbios="96.00.A5.00.1A", app_sm_clock_mhz=1980.0)
    from_nvml = gpu_fields([info], SYSTEM)
    shared = [n for n in from_smi if n in from_nvml and n != "gpu.count"]
    assert len(shared) >= 17
    assert {n: from_smi[n] for n in shared} == {n: from_nvml[n] for n in shared}


def test_machine_hash_of_either_shape_leaves_out_the_volatile_fields() -> None:
    moved = json.loads(json.dumps(NESTED))
    moved["captured_utc"], moved["host"]["hostname"] = "2030-01-01T00:00:00+00:00", "elsewhere"
    assert manifest_hash(moved) == manifest_hash(NESTED)
    flat = from_stored(NESTED)
    assert flat.merged({"host.name": "elsewhere"}).machine_sha256 == flat.machine_sha256


def test_a_monitor_run_stored_in_the_older_shape_still_replays(tmp_path: Path) -> None:
    with open_store(tmp_path / "runs.sqlite") as st:
        run_id = st.begin_run("monitor", "old", NESTED, {"interval_s": 0.1})
        st.end_run(run_id, "completed", {})
        trace = trace_from_run(st.export_run(run_id, samples=True))
    assert trace.devices[0].name == "NVIDIA H200" and trace.system.driver_version == "580.159.04"


def test_a_monitor_run_stored_now_replays_its_devices_and_driver(tmp_path: Path) -> None:
    m = machine_manifest(FakeBackend(build(make_samples("idle", 1.0))))
    with open_store(tmp_path / "runs.sqlite") as st:
        run_id = st.begin_run("monitor", "new", m.to_dict(), {"interval_s": 0.1})
        st.end_run(run_id, "completed", {})
        trace = trace_from_run(st.export_run(run_id, samples=True))
    assert trace.devices == (H200_INFO,) and trace.system == SYSTEM


def test_reimporting_an_older_shape_export_is_still_refused(tmp_path: Path) -> None:
    """The import's run id hashes the file's manifest as stored (not rewritten), so the same file twice is one run."""
    from gpumatch.usecases.import_bench import import_run

    store = tmp_path / "runs.sqlite"
    first = import_run(BENCH_EXPORT, store)
    with pytest.raises(InputError, match=f"run {first}"):
        import_run(BENCH_EXPORT, store)
    with open_store(store) as st:
        assert isinstance(st, Store) and len(st.runs()) == 1
        assert st.run(first).manifest == FLAT


def test_a_manifest_is_frozen() -> None:
    m = Manifest({"gpu.name": "NVIDIA H200"})
    with pytest.raises(TypeError):
        m.fields["gpu.name"] = "other"  # type: ignore[index]
    assert m.merged({"gpu.name": "x"}).get("gpu.name") == "x" and m.get("gpu.name") == "NVIDIA H200"


def test_the_builder_needs_neither_numpy_nor_pydantic() -> None:
    """The bench's child builds it on a GPU machine that may have torch and nothing else."""
    import subprocess
    import sys

    code = ("import sys\nfor m in ('numpy', 'pydantic', 'scipy', 'pynvml'): sys.modules[m] = None\n"
            "from gpumatch.telemetry.manifest import machine_manifest\n"
            "m = machine_manifest()\nprint(m.get('schema'), m.get('host.cpu') is not None)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["gpumatch.manifest/2", "True"]
