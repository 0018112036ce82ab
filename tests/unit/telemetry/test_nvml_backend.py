"""The NVML backend against a stand-in ``pynvml`` module (the real one needs a driver).

The stand-in follows nvidia-ml-py 13's signatures and units (mW, ns, mJ, field values with their own
return code), so unit conversions, NotSupported handling, GPM pairing and Xid draining are checked here;
tests/gpu and the recorded traces check the real thing.
"""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace as NS

import pytest

from gpumatch.errors import MissingDependencyError, NoDeviceError


class NVMLError(Exception):
    pass


class NotSupported(NVMLError):
    pass


class FunctionNotFound(NVMLError):
    pass


class Timeout(NVMLError):
    pass


def _fake_pynvml(count: int = 1, init_error: bool = False) -> types.ModuleType:
    nv = types.ModuleType("pynvml")
    calls: dict[str, int] = {}
    xids = [NS(device="h0", eventData=79)]

    def counted(name, fn):
        def wrapper(*a):
            calls[name] = calls.get(name, 0) + 1
            return fn(*a)
        return wrapper

    def unsupported(*_):
        raise NotSupported()

    def field_values(h, ids):
        vals = {186: (1, 412_345), 185: (1, 400_000), 82: (1, 41)}
        return [NS(nvmlReturn=0, valueType=vals[i][0], value=NS(uiVal=vals[i][1])) for i in ids]

    def event_wait(es, timeout):
        if xids:
            return xids.pop()
        raise Timeout()

    def gpm_metrics(mg):
        for m, v in zip(mg.metrics[:3], (96.5, 93.7, 17.7), strict=True):
            m.value, m.nvmlReturn = v, 0
        return mg

    class MetricsGet:
        def __init__(self):
            self.metrics = [NS(metricId=0, value=0.0, nvmlReturn=1) for _ in range(3)]

    consts = dict(
        NVMLError=NVMLError, NVMLError_NotSupported=NotSupported, NVMLError_FunctionNotFound=FunctionNotFound,
        NVML_FI_DEV_POWER_INSTANT=186, NVML_FI_DEV_POWER_AVERAGE=185, NVML_FI_DEV_MEMORY_TEMP=82,
        NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, NVML_TEMPERATURE_GPU=0, NVML_MEMORY_ERROR_TYPE_CORRECTED=0,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1, NVML_VOLATILE_ECC=0, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN=1,
        NVML_TEMPERATURE_THRESHOLD_SHUTDOWN=0, NVML_TEMPERATURE_THRESHOLD_GPU_MAX=3,
        NVML_TEMPERATURE_THRESHOLD_MEM_MAX=2, NVML_GPM_METRIC_SM_UTIL=2, NVML_GPM_METRIC_ANY_TENSOR_UTIL=5,
        NVML_GPM_METRIC_DRAM_BW_UTIL=10, NVML_GPM_METRICS_GET_VERSION=1, nvmlEventTypeXidCriticalError=8,
        c_nvmlGpmMetricsGet_t=MetricsGet,
    )
    funcs = dict(
        nvmlInit=lambda: (_ for _ in ()).throw(NVMLError("Driver Not Loaded")) if init_error else None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: count,
        nvmlDeviceGetHandleByIndex=lambda i: f"h{i}",
        nvmlDeviceGetIndex=lambda h: int(h[1:]),
        nvmlDeviceGetFieldValues=field_values,
        nvmlDeviceGetPowerUsage=lambda h: 399_000,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x4,
        nvmlDeviceGetUtilizationRates=lambda h: NS(gpu=100, memory=24),
        nvmlDeviceGetMemoryInfo=lambda h: NS(used=2**30, total=150 * 10**9),
        nvmlDeviceGetClockInfo=lambda h, c: 1470 if c == 1 else 3201,
        nvmlDeviceGetTemperature=lambda h, s: 57,
        nvmlGpmQueryDeviceSupport=lambda h: NS(isSupportedDevice=1),
        nvmlGpmSampleAlloc=lambda: object(),
        nvmlGpmSampleGet=lambda h, s: s,
        nvmlGpmMetricsGet=gpm_metrics,
        nvmlGpmSampleFree=lambda s: None,
        nvmlDeviceGetViolationStatus=lambda h, p: NS(violationTime=6_810_000_000 if p == 0 else 0),
        nvmlDeviceGetRemappedRows=lambda h: (0, 0, 0, 0),
        nvmlDeviceGetTotalEccErrors=lambda h, t, c: 0,
        nvmlDeviceGetTotalEnergyConsumption=lambda h: 123_456_789,
        nvmlDeviceGetPcieReplayCounter=lambda h: 0,
        nvmlDeviceGetCurrPcieLinkGeneration=lambda h: 5,
        nvmlDeviceGetCurrPcieLinkWidth=lambda h: 16,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [NS(pid=4242, usedGpuMemory=2**31)],
        nvmlDeviceGetGraphicsRunningProcesses=unsupported,
        nvmlSystemGetProcessName=lambda pid: b"python3",
        nvmlDeviceGetEccMode=lambda h: [1, 1],
        nvmlDeviceGetMigMode=unsupported,
        nvmlDeviceGetPowerManagementLimitConstraints=lambda h: [200_000, 700_000],
        nvmlDeviceGetPciInfo=lambda h: NS(busId=b"00000000:01:00.0"),
        nvmlDeviceGetCudaComputeCapability=lambda h: (9, 0),
        nvmlDeviceGetTemperatureThreshold=lambda h, t: {1: 89, 0: 95, 3: 87, 2: 95}[t],
        nvmlDeviceGetName=lambda h: "NVIDIA H200",
        nvmlDeviceGetUUID=lambda h: "GPU-1234",
        nvmlDeviceGetSerial=unsupported,
        nvmlDeviceGetVbiosVersion=lambda h: "96.00.AF.00.01",
        nvmlDeviceGetPowerManagementDefaultLimit=lambda h: 700_000,
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700_000,
        nvmlDeviceGetPowerManagementLimit=lambda h: 700_000,
        nvmlDeviceGetMaxClockInfo=lambda h, c: 1980 if c == 1 else 3201,
        nvmlDeviceGetApplicationsClock=lambda h, c: 1980 if c == 1 else 3201,
        nvmlDeviceGetDefaultApplicationsClock=lambda h, c: 1980 if c == 1 else 3201,
        nvmlDeviceGetPersistenceMode=lambda h: 1,
        nvmlDeviceGetMaxPcieLinkGeneration=lambda h: 5,
        nvmlDeviceGetMaxPcieLinkWidth=lambda h: 16,
        nvmlDeviceGetGpuMaxPcieLinkGeneration=lambda h: 5,
        nvmlDeviceGetRetiredPagesPendingStatus=unsupported,
        nvmlEventSetCreate=lambda: "es",
        nvmlDeviceGetSupportedEventTypes=lambda h: 0xFF9F,
        nvmlDeviceRegisterEvents=lambda h, t, es: None,
        nvmlEventSetWait_v2=event_wait,
        nvmlEventSetFree=lambda es: None,
        nvmlSystemGetDriverVersion=lambda: "580.159.04",
        nvmlSystemGetCudaDriverVersion=lambda: 13000,
        nvmlSystemGetNVMLVersion=lambda: "13.580.159.04",
    )
    for k, v in consts.items():
        setattr(nv, k, v)
    for k, v in funcs.items():
        setattr(nv, k, counted(k, v))
    nv.calls = calls  # type: ignore[attr-defined]
    return nv


