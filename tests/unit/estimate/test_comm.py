"""Alpha-beta collective formulas and link-tier selection."""

from __future__ import annotations

import numpy as np
import pytest

from gpumatch.estimate import Calibration, Case, comm

NO_LATENCY = Calibration(collective_latency_s=0.0, nvlink_hop_latency_s=0.0, pcie_hop_latency_s=0.0,
                         network_hop_latency_s=0.0)


@pytest.mark.parametrize("n", [2, 4, 8, 64])
def test_ring_all_reduce_moves_2_n_minus_1_over_n(n: int) -> None:
    size, bw = 1e9, 100e9
    assert comm.all_reduce_s(size, float(n), bw, 0.0, NO_LATENCY) == pytest.approx(2 * (n - 1) / n * size / bw)


@pytest.mark.parametrize("n", [2, 8])
def test_all_gather_reduce_scatter_all_to_all_move_n_minus_1_over_n(n: int) -> None:
    size, bw = 4e8, 50e9
    expected = (n - 1) / n * size / bw
    for f in (comm.all_gather_s, comm.reduce_scatter_s, comm.all_to_all_s):
        assert f(size, float(n), bw, 0.0, NO_LATENCY) == pytest.approx(expected)


def test_single_rank_collectives_cost_nothing() -> None:
    cal = Calibration()
    assert comm.all_reduce_s(1e9, 1.0, 1e9, 1e-6, cal) == 0.0
    assert comm.all_gather_s(1e9, 1.0, 1e9, 1e-6, cal) == 0.0


def test_latency_terms_count_ring_steps() -> None:
    cal = Calibration(collective_latency_s=10e-6)
    t = comm.all_reduce_s(0.0, 8.0, 1e9, 2e-6, cal)
    assert t == pytest.approx(10e-6 + 2 * 7 * 2e-6)


def test_p2p_and_bus_bandwidth() -> None:
    assert comm.p2p_s(1e9, 1e10, 0.0, NO_LATENCY) == pytest.approx(0.1)
    # nccl-tests: busbw = algbw · 2(n-1)/n; a time from our own formula gives back the link bandwidth
    t = comm.all_reduce_s(1e9, 8.0, 360e9, 0.0, NO_LATENCY)
    assert comm.bus_bandwidth(1e9, 8.0, t) == pytest.approx(360e9)


def _case(**kw: float) -> Case:
    base = dict(capacity_bytes=80e9, bandwidth_bytes_per_s=3e12, peak_flops_per_s=1e15, tdp_w=700.0,
                scaleup_bytes_per_s=450e9, scaleup_domain=8.0, pcie_bytes_per_s=63e9, pcie_p2p=1.0)
    base.update(kw)
    return Case(**base)


def test_link_tiers() -> None:
    cal = Calibration()
    nv, _ = comm.link(_case(), 8.0, cal)
    assert nv == pytest.approx(450e9 * cal.nvlink_efficiency)
    net, _ = comm.link(_case(), 16.0, cal)
    assert net == pytest.approx(cal.internode_bytes_per_s * cal.network_efficiency)
    pcie, _ = comm.link(_case(scaleup_bytes_per_s=0.0, scaleup_domain=1.0), 2.0, cal)
    assert pcie == pytest.approx(63e9 * cal.pcie_efficiency)
    host, hop = comm.link(_case(scaleup_bytes_per_s=0.0, scaleup_domain=1.0, pcie_p2p=0.0), 2.0, cal)
    assert host == pytest.approx(pcie / 2)
    assert hop == pytest.approx(2 * cal.pcie_hop_latency_s)
    bridge, _ = comm.link(_case(scaleup_domain=2.0), 4.0, cal)  # NVLink bridge pairs: 4 GPUs go over PCIe
    assert bridge == pytest.approx(pcie)


def test_link_vectorized() -> None:
    cal = Calibration()
    spans = np.array([1.0, 8.0, 16.0])
    bw, _ = comm.link(_case(), spans, cal)
    assert bw.shape == (3,)
    assert bw[0] == bw[1] > bw[2]
