"""The GPU topology of this machine through NVML: the ``nvidia-smi topo -m`` matrix, as plain data.

Sources (nvml.h, NVML API reference "Topology" and "NvLink" queries, nvidia-ml-py names):

- PCIe path between two GPUs: ``nvmlDeviceGetTopologyCommonAncestor(a, b)`` → NVML_TOPOLOGY_INTERNAL (0, the
  same board), _SINGLE (10), _MULTIPLE (20), _HOSTBRIDGE (30), _NODE (40), _SYSTEM (50), shown with the legend
  of ``nvidia-smi topo -m``: PIX (at most one PCIe bridge), PXB (several bridges, no host bridge), PHB (through a
  PCIe host bridge), NODE (host bridges within one NUMA node), SYS (across the SMP interconnect between NUMA
  nodes); INTERNAL as ``internal``.
- NVLink: for each link 0 .. NVML_NVLINK_MAX_LINKS-1, ``nvmlDeviceGetNvLinkState`` (NVML_FEATURE_ENABLED = 1 is
  an active link), ``nvmlDeviceGetNvLinkRemoteDeviceType`` (NVML_NVLINK_DEVICE_TYPE_GPU 0, _SWITCH 2) and
  ``nvmlDeviceGetNvLinkRemotePciInfo_v2`` (the peer's PCI bus id). A pair's class is ``NV{k}`` with k the
  active links from one GPU straight to the other; when both GPUs' links go to NVSwitches (HGX boards), k is the
  smaller of their switch link counts, as ``nvidia-smi topo -m`` prints NV18 for every H100/H200 SXM pair.
  Without NVLink between them the PCIe class stands.
- Per GPU: active NVLinks (to GPUs and to switches), NUMA node (``nvmlDeviceGetNumaNodeId``, newer drivers)
  and CPU affinity (``nvmlDeviceGetCpuAffinity``, 64-bit masks → a CPU list like ``0-55,112-167``).

:func:`topology_from` is pure (it takes an initialized pynvml-like module); :func:`gpu_topology` opens NVML
through :mod:`gpumatch.telemetry.nvml` (the only module importing pynvml) and never raises: without NVML it
returns ``{"available": False, "reason": ...}``.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from gpumatch.errors import GpumatchError
from gpumatch.telemetry.nvml import _Caller, _pynvml, _text

PCIE_CLASS = {0: "internal", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
"""NVML topology levels → ``nvidia-smi topo -m`` legend (module docstring)."""

NVLINK_MAX_LINKS = 18
"""NVML_NVLINK_MAX_LINKS of nvidia-ml-py 12/13 (18 on Hopper), used when the module lacks the constant."""

_FEATURE_ENABLED = 1
_REMOTE_GPU = 0
_REMOTE_SWITCH = 2


def cpu_list(masks: list[int] | None) -> str | None:
    """64-bit affinity masks (mask i covers CPUs 64·i .. 64·i+63) as a range list: [0b1111, 0] → '0-3'."""
    if masks is None:
        return None
    cpus = [64 * i + b for i, m in enumerate(masks) for b in range(64) if int(m) >> b & 1]
    runs: list[str] = []
    for c in cpus:
        if runs and int(runs[-1].split("-")[-1]) == c - 1:
            runs[-1] = f"{runs[-1].split('-')[0]}-{c}"
        else:
            runs.append(str(c))
    return ",".join(runs)


def _links(nv: Any, c: _Caller, h: Any, i: int) -> tuple[dict[str, int], int]:
    """(active links per peer PCI bus id, active links to NVSwitches) of GPU handle ``h``; every link is asked
    (an error on one link, e.g. NotSupported for an absent one, does not stop the others)."""
    to_gpu: dict[str, int] = {}
    to_switch = 0
    for link in range(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", NVLINK_MAX_LINKS))):
        state = c(f"nvl{i}.{link}", nv.nvmlDeviceGetNvLinkState, h, link)
        if state != getattr(nv, "NVML_FEATURE_ENABLED", _FEATURE_ENABLED):
            continue
        kind = c(f"nvltype{i}.{link}", getattr(nv, "nvmlDeviceGetNvLinkRemoteDeviceType", _absent), h, link)
        if kind == getattr(nv, "NVML_NVLINK_DEVICE_TYPE_SWITCH", _REMOTE_SWITCH):
            to_switch += 1
            continue
        remote = c(f"nvlpci{i}.{link}", nv.nvmlDeviceGetNvLinkRemotePciInfo_v2, h, link)
        if remote is not None:
            bus = _text(remote.busId).lower()
            to_gpu[bus] = to_gpu.get(bus, 0) + 1
    return to_gpu, to_switch


def _absent(*_: Any) -> Any:
    raise AttributeError("not in this nvidia-ml-py")


def _gpu(nv: Any, c: _Caller, i: int) -> tuple[Any, dict[str, Any], dict[str, int]]:
    h = nv.nvmlDeviceGetHandleByIndex(i)
    pci = c("pci", nv.nvmlDeviceGetPciInfo, h)
    to_gpu, to_switch = _links(nv, c, h, i)
    cpu_words = max(1, -(-(os.cpu_count() or 64) // 64))
    affinity = c("aff", nv.nvmlDeviceGetCpuAffinity, h, cpu_words)
    numa = c("numa", getattr(nv, "nvmlDeviceGetNumaNodeId", _absent), h)
    info = {
        "index": i,
        "name": _text(c("name", nv.nvmlDeviceGetName, h) or "unknown"),
        "uuid": None if (u := c("uuid", nv.nvmlDeviceGetUUID, h)) is None else _text(u),
        "pci_bus_id": None if pci is None else _text(pci.busId).lower(),
        "nvlinks_active": sum(to_gpu.values()) + to_switch,
        "nvlinks_to_switch": to_switch,
        "numa_node": None if numa is None else int(numa),
        "cpu_affinity": cpu_list(None if affinity is None else [int(m) for m in affinity]),
    }
    return h, info, to_gpu


def topology_from(nv: Any) -> dict[str, Any]:
    """The topology of every GPU ``nv`` (an initialized pynvml or a stand-in) sees (module docstring)."""
    c = _Caller(nv)
    count = int(nv.nvmlDeviceGetCount())
    handles, gpus, links = [], [], []
    for i in range(count):
        h, info, to_gpu = _gpu(nv, c, i)
        handles.append(h)
        gpus.append(info)
        links.append(to_gpu)
    pairs: list[dict[str, Any]] = []
    matrix = [["X" if a == b else "" for b in range(count)] for a in range(count)]
    for a in range(count):
        for b in range(a + 1, count):
            level = c("topo", nv.nvmlDeviceGetTopologyCommonAncestor, handles[a], handles[b])
            pcie = None if level is None else PCIE_CLASS.get(int(level), f"level-{level}")
            bus_b = gpus[b]["pci_bus_id"]
            direct = links[a].get(bus_b, 0) if bus_b else 0
            switched = min(gpus[a]["nvlinks_to_switch"], gpus[b]["nvlinks_to_switch"])
            k, via = (direct, "direct") if direct else (switched, "nvswitch") if switched else (0, None)
            link = f"NV{k}" if k else (pcie or "unknown")
            pairs.append({"a": a, "b": b, "link": link, "nvlinks": k, "nvlink_via": via, "pcie": pcie})
            matrix[a][b] = matrix[b][a] = link
    return {"available": True, "source": "nvml", "gpu_count": count, "gpus": gpus, "pairs": pairs,
            "matrix": matrix}


def gpu_topology() -> dict[str, Any]:
    """This machine's :func:`topology_from` through NVML, or ``{"available": False, "reason": ...}``."""
    try:
        nv = _pynvml()
    except GpumatchError as exc:
        return {"available": False, "reason": str(exc)}
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        return {"available": False, "reason": f"NVML could not start ({_text(exc)})"}
    try:
        return topology_from(nv)
    except nv.NVMLError as exc:
        return {"available": False, "reason": f"NVML topology query failed ({_text(exc)})"}
    finally:
        with contextlib.suppress(nv.NVMLError):
            nv.nvmlShutdown()
