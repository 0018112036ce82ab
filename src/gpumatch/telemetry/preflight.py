"""Preflight checks: is this machine fit to produce comparable measurements? Each check gives a
verdict (pass / warn / fail / skip), what it saw, and a hint.

Pure functions over facts gathered elsewhere (:class:`GpuFacts`, :class:`MachineFacts`), so every
rule is unit-tested with made-up facts. Rules and their sources:

- PCIe: the current link (under load when measured) against the slot+GPU maximum (downtraining), and
  the slot maximum against the GPU's own (a Gen4 slot for a Gen5 card, an x4 slot — seed 001 误区二).
- Power limit: enforced against default (someone ran ``nvidia-smi -pl``, or a board limit applies —
  seed 001: "电源线只插了一根8pin", only one of two 8-pin cables plugged in, capped the card).
- Clocks: application clocks against their defaults, and the ApplicationsClocksSetting reason bit.
- ECC and row remapping: ECC off or a mode change pending; pending or failed remaps (pending needs a
  GPU reset, failed means the card should be pulled — nvml.h); uncorrectable errors since driver load.
- MIG and persistence mode; foreign processes holding a context on the GPU.
- Temperature headroom to the slowdown threshold (H200: slowdown 89 °C).
- Driver vs CUDA vs torch build: the torch CUDA major must not exceed the driver's; the card's compute
  capability must be in torch's arch list (seed 001 误区四: 旧卡不跑新框架).
- PSU: PSU watts >= 1.5 x (sum of GPU enforced limits + other load) (seed 001 误区三: 功率余量建议留到1.5倍).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gpumatch.telemetry.probe import TorchBuild
from gpumatch.telemetry.types import REASON_APP_CLOCKS, DeviceInfo, EdgeCounters, GpuProcess, Sample, SystemInfo
from gpumatch.units import GIB

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
PSU_RULE = 1.5
TEMP_HEADROOM_PASS_C = 20.0
TEMP_HEADROOM_FAIL_C = 10.0


@dataclass(frozen=True)
class Check:
    """One check's outcome. ``gpu_index`` None = machine-wide."""

    name: str
    verdict: str
    detail: str
    hint: str = ""
    gpu_index: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GpuFacts:
    """What was read from one GPU for the checks."""

    info: DeviceInfo
    sample: Sample | None = None
    edges: EdgeCounters | None = None
    processes: tuple[GpuProcess, ...] = ()
    pcie_under_load: tuple[int | None, int | None] | None = None


@dataclass(frozen=True)
class MachineFacts:
    """Machine-wide inputs: driver, torch build, own process ids, and the user's PSU figures (W)."""

    system: SystemInfo | None
    gpus: tuple[GpuFacts, ...]
    torch: TorchBuild | None = None
    own_pids: frozenset[int] = field(default_factory=frozenset)
    psu_w: float | None = None
    other_load_w: float = 0.0
    torch_probed: bool = True


def _c(name: str, g: GpuFacts, verdict: str, detail: str, hint: str = "") -> Check:
    return Check(name, verdict, detail, hint, g.info.index)


def check_pcie(g: GpuFacts) -> Check:
    i = g.info
    cur = g.pcie_under_load or (i.pcie_gen, i.pcie_width)
    loaded = g.pcie_under_load is not None
    if cur[0] is None or i.pcie_max_gen_system is None:
        return _c("pcie", g, SKIP, "PCIe link not reported (SXM/NVLink-only or virtualized)")
    when = "under load" if loaded else "at idle"
    detail = f"Gen{cur[0]} x{cur[1]} {when}; slot max Gen{i.pcie_max_gen_system} x{i.pcie_max_width_system}"
    if i.pcie_max_gen_gpu is not None:
        detail += f"; GPU max Gen{i.pcie_max_gen_gpu}"
    down = cur[0] < i.pcie_max_gen_system or (cur[1] or 0) < (i.pcie_max_width_system or 0)
    if down and loaded:
        return _c("pcie", g, FAIL, detail + " (downtrained)", "reseat the card, check the riser/cable and BIOS "
                  "PCIe settings; a downtrained link cuts host<->GPU bandwidth")
    if down:
        return _c("pcie", g, WARN, detail, "NVML lowers the link at idle; run 'gpumatch doctor' with the PCIe load "
                  "probe (needs torch) to read it under load")
    if i.pcie_max_gen_gpu is not None and i.pcie_max_gen_system < i.pcie_max_gen_gpu:
        return _c("pcie", g, WARN, detail + " (slot slower than the GPU)", "move the card to a slot of the GPU's "
                  "generation, or accept slower host<->GPU copies")
    if (i.pcie_max_width_system or 16) < 16:
        return _c("pcie", g, WARN, detail + " (narrow slot)", "an x4/x8 slot cuts host<->GPU bandwidth; use an x16 "
                  "slot (seed: 消费级显卡插到PCIe x4的槽上)")
    return _c("pcie", g, PASS, detail)


