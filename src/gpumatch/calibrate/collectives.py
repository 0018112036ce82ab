"""The collective class: the estimators' communication model against measured collectives, and its fit.

A measured point is one collective ``op`` of ``size_bytes`` (nccl-tests' "size": the whole buffer ``S``,
https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md) on ``n`` ranks taking ``time_s``. Its
prediction is :mod:`gpumatch.estimate.comm` (ring collectives, alpha-beta per link tier) on the catalog card:

- ``all_reduce``: ``latency + 2(n-1)·hop + 2(n-1)/n · S / bw``;
- ``all_gather``, ``reduce_scatter``, ``all_to_all``: ``latency + (n-1)·hop + (n-1)/n · S / bw``;
- ``sendrecv``: ``latency + hop + S / bw``;

with ``bw`` = the link's bytes/s per direction × ``nvlink_efficiency`` (``pcie_efficiency`` when the GPUs talk
over PCIe: a card without NVLink, or a measured topology without NV links), ``latency`` =
``collective_latency_s`` and ``hop`` the link's hop latency (:func:`gpumatch.estimate.comm.link`).

:func:`fit_collectives` fits the efficiency and ``collective_latency_s`` by least squares on
log(predicted / measured) (:func:`scipy.optimize.least_squares`, trust-region reflective; bounds
``0.01 <= efficiency <= 1``, ``1e-7 <= latency <= 1e-2`` s), the error measure of
:mod:`gpumatch.calibrate.curves`. **Held out by message size**: the distinct sizes sorted, even positions
(the smallest, the third, ...) fit, odd ones held out, so held-out errors are on sizes the fit never saw;
leave-one-size-out over the fit sizes as well.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpumatch.catalog import catalog_name
from gpumatch.errors import GpumatchError, InputError
from gpumatch.estimate import Calibration

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "sendrecv")
BOUNDS_EFF = (0.01, 1.0)
BOUNDS_LATENCY_S = (1e-7, 1e-2)
NCCL_TESTS_OPS = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
                  "alltoall": "all_to_all", "all_to_all": "all_to_all", "sendrecv": "sendrecv"}
"""nccl-tests binary names (``all_reduce_perf`` ...) to gpumatch's op names."""


@dataclass(frozen=True)
class CollectivePoint:
    """One measured collective: ``time_s`` seconds for ``op`` of ``size_bytes`` on ``n`` ranks."""

    op: str
    size_bytes: float
    n: int
    time_s: float
    run_id: int | None = None
    source: str = "gpumatch bench scale"


def link_of(card: str, pcie: bool) -> dict[str, float]:
    """The catalog card's per-direction link fields (:func:`gpumatch.estimate.options.gpu_link_fields`);
    ``pcie`` forces the PCIe tier (a measured topology without NVLink between the GPUs)."""
    from gpumatch.estimate.api import resolve_gpu
    from gpumatch.estimate.options import gpu_link_fields

    fields = gpu_link_fields(resolve_gpu(card))
    if pcie:
        fields["scaleup_bytes_per_s"] = 0.0
    return fields


def uses_pcie(card: str, pcie: bool) -> bool:
    """True when the model's collectives on ``card`` run on the PCIe tier (so ``pcie_efficiency`` is fitted)."""
    return pcie or link_of(card, False)["scaleup_bytes_per_s"] <= 0


def predict_time_s(op: str, size_bytes: float, n: int, card: str, cal: Calibration, pcie: bool = False) -> float:
    """The communication model's seconds for one collective (module docstring); 0 for ``n = 1``."""
    from gpumatch.estimate import comm
    from gpumatch.estimate.case import Case

    if op not in OPS:
        raise InputError(f"unknown collective {op!r}", f"one of {', '.join(OPS)}")
    case = Case(capacity_bytes=0.0, bandwidth_bytes_per_s=0.0, peak_flops_per_s=0.0, tdp_w=0.0,
                gpus_per_node=float(max(n, 8)), **link_of(card, pcie))
    bw, hop = comm.link(case, float(n), cal)
    if op == "all_reduce":
        return float(comm.all_reduce_s(size_bytes, float(n), bw, hop, cal))
    if op == "sendrecv":
        return float(comm.p2p_s(size_bytes, bw, hop, cal)) if n > 1 else 0.0
    fn = {"all_gather": comm.all_gather_s, "reduce_scatter": comm.reduce_scatter_s, "all_to_all": comm.all_to_all_s}
    return float(fn[op](size_bytes, float(n), bw, hop, cal))


