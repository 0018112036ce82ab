"""Each stored result against the card's catalog ceiling, with a one-line reason where the ratio is low.

The ceiling of a result (docs/bench.md, "Ratios to the card's ceilings"):

- GEMM, soak, kernel-path FLOP/s, prefill and training steps: the catalog's dense peak of the precision they ran
  (prefill and training: bf16), against the achieved FLOP/s (a step's ``flops_per_step`` / its time:
  :mod:`gpumatch.bench.work`);
- copy and read bandwidth, decode steps: the catalog's HBM bandwidth, against the achieved B/s (a decode step's
  ``bytes_per_step`` / its time); a decode step is also read against the run's measured copy bandwidth (its MBU).

The reason comes only from what the run recorded (the NVML summary of the case's window:
:mod:`gpumatch.lab.telemetry`; a step's own power window) and from the row's shape: ``reason`` is the one cause
:func:`reason` ranks first (thermal or hardware slowdown, a GEMM shape under the ridge point, a copy that does not
reach the catalog bandwidth, the power limit, a low SM clock, fp8 dimensions off the 128-wide tiles), short enough
for one line; ``reason_detail`` lists everything the telemetry shows (:func:`evidence`): the share of the window at
the power cap (the violation counter when read, else the share of 10 Hz samples with the reason bit), the mean SM
clock against the card's maximum, whether the window was mostly start-up. Where none of these shows, the reason
says so: the kernels themselves fall short of the ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpumatch.errors import GpumatchError

LOW_RATIO = 0.8
"""Below this share of its ceiling a result gets a reason."""

FLOP_METRICS = {"gemm_flops_per_s", "soak_flops_per_s", "kernel_path_flops_per_s"}
BYTE_METRICS = {"copy_bytes_per_s", "read_bytes_per_s"}
STEP_FLOPS = {"prefill_s", "train_step_s"}


def _spec(manifest: dict[str, Any]) -> Any:
    try:
        from gpumatch.catalog import get_gpu

        name = manifest.get("gpu.name")
        return get_gpu(name) if name else None
    except (GpumatchError, ImportError):
        return None


def _achieved(r: dict[str, Any], spec: Any) -> tuple[float, float, str] | None:
    """(achieved, ceiling, what the ceiling is) of a result row, or None when it has no ceiling here."""
    metric, value, cfg = r["metric"], float(r["measured"]), r.get("config") or {}
    bw = float(spec.memory_bandwidth_bytes_per_s)
    if metric in FLOP_METRICS or metric in STEP_FLOPS:
        prec = str(cfg.get("precision") or "bf16")
        peak = spec.peak_flops_per_s.get(prec)
        if not peak:
            return None
        if metric in STEP_FLOPS:
            if not r.get("flops_per_step") or value <= 0:
                return None
            value = float(r["flops_per_step"]) / value
        return value, float(peak), f"dense {prec} {peak / 1e12:.0f} TFLOP/s"
    if metric in BYTE_METRICS:
        return value, bw, f"HBM {bw / 1e12:.2f} TB/s"
    if metric == "decode_step_s" and r.get("bytes_per_step") and value > 0:
        return float(r["bytes_per_step"]) / value, bw, f"HBM {bw / 1e12:.2f} TB/s"
    return None


def window_share(t: dict[str, Any], counter: str, sampled: str) -> tuple[float | None, str]:
    """The share of the case window under a limiter: its NVML violation counter (``violation_duty``) when read,
    else the share of samples with the reason bit; and which of the two it is."""
    duty = t.get("violation_duty") or {}
    if counter in duty:
        return float(duty[counter]), "of the case window (counter)"
    value = t.get(sampled)
    return (float(value), "of samples") if value is not None else (None, "")


IDLE_WINDOW = 0.5
"""A case window whose ``low_utilization`` violation counter ran for more than this share was mostly idle (child
start-up, compilation): its mean power and clock then describe the idle card, not the timed kernels."""


POWER_SHARE = 0.05
"""A power-cap share of the case window (counter or samples) from which the cap is named as a reason (the
verdict's ``valid-power-capped`` threshold, :mod:`gpumatch.telemetry.verdict`)."""
AT_LIMIT = 0.95
"""Timed steps whose mean power is at least this share of the enforced limit ran at the power limit."""


def gemm_bytes(m: int, n: int, k: int, precision: str) -> float:
    """Bytes a GEMM ``(m × k) · (k × n)`` must move at least: both operands read once and the output written
    once (fp8 ``_scaled_mm`` writes bf16), at the estimator's bytes per element of the precision. The roofline's
    minimum traffic (Williams et al. 2009)."""
    from gpumatch.estimate.precision import BYTES_PER_ELEMENT

    elt = BYTES_PER_ELEMENT.get(precision, 2.0)
    return (m * k + k * n) * elt + m * n * (2.0 if precision == "fp8" else elt)


def _memory_bound(row: dict[str, Any], spec: Any) -> str | None:
    """For a GEMM-shaped row whose arithmetic intensity 2mnk / :func:`gemm_bytes` is under the card's ridge
    (dense peak / HBM bandwidth): the bandwidth it reached, as the reason it cannot reach the FLOP ceiling."""
    cfg = row.get("config") or {}
    if spec is None or not {"m", "n", "k"} <= cfg.keys() or row.get("metric") not in FLOP_METRICS:
        return None
    prec = str(cfg.get("precision") or "bf16")
    peak, bw = spec.peak_flops_per_s.get(prec), float(spec.memory_bandwidth_bytes_per_s)
    m, n, k = (int(cfg[d]) for d in "mnk")
    moved = gemm_bytes(m, n, k, prec)
    intensity = 2.0 * m * n * k / moved
    if not peak or intensity >= float(peak) / bw:
        return None
    reached = float(row["measured"]) / intensity
    return f"memory-bound (M={m}): {reached / 1e12:.2f} TB/s, {reached / bw:.0%} of HBM"


@dataclass(frozen=True)
class _Facts:
    """What a case's telemetry and a row's own power window recorded, read once for :func:`evidence` and
    :func:`reason`."""

    telemetry: bool
    thermal: float | None
    thermal_src: str
    hw_slowdown: float
    power: float | None
    power_src: str
    power_w_mean: float | None
    idle: float
    """Share of the case window under the ``low_utilization`` counter (start-up when over :data:`IDLE_WINDOW`)."""
    slow_clock_mhz: float | None
    """The mean SM clock when under 95% of the maximum in a window that is not mostly start-up, else None."""
    max_sm_mhz: float | None
    steady_w: float | None
    limit_w: float | None
    fp8_odd: list[str] | None
    """For an fp8 GEMM row, its dimensions that are not multiples of 128 (cuBLAS's tile); None otherwise."""


def _facts(telemetry: dict[str, Any] | None, max_sm_mhz: float | None, row: dict[str, Any]) -> _Facts:
    t = telemetry or {}
    thermal, t_src = window_share(t, "thermal", "thermal_frac")
    power, p_src = window_share(t, "power", "power_cap_frac")
    idle = float((t.get("violation_duty") or {}).get("low_utilization") or 0.0)
    clock = t.get("sm_clock_mhz_mean")
    slow = clock if clock and max_sm_mhz and clock < 0.95 * max_sm_mhz and idle <= IDLE_WINDOW else None
    cfg = row.get("config") or {}
    odd = ([f"{d}={cfg[d.lower()]}" for d in "MNK" if int(cfg[d.lower()]) % 128]
           if cfg.get("precision") == "fp8" and {"m", "n", "k"} <= cfg.keys() else None)
    return _Facts(bool(t), thermal, t_src, float(t.get("hw_slowdown_frac") or 0.0), power, p_src,
                  t.get("power_w_mean"), idle, slow, max_sm_mhz, row.get("power_window_w"), row.get("power_limit_w"),
                  odd)


def evidence(telemetry: dict[str, Any] | None, max_sm_mhz: float | None, row: dict[str, Any]) -> list[str]:
    """Everything the case's telemetry and the row's own power window say about a low result (module
    docstring), most severe first; :func:`reason` picks one cause."""
    f = _facts(telemetry, max_sm_mhz, row)
    parts = []
    if f.thermal:
        parts.append(f"thermal slowdown {f.thermal:.0%} {f.thermal_src}")
    if f.hw_slowdown:
        parts.append(f"HW slowdown/power brake {f.hw_slowdown:.0%} of samples")
    if f.power:
        watts = f", mean {f.power_w_mean:.0f} W" if f.power_w_mean and f.idle <= IDLE_WINDOW else ""
        parts.append(f"power-capped {f.power:.0%} {f.power_src}{watts}")
    if f.idle > IDLE_WINDOW:
        parts.append(f"case window {f.idle:.0%} low-utilization (start-up): its clock and power means are not the "
                     "kernels'")
    if f.slow_clock_mhz and f.max_sm_mhz:
        parts.append(f"SM clock {f.slow_clock_mhz:.0f} MHz = {f.slow_clock_mhz / f.max_sm_mhz:.0%} of max "
                     f"{f.max_sm_mhz:.0f}")
    if f.steady_w and f.limit_w:
        parts.append(f"timed steps at {f.steady_w:.0f} W = {f.steady_w / f.limit_w:.0%} of the {f.limit_w:.0f} W "
                     "limit")
    if f.fp8_odd is not None:
        parts.append("fp8 _scaled_mm" + (f": {', '.join(f.fp8_odd)} not multiples of 128 (tile)" if f.fp8_odd
                                         else ", dims multiples of 128"))
    if not f.telemetry:
        parts.append("no telemetry recorded for this case")
    return parts


def _short(src: str) -> str:
    return src.replace("the case window", "window")


def reason(telemetry: dict[str, Any] | None, max_sm_mhz: float | None, row: dict[str, Any],
           spec: Any = None) -> str:
    """The one reason a result is low, short enough for one line (under 45 characters), first of:

    1. thermal or hardware slowdown in the case window;
    2. a GEMM shape under the card's ridge point (:func:`_memory_bound`): bandwidth, not FLOP/s, bounds it;
    3. a decode step at :data:`LOW_RATIO` or more of the run's measured copy: the catalog bandwidth is what the
       card's own copy does not reach (``row["mbu_vs_copy"]``, ``row["copy_bytes_per_s"]``);
    4. timed steps at :data:`AT_LIMIT` of the enforced power limit, else the power cap for :data:`POWER_SHARE` or
       more of the case window;
    5. a mean SM clock under 95% of the card's maximum (in a window that is not mostly start-up);
    6. fp8 dimensions off cuBLAS's 128-wide tiles;
    7. otherwise: no telemetry, or none of these, so the kernels themselves fall short.
    """
    f = _facts(telemetry, max_sm_mhz, row)
    shape = _memory_bound(row, spec)
    copy = row.get("copy_bytes_per_s")
    if f.thermal:
        return f"thermal slowdown {f.thermal:.0%} {_short(f.thermal_src)}"
    if f.hw_slowdown:
        return f"HW slowdown {f.hw_slowdown:.0%} of samples"
    if shape:
        return shape
    if spec is not None and copy and row.get("mbu_vs_copy", 0.0) >= LOW_RATIO:
        return f"copy is {float(copy) / float(spec.memory_bandwidth_bytes_per_s):.2f} of catalog HBM"
    if f.steady_w and f.limit_w and f.steady_w >= AT_LIMIT * f.limit_w:
        return f"power limit: {f.steady_w:.0f} of {f.limit_w:.0f} W in steps"
    if f.power and f.power >= POWER_SHARE:
        return f"power cap {f.power:.0%} {_short(f.power_src)}"
    if f.slow_clock_mhz and f.max_sm_mhz:
        return f"SM clock {f.slow_clock_mhz:.0f} MHz = {f.slow_clock_mhz / f.max_sm_mhz:.0%} of max"
    if f.fp8_odd:
        return f"fp8 tile: {', '.join(f.fp8_odd)} not a multiple of 128"
    return "no throttling recorded: kernels fall short" if f.telemetry else "no telemetry recorded for this case"


def _row_key(r: dict[str, Any], name: str) -> str:
    cfg = r.get("config") or {}
    return f"{r.get('case')}|{name}|" + ",".join(f"{k}={cfg[k]}" for k in sorted(cfg) if k != "case")


def _window_power(results: list[dict[str, Any]]) -> dict[str, float]:
    """Mean power (W) over each step row's own power window, from its energy row (``*_energy_j_per_token`` with
    ``power_basis`` 'power window'), keyed like :func:`_row_key` of the step row."""
    out = {}
    for r in results:
        m = r["metric"]
        if m.endswith("_energy_j_per_token") and r.get("power_basis") == "power window" and r.get("power_w_mean"):
            out[_row_key(r, m.removesuffix("_energy_j_per_token"))] = float(r["power_w_mean"])
    return out


def ceiling_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per result that has a ceiling (:func:`gpumatch.usecases.stored_bench.load_run`'s ``data``): case, metric,
    config, ``achieved`` (FLOP/s or B/s), ``ceiling`` and its ``ceiling_basis``, ``ceiling_ratio``, for decode
    also ``copy_bytes_per_s`` (the run's best measured copy) and ``mbu_vs_copy``, and ``reason`` where the ratio
    is under :data:`LOW_RATIO`. Empty when the card is not in the catalog."""
    spec = _spec(data.get("manifest") or {})
    if spec is None:
        return []
    max_sm = (data.get("manifest") or {}).get("gpu.clocks_max_sm_mhz")
    max_sm_mhz = float(max_sm) if isinstance(max_sm, int | float) else None
    tele = {c.get("case_id"): c.get("telemetry") for c in data.get("cases", [])}
    copies = [float(r["measured"]) for r in data["results"] if r["metric"] == "copy_bytes_per_s"]
    copy = max(copies) if copies else None
    limit = (data.get("manifest") or {}).get("gpu.power_enforced_limit_w")
    steady = _window_power(data["results"])
    out = []
    for r in data["results"]:
        r = {**r, "power_limit_w": limit if isinstance(limit, int | float) else None,
             "power_window_w": steady.get(_row_key(r, r["metric"].removesuffix("_s").removesuffix("_step")))}
        got = _achieved(r, spec)
        if got is None:
            continue
        achieved, ceiling, basis = got
        row = {"case": r.get("case"), "metric": r["metric"], "config": r.get("config"), "achieved": achieved,
               "unit": "B/s" if basis.startswith("HBM") else "flop/s", "ceiling": ceiling,
               "ceiling_basis": f"{basis} ({spec.name} catalog)", "ceiling_ratio": achieved / ceiling, "reason": ""}
        if r["metric"] == "decode_step_s" and copy:
            row.update(copy_bytes_per_s=copy, mbu_vs_copy=achieved / copy)
        if row["ceiling_ratio"] < LOW_RATIO:
            r = {**r, **row}
            row["reason"] = reason(tele.get(r.get("case")), max_sm_mhz, r, spec)
            row["reason_detail"] = "; ".join(evidence(tele.get(r.get("case")), max_sm_mhz, r))
        out.append(row)
    return out