def check_power_limit(g: GpuFacts) -> Check:
    i = g.info
    if i.power_limit_enforced_w is None or i.power_limit_default_w is None:
        return _c("power-limit", g, SKIP, "power limits not reported")
    ratio = i.power_limit_enforced_w / i.power_limit_default_w
    detail = f"enforced {i.power_limit_enforced_w:.0f} W, default {i.power_limit_default_w:.0f} W"
    if i.power_limit_set_w is not None:
        detail += f", set {i.power_limit_set_w:.0f} W"
    hint = ("someone capped the card (nvidia-smi -pl) or a board/PSU limit applies; on cards with several power "
            "connectors check that every cable is plugged in (seed: 电源线只插了一根8pin)")
    if ratio < 0.9:
        return _c("power-limit", g, FAIL, detail + f" ({ratio:.0%} of default)", hint)
    if ratio < 0.99:
        return _c("power-limit", g, WARN, detail + f" ({ratio:.0%} of default)", hint)
    return _c("power-limit", g, PASS, detail)


def check_clocks(g: GpuFacts) -> Check:
    i = g.info
    reasons = g.sample.clock_event_reasons if g.sample else None
    pairs = (("app SM", i.app_sm_clock_mhz, i.app_sm_clock_default_mhz),
             ("app mem", i.app_mem_clock_mhz, i.app_mem_clock_default_mhz))
    changed = [f"{n} {cur:.0f} MHz (default {d:.0f})" for n, cur, d in pairs
               if cur is not None and d is not None and cur != d]
    hint = "results reflect the set clocks: reset with 'nvidia-smi -rac' / '-rgc' (as admin) or record it"
    if changed:
        return _c("clocks", g, WARN, "application clocks changed: " + "; ".join(changed), hint)
    if reasons is not None and reasons & REASON_APP_CLOCKS:
        return _c("clocks", g, WARN, "the 'applications clocks setting' reason is active (locked clocks?)", hint)
    if i.app_sm_clock_mhz is None and reasons is None:
        return _c("clocks", g, SKIP, "application clocks not reported")
    return _c("clocks", g, PASS, f"default clocks (SM max {i.sm_clock_max_mhz or 0:.0f} MHz)")


def check_ecc(g: GpuFacts) -> Check:
    i, e = g.info, g.edges
    rows = e.remapped_rows if e else None
    if rows is not None and rows[3]:
        return _c("ecc-remap", g, FAIL, f"row remapping FAILED (remapped rows {rows[0]}+{rows[1]})",
                  "the card has run out of spare rows: have it replaced")
    if rows is not None and rows[2]:
        return _c("ecc-remap", g, FAIL, "row remap pending", "reset the GPU or reboot to apply the pending remap")
    if i.retired_pages_pending:
        return _c("ecc-remap", g, FAIL, "page retirement pending", "reboot to retire the pending pages")
    if e is not None and (e.ecc_uncorrected or 0) > 0:
        return _c("ecc-remap", g, FAIL, f"{e.ecc_uncorrected} uncorrectable ECC errors since the driver loaded",
                  "check 'nvidia-smi -q -d ECC'; rerun after a reset; replace the card if they recur")
    if i.ecc_enabled is None:
        return _c("ecc-remap", g, SKIP, "ECC not supported on this GPU")
    detail = f"ECC {'on' if i.ecc_enabled else 'off'}" + (f"; remapped rows {rows[0]}+{rows[1]}" if rows else "")
    if i.ecc_pending_enabled is not None and i.ecc_pending_enabled != i.ecc_enabled:
        return _c("ecc-remap", g, WARN, detail + " (mode change pending)", "reboot to apply the pending ECC mode")
    if not i.ecc_enabled:
        return _c("ecc-remap", g, WARN, detail, "with ECC off, memory errors go unseen; datacenter runs use ECC on")
    return _c("ecc-remap", g, PASS, detail)


