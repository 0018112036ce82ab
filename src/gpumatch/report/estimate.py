"""The views of ``gpumatch estimate``: one estimate's fields, its memory curve, a comparison over GPUs.

The input is :meth:`gpumatch.estimate.Estimate.to_dict` (the JSON contract, SI units); nothing here computes a
new figure. ``human=True`` (the table) shows quantities in human units ("36.2 GiB", "18.4 ms", "445 W", "$3.38");
``human=False`` is the CSV view, the figures as before (GiB with two decimals, seconds and watts as numbers), so
a spreadsheet reads the same columns as it always did. JSON carries every field either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpumatch.estimate.query import EstimateRun
from gpumatch.report import human as hu
from gpumatch.report.estimate_compare import comparison_csv_rows, comparison_text
from gpumatch.report.intervals import basis_rows, span
from gpumatch.report.render import key_values, to_csv, to_json, to_table
from gpumatch.units import GIB
from gpumatch.vocab import TRAINING_TASKS

TRAINING = TRAINING_TASKS
MEMORY_ITEMS = ("weights", "gradients", "optimizer", "activations", "kv_cache", "overhead", "total", "capacity")


def _gib2(v: float) -> str:
    return f"{v / GIB:.2f} GiB"


def _plain(v: Any) -> Any:
    return f"{v:.4g}" if isinstance(v, float) else v


def _num(v: float | None) -> str:
    """A count or rate for the table; None (no finite value: an unstable open-loop queue) as "unbounded"."""
    if v is None:
        return "unbounded"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.4g}"


_HUMAN: dict[str, Callable[[Any], str]] = {
    "tpot_s": hu.seconds, "e2e_s": hu.seconds, "step_s": hu.seconds, "mfu": hu.percent, "power_w": hu.watts,
    "energy_j_per_token": lambda v: f"{v:.3g} J", "usd_per_million_tokens": hu.usd,
    "scaling_efficiency": hu.percent, "effective_gpus": lambda v: f"{v:.3g}",
    "run_hours": lambda v: hu.seconds(v * 3600.0), "energy_kwh_per_run": lambda v: f"{v:,.3g} kWh",
    "usd_per_run": hu.usd,
}
"""The table's unit for each figure of an estimate (the CSV keeps ``_plain``)."""


def field_values(d: dict[str, Any], human: bool = True) -> dict[str, Any]:
    """The estimate as ordered field/value pairs: fit and margin, the request, memory per item, then (only for a
    configuration that fits: one that does not would not run) times, throughputs, power and cost, the price,
    the uncertainty, the basis and the warnings."""
    gib = hu.gib if human else _gib2
    mem = d["memory"]
    pct = hu.percent(d["margin_fraction"]) if human else f"{d['margin_fraction'] * 100:.1f}%"
    view: dict[str, Any] = {
        "fits": d["fits"],
        "margin": f"{gib(d['margin_bytes'])} ({pct} of capacity)",
        "gpu": f"{d['count']} × {d['gpu']}",
        "model": d["model"],
        "task": d["task"],
        "layout": " ".join(f"{k}={v}" for k, v in d["layout"].items() if v is not None),
    }
    prec = d.get("precision") or {}
    if prec.get("kv") and d["task"] not in TRAINING:
        kept = prec.get("kept_16_bit") or []
        weights = f"{prec['weights']} ({', '.join(kept)} 16-bit)" if kept else prec["weights"]
        view["precision"] = f"weights {weights}, KV cache {prec['kv_basis']}"
    for k in MEMORY_ITEMS:
        view[f"memory.{k}"] = gib(mem[f"{k}_bytes"])
    if human:
        view["memory.total"] = span(gib, mem["total_bytes"], (d.get("intervals") or {}).get("total_bytes"))
    if mem.get("peak_rule"):
        view["memory.peak_rule"] = mem["peak_rule"]
    if not d["fits"]:
        view["speed and cost"] = "does not fit: no speed, power or cost (it would not run; see the warning)"
    view.update(_run_rows(d, human))
    if d.get("price"):
        p = d["price"]
        view["price"] = (p.get("choice") or {}).get("text") or (
            f"{p['kind']} ${p['usd_per_gpu_hour']:.2f}/GPU-h ({p['provider']}, {p['date']})")
    if human and d.get("intervals"):
        view.update(basis_rows(d, INTERVAL_ROWS))
    elif d.get("uncertainty"):
        u = d["uncertainty"]
        view["uncertainty"] = f"±{u['time_fraction'] * 100:.0f}% on times ({u['basis']})"
    view["basis"] = d["basis"]
    for i, w in enumerate(d["warnings"]):
        view[f"warning {i + 1}"] = w
    return view