@pytest.fixture
def nvml(monkeypatch):
    nv = _fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    from gpumatch.telemetry.nvml import open_nvml

    b = open_nvml()
    yield b, nv
    b.close()


def test_sample_converts_units(nvml) -> None:
    b, _ = nvml
    s = b.devices()[0].sample(1.5)
    assert s.t_s == 1.5 and s.gpu_index == 0
    assert s.power_instant_w == pytest.approx(412.345)
    assert s.power_avg_w == pytest.approx(400.0)
    assert s.mem_temp_c == 41.0 and s.gpu_temp_c == 57.0
    assert (s.sm_clock_mhz, s.mem_clock_mhz, s.clock_event_reasons) == (1470.0, 3201.0, 4)
    assert (s.util_gpu_pct, s.util_mem_pct, s.memory_used_bytes) == (100.0, 24.0, 2**30)
    assert s.gpm_sm_active is None


def test_gpm_needs_a_pair(nvml) -> None:
    d = nvml[0].devices()[0]
    assert d.gpm() is None
    m = d.gpm()
    assert m is not None and (m.sm_active_pct, m.tensor_active_pct, m.dram_bw_util_pct) == (96.5, 93.7, 17.7)


def test_edge_counters(nvml) -> None:
    e = nvml[0].devices()[0].edge_counters(2.0)
    assert e.energy_mj == 123_456_789
    assert e.violation_ns["power"] == 6_810_000_000
    assert set(e.violation_ns) >= {"power", "thermal", "sync_boost", "board_limit", "reliability"}
    assert (e.remapped_rows, e.pcie_gen, e.pcie_width, e.ecc_uncorrected) == ((0, 0, 0, 0), 5, 16, 0)


def test_info_and_unsupported_fields(nvml) -> None:
    b, nv = nvml
    i = b.devices()[0].info()
    assert (i.name, i.uuid, i.serial, i.mig_enabled, i.pci_bus_id) == ("NVIDIA H200", "GPU-1234", None, None,
                                                                       "00000000:01:00.0")
    assert (i.power_limit_default_w, i.power_limit_min_w, i.power_limit_max_w) == (700.0, 200.0, 700.0)
    assert (i.temp_slowdown_c, i.compute_capability, i.gpm_supported, i.ecc_enabled) == (89.0, (9, 0), True, True)
    b.devices()[0].info()
    assert nv.calls["nvmlDeviceGetSerial"] == 1  # NotSupported is remembered, not retried


def test_processes_and_xids(nvml) -> None:
    b, _ = nvml
    (p,) = b.devices()[0].processes()
    assert (p.pid, p.name, p.used_memory_bytes) == (4242, "python3", 2**31)
    xs = b.poll_xid(3.0)
    assert [(x.gpu_index, x.xid, x.t_s) for x in xs] == [(0, 79, 3.0)]
    assert b.poll_xid(4.0) == []
    assert b.system().cuda_driver_version_str == "13.0"


def test_no_driver_and_no_package(monkeypatch) -> None:
    from gpumatch.telemetry.nvml import open_nvml

    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(init_error=True))
    with pytest.raises(NoDeviceError) as e:
        open_nvml()
    assert "--replay" in e.value.hint
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(count=0))
    with pytest.raises(NoDeviceError, match="no GPU"):
        open_nvml()
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(count=2))
    with pytest.raises(NoDeviceError, match="index 5"):
        open_nvml([5])
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(MissingDependencyError):
        open_nvml()


def test_sampler_over_the_nvml_backend(nvml) -> None:
    from gpumatch.telemetry.sampler import Sampler
    from gpumatch.telemetry.verdict import analyze

    s = Sampler(nvml[0], 0.01, gpm_interval_s=0.05).start()
    import time

    time.sleep(0.2)
    tr = s.stop()
    assert any(x.gpm_tensor_active == 93.7 for x in tr.samples)
    assert tr.xid_events == () or tr.xid_events[0].xid == 79
    (v,) = analyze(tr)
    assert v.workload.label == "compute-bound"
