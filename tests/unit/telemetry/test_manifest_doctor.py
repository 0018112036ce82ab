"""The environment manifest (stable hash, no torch import) and the doctor library call."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

from synth_traces import H200_INFO, build, make_samples

from gpumatch.store import manifest_sha256
from gpumatch.telemetry.doctor import run_doctor
from gpumatch.telemetry.fake import FakeBackend
from gpumatch.telemetry.manifest import machine_manifest, manifest_hash, trace_manifest
from gpumatch.telemetry.probe import probe_torch


def _backend(info=H200_INFO):
    return FakeBackend(build(make_samples("idle", 2.0), info=info))


def test_manifest_has_the_sections_and_a_stable_hash() -> None:
    a = machine_manifest(_backend())
    b = machine_manifest(_backend())
    assert a.get("schema") == "gpumatch.manifest/2"
    assert a.get("gpu.name") == "NVIDIA H200" and a.get("gpu.compute_capability") == "9.0"
    assert a.get("gpu.devices")[0]["name"] == "NVIDIA H200" and a.devices()[0] == H200_INFO
    assert a.get("gpu.driver") == "580.159.04" and a.get("gpu.cuda_driver") == "13.0"
    assert a.get("host.cpu") and a.get("software.python") and a.get("software.gpumatch")
    assert a.machine_sha256 == b.machine_sha256 and len(a.machine_sha256) == 64
    assert a.sha256 == manifest_sha256(a.to_dict())  # the store's key of it


def test_hash_ignores_volatile_fields_and_sees_settings() -> None:
    base = machine_manifest(_backend())
    idle_link = machine_manifest(_backend(replace(H200_INFO, pcie_gen=1)))
    capped = machine_manifest(_backend(replace(H200_INFO, power_limit_enforced_w=450.0)))
    assert idle_link.machine_sha256 == base.machine_sha256
    assert capped.machine_sha256 != base.machine_sha256
    assert manifest_hash(base.merged({"host.name": "elsewhere"}).fields) == base.machine_sha256


def test_manifest_reads_versions_without_importing_torch() -> None:
    code = ("import sys, json; from gpumatch.telemetry.manifest import machine_manifest; m = machine_manifest(); "
            "print(json.dumps({'torch_imported': 'torch' in sys.modules, 'pynvml_imported': 'pynvml' in sys.modules, "
            "'torch': m.get('software.torch')}))")
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert out == {"torch_imported": False, "pynvml_imported": False, "torch": out["torch"]}
    assert out["torch"]  # the dev venv has torch installed: its version is read from metadata


def test_trace_manifest_describes_the_recorded_machine() -> None:
    m = trace_manifest(build(make_samples("idle", 1.0), meta={"card": "NVIDIA H200", "what_ran": "idle"}))
    assert m.get("gpu.uuid") == "GPU-test" and m.get("replay.what_ran") == "idle"
    assert m.devices()[0].uuid == "GPU-test"


def test_probe_torch_reads_the_build_in_a_subprocess() -> None:
    tb = probe_torch()
    assert tb is not None and tb.version and not tb.error  # the dev venv's CPU torch
    assert probe_torch(sys.executable + "-missing") is not None  # an unusable python reports an error
    assert probe_torch(sys.executable + "-missing").error  # type: ignore[union-attr]


def test_doctor_with_a_fake_gpu_runs_every_check() -> None:
    r = run_doctor(psu_w=1600.0, pcie_load=False, torch_probe=False, open_backend=_backend)
    names = [c.name for c in r.checks]
    assert r.gpu_found and names[:2] == ["torch-build", "psu"]
    assert {"pcie", "power-limit", "clocks", "ecc-remap", "mig-persistence", "foreign-processes",
            "temperature"} <= set(names)
    assert r.overall == "pass", [c for c in r.checks if c.verdict != "pass"]
    assert r.manifest.get("gpu.name") == "NVIDIA H200"


def test_doctor_without_a_gpu_says_so() -> None:
    from gpumatch.errors import NoDeviceError

    def none():
        raise NoDeviceError("NVML could not start", "hint")

    r = run_doctor(pcie_load=False, torch_probe=False, open_backend=none)
    assert not r.gpu_found and "NVML" in r.note
    assert r.checks[0].name == "gpu" and r.checks[0].verdict == "skip"
    assert r.overall == "skip"  # not "pass": no GPU was checked
    assert r.to_dict()["manifest"].get("gpu.devices") is None  # no NVML: nvidia-smi asked, none here
