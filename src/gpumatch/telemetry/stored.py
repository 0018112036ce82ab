"""A trace as results-store records and back: what ``gpumatch monitor`` saves, and what
``gpumatch runs export`` rebuilds into a trace file.

The store knows nothing of telemetry types, so a monitor run holds plain data (docs/store.md):

- ``samples``: one dict per sample, keyed by :data:`~gpumatch.telemetry.types.SAMPLE_FIELDS`;
- ``events``: kind ``"edge"`` (data = :meth:`EdgeCounters.to_dict`) for every window-edge counter
  read, and kind ``"xid"`` (data = ``{"xid": N}``) for every Xid, at ``t_s`` on the sampler's clock;
- the manifest (:mod:`gpumatch.telemetry.manifest`): the driver (``gpu.driver``, ``gpu.cuda_driver``, ``gpu.nvml``,
  ``gpu.count``) and ``gpu.devices`` (:meth:`DeviceInfo.to_dict`); runs saved before the one manifest hold them
  as ``driver`` and ``gpus`` and read the same (:func:`~gpumatch.telemetry.manifest.from_stored`);
- ``config["interval_s"]``; the summary: ``sampler`` (the sampler's cost) and ``command``.

:func:`trace_from_run` reads the dict of ``Store.export_run(run_id, samples=True)``. Runs saved before
the edge events existed (gpumatch before 2026-12-03) have none; their trace then says so in
``meta["missing"]``, and an analysis of it integrates energy from power and takes throttle duty from
the sampled reason bits instead of the counters.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from gpumatch.errors import DataWarning
from gpumatch.telemetry.manifest import from_stored
from gpumatch.telemetry.trace import SamplerStats, Trace
from gpumatch.telemetry.types import SAMPLE_FIELDS, DeviceInfo, EdgeCounters, Sample, XidEvent

EDGE_EVENT = "edge"
XID_EVENT = "xid"

#: (t_s, gpu_index, kind, data): the arguments of ``Store.add_event`` after the run id.
Event = tuple[float, int | None, str, dict[str, Any]]
T = TypeVar("T")


def trace_events(trace: Trace) -> list[Event]:
    """The window-edge counter reads and Xid events of ``trace``, as store events, in time order."""
    out: list[Event] = [(e.t_s, e.gpu_index, EDGE_EVENT, e.to_dict()) for e in trace.edges]
    out += [(x.t_s, x.gpu_index, XID_EVENT, {"xid": x.xid}) for x in trace.xid_events]
    return sorted(out, key=lambda ev: ev[0])


def trace_from_run(export: Mapping[str, Any]) -> Trace:
    """Rebuild the trace of one stored run from ``Store.export_run(run_id, samples=True)``."""
    run: Mapping[str, Any] = export["run"]
    events: list[Mapping[str, Any]] = list(export.get("events") or [])
    samples = tuple(_sample(s) for s in export.get("samples") or [])
    manifest = from_stored(run.get("manifest"))
    summary: Mapping[str, Any] = run.get("summary") or {}
    devices = manifest.devices()
    edges = tuple(_readable(run, events, EDGE_EVENT, lambda e: EdgeCounters.from_dict(e["data"])))
    xids = tuple(_readable(run, events, XID_EVENT, _xid))
    stats = summary.get("sampler") or {}
    interval = (run.get("config") or {}).get("interval_s") or summary.get("interval_s") or 0.1
    return Trace(
        samples=samples,
        devices=devices or tuple(DeviceInfo(index=i, name="unknown") for i in sorted({s.gpu_index for s in samples})),
        system=manifest.system(),
        edges=edges,
        xid_events=xids,
        interval_s=float(interval),
        stats=SamplerStats(**{k: v for k, v in stats.items() if k in SamplerStats.__dataclass_fields__}),
        meta=_meta(run, summary, edges),
    )


def _xid(e: Mapping[str, Any]) -> XidEvent:
    return XidEvent(float(e["t_s"]), int(e["gpu_index"] if e.get("gpu_index") is not None else -1),
                    int(e["data"]["xid"]))


def _readable(run: Mapping[str, Any], events: list[Mapping[str, Any]], kind: str,
              read: Callable[[Mapping[str, Any]], T]) -> list[T]:
    """``read(e)`` of each event of ``kind``; an event whose data is not in the shape the monitor writes (another
    writer's event of that kind, or a damaged row) is left out with a :class:`~gpumatch.errors.DataWarning`: one
    bad event does not stop the export."""
    out = []
    for e in events:
        if e.get("kind") != kind:
            continue
        try:
            out.append(read(e))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            warnings.warn(DataWarning(f"run {run.get('run_id')}: {kind} event {e.get('event_id')} is not a "
                                      f"monitor's ({type(exc).__name__}: {exc}); exported without it"), stacklevel=2)
    return out


def _sample(d: Mapping[str, Any]) -> Sample:
    """A stored sample dict (extra keys ignored; ``gpu_index`` defaults to 0 as in the store)."""
    rest = {k: d.get(k) for k in SAMPLE_FIELDS if k not in ("t_s", "gpu_index")}
    return Sample(t_s=float(d["t_s"]), gpu_index=int(d.get("gpu_index") or 0), **rest)


def _meta(run: Mapping[str, Any], summary: Mapping[str, Any], edges: tuple[EdgeCounters, ...]) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "exported_from_run": {k: run.get(k) for k in ("run_id", "kind", "name", "status", "started_at",
                                                      "manifest_sha256")},
    }
    if summary.get("command"):
        meta["command"] = list(summary["command"])
    recorded = [{k: g.get(k) for k in ("gpu_index", "workload", "verdict")} for g in summary.get("gpus") or []]
    if recorded:
        meta["recorded_labels"] = recorded
    if not edges:
        meta["missing"] = ["edges: the run has no window-edge counter events (saved by gpumatch monitor since "
                           "2026-12-03), so energy is integrated from power and throttle duty comes from the "
                           "sampled reason bits"]
    return meta
