"""``gpumatch monitor``: GPU telemetry around any command (or until Ctrl-C), with a summary and a verdict."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from gpumatch.cli.common import Format, FormatOption, emit
from gpumatch.errors import GpumatchError
from gpumatch.report.render import to_csv, to_json, to_table, wrap_block

HELP = (
    'Sample GPU telemetry while a command runs (or until Ctrl-C); print a summary and a verdict per GPU.\n\n'
    'Samples power (instant and 1-s average), SM/memory clocks, clock-event reasons, temperatures, '
    'memory, utilization at 1/INTERVAL Hz, GPM SM/tensor/DRAM activity once a second where supported, and'
    ' energy, violation, ECC, PCIe-replay and remap counters at the start and the end. Exits with the '
    "command's exit code; SIGINT/SIGTERM/SIGHUP are passed to the command, the run is saved as interrupted and "
    "gpumatch exits 130/143/129. The run, its samples and its verdict go to the results store unless --no-store.\n\n"
    'Without a GPU, --replay TRACE.csv replays a recorded trace through the same analysis.\n\n'
    'Examples:\n'
    '  gpumatch monitor -- python train.py --epochs 1\n'
    '  gpumatch monitor --interval 0.05 --output run.csv -- ./bench.sh\n'
    '  gpumatch monitor                      # until Ctrl-C\n'
    '  gpumatch monitor --replay tests/data/traces/h200-2026-12-02-gemm-bf16.csv'
)

class CommandExit(GpumatchError):
    """The monitored command failed: gpumatch exits with the command's own exit code."""

    def __init__(self, code: int) -> None:
        super().__init__(f"the monitored command exited with code {code}", "its output is above; telemetry was kept")
        self.exit_code = code


#: Everything after the first positional argument is the command (so '--' is optional for simple commands).
CONTEXT = {"allow_interspersed_args": False}

_COLUMNS = ["gpu", "name", "workload", "verdict", "duration_s", "power_avg_w", "power_inst_max_w", "energy_j",
            "sm_clock_mhz", "sm_clock_p5_mhz", "util_gpu_pct", "gpm_sm_pct", "gpm_tensor_pct", "gpm_dram_pct",
            "power_cap_duty", "temp_max_c", "idle_power_w", "busy_s", "start_up_s", "tail_s"]