def predict_or_none(op: str, size_bytes: float, n: int, card: str | None, pcie: bool = False,
                    cal: Calibration | None = None) -> float | None:
    """:func:`predict_time_s` under ``cal`` (default: the shipped one), or None (no card, n = 1, unknown op)."""
    if card is None or n < 2 or op not in OPS:
        return None
    try:
        return predict_time_s(op, size_bytes, n, card, cal or Calibration(), pcie)
    except (GpumatchError, KeyError, ValueError, ZeroDivisionError):
        return None


def efficiency_field(card: str, pcie: bool) -> str:
    """The Calibration field the collective fit moves: ``pcie_efficiency`` on PCIe, else ``nvlink_efficiency``."""
    return "pcie_efficiency" if uses_pcie(card, pcie) else "nvlink_efficiency"


def split_by_size(points: Sequence[CollectivePoint]) -> tuple[list[CollectivePoint], list[CollectivePoint]]:
    """(fit, held out): distinct sizes sorted, even positions fit, odd ones held out (module docstring)."""
    sizes = sorted({p.size_bytes for p in points})
    fit_sizes = set(sizes[0::2])
    return [p for p in points if p.size_bytes in fit_sizes], [p for p in points if p.size_bytes not in fit_sizes]


def _usable(points: Sequence[CollectivePoint]) -> list[CollectivePoint]:
    return [p for p in points if p.n > 1 and p.op in OPS and p.time_s > 0 and p.size_bytes > 0]


def fit_points(points: Sequence[CollectivePoint], card: str, pcie: bool, start: Calibration) -> Calibration:
    """``start`` with the efficiency field and ``collective_latency_s`` fitted to ``points`` (module docstring).
    InputError with fewer than two distinct sizes."""
    pts = _usable(points)
    if len({p.size_bytes for p in pts}) < 2:
        got = len({p.size_bytes for p in pts})
        raise InputError(f"a collective fit needs two message sizes on 2+ ranks, got {got}",
                         "sweep sizes with 'gpumatch bench scale --workload collectives'")
    import numpy as np
    from scipy.optimize import least_squares

    field = efficiency_field(card, pcie)
    measured = np.array([p.time_s for p in pts])

    def cal_of(theta: Any) -> Calibration:
        values: dict[str, Any] = {field: float(theta[0]), "collective_latency_s": float(math.exp(theta[1]))}
        return replace(start, **values)

    def resid(theta: np.ndarray) -> np.ndarray:
        cal = cal_of(theta)
        pred = np.array([predict_time_s(p.op, p.size_bytes, p.n, card, cal, pcie) for p in pts])
        return np.asarray(np.log(pred / measured))

    lo, hi = BOUNDS_EFF, BOUNDS_LATENCY_S
    x0 = [min(max(float(getattr(start, field)), lo[0]), lo[1]),
          math.log(min(max(start.collective_latency_s, hi[0]), hi[1]))]
    sol = least_squares(resid, x0, bounds=([lo[0], math.log(hi[0])], [lo[1], math.log(hi[1])]), method="trf")
    return cal_of(sol.x)


def _errors(points: Sequence[CollectivePoint], card: str, pcie: bool, cal: Calibration) -> list[float]:
    return [abs(predict_time_s(p.op, p.size_bytes, p.n, card, cal, pcie) / p.time_s - 1.0) for p in _usable(points)]


def _stats(errs: Sequence[float]) -> tuple[float, float]:
    return (sum(errs) / len(errs), max(errs)) if errs else (math.nan, math.nan)