def _throughput_rows(d: dict[str, Any]) -> dict[str, str]:
    """Each throughput with what it counts (generated or trained tokens; all replicas or one; prefill or not)."""
    dp = d["layout"]["dp"]
    if d["task"] in TRAINING:
        ranks = f"all {dp} DP ranks" if dp > 1 else "one GPU" if d["count"] == 1 else "the whole model-parallel group"
        return {"tokens_per_s": f"{_num(d['tokens_per_s'])} trained tokens/s ({ranks})"}
    where = f"all {dp} replicas" if dp > 1 else "one replica"
    if _engine_serving(d) and (d.get("serving") or {}).get("replay") is not None:
        rows = {"tokens_per_s": f"{_num(d['tokens_per_s'])} generated tokens/s ({where}, mean over the replayed "
                                "benchmark)"}
        decode = f"from decode passes at the steady state ({where}; not the benchmark's figure)"
    elif _engine_serving(d):  # steady state: both per second of serving; decode lacks each request's first token
        rows = {"tokens_per_s": f"{_num(d['tokens_per_s'])} generated tokens/s ({where}, requests/s × output "
                                "tokens)"}
        decode = f"from decode passes ({where}; the rest are first tokens, from each request's prefill)"
    else:
        rows = {"tokens_per_s": f"{_num(d['tokens_per_s'])} generated tokens/s ({where}, prefill time included)"}
        decode = f"in decode steps alone ({where}, no prefill time)"
    if dp > 1:
        rows["tokens_per_s_per_replica"] = f"{_num(d['tokens_per_s_per_replica'])} generated tokens/s per replica"
    rows["decode_tokens_per_s"] = f"{_num(d['decode_tokens_per_s'])} generated tokens/s {decode}"
    rows["prefill_tokens_per_s"] = f"{_num(d['prefill_tokens_per_s'])} prompt tokens/s during prefill ({where})"
    return rows


def _engine_serving(d: dict[str, Any]) -> bool:
    """Whether ``d`` holds a serving engine's steady state (``--task serve`` with vllm, sglang, trtllm), whose
    TTFT and throughputs are defined per second of serving (docs/estimators.md "Definitions")."""
    engine = (d.get("serving") or {}).get("engine")
    return engine is not None and engine != "static"


def _engine_line(sv: dict[str, Any]) -> str:
    """The serving engine and the steady state it settles in (the JSON ``serving`` object, in one line)."""
    rp = sv.get("replay")
    arrivals = f", {rp['num_prompts']} arrivals replayed pass by pass" if rp is not None else ""
    mode = (f"open loop, {sv['request_rate_per_s']:g} requests/s{arrivals}" if sv["mode"] != "closed-loop"
            else f"closed loop, {sv['concurrency_per_replica']:g} in flight per replica" if rp is None
            else f"benchmark of {rp['num_prompts']} requests per replica, {sv['concurrency_per_replica']:g} in "
                 f"flight, replayed pass by pass")
    limits = [w for w, on in (("KV/sequence cap admits fewer: queueing", sv["admission_limited"]),
                              ("prefill-bound", sv["prefill_limited"]),
                              ("unstable in the long run" if rp is not None else "unstable", not sv["stable"])) if on]
    return (f"{sv['engine']} ({mode}; running decode batch {sv['mean_decode_batch']:.1f}, "
            f"{sv['prefill_tokens_per_pass']:.0f} prompt tokens/pass of a {sv['token_budget']} budget"
            + (f"; {', '.join(limits)}" if limits else "") + ")")


def _ttft_basis(sv: dict[str, Any], secs: Callable[[Any], str]) -> str:
    """What the serving TTFT is: the replayed benchmark's mean (its first burst and p99 named) or the steady
    state's, and whether the engine profile's front-end cost per request is in it."""
    rp = sv.get("replay")
    front = sv.get("frontend_s") or 0.0
    tail = f"engine passes + front end {secs(front)}" if front > 0 else "engine passes only"
    if rp is None:
        return f"mean, at steady state: pass in flight, own prefill, queueing; {tail}"
    burst = f", first burst {secs(rp['first_wave_ttft_s'])}" if sv["mode"] == "closed-loop" else ""  # open: no burst
    return (f"mean of the benchmark; p50 {secs(rp['ttft_p50_s'])}, p99 {secs(rp['ttft_p99_s'])}{burst}; steady "
            f"state {secs(sv['steady_state_ttft_s'])}; {tail}")


