"""Communication: alpha-beta collectives per link tier, and where each parallel group lives.

Sources:
- Ring collectives (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms for clusters of
  workstations"; NCCL's performance notes, nccl-tests PERFORMANCE.md): per rank, all-reduce moves
  ``2(n−1)/n · S`` bytes in ``2(n−1)`` steps; all-gather and reduce-scatter ``(n−1)/n · S`` in ``n−1``
  steps (S = the full buffer); all-to-all ``(n−1)/n · S``; point-to-point ``S``.
  ``time = latency + steps · hop_latency + bytes_on_wire / (link_bandwidth · efficiency)``.
- Group placement follows Megatron-LM's default rank order (tensor innermost, then data, then
  pipeline): the TP group spans ``tp`` consecutive GPUs, a DP group ``tp·dp``, a PP hop ``tp·dp·pp``.
  A group inside the scale-up domain (NVLink/NVSwitch, bridge pairs) uses that link, inside a node
  PCIe (halved when there is no peer-to-peer: data bounces through host memory), else the network.
"""

from __future__ import annotations

from gpumatch.estimate._num import Num, where
from gpumatch.estimate.calibration import Calibration
from gpumatch.estimate.case import Case


def link(c: Case, span: Num, cal: Calibration) -> tuple[Num, Num]:
    """(effective bytes/s per direction, hop latency s) for a group spanning ``span`` consecutive GPUs."""
    pcie_bw = c.pcie_bytes_per_s * cal.pcie_efficiency * where(c.pcie_p2p > 0, 1.0, 0.5)
    pcie_hop = cal.pcie_hop_latency_s * where(c.pcie_p2p > 0, 1.0, 2.0)
    net_bw = cal.internode_bytes_per_s * cal.network_efficiency
    in_domain = (span <= c.scaleup_domain) * (c.scaleup_bytes_per_s > 0)
    in_node = span <= c.gpus_per_node
    bw = where(in_domain, c.scaleup_bytes_per_s * cal.nvlink_efficiency, where(in_node, pcie_bw, net_bw))
    hop = where(in_domain, cal.nvlink_hop_latency_s, where(in_node, pcie_hop, cal.network_hop_latency_s))
    return bw, hop


def all_reduce_s(size_bytes: Num, n: Num, bw: Num, hop_s: Num, cal: Calibration) -> Num:
    """Ring all-reduce of ``size_bytes`` over ``n`` ranks (0 when ``n = 1``)."""
    steps = 2.0 * (n - 1.0)
    return where(n > 1, cal.collective_latency_s + steps * hop_s + steps / n * size_bytes / bw, 0.0)


def all_gather_s(size_bytes: Num, n: Num, bw: Num, hop_s: Num, cal: Calibration) -> Num:
    """Ring all-gather producing ``size_bytes`` on every rank (equal cost: reduce-scatter of that buffer)."""
    steps = n - 1.0
    return where(n > 1, cal.collective_latency_s + steps * hop_s + steps / n * size_bytes / bw, 0.0)


reduce_scatter_s = all_gather_s


def all_to_all_s(size_bytes: Num, n: Num, bw: Num, hop_s: Num, cal: Calibration) -> Num:
    """All-to-all of ``size_bytes`` per rank: ``(n−1)/n`` of it leaves the rank."""
    return all_gather_s(size_bytes, n, bw, hop_s, cal)


def p2p_s(size_bytes: Num, bw: Num, hop_s: Num, cal: Calibration) -> Num:
    """Point-to-point send of ``size_bytes``."""
    return cal.collective_latency_s + hop_s + size_bytes / bw


def bus_bandwidth(size_bytes: Num, n: Num, time_s: Num) -> Num:
    """nccl-tests bus bandwidth of an all-reduce: ``S/t · 2(n−1)/n``."""
    return size_bytes / time_s * 2.0 * (n - 1.0) / n
