"""The NVML backend (nvidia-ml-py): the only module of gpumatch that imports ``pynvml``, and lazily.

API names and caveats are those of ../shared/notes/benchmark-method.md section 2 (nvml.h, nvidia-ml-py
13.x): power from ``nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_INSTANT | _AVERAGE)`` in mW; clock-event
reasons from ``nvmlDeviceGetCurrentClocksEventReasons`` (the older ``…ThrottleReasons`` as fallback);
violation time in ns from ``nvmlDeviceGetViolationStatus``; energy in mJ from
``nvmlDeviceGetTotalEnergyConsumption`` (~4 ms a read on an H200, so only at window edges); GPM from two
``nvmlGpmSampleGet`` samples and ``nvmlGpmMetricsGet``. A field the GPU does not support reads as None;
after the first NotSupported the call is not repeated (so the 10-20 Hz loop stays cheap).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpumatch.errors import MissingDependencyError, NoDeviceError
from gpumatch.telemetry.types import (
    VIOLATION_POLICIES,
    DeviceInfo,
    EdgeCounters,
    GpmMetrics,
    GpuProcess,
    Sample,
    SystemInfo,
    XidEvent,
)

_NO_NVML_HINT = (
    "no NVIDIA driver/NVML here; on a machine without a GPU use 'gpumatch monitor --replay TRACE.csv' "
    "to see how it works, or 'gpumatch doctor' for the environment"
)


def _pynvml() -> Any:
    try:
        import pynvml
    except ImportError as e:
        raise MissingDependencyError(
            "NVML telemetry needs the 'nvidia-ml-py' package", "pip install 'gpumatch[bench]' (or nvidia-ml-py)"
        ) from e
    return pynvml


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class _Caller:
    """Calls NVML functions by name; NVML errors become None, and NotSupported is remembered."""

    def __init__(self, nv: Any) -> None:
        self.nv = nv
        self.off: set[str] = set()

    def __call__(self, key: str, fn: Callable[..., Any], *args: Any) -> Any:
        if key in self.off:
            return None
        try:
            return fn(*args)
        except self.nv.NVMLError as e:
            if isinstance(e, self.nv.NVMLError_NotSupported | self.nv.NVMLError_FunctionNotFound):
                self.off.add(key)
            return None
        except (AttributeError, TypeError, OSError):  # a binding too old for this call
            self.off.add(key)
            return None


class NvmlDevice:
    """One GPU through NVML (implements :class:`gpumatch.telemetry.device.Device`)."""

    def __init__(self, nv: Any, index: int) -> None:
        self._nv = nv
        self._index = index
        self._h = nv.nvmlDeviceGetHandleByIndex(index)
        self._call = _Caller(nv)
        self._fields = [nv.NVML_FI_DEV_POWER_INSTANT, nv.NVML_FI_DEV_POWER_AVERAGE, nv.NVML_FI_DEV_MEMORY_TEMP]
        self._gpm_samples: list[Any] = []
        self._gpm_prev_t: float | None = None
        self._gpm_ok = self._init_gpm()

    @property
    def index(self) -> int:
        return self._index

    # --- cheap fields (10-20 Hz) -------------------------------------------------------------
    def sample(self, t_s: float) -> Sample:
        nv, h, c = self._nv, self._h, self._call
        inst, avg, mem_t = self._field_values()
        if inst is None and avg is None:
            usage = c("power", nv.nvmlDeviceGetPowerUsage, h)  # 1-s average on Ampere+ (except GA100)
            avg = None if usage is None else usage / 1000.0
        reasons = c("reasons", self._reasons_fn(), h)
        util = c("util", nv.nvmlDeviceGetUtilizationRates, h)
        mem = c("mem", nv.nvmlDeviceGetMemoryInfo, h)
        sm = c("sm_clk", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
        mclk = c("mem_clk", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM)
        temp = c("temp", nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
        return Sample(
            t_s=t_s,
            gpu_index=self._index,
            power_instant_w=inst,
            power_avg_w=avg,
            sm_clock_mhz=None if sm is None else float(sm),
            mem_clock_mhz=None if mclk is None else float(mclk),
            clock_event_reasons=None if reasons is None else int(reasons),
            gpu_temp_c=None if temp is None else float(temp),
            mem_temp_c=mem_t,
            memory_used_bytes=None if mem is None else int(mem.used),
            util_gpu_pct=None if util is None else float(util.gpu),
            util_mem_pct=None if util is None else float(util.memory),
        )

    def _reasons_fn(self) -> Callable[..., Any]:
        nv = self._nv
        fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        return fn if fn is not None else nv.nvmlDeviceGetCurrentClocksThrottleReasons  # type: ignore[no-any-return]

    def _field_values(self) -> tuple[float | None, float | None, float | None]:
        """Instant power (W), 1-s average power (W) and HBM temperature (°C) in one NVML call."""
        vals = self._call("fields", self._nv.nvmlDeviceGetFieldValues, self._h, self._fields)
        if vals is None:
            return None, None, None
        out = [_field_number(self._nv, v) for v in vals]
        inst = None if out[0] is None else out[0] / 1000.0
        avg = None if out[1] is None else out[1] / 1000.0
        return inst, avg, out[2]

    # --- GPM (about 1 Hz) ---------------------------------------------------------------------
    def _init_gpm(self) -> bool:
        nv = self._nv
        support = self._call("gpm_query", getattr(nv, "nvmlGpmQueryDeviceSupport", _missing), self._h)
        if support is None or not support.isSupportedDevice:
            return False
        s1 = self._call("gpm_alloc", nv.nvmlGpmSampleAlloc)
        s2 = self._call("gpm_alloc", nv.nvmlGpmSampleAlloc)
        if s1 is None or s2 is None:
            return False
        self._gpm_samples = [s1, s2]
        return True

    def gpm(self) -> GpmMetrics | None:
        """Metrics between the previous call and now; swaps the two GPM sample buffers."""
        if not self._gpm_ok:
            return None
        nv = self._nv
        prev, cur = self._gpm_samples
        now = time.monotonic()
        if self._call("gpm_get", nv.nvmlGpmSampleGet, self._h, cur) is None:
            return None
        prev_t, self._gpm_prev_t = self._gpm_prev_t, now
        self._gpm_samples = [cur, prev]
        if prev_t is None:
            return None
        ids = [nv.NVML_GPM_METRIC_SM_UTIL, nv.NVML_GPM_METRIC_ANY_TENSOR_UTIL, nv.NVML_GPM_METRIC_DRAM_BW_UTIL]
        mg = nv.c_nvmlGpmMetricsGet_t()
        mg.version = nv.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(ids)
        mg.sample1, mg.sample2 = prev, cur
        for i, mid in enumerate(ids):
            mg.metrics[i].metricId = mid
        if self._call("gpm_metrics", nv.nvmlGpmMetricsGet, mg) is None:
            return None
        vals = [float(mg.metrics[i].value) if mg.metrics[i].nvmlReturn == 0 else None for i in range(len(ids))]
        return GpmMetrics(vals[0], vals[1], vals[2], interval_s=now - prev_t)

    # --- window edges -------------------------------------------------------------------------
    def edge_counters(self, t_s: float) -> EdgeCounters:
        nv, h, c = self._nv, self._h, self._call
        viol: dict[str, int] = {}
        for name, pid in VIOLATION_POLICIES.items():
            v = c(f"viol_{name}", nv.nvmlDeviceGetViolationStatus, h, pid)
            if v is not None:
                viol[name] = int(v.violationTime)
        rows = c("remap", nv.nvmlDeviceGetRemappedRows, h)
        corr = c("ecc_c", nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, nv.NVML_VOLATILE_ECC)
        unc = c("ecc_u", nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC)
        energy = c("energy", nv.nvmlDeviceGetTotalEnergyConsumption, h)
        return EdgeCounters(
            t_s=t_s,
            gpu_index=self._index,
            energy_mj=None if energy is None else int(energy),
            violation_ns=viol,
            ecc_corrected=_opt_int(corr),
            ecc_uncorrected=_opt_int(unc),
            pcie_replays=_opt_int(c("replay", nv.nvmlDeviceGetPcieReplayCounter, h)),
            remapped_rows=None if rows is None else (int(rows[0]), int(rows[1]), int(rows[2]), int(rows[3])),
            pcie_gen=_opt_int(c("pcie_gen", nv.nvmlDeviceGetCurrPcieLinkGeneration, h)),
            pcie_width=_opt_int(c("pcie_width", nv.nvmlDeviceGetCurrPcieLinkWidth, h)),
        )

    def pcie_link(self) -> tuple[int | None, int | None]:
        nv, h, c = self._nv, self._h, self._call
        return (_opt_int(c("pcie_gen", nv.nvmlDeviceGetCurrPcieLinkGeneration, h)),
                _opt_int(c("pcie_width", nv.nvmlDeviceGetCurrPcieLinkWidth, h)))

    def processes(self) -> list[GpuProcess]:
        nv, h, c = self._nv, self._h, self._call
        seen: dict[int, GpuProcess] = {}
        for key, fn in (("procs_c", nv.nvmlDeviceGetComputeRunningProcesses),
                        ("procs_g", nv.nvmlDeviceGetGraphicsRunningProcesses)):
            for p in c(key, fn, h) or []:
                used = getattr(p, "usedGpuMemory", None)
                used_b = int(used) if isinstance(used, int) and used < (1 << 63) else None
                seen[int(p.pid)] = GpuProcess(int(p.pid), _process_name(nv, int(p.pid)), used_b)
        return list(seen.values())

    def info(self) -> DeviceInfo:
        nv, h, c = self._nv, self._h, self._call
        ecc = c("ecc_mode", nv.nvmlDeviceGetEccMode, h)
        mig = c("mig_mode", nv.nvmlDeviceGetMigMode, h)
        cons = c("pl_cons", nv.nvmlDeviceGetPowerManagementLimitConstraints, h)
        mem = c("mem", nv.nvmlDeviceGetMemoryInfo, h)
        pci = c("pci", nv.nvmlDeviceGetPciInfo, h)
        cc = c("cc", nv.nvmlDeviceGetCudaComputeCapability, h)
        thr = nv.nvmlDeviceGetTemperatureThreshold
        return DeviceInfo(
            index=self._index,
            name=_text(c("name", nv.nvmlDeviceGetName, h) or "unknown"),
            uuid=_opt_text(c("uuid", nv.nvmlDeviceGetUUID, h)),
            serial=_opt_text(c("serial", nv.nvmlDeviceGetSerial, h)),
            vbios=_opt_text(c("vbios", nv.nvmlDeviceGetVbiosVersion, h)),
            pci_bus_id=None if pci is None else _text(pci.busId),
            compute_capability=None if cc is None else (int(cc[0]), int(cc[1])),
            memory_total_bytes=None if mem is None else int(mem.total),
            power_limit_default_w=_mw(c("pl_def", nv.nvmlDeviceGetPowerManagementDefaultLimit, h)),
            power_limit_enforced_w=_mw(c("pl_enf", nv.nvmlDeviceGetEnforcedPowerLimit, h)),
            power_limit_set_w=_mw(c("pl_set", nv.nvmlDeviceGetPowerManagementLimit, h)),
            power_limit_min_w=None if cons is None else _mw(cons[0]),
            power_limit_max_w=None if cons is None else _mw(cons[1]),
            sm_clock_max_mhz=_opt_float(c("max_sm", nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM)),
            mem_clock_max_mhz=_opt_float(c("max_mem", nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM)),
            app_sm_clock_mhz=_opt_float(c("app_sm", nv.nvmlDeviceGetApplicationsClock, h, nv.NVML_CLOCK_SM)),
            app_sm_clock_default_mhz=_opt_float(
                c("dapp_sm", nv.nvmlDeviceGetDefaultApplicationsClock, h, nv.NVML_CLOCK_SM)),
            app_mem_clock_mhz=_opt_float(c("app_mem", nv.nvmlDeviceGetApplicationsClock, h, nv.NVML_CLOCK_MEM)),
            app_mem_clock_default_mhz=_opt_float(
                c("dapp_mem", nv.nvmlDeviceGetDefaultApplicationsClock, h, nv.NVML_CLOCK_MEM)),
            ecc_enabled=None if ecc is None else bool(ecc[0]),
            ecc_pending_enabled=None if ecc is None else bool(ecc[1]),
            mig_enabled=None if mig is None else bool(mig[0]),
            persistence_enabled=_opt_bool(c("persist", nv.nvmlDeviceGetPersistenceMode, h)),
            pcie_gen=_opt_int(c("pcie_gen", nv.nvmlDeviceGetCurrPcieLinkGeneration, h)),
            pcie_width=_opt_int(c("pcie_width", nv.nvmlDeviceGetCurrPcieLinkWidth, h)),
            pcie_max_gen_system=_opt_int(c("pcie_mgen", nv.nvmlDeviceGetMaxPcieLinkGeneration, h)),
            pcie_max_width_system=_opt_int(c("pcie_mwidth", nv.nvmlDeviceGetMaxPcieLinkWidth, h)),
            pcie_max_gen_gpu=_opt_int(c("pcie_gmgen", nv.nvmlDeviceGetGpuMaxPcieLinkGeneration, h)),
            temp_slowdown_c=_opt_float(c("t_slow", thr, h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)),
            temp_shutdown_c=_opt_float(c("t_shut", thr, h, nv.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN)),
            temp_gpu_max_c=_opt_float(c("t_gmax", thr, h, nv.NVML_TEMPERATURE_THRESHOLD_GPU_MAX)),
            temp_mem_max_c=_opt_float(c("t_mmax", thr, h, nv.NVML_TEMPERATURE_THRESHOLD_MEM_MAX)),
            gpm_supported=self._gpm_ok,
            retired_pages_pending=_opt_bool(c("retired", nv.nvmlDeviceGetRetiredPagesPendingStatus, h)),
        )


class NvmlBackend:
    """The GPUs of this machine through NVML (implements :class:`gpumatch.telemetry.device.Backend`)."""

    def __init__(self, nv: Any, indices: Sequence[int] | None = None) -> None:
        self._nv = nv
        count = int(nv.nvmlDeviceGetCount())
        wanted = list(range(count)) if indices is None else list(indices)
        bad = [i for i in wanted if not 0 <= i < count]
        if bad:
            nv.nvmlShutdown()
            raise NoDeviceError(f"no GPU with index {bad[0]} (this machine has {count})",
                                f"use an index from 0 to {count - 1}" if count else _NO_NVML_HINT)
        self._devices = [NvmlDevice(nv, i) for i in wanted]
        self._count = count
        self._events = self._init_events()
        self._closed = False

    def _init_events(self) -> Any:
        nv = self._nv
        c = _Caller(nv)
        es = c("evset", nv.nvmlEventSetCreate)
        if es is None:
            return None
        for d in self._devices:
            h = nv.nvmlDeviceGetHandleByIndex(d.index)
            supported = c("evtypes", nv.nvmlDeviceGetSupportedEventTypes, h) or 0
            if supported & nv.nvmlEventTypeXidCriticalError:
                c(f"reg{d.index}", nv.nvmlDeviceRegisterEvents, h, nv.nvmlEventTypeXidCriticalError, es)
        return es

    def system(self) -> SystemInfo:
        nv, c = self._nv, _Caller(self._nv)
        return SystemInfo(
            driver_version=_opt_text(c("drv", nv.nvmlSystemGetDriverVersion)),
            cuda_driver_version=_opt_int(c("cuda", nv.nvmlSystemGetCudaDriverVersion)),
            nvml_version=_opt_text(c("nvml", nv.nvmlSystemGetNVMLVersion)),
            device_count=self._count,
        )

    def devices(self) -> Sequence[NvmlDevice]:
        return self._devices

    def poll_xid(self, t_s: float) -> list[XidEvent]:
        """Drain the event set with a 0-ms wait (NVML answers Timeout at once when it is empty)."""
        if self._events is None:
            return []
        nv, out = self._nv, []
        for _ in range(64):
            try:
                data = nv.nvmlEventSetWait_v2(self._events, 0)
            except nv.NVMLError:
                break
            idx = _opt_int(_Caller(nv)("idx", nv.nvmlDeviceGetIndex, data.device))
            out.append(XidEvent(t_s=t_s, gpu_index=-1 if idx is None else idx, xid=int(data.eventData)))
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        nv = self._nv
        try:
            if self._events is not None:
                nv.nvmlEventSetFree(self._events)
            for d in self._devices:
                for s in d._gpm_samples:
                    nv.nvmlGpmSampleFree(s)
            nv.nvmlShutdown()
        except nv.NVMLError:
            pass


def open_nvml(indices: Sequence[int] | None = None) -> NvmlBackend:
    """Initialise NVML and open the GPUs (all, or ``indices``).

    Raises MissingDependencyError without nvidia-ml-py, NoDeviceError without a driver or a GPU.
    """
    nv = _pynvml()
    try:
        nv.nvmlInit()
    except nv.NVMLError as e:
        raise NoDeviceError(f"NVML could not start ({_text(e)})", _NO_NVML_HINT) from e
    if int(nv.nvmlDeviceGetCount()) == 0:
        nv.nvmlShutdown()
        raise NoDeviceError("NVML found no GPU on this machine", _NO_NVML_HINT)
    return NvmlBackend(nv, indices)


def _missing(*_: Any) -> Any:
    raise AttributeError("not in this nvidia-ml-py")


def _field_number(nv: Any, v: Any) -> float | None:
    """The number in an nvmlFieldValue_t, or None when its own return code is not success."""
    if v.nvmlReturn != 0:
        return None
    t = int(v.valueType)
    member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(t)
    return None if member is None else float(getattr(v.value, member))


def _process_name(nv: Any, pid: int) -> str:
    try:
        return _text(nv.nvmlSystemGetProcessName(pid))
    except Exception:
        comm = Path(f"/proc/{pid}/comm")
        return comm.read_text().strip() if comm.exists() else "?"


def _mw(v: Any) -> float | None:
    return None if v is None else float(v) / 1000.0


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


def _opt_bool(v: Any) -> bool | None:
    return None if v is None else bool(v)


def _opt_text(v: Any) -> str | None:
    return None if v is None else _text(v)
