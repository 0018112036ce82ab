"""GPU topology from a stand-in pynvml: PCIe classes, direct and NVSwitch NVLinks, affinity, no NVML."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace as NS
from typing import Any

import pytest

from gpumatch.telemetry.topology import cpu_list, gpu_topology, topology_from


class NVMLError(Exception):
    pass


class NotSupported(NVMLError):
    pass


class FunctionNotFound(NVMLError):
    pass


BUS = ["00000000:18:00.0", "00000000:2a:00.0", "00000000:9a:00.0", "00000000:ab:00.0"]
# GPU 0 and 1: 4 links to each other; GPU 2 and 3: 18 links each to NVSwitches; GPU 1 also 2 links to GPU 2
LINKS: dict[int, list[tuple[str, str | None]]] = {
    0: [("gpu", BUS[1])] * 4,
    1: [("gpu", BUS[0])] * 4 + [("gpu", BUS[2])] * 2,
    2: [("switch", None)] * 18 + [("gpu", BUS[1])] * 2,
    3: [("switch", None)] * 18,
}
# common ancestor levels: same host bridge for 0-1, same NUMA node for 2-3, across sockets otherwise
LEVEL = {(0, 1): 30, (2, 3): 40}


def fake_pynvml(count: int = 4, init_error: bool = False, numa: bool = True) -> types.ModuleType:
    nv = types.ModuleType("pynvml")
    nv.NVMLError, nv.NVMLError_NotSupported, nv.NVMLError_FunctionNotFound = NVMLError, NotSupported, FunctionNotFound
    nv.NVML_NVLINK_MAX_LINKS = 20
    nv.NVML_FEATURE_ENABLED = 1
    nv.NVML_NVLINK_DEVICE_TYPE_SWITCH = 2
    state: dict[str, Any] = {"init": 0, "shutdown": 0}
    nv.state = state

    def init() -> None:
        if init_error:
            raise NVMLError("Driver Not Loaded")
        state["init"] += 1

    def link(h: int, i: int) -> tuple[str, str | None]:
        links = LINKS[h]
        if i >= len(links):
            raise NotSupported()  # an absent link answers NotSupported, as on real boards with fewer links
        return links[i]

    nv.nvmlInit = init
    nv.nvmlShutdown = lambda: state.__setitem__("shutdown", state["shutdown"] + 1)
    nv.nvmlDeviceGetCount = lambda: count
    nv.nvmlDeviceGetHandleByIndex = lambda i: i
    nv.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    nv.nvmlDeviceGetUUID = lambda h: f"GPU-{h:04d}"
    nv.nvmlDeviceGetPciInfo = lambda h: NS(busId=BUS[h].upper().encode())
    nv.nvmlDeviceGetNvLinkState = lambda h, i: (link(h, i), 1)[1]
    nv.nvmlDeviceGetNvLinkRemoteDeviceType = lambda h, i: 2 if link(h, i)[0] == "switch" else 0
    nv.nvmlDeviceGetNvLinkRemotePciInfo_v2 = lambda h, i: NS(busId=link(h, i)[1])
    nv.nvmlDeviceGetTopologyCommonAncestor = lambda a, b: LEVEL.get((min(a, b), max(a, b)), 50)
    nv.nvmlDeviceGetCpuAffinity = lambda h, n: [0xFF if h < 2 else 0xFF00, 0][:n]
    if numa:
        nv.nvmlDeviceGetNumaNodeId = lambda h: 0 if h < 2 else 1
    return nv


def test_matrix_and_pairs() -> None:
    topo = topology_from(fake_pynvml())
    assert topo["available"] and topo["gpu_count"] == 4
    assert topo["matrix"] == [
        ["X", "NV4", "SYS", "SYS"],
        ["NV4", "X", "NV2", "SYS"],
        ["SYS", "NV2", "X", "NV18"],
        ["SYS", "SYS", "NV18", "X"],
    ]
    pair = {(p["a"], p["b"]): p for p in topo["pairs"]}
    assert pair[(0, 1)] == {"a": 0, "b": 1, "link": "NV4", "nvlinks": 4, "nvlink_via": "direct", "pcie": "PHB"}
    assert pair[(2, 3)]["nvlink_via"] == "nvswitch" and pair[(2, 3)]["pcie"] == "NODE"
    assert pair[(0, 3)] == {"a": 0, "b": 3, "link": "SYS", "nvlinks": 0, "nvlink_via": None, "pcie": "SYS"}
    g = topo["gpus"]
    assert [x["nvlinks_active"] for x in g] == [4, 6, 20, 18]
    assert [x["nvlinks_to_switch"] for x in g] == [0, 0, 18, 18]
    assert g[0]["pci_bus_id"] == BUS[0] and g[0]["uuid"] == "GPU-0000" and g[0]["name"] == "NVIDIA H200"
    assert (g[0]["cpu_affinity"], g[2]["cpu_affinity"]) == ("0-7", "8-15")
    assert [x["numa_node"] for x in g] == [0, 0, 1, 1]


def test_old_binding_without_numa_call() -> None:
    topo = topology_from(fake_pynvml(count=2, numa=False))
    assert [x["numa_node"] for x in topo["gpus"]] == [None, None]
    assert topo["matrix"] == [["X", "NV4"], ["NV4", "X"]]


def test_cpu_list() -> None:
    assert cpu_list([0b1011, 0]) == "0-1,3"
    assert cpu_list([0, 1 << 63, 0b11]) == "127-129"
    assert cpu_list(None) is None


def test_gpu_topology_through_the_choke_point(monkeypatch: pytest.MonkeyPatch) -> None:
    nv = fake_pynvml(count=2)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    topo = gpu_topology()
    assert topo["available"] and topo["matrix"][0][1] == "NV4"
    assert nv.state == {"init": 1, "shutdown": 1}


def test_without_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    topo = gpu_topology()
    assert topo["available"] is False and "nvidia-ml-py" in topo["reason"]
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_error=True))
    topo = gpu_topology()
    assert topo == {"available": False, "reason": "NVML could not start (Driver Not Loaded)"}