def check_modes(g: GpuFacts) -> Check:
    i = g.info
    if i.mig_enabled:
        return _c("mig-persistence", g, WARN, "MIG is enabled", "whole-GPU benchmarks need MIG off; results are "
                  "per MIG slice otherwise")
    if i.persistence_enabled is False:
        return _c("mig-persistence", g, WARN, "persistence mode off", "the driver unloads between jobs (slow first "
                  "call, settings reset): 'nvidia-smi -pm 1' or nvidia-persistenced")
    if i.mig_enabled is None and i.persistence_enabled is None:
        return _c("mig-persistence", g, SKIP, "MIG and persistence mode not reported")
    return _c("mig-persistence", g, PASS, f"MIG {'off' if i.mig_enabled is False else 'n/a'}, persistence "
              f"{'on' if i.persistence_enabled else 'n/a'}")


def check_processes(g: GpuFacts, own_pids: frozenset[int]) -> Check:
    foreign = [p for p in g.processes if p.pid not in own_pids]
    if not foreign:
        return _c("foreign-processes", g, PASS, "no other process holds this GPU")
    desc = ", ".join(f"{p.pid} {p.name}" + (f" ({p.used_memory_bytes / GIB:.1f} GiB)" if p.used_memory_bytes
                                            else "") for p in foreign[:5])
    return _c("foreign-processes", g, FAIL, f"{len(foreign)} other process(es): {desc}",
              "stop them or choose another GPU (CUDA_VISIBLE_DEVICES); shared GPUs give unrepeatable numbers")


def check_temperature(g: GpuFacts) -> Check:
    t = g.sample.gpu_temp_c if g.sample else None
    slow = g.info.temp_slowdown_c
    if t is None or slow is None:
        return _c("temperature", g, SKIP, "temperature or slowdown threshold not reported")
    head = slow - t
    detail = f"{t:.0f} °C now, slowdown at {slow:.0f} °C ({head:.0f} °C headroom)"
    hint = "improve airflow/cooling before long runs; hot cards down-clock under sustained load (seed: 85 °C cost ~20%)"
    if head < TEMP_HEADROOM_FAIL_C:
        return _c("temperature", g, FAIL, detail, hint)
    if head < TEMP_HEADROOM_PASS_C:
        return _c("temperature", g, WARN, detail, hint)
    return _c("temperature", g, PASS, detail)


def check_torch(m: MachineFacts) -> list[Check]:
    """Driver vs the torch CUDA build, and each card's compute capability vs torch's arch list."""
    tb = m.torch
    if not m.torch_probed:
        return [Check("torch-build", SKIP, "torch build not probed (--no-torch)")]
    if tb is None:
        return [Check("torch-build", SKIP, "torch is not installed for this Python", "pip install 'gpumatch[bench]'")]
    if tb.error:
        return [Check("torch-build", WARN, f"torch could not be probed: {tb.error}", "run python -c 'import torch'")]
    if tb.cuda is None:
        return [Check("torch-build", WARN if m.gpus else SKIP, f"torch {tb.version} is a CPU-only build",
                      "install a CUDA build of torch to benchmark GPUs")]
    out = [_driver_vs_torch(m.system, tb)]
    out += [_arch_check(g.info, tb) for g in m.gpus]
    return out


