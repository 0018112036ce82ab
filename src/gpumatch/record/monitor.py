"""``gpumatch monitor`` as one library call: measure around a command (or replay a trace) and record the run.

:func:`run_monitor` samples the GPUs while a command runs (or until a stop signal), or replays a recorded
trace, and records it through the spine (:class:`~gpumatch.record.recording.Recording`): samples every 2 s as
they come, then the window-edge and Xid events, four results per GPU and the run's end. It never prints:
the caller passes ``on_start`` and ``on_store_error`` to say what it wants said, and renders the returned
:class:`MonitorRun` (:mod:`gpumatch.report.monitor`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpumatch.errors import GpumatchError
from gpumatch.record.recording import Recording, RecordingOutcome, StoreErrorHook
from gpumatch.telemetry.monitor import MonitorResult
from gpumatch.telemetry.types import Sample

DEFAULT_INTERVAL_S = 0.1
"""Seconds between samples when the caller gives none (10 Hz)."""

StartHook = Callable[[int, float], None]
"""Called once sampling starts, with the number of GPUs and the interval in seconds."""


@dataclass(frozen=True)
class MonitorRun:
    """What :func:`run_monitor` did: the measurement (trace, per-GPU verdicts, how the command ended), the
    trace files written to ``output`` (empty without one), the kind under which it was recorded
    (``monitor``, ``monitor-replay``) and how the recording ended (None with ``use_store=False``)."""

    result: MonitorResult
    written: tuple[Path, ...]
    kind: str
    recording: RecordingOutcome | None


class StoreNotUpdated(GpumatchError):
    """The measurement finished but the results store could not take it; the trace is in a file."""

    def __init__(self, cause: GpumatchError, kept: Sequence[Path]) -> None:
        where = ", ".join(str(p) for p in kept) if kept else "nowhere (it could not be written either)"
        super().__init__(
            f"results store not updated: {cause}; the trace is in {where}",
            "fix the store (see the message), then re-analyse with 'gpumatch monitor --replay FILE.csv'",
        )


def run_monitor(command: Sequence[str] | None, interval_s: float | None = None, *, replay: Path | None = None,
                gpus: Sequence[int] | None = None, use_store: bool = True, output: Path | None = None,
                on_start: StartHook | None = None, on_store_error: StoreErrorHook | None = None,
                prometheus: str | None = None) -> MonitorRun:
    """Measure ``command`` on ``gpus`` (default all) every ``interval_s`` seconds, or replay the trace file
    ``replay``; write the trace to ``output`` (.csv or .parquet) if given; record the run unless ``use_store``
    is False. ``prometheus`` (``HOST:PORT``): also serve the live samples at ``/metrics`` under dcgm-exporter's
    names (:mod:`gpumatch.telemetry.prometheus`) while it runs. SIGINT/SIGTERM/SIGHUP are caught (main thread),
    forwarded to the command, and end the measurement; the run is then saved ``interrupted`` (``completed``
    without a command)."""
    if replay is not None:
        return _replay(replay, interval_s, use_store, output)
    from gpumatch.telemetry.backends import open_backend
    from gpumatch.telemetry.child import StopSignals
    from gpumatch.telemetry.manifest import machine_manifest
    from gpumatch.telemetry.monitor import monitor_command

    interval = DEFAULT_INTERVAL_S if interval_s is None else interval_s
    backend = open_backend("nvml", list(gpus) if gpus else None)
    exporter = _exporter(backend, prometheus)
    # from here a stop signal is forwarded to the command, and waits for the save below
    with StopSignals() as stop, contextlib.closing(backend), contextlib.ExitStack() as stack:
        if exporter is not None:
            stack.callback(exporter.close)
        name = " ".join(command or []) or "(until Ctrl-C)"
        manifest = machine_manifest(backend).to_dict()
        with Recording("monitor", name, manifest, {"interval_s": interval}, use_store=use_store,
                       on_store_error=on_store_error, keep_samples=False, flush_interval_s=0.0) as rec:
            if on_start is not None:
                on_start(len(backend.devices()), interval)
            on_samples = rec.add_samples if exporter is None else _both(exporter.update, rec.add_samples)
            every_s = 2.0 if exporter is None else PROMETHEUS_UPDATE_S
            result = monitor_command(backend, command or None, interval, on_samples=on_samples,
                                     flush_every_s=every_s, stop=stop)
            written = _write_output(result, output)
            outcome = _finish(rec, result, written) if use_store else None
    return MonitorRun(result, written, "monitor", outcome)


PROMETHEUS_UPDATE_S = 1.0
"""With ``--prometheus`` the gauges (and the store) take new samples every this-many seconds (else 2 s)."""


def _exporter(backend: Any, listen: str | None) -> Any:
    """The Prometheus exporter serving ``listen`` (HOST:PORT), started; None without ``--prometheus``."""
    if listen is None:
        return None
    from gpumatch.telemetry.prometheus import PrometheusExporter, parse_listen

    host, port = parse_listen(listen)
    return PrometheusExporter([d.info() for d in backend.devices()], host, port).start()


def _both(first: Callable[[list[Sample]], None],
          second: Callable[[list[Sample]], None]) -> Callable[[list[Sample]], None]:
    def call(samples: list[Sample]) -> None:
        first(samples)
        second(samples)

    return call


def _replay(path: Path, interval_s: float | None, use_store: bool, output: Path | None) -> MonitorRun:
    """Replays: the whole run at once, as kind ``monitor-replay``; the replayed file is the kept copy."""
    from gpumatch.telemetry.manifest import trace_manifest
    from gpumatch.telemetry.monitor import replay_trace

    result = replay_trace(path, interval_s)
    written = _write_output(result, output)
    if not use_store:
        return MonitorRun(result, written, "monitor-replay", None)
    with Recording("monitor-replay", str(path), trace_manifest(result.trace).to_dict(),
                   {"interval_s": result.trace.interval_s}, keep_samples=False, flush_interval_s=0.0) as rec:
        rec.add_samples(result.trace.samples)  # one transaction: all or none
        outcome = _finish(rec, result, written or (path,))
    return MonitorRun(result, written, "monitor-replay", outcome)


def _write_output(result: MonitorResult, output: Path | None) -> tuple[Path, ...]:
    if output is None:
        return ()
    from gpumatch.telemetry.trace import write_trace

    return tuple(write_trace(result.trace, output))


def _finish(rec: Recording, result: MonitorResult, kept: Sequence[Path]) -> RecordingOutcome:
    """Events (what ``runs export`` needs back), results, and the end of the run."""
    from gpumatch.telemetry.stored import trace_events

    for t_s, gpu_index, kind, data in trace_events(result.trace):
        rec.add_event(t_s, kind, data, gpu_index=gpu_index)
    for metric, value, unit, config, extra in monitor_results(result):
        rec.add_result(metric, value, unit, config=config, extra=extra)
    # without a command, a stop signal is how the measurement ends: completed
    status = "interrupted" if result.interrupted and result.command else "failed" if result.exit_code else "completed"
    return rec.close(status, result.to_dict(), trace=None if kept else result.trace, kept=kept)


def monitor_results(result: MonitorResult) -> list[tuple[str, float, str, dict[str, Any], dict[str, Any]]]:
    """Per GPU: ``energy_j`` (J), ``power_avg_w`` (W), ``sm_clock_hz`` (Hz, the mean SM clock) and
    ``power_cap_duty`` (1, the fraction of busy time at the power cap), where measured; as (metric, value,
    unit, config with ``gpu_index``, extra with the verdict and workload labels)."""
    from gpumatch.telemetry.verdict import power_cap_duty

    out = []
    for v in result.verdicts:
        s = v.summary
        cfg = {"gpu_index": s.gpu_index}
        extra = {"verdict": v.verdict.label, "workload": v.workload.label}
        mhz = s.sm_clock_mhz_mean
        for metric, value, unit in (("energy_j", s.energy_j, "J"), ("power_avg_w", s.power_avg_w_mean, "W"),
                                    ("sm_clock_hz", None if mhz is None else mhz * 1e6, "Hz"),
                                    ("power_cap_duty", power_cap_duty(s), "1")):
            if value is not None:
                out.append((metric, value, unit, cfg, extra))
    return out