def _run_rows(d: dict[str, Any], human: bool) -> dict[str, Any]:
    """Times, throughputs, power and cost: only for a configuration that fits (one that does not would not run)."""
    if not d["fits"]:
        return {}
    ivs = (d.get("intervals") or {}) if human else {}
    secs: Callable[[Any], str] = hu.seconds if human else (lambda v: f"{v:.4g}")
    view: dict[str, Any] = {}
    sv = d.get("serving") or {}
    engine = sv.get("engine")
    if _engine_serving(d):
        view["engine"] = _engine_line(sv)
        view["ttft_s"] = (f"{span(secs, d['ttft_s'], ivs.get('ttft_s'))} ({_ttft_basis(sv, secs)})"
                          if d.get("ttft_s") is not None else "unbounded: the queue grows (see the warning)")
        view["requests_per_s"] = f"{_num(d['requests_per_s'])} requests/s"
    elif d.get("ttft_s") is not None:
        if engine == "static":
            view["engine"] = "static (static batch: the whole batch prefills, then decodes)"
        view["ttft_s"] = f"{span(secs, d['ttft_s'], ivs.get('ttft_s'))} (one prompt alone, no queueing)"
        view["prefill_s"] = (f"{span(secs, d['prefill_s'], ivs.get('prefill_s'))} (a replica's whole batch of "
                             f"{d['layout']['seqs_per_replica']})")
    for k in ("tpot_s", "e2e_s", "step_s"):
        if d.get(k) is not None:
            view[k] = span(_HUMAN[k], d[k], ivs.get(k)) if human else _plain(d[k])
    if d.get("tokens_per_s") is not None:
        view.update(_throughput_rows(d))
    for k in ("mfu", "bound", "power_w", "energy_j_per_token", "usd_per_million_tokens", "scaling_efficiency",
              "effective_gpus", "run_hours", "energy_kwh_per_run", "usd_per_run"):
        if k in d and d[k] is not None:
            v = d[k]
            view[k] = _HUMAN[k](v) if human and k in _HUMAN and isinstance(v, int | float) else _plain(v)
    return view


INTERVAL_ROWS = ("ttft_s", "prefill_s", "tpot_s", "e2e_s", "step_s", "total_bytes")
"""The figures the table shows with their interval (JSON has every figure's)."""

CURVE_TITLE = "Memory per GPU over batch × sequence length"


def curve_rows(rows: list[dict[str, Any]], human: bool = True) -> list[dict[str, Any]]:
    """The memory curve as table rows: batch, sequence length, activations, KV cache, total, fits."""
    gib = hu.gib if human else _gib2
    return [{"batch": r["batch"], "seq": r["seq"], "activations": gib(r["activations_bytes"]),
             "kv_cache": gib(r["kv_cache_bytes"]), "total": gib(r["total_bytes"]), "fits": r["fits"]} for r in rows]


def estimate_output(run: EstimateRun, fmt: str) -> list[str]:
    """The text blocks ``gpumatch estimate`` prints, in order, for ``fmt`` (table, json or csv).

    One GPU: its field/value view (JSON: the whole result, with ``memory_curve`` when asked for), then the
    memory curve (table/CSV). Several GPUs: the comparison (JSON: a list of estimates; table/CSV: a row per GPU).
    """
    results = [e.to_dict() for e in run.estimates]
    if len(results) > 1:
        if fmt == "json":
            return [to_json(results)]
        return [to_csv(comparison_csv_rows(results)) if fmt == "csv" else comparison_text(results)]
    d = results[0]
    if run.with_curve:
        d["memory_curve"] = run.curve
    if fmt == "json":
        return [to_json(d)]
    human = fmt == "table"  # CSV keeps its figures as they were
    view = field_values(d, human)
    if fmt == "csv":
        out = [to_csv([{"field": k, "value": v} for k, v in view.items()], ["field", "value"])]
    else:
        out = [key_values(view)]
    if run.with_curve:
        rows = curve_rows(run.curve, human)
        out.append(to_csv(rows, None) if fmt == "csv" else to_table(rows, None, CURVE_TITLE))
    return out
