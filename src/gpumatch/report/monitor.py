"""Views of ``gpumatch monitor``: the verdict table, the per-GPU account, CSV rows, and its stderr lines.

The measurement is :class:`gpumatch.telemetry.monitor.MonitorResult` (recorded by
:func:`gpumatch.record.monitor.run_monitor`); nothing here computes a figure.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

from gpumatch.report.render import to_csv, to_json, to_table, wrap_block

if TYPE_CHECKING:
    from gpumatch.record.monitor import MonitorRun
    from gpumatch.telemetry.monitor import MonitorResult
    from gpumatch.telemetry.verdict import GpuVerdict

COLUMNS = ["gpu", "name", "workload", "verdict", "duration_s", "power_avg_w", "power_inst_max_w", "energy_j",
           "sm_clock_mhz", "sm_clock_p5_mhz", "util_gpu_pct", "gpm_sm_pct", "gpm_tensor_pct", "gpm_dram_pct",
           "power_cap_duty", "temp_max_c", "idle_power_w", "busy_s", "start_up_s", "tail_s"]
"""CSV columns, one row per GPU (SI units as named; the table shows the first four)."""


def verdict_rows(result: MonitorResult) -> list[dict[str, Any]]:
    """One row per GPU with the :data:`COLUMNS` keys."""
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


def monitor_view(result: MonitorResult, fmt: str) -> str:
    """The whole output for ``--format`` ``table``, ``json`` or ``csv``."""
    if fmt == "json":
        return to_json(result.to_dict())
    rows = verdict_rows(result)
    if fmt == "csv":
        return to_csv(rows, COLUMNS)
    return monitor_text(result, rows)


def monitor_text(result: MonitorResult, rows: list[dict[str, Any]]) -> str:
    """The verdict table, then per GPU what it did and what limited it, then the sampler's cost."""
    lines = [to_table([{k: r[k] for k in COLUMNS[:4]} for r in rows], COLUMNS[:4], title="Verdict per GPU")]
    for v, r in zip(result.verdicts, rows, strict=True):
        lines += ["", *gpu_lines(v, r)]
    lines += ["", sampler_line(result)]
    if result.exit_code is not None:
        lines.append(f"command exit code: {result.exit_code}")
    return wrap_block("\n".join(lines))  # prose lines fit the width


def gpu_lines(v: GpuVerdict, r: dict[str, Any]) -> list[str]:
    """One GPU: its verdict and reasons, power, clocks, what limited it, busy time, dips, burst, idle power."""
    s = v.summary
    lines = [f"GPU {r['gpu']} ({r['name']}): {r['workload']}, {r['verdict']}"]
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
    return lines + _burst_idle_lines(v)


def _burst_idle_lines(v: GpuVerdict) -> list[str]:
    s, lines = v.summary, []
    if s.burst and s.burst.sm_clock_ratio is not None:
        lines.append(f"  sustained/burst SM clock {s.burst.sm_clock_ratio:.3f} (first {s.burst.burst_window_s:.0f}"
                     " s vs last half)")
    if s.idle is not None and s.idle.power_w is not None:
        lines.append(f"  idle power after clocks settled ({s.idle.settle_s:.0f} s): {s.idle.power_w:.0f} W at "
                     f"{_f(s.idle.sm_clock_mhz)} MHz")
    elif s.idle is not None and v.workload.label == "idle":
        lines.append(f"  idle power not measured: clocks never settled (SM {_f(s.idle.sm_clock_mhz)} MHz, no "
                     "GpuIdle reason); a process holding a CUDA context keeps them up")
    return lines


def sampler_line(result: MonitorResult) -> str:
    """How many samples over how long, and what sampling cost (when the trace was recorded, for a replay)."""
    st = result.trace.stats
    rec = result.trace.meta.get("recorded_sampler")
    if rec:  # a replay: what sampling cost when the trace was recorded
        cost = f"recorded with {rec['mean_tick_s'] * 1e3:.2f} ms/tick mean, {rec['overruns']} overruns (replayed)"
    else:
        cost = f"sampler cost {st.mean_tick_s * 1e3:.2f} ms/tick mean, {st.overruns} overruns"
    return f"{len(result.trace.samples)} samples over {result.trace.duration_s:.1f} s; {cost}"


def start_line(n_gpus: int, interval_s: float, until_ctrl_c: bool) -> str:
    """Said on stderr when sampling starts."""
    return f"monitoring {n_gpus} GPU(s) every {interval_s:g} s{' until Ctrl-C' if until_ctrl_c else ''}"


def saved_line(run: MonitorRun) -> str | None:
    """``saved as run N in PATH`` (with the kind for a replay); None when the run was not saved."""
    o = run.recording
    if o is None or not o.saved:
        return None
    kind = f" (kind {run.kind})" if run.kind != "monitor" else ""
    return f"saved as run {o.run_id}{kind} in {o.store_path}"


def stopped_line(result: MonitorResult, saved: str) -> str | None:
    """The one line after a stop signal ended the monitoring; ``saved``: ``saved``, ``not stored``... None for
    SIGINT without a command (the documented way to end 'gpumatch monitor' with no command, exit 0)."""
    name = result.signal_name
    if not result.command:
        if result.signal == signal.SIGINT:
            return None
        return f"stopped by {name}; the run is {saved} as completed"
    ended = "ended" if result.exit_code is None else f"ended with code {result.exit_code}"
    return (f"interrupted by {name}: the command was stopped ({ended}); every sample up to then is "
            f"{saved}{' as an interrupted run' if saved == 'saved' else ''}")


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}" if abs(v) >= 10 else f"{v:.2f}"