@dataclass(frozen=True)
class CollectiveFit:
    """The fitted Calibration, the field moved, and |predicted/measured - 1| before/after on held-out sizes and
    by leave-one-size-out on the fit sizes (mean, max)."""

    calibration: Calibration
    field: str
    fit_sizes: int
    held_sizes: int
    n_fit: int
    n_held: int
    held_before: tuple[float, float]
    held_after: tuple[float, float]
    loo: tuple[float, float]

    def fields(self) -> dict[str, Any]:
        """The two fitted values."""
        return {self.field: float(getattr(self.calibration, self.field)),
                "collective_latency_s": float(self.calibration.collective_latency_s)}

    def score(self) -> dict[str, Any]:
        """A row in the shape of :class:`gpumatch.calibrate.stored.ClassScore` (class ``collective``)."""
        return {"cls": "collective", "fit_shapes": self.fit_sizes, "held_shapes": self.held_sizes,
                "n_fit": self.n_fit, "n_held": self.n_held, "held_before_mean": self.held_before[0],
                "held_before_max": self.held_before[1], "held_after_mean": self.held_after[0],
                "held_after_max": self.held_after[1], "loo_mean": self.loo[0], "loo_max": self.loo[1]}


def fit_collectives(points: Sequence[CollectivePoint], card: str, pcie: bool = False,
                    start: Calibration | None = None) -> CollectiveFit:
    """Fit on the even-position sizes, score on the odd ones and by leave-one-size-out (module docstring)."""
    base = start or Calibration()
    fit, held = split_by_size(_usable(points))
    cal = fit_points(fit, card, pcie, base)
    loo: list[float] = []
    fit_sizes = sorted({p.size_bytes for p in fit})
    if len(fit_sizes) >= 3:
        for s in fit_sizes:
            rest = [p for p in fit if p.size_bytes != s]
            loo += _errors([p for p in fit if p.size_bytes == s], card, pcie, fit_points(rest, card, pcie, base))
    return CollectiveFit(cal, efficiency_field(card, pcie), len(fit_sizes), len({p.size_bytes for p in held}),
                         len(fit), len(held), _stats(_errors(held, card, pcie, base)),
                         _stats(_errors(held, card, pcie, cal)), _stats(loo))


def points_of_scale(results: Sequence[dict[str, Any]], run_id: int | None = None) -> list[CollectivePoint]:
    """The job-level collective times of a stored ``bench scale`` run (metric ``ladder_collective_time_s``)."""
    out = []
    for r in results:
        c = r.get("config") or {}
        if r.get("metric") == "ladder_collective_time_s" and c.get("op") in OPS:
            out.append(CollectivePoint(str(c["op"]), float(c["size_bytes"]), int(c["n_gpus"]), float(r["value"]),
                                       run_id, "gpumatch bench scale"))
    return out


def points_of_nccl_tests(results: Sequence[dict[str, Any]], ranks: int,
                         run_id: int | None = None) -> list[CollectivePoint]:
    """The out-of-place times (``nccl_time_s``) of an imported nccl-tests ``-J`` run on ``ranks`` GPUs."""
    out = []
    for r in results:
        c = r.get("config") or {}
        op = NCCL_TESTS_OPS.get(str(c.get("collective")))
        if r.get("metric") == "nccl_time_s" and op and c.get("placement") == "out_of_place" and c.get("size_bytes"):
            out.append(CollectivePoint(op, float(c["size_bytes"]), ranks, float(r["value"]), run_id, "nccl-tests"))
    return out


def pcie_only(topology: dict[str, Any], n: int) -> bool:
    """True when a measured topology (:func:`gpumatch.telemetry.topology.gpu_topology`) shows no NVLink among the
    first ``n`` GPUs: every pair's link class is PCIe/host (``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``), none
    ``NV{k}``. False when unknown (the catalog card's own link is then assumed)."""
    if not topology.get("available") or n < 2:
        return False
    classes = [str(link) for (a, b), link in _pairs(topology) if a < n and b < n and a != b]
    return bool(classes) and not any(c.startswith("NV") for c in classes)