def monitor(
    command: Annotated[list[str] | None, typer.Argument(help="The command to run, after '--'.")] = None,
    interval: Annotated[float | None, typer.Option(
        "--interval", "-i", help="Seconds between samples (default 0.1; 0.05-0.1 = 20-10 Hz).")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write the trace: .csv or .parquet (+ a .json sidecar).")] = None,
    replay: Annotated[Path | None, typer.Option(
        "--replay", help="Replay a recorded trace instead of reading a GPU.")] = None,
    gpu: Annotated[list[int] | None, typer.Option(
        "--gpu", help="Only this GPU index (repeatable); default all.")] = None,
    store: bool = typer.Option(True, "--store/--no-store", help="Save the run in the results store."),
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.errors import InputError

    if replay is not None and command:
        raise InputError("--replay takes no command", "drop the command, or drop --replay to measure it")
    if output is not None and output.suffix.lower() not in (".csv", ".parquet"):
        raise InputError(f"--output must end in .csv or .parquet, not '{output.suffix or output.name}'",
                         "e.g. --output trace.csv")
    if output is not None and not output.parent.is_dir():  # say so before an hours-long measurement, not after
        raise InputError(f"cannot write {output}: folder {output.parent} does not exist",
                         "create the folder first, or choose another --output")
    result, store_error = _run(command, interval, replay, gpu, store)
    written: list[Path] = []
    if output is not None:
        from gpumatch.telemetry.trace import write_trace

        written = write_trace(result.trace, output)
        sys.stderr.write(f"gpumatch: trace written to {', '.join(str(p) for p in written)}\n")
    _render(result, fmt)
    if store_error is not None:
        kept = written or ([replay] if replay is not None else _write_fallback(result.trace))
        failed = StoreNotUpdated(store_error, kept)
        if not result.exit_code and result.signal is None:
            raise failed
        sys.stderr.write(f"gpumatch: warning: {failed}\n")
    if result.signal is not None:
        _stopped(result, "not stored" if not store else "not stored (see above)" if store_error else "saved")
    if result.exit_code:
        raise CommandExit(result.exit_code)


def _stopped(result: Any, saved: str) -> None:
    """A stop signal ended the monitoring: one line, then exit 128 + N (SIGINT without a command: the
    documented way to end 'gpumatch monitor' with no command, exit 0)."""
    import signal

    name, code = result.signal_name, 128 + int(result.signal)
    if not result.command:
        if result.signal == signal.SIGINT:
            return
        sys.stderr.write(f"gpumatch: stopped by {name}; the run is {saved} as completed\n")
        raise typer.Exit(code)
    ended = "ended" if result.exit_code is None else f"ended with code {result.exit_code}"
    sys.stderr.write(f"gpumatch: interrupted by {name}: the command was stopped ({ended}); every sample up to "
                     f"then is {saved}{' as an interrupted run' if saved == 'saved' else ''}\n")
    raise typer.Exit(code)


class StoreNotUpdated(GpumatchError):
    """The measurement finished but the results store could not take it; the trace is in a file."""

    def __init__(self, cause: GpumatchError, kept: list[Path]) -> None:
        where = ", ".join(str(p) for p in kept) if kept else "nowhere (it could not be written either)"
        super().__init__(
            f"results store not updated: {cause}; the trace is in {where}",
            "fix the store (see the message), then re-analyse with 'gpumatch monitor --replay FILE.csv'",
        )


def _write_fallback(trace: Any) -> list[Path]:
    """``./gpumatch-monitor-<UTC time>.csv`` (+ .json), else the same name in the temp folder.

    Both names are created exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW``): a file or a symlink planted
    under the name (the temp folder is shared, the name predictable) is never written through; the next
    free name (``-2``, ``-3``...) is taken instead. The trace is written in a private folder first
    (``tempfile.mkdtemp``, mode 0700) and copied into the two new files."""
    import datetime as dt
    import shutil
    import tempfile

    from gpumatch.telemetry.trace import write_trace

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    private = Path(tempfile.mkdtemp(prefix="gpumatch-trace-"))
    try:
        made = write_trace(trace, private / "trace.csv")
        for folder in (*_cwd(), Path(tempfile.gettempdir())):
            for n in range(1, 100):
                path = folder / f"gpumatch-monitor-{stamp}{'' if n == 1 else f'-{n}'}.csv"
                try:
                    return _copy_exclusive(made, [path, path.with_suffix(".json")])
                except FileExistsError:
                    continue  # taken (or a planted link): the next name
                except OSError:
                    break  # this folder cannot be written: the next folder
    except GpumatchError:
        return []
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return []


def _cwd() -> list[Path]:
    try:
        return [Path.cwd()]
    except OSError:  # the working folder was deleted
        return []


def _copy_exclusive(sources: list[Path], targets: list[Path]) -> list[Path]:
    """Copy each source to a target that this call creates (never an existing file, never through a link)."""
    import os
    import shutil

    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    done: list[Path] = []
    try:
        for src, dst in zip(sources, targets, strict=True):
            fd = os.open(dst, flags, 0o644)
            done.append(dst)
            with os.fdopen(fd, "wb") as out, src.open("rb") as inp:
                shutil.copyfileobj(inp, out)
    except BaseException:
        for d in done:  # ours: created by this call
            with contextlib.suppress(OSError):
                d.unlink()
        raise
    return done


def _run(command: list[str] | None, interval: float | None, replay: Path | None, gpu: list[int] | None,
         use_store: bool) -> tuple[Any, GpumatchError | None]:
    """The result, and the store error if the run could not be saved (the caller keeps the trace)."""
    from gpumatch.telemetry.manifest import build_manifest, trace_manifest
    from gpumatch.telemetry.monitor import monitor_command, replay_trace

    if replay is not None:
        result = replay_trace(replay, interval)
        manifest = trace_manifest(result.trace)
        return result, _save(result, manifest, "monitor-replay", str(replay), use_store)
    from gpumatch.telemetry.child import StopSignals
    from gpumatch.telemetry.nvml import open_nvml

    interval = 0.1 if interval is None else interval
    backend = open_nvml(gpu or None)
    with StopSignals() as stop:  # from here a stop signal is forwarded, and waits for the save below
        try:
            manifest = build_manifest(backend)
            saver = _Saver(manifest, " ".join(command or []) or "(until Ctrl-C)", interval) if use_store else None
            sys.stderr.write(f"gpumatch: monitoring {len(backend.devices())} GPU(s) every {interval:g} s"
                             f"{'' if command else ' until Ctrl-C'}\n")
            result = monitor_command(backend, command or None, interval,
                                     on_samples=saver.add if saver else None, stop=stop)
        finally:
            backend.close()
        if saver is not None:
            saver.finish(result)
            return result, saver.error
    return result, None


class _Saver:
    """Writes the run to the results store as it goes; a store problem never stops the measurement,
    it is kept in ``error`` (the CLI then writes the trace to a file and exits 2)."""

    def __init__(self, manifest: dict[str, Any], name: str, interval: float) -> None:
        from gpumatch.errors import GpumatchError
        from gpumatch.store import open_store

        self.store: Any = None
        self.run_id: int | None = None
        self.error: GpumatchError | None = None
        try:
            self.store = open_store(mode="write")
            self.run_id = self.store.begin_run("monitor", name, manifest, {"interval_s": interval})
        except GpumatchError as e:
            self._fail(e)

    def _fail(self, e: GpumatchError) -> None:
        _warn_store(e)
        self.error = self.error or e
        if self.store is not None:
            with contextlib.suppress(GpumatchError):
                self.store.close()  # ends the begun run as 'interrupted', if the file still takes it
        self.store = None

    def add(self, samples: list[Any]) -> None:
        from gpumatch.errors import GpumatchError

        if self.store is None or self.run_id is None:
            return
        try:
            self.store.add_samples(self.run_id, [s.to_dict() for s in samples])
        except GpumatchError as e:
            self._fail(e)

    def finish(self, result: Any) -> None:
        if self.store is None or self.run_id is None:
            return
        try:
            _finish(self.store, self.run_id, result)
            sys.stderr.write(f"gpumatch: saved as run {self.run_id} in {self.store.path}\n")
            self.store.close()
        except GpumatchError as e:
            self._fail(e)


def _save(result: Any, manifest: dict[str, Any], kind: str, name: str, use_store: bool) -> GpumatchError | None:
    """Replays: store the whole run at once, as kind ``monitor-replay``; returns the store error, if any."""
    if not use_store:
        return None
    from gpumatch.store import open_store

    try:
        with open_store(mode="write") as st:
            run_id = st.begin_run(kind, name, manifest, {"interval_s": result.trace.interval_s})
            st.add_samples(run_id, [s.to_dict() for s in result.trace.samples])
            _finish(st, run_id, result)
            sys.stderr.write(f"gpumatch: saved as run {run_id} (kind {kind}) in {st.path}\n")
    except GpumatchError as e:
        return e
    return None


def _finish(st: Any, run_id: int, result: Any) -> None:
    """Events, results and the end of the run; a store error propagates (the caller keeps the trace)."""
    from gpumatch.telemetry.stored import trace_events

    for t_s, gpu_index, kind, data in trace_events(result.trace):  # what `runs export` needs back
        st.add_event(run_id, t_s, kind, data, gpu_index=gpu_index)
    for row in _rows(result):
        cfg = {"gpu_index": row["gpu"]}
        for metric, key, unit in (("energy_j", "energy_j", "J"), ("power_avg_w", "power_avg_w", "W"),
                                  ("sm_clock_hz", "sm_clock_mhz", "Hz"), ("power_cap_duty", "power_cap_duty", "1")):
            v = row.get(key)
            if v is not None:
                st.add_result(run_id, metric, v * 1e6 if unit == "Hz" else v, unit, config=cfg,
                              extra={"verdict": row["verdict"], "workload": row["workload"]})
    # without a command, a stop signal is how the measurement ends: completed
    status = "interrupted" if result.interrupted and result.command else "failed" if result.exit_code else "completed"
    st.end_run(run_id, status, summary=result.to_dict())


def _warn_store(e: Exception) -> None:
    """Said at once during a live run (it may go on for hours); the final error says where the trace is."""
    sys.stderr.write(f"gpumatch: warning: results store unavailable, measuring on (the trace goes to a file): {e}\n")


def _rows(result: Any) -> list[dict[str, Any]]:
    from gpumatch.telemetry.verdict import power_cap_duty

    rows = []
    for v in result.verdicts:
        s = v.summary
        rows.append({
            "gpu": s.gpu_index, "name": s.name, "workload": v.workload.label, "verdict": v.verdict.label,
            "duration_s": s.duration_s, "power_avg_w": s.power_avg_w_mean, "power_inst_max_w": s.power_instant_w_max,
            "energy_j": s.energy_j, "sm_clock_mhz": s.sm_clock_mhz_mean, "sm_clock_p5_mhz": s.sm_clock_mhz_p5,
            "util_gpu_pct": s.util_gpu_pct_mean, "gpm_sm_pct": s.gpm_sm_active_mean,
            "gpm_tensor_pct": s.gpm_tensor_active_mean, "gpm_dram_pct": s.gpm_dram_bw_util_mean,
            "power_cap_duty": power_cap_duty(s), "temp_max_c": s.gpu_temp_c_max, "idle_power_w": s.idle_power_w,
            "busy_s": a.duration_s if (a := s.active) else None, "start_up_s": a.lead_in_s if a else None,
            "tail_s": a.tail_s if a else None,
        })
    return rows


def _render(result: Any, fmt: Format) -> None:
    if fmt is Format.json:
        emit(to_json(result.to_dict()))
        return
    rows = _rows(result)
    if fmt is Format.csv:
        emit(to_csv(rows, _COLUMNS))
        return
    lines = [to_table([{k: r[k] for k in _COLUMNS[:4]} for r in rows], _COLUMNS[:4], title="Verdict per GPU")]
    for v, r in zip(result.verdicts, rows, strict=True):
        s = v.summary
        lines.append("")
        lines.append(f"GPU {r['gpu']} ({r['name']}): {r['workload']}, {r['verdict']}")
        lines += [f"  - {x}" for x in (*v.workload.reasons, *v.verdict.reasons)]
        lines.append(f"  power avg {_f(r['power_avg_w'])} W, instant max {_f(r['power_inst_max_w'])} W, limit "
                     f"{_f(s.power_limit_w)} W; energy {_f(r['energy_j'])} J ({s.energy_source})")
        lines.append(f"  SM clock mean {_f(r['sm_clock_mhz'])} MHz, p5 {_f(r['sm_clock_p5_mhz'])}, max "
                     f"{_f(s.sm_clock_max_mhz)}; temp max {_f(s.gpu_temp_c_max)} °C (headroom {_f(s.temp_headroom_c)})")
        duty = s.violation_duty or {k: d for k, d in s.throttle_duty.items() if d > 0}
        lines.append(f"  limited ({s.throttle_source}): " + (", ".join(f"{k} {d:.0%}" for k, d in duty.items() if d > 0)
                                                          or "none"))
        a = s.active
        if a is not None and (a.lead_in_s >= 0.5 or a.tail_s >= 0.5):
            lines.append(f"  busy {a.duration_s:.1f} s of {s.duration_s:.1f} s: start-up {a.lead_in_s:.1f} s before "
                         f"the first kernel, tail {a.tail_s:.1f} s after the last (not counted as dips)")
        for d in s.dips:
            if d.count:
                lines.append(f"  dips in {d.signal}: {d.count}, {d.time_fraction:.0%} of the busy time, longest "
                             f"{d.longest_s:.1f} s (waiting on data loading or communication?)")
        if s.burst and s.burst.sm_clock_ratio is not None:
            lines.append(f"  sustained/burst SM clock {s.burst.sm_clock_ratio:.3f} (first {s.burst.burst_window_s:.0f}"
                         " s vs last half)")
        if s.idle is not None and s.idle.power_w is not None:
            lines.append(f"  idle power after clocks settled ({s.idle.settle_s:.0f} s): {s.idle.power_w:.0f} W at "
                         f"{_f(s.idle.sm_clock_mhz)} MHz")
        elif s.idle is not None and v.workload.label == "idle":
            lines.append(f"  idle power not measured: clocks never settled (SM {_f(s.idle.sm_clock_mhz)} MHz, no "
                         "GpuIdle reason); a process holding a CUDA context keeps them up")
    st = result.trace.stats
    lines.append("")
    rec = result.trace.meta.get("recorded_sampler")
    if rec:  # a replay: what sampling cost when the trace was recorded
        st_text = f"recorded with {rec['mean_tick_s'] * 1e3:.2f} ms/tick mean, {rec['overruns']} overruns (replayed)"
    else:
        st_text = f"sampler cost {st.mean_tick_s * 1e3:.2f} ms/tick mean, {st.overruns} overruns"
    lines.append(f"{len(result.trace.samples)} samples over {result.trace.duration_s:.1f} s; {st_text}")
    if result.exit_code is not None:
        lines.append(f"command exit code: {result.exit_code}")
    emit(wrap_block("\n".join(lines)))  # prose lines fit the width


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}" if abs(v) >= 10 else f"{v:.2f}"