def _driver_vs_torch(system: SystemInfo | None, tb: TorchBuild) -> Check:
    drv = system.cuda_driver_version if system else None
    if drv is None:
        return Check("driver-cuda", SKIP, f"torch {tb.version} built for CUDA {tb.cuda}; no driver found")
    t_major, _, t_minor = (tb.cuda or "0.0").partition(".")
    d_major, d_minor = drv // 1000, (drv % 1000) // 10
    detail = f"driver supports CUDA {d_major}.{d_minor}; torch {tb.version} built for CUDA {tb.cuda}"
    if int(t_major) > d_major:
        return Check("driver-cuda", FAIL, detail, "update the NVIDIA driver, or install a torch built for CUDA "
                     f"{d_major}.x")
    if int(t_major) == d_major and int(t_minor.split(".")[0] or 0) > d_minor:
        return Check("driver-cuda", WARN, detail, "minor-version compatibility usually works, but PTX JIT and new "
                     "features may fail: update the driver")
    if not tb.cuda_available:
        return Check("driver-cuda", FAIL, detail + ", but torch sees no GPU", "check CUDA_VISIBLE_DEVICES and the "
                     "driver install ('nvidia-smi')")
    return Check("driver-cuda", PASS, detail)


def _arch_check(info: DeviceInfo, tb: TorchBuild) -> Check:
    cc = info.compute_capability
    if cc is None:
        return Check("torch-arch", SKIP, "compute capability not reported", gpu_index=info.index)
    want = cc[0] * 10 + cc[1]
    sms = {int(a.split("_")[1].rstrip("af")) for a in tb.arch_list if a.startswith("sm_")}
    ptx = {int(a.split("_")[1].rstrip("af")) for a in tb.arch_list if a.startswith("compute_")}
    detail = f"compute capability {cc[0]}.{cc[1]}; torch arch list {', '.join(tb.arch_list) or 'empty'}"
    if want in sms:
        return Check("torch-arch", PASS, detail, gpu_index=info.index)
    if any(p <= want for p in ptx) or any(s <= want and s // 10 == cc[0] for s in sms):
        return Check("torch-arch", WARN, detail, "no exact kernels for this card: they are JIT-compiled or run the "
                     "same-major build; check speed", gpu_index=info.index)
    return Check("torch-arch", FAIL, detail, "this torch build has no kernels for this card (seed: 旧卡不跑新框架): "
                 "install a torch build that lists it", gpu_index=info.index)


def check_psu(m: MachineFacts) -> Check:
    if m.psu_w is None:
        return Check("psu", SKIP, "PSU wattage not given", "pass --psu-w WATTS to check the 1.5x headroom rule")
    limits = [g.info.power_limit_enforced_w for g in m.gpus]
    if not limits or any(v is None for v in limits):
        return Check("psu", SKIP, "GPU power limits not known here", "run on the machine whose PSU this is")
    load = sum(v for v in limits if v is not None) + m.other_load_w
    need = PSU_RULE * load
    detail = (f"PSU {m.psu_w:.0f} W for {load:.0f} W of load (GPUs {load - m.other_load_w:.0f} W + other "
              f"{m.other_load_w:.0f} W); 1.5x rule needs {need:.0f} W")
    hint = "GPU load transients exceed the power limit for milliseconds; an undersized PSU drops the driver (seed)"
    if m.psu_w >= need:
        return Check("psu", PASS, detail)
    return Check("psu", WARN if m.psu_w >= load else FAIL, detail, hint)


def run_checks(m: MachineFacts) -> list[Check]:
    """Every check, machine-wide first, then per GPU in index order."""
    if not m.gpus:
        out = [Check("gpu", SKIP, "no NVIDIA GPU or driver found on this machine",
                     "this is fine for planning; measuring needs a GPU")]
        return out + check_torch(m) + [check_psu(m)]
    out = [*check_torch(m), check_psu(m)]
    for g in m.gpus:
        out += [check_pcie(g), check_power_limit(g), check_clocks(g), check_ecc(g), check_modes(g),
                check_processes(g, m.own_pids), check_temperature(g)]
    return out


def worst(checks: Sequence[Check]) -> str:
    """The overall verdict: fail > warn > pass (skip counts as pass)."""
    vs = {c.verdict for c in checks}
    return FAIL if FAIL in vs else (WARN if WARN in vs else PASS)