def _pairs(topology: dict[str, Any]) -> list[tuple[tuple[int, int], str]]:
    """((a, b), link class) of a topology: a ``matrix`` (list of rows of class strings) or ``links`` /
    ``pairs`` (objects with ``a``/``b`` or ``gpu_a``/``gpu_b`` and ``link``/``class``)."""
    out: list[tuple[tuple[int, int], str]] = []
    matrix = topology.get("matrix")
    if isinstance(matrix, list):
        for a, row in enumerate(matrix):
            for b, cell in enumerate(row if isinstance(row, list) else []):
                out.append(((a, b), str(cell)))
    for link in topology.get("links") or topology.get("pairs") or []:
        if isinstance(link, dict):
            a, b = int(link.get("a", link.get("gpu_a")) or 0), int(link.get("b", link.get("gpu_b")) or 0)
            out.append(((a, b), str(link.get("link") or link.get("class") or "")))
    return out


@dataclass(frozen=True)
class CollectiveSources:
    """The collective measurements of one catalog card in a store: points, tier, and where they came from."""

    card: str
    points: tuple[CollectivePoint, ...]
    pcie: bool
    run_ids: tuple[int, ...]
    gpu_names: tuple[str, ...]
    dates: tuple[str, ...]


def _scale_source(st: Any, rec: Any) -> tuple[str | None, list[CollectivePoint], bool, str]:
    m = rec.manifest or {}
    if m.get("scale.device") != "cuda":
        return None, [], False, ""
    pts = points_of_scale(st.export_run(rec.run_id)["results"], rec.run_id)
    topo = m.get("scale.topology") or {}
    pcie = any(pcie_only(topo, p.n) for p in pts)
    return catalog_name(m.get("gpu.name")), pts, pcie, str(m.get("gpu.name"))


def _nccl_source(st: Any, rec: Any) -> tuple[str | None, list[CollectivePoint], bool, str]:
    m, cfg = rec.manifest or {}, rec.config or {}
    if cfg.get("case") != "nccl-tests":
        return None, [], False, ""
    names = m.get("gpu.names") or []
    ranks = int(cfg.get("ranks") or cfg.get("ngpus") or 0)  # nccl-tests config: devices listed, else -g
    pts = points_of_nccl_tests(st.export_run(rec.run_id)["results"], ranks, rec.run_id) if ranks > 1 else []
    return catalog_name(names[0] if names else None), pts, False, str(names[0] if names else "")


def load_collective_points(store: Any, run_ids: Sequence[int] = (), gpu: str | None = None) -> CollectiveSources | None:
    """The collectives of the completed ``bench scale`` runs (on CUDA) and imported nccl-tests runs in the store
    (those of ``run_ids`` when given), of card ``gpu`` when given; None when there are none. InputError when they
    span card models without ``gpu``."""
    from gpumatch.store import open_existing_store

    want = catalog_name(gpu) if gpu else None
    found: dict[str, list[tuple[int, list[CollectivePoint], bool, str, str]]] = {}
    with open_existing_store(store) as st:
        records = [(r, _scale_source) for r in st.runs("scale", limit=100_000)] + \
                  [(r, _nccl_source) for r in st.runs("bench", limit=100_000)]
        for rec, reader in records:
            if rec.status != "completed" or (run_ids and rec.run_id not in set(run_ids)):
                continue
            card, pts, pcie, name = reader(st, rec)
            if card and pts and (want is None or card == want):
                found.setdefault(card, []).append((rec.run_id, pts, pcie, name, str(rec.started_at)[:10]))
    if not found:
        return None
    if len(found) > 1:
        raise InputError(f"the collective runs were measured on {len(found)} card models ({', '.join(sorted(found))})",
                         "a calibration is for one card model: add --gpu NAME")
    card, runs = next(iter(found.items()))
    pcie = any(r[2] for r in runs)
    runs = [r for r in runs if r[2] == pcie]
    return CollectiveSources(card, tuple(p for r in runs for p in r[1]), pcie, tuple(sorted(r[0] for r in runs)),
                             tuple(sorted({r[3] for r in runs})), tuple(sorted({r[4] for r in runs})))
