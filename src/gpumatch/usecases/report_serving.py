"""The serving part of ``gpumatch report``: stored serve runs as load levels, ready to draw (no drawing here).

A serve run is a gpumatch ``bench serve`` run (kind ``serve``) or an imported vLLM / GuideLLM / AIPerf file (today
kind ``bench`` with ``config.case = "serve"``). Each stored result belongs to one load level (its ``config``: the
concurrency or the request rate); :func:`serve_runs` groups them into levels with the figures a lab lead reads:

- TTFT and TPOT at p50 and p99 (s), output tokens/s, requests/s, requests completed and failed, requests in
  flight (mean and peak, where the tool stored them), energy per output token gross and idle-subtracted (J/token,
  where the server published GPU telemetry: :mod:`gpumatch.loadgen.energy`);
- the estimator's prediction stored beside the measurement (``extra.predicted`` of gpumatch's results: the
  mean TTFT, mean TPOT, output and request throughput of the engine profile, :mod:`gpumatch.loadgen.predict`)
  and its error ``(predicted - measured) / measured`` in percent;
- whether the level meets the SLO (:func:`slo_for`): its p99 TTFT and p99 TPOT at or under the thresholds.

Names: every figure is read through :func:`level_value`, the one place that knows the names the tools store a
figure under (``ttft_median_s`` from ``bench serve``, ``ttft_p50_s`` from imports, the vLLM keys of the level
event via :func:`gpumatch.metric_names.si_name`), so a rename touches :data:`ALIASES` only.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from gpumatch.metric_names import canonical_metric

ALIASES: dict[str, tuple[str, ...]] = {
    "mean_concurrent_requests": ("mean_in_flight_requests",),
    "peak_concurrent_requests": ("max_in_flight_requests",),
    "energy_per_output_token_j": ("output_energy_j_per_token",),
    "energy_net_per_output_token_j": ("output_energy_net_j_per_token",),
}
"""The page's name of a figure and the names it is stored under besides that: the load generator's in-flight
keys and the canonical energy results. Older stored names need no entry (:func:`level_value` reads them through
:func:`gpumatch.metric_names.canonical_metric`), nor do vLLM's keys (level events pass through ``si_name``)."""

PREDICTED = ("ttft_mean_s", "tpot_mean_s", "output_tokens_per_s", "request_throughput_per_s")
"""Predicted figures: the stored results (canonical names) whose ``extra.predicted`` holds gpumatch's
prediction."""

DEFAULT_SLO = {"ttft_p99_s": 0.450, "tpot_p99_s": 0.040}
DEFAULT_SLO_SOURCE = ("default: the MLPerf Inference v5.0 interactive LLM limits (p99 TTFT 450 ms, p99 TPOT "
                      "40 ms; mlcommons.org/2025/04/llm-inference-v5)")
"""The SLO when neither ``--slo-ttft-ms``/``--slo-tpot-ms`` nor a run's settings give one."""

_KNOWN = {*ALIASES, *(a for names in ALIASES.values() for a in names)}
_NOT_LOAD = ("case", "phase", "level", "label", "endpoint_type", "backend", "num_prompts", "burstiness", "arrival",
             "request_goodput_config", "error_class", "mode")


def level_value(values: dict[str, Any], name: str) -> float | None:
    """The figure ``name`` (canonical, SI) of a level's ``values``, under whichever name it was stored; None when
    absent or not a finite number."""
    older = [k for k in values if k != name and canonical_metric(k) == name]  # older stores' names
    for key in (name, *ALIASES.get(name, ()), *older):
        v = values.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


def is_serve_run(data: dict[str, Any]) -> bool:
    """A serving run, by the one rule of :func:`gpumatch.usecases.stored_serving.is_serving` (kind ``serve``, or an
    older store's ``bench`` run whose every result is a serving level)."""
    from gpumatch.usecases.stored_serving import is_serving

    return is_serving(data["run"], data.get("results") or [])


def _number(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and x > 0 else None


def load_of(config: dict[str, Any]) -> tuple[str, float | None, str]:
    """(mode, load, label) of a level's config: ``concurrency`` (closed loop: a finite request count in flight,
    the request rate unbounded) or ``rate`` (open loop: requests/s), ``other`` when it names neither (GuideLLM's
    ``throughput`` sweep)."""
    mode = config.get("mode")
    rate, conc = _number(config.get("request_rate")), _number(config.get("max_concurrency"))
    if mode == "rate" or (mode is None and rate is not None):
        label = config.get("label") or f"{rate:g}/s"
        return "rate", rate, str(label)
    if conc is not None:
        return "concurrency", conc, str(config.get("label") or f"c={conc:g}")
    return "other", None, str(config.get("label") or config.get("strategy") or "level")


def _level_key(config: dict[str, Any]) -> str:
    if "level" in config:
        return f"level {config['level']}"
    return json.dumps({k: v for k, v in config.items() if k not in _NOT_LOAD}, sort_keys=True, default=str)


def _event_values(event: dict[str, Any]) -> dict[str, Any]:
    """A gpumatch ``level`` event's summary (vLLM keys) under gpumatch's SI names, plus its own SI keys."""
    from gpumatch.metric_names import si_name

    out: dict[str, Any] = {}
    for key, v in event.items():
        mapped = si_name(key)
        if mapped is not None and isinstance(v, int | float):
            out[mapped[0]] = v * mapped[2]
        elif key in _KNOWN:
            out[key] = v
    out.setdefault("completed_requests", event.get("completed"))
    out.setdefault("failed_requests", event.get("failed"))
    return out


def group_levels(results: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's levels: per load config, its values (results first, then the level event's summary) and the
    predictions stored beside them."""
    by: dict[str, dict[str, Any]] = {}
    for r in results:
        cfg = r.get("config") or {}
        if cfg.get("error_class"):
            continue
        lv = by.setdefault(_level_key(cfg), {"config": cfg, "values": {}, "predicted": {}})
        lv["values"][r["metric"]] = r["measured"]
        predicted = r.get("predicted", (r.get("extra") or {}).get("predicted"))
        if predicted is not None:
            lv["predicted"][r["metric"]] = predicted
    for e in events:
        lv = by.setdefault(f"level {e.get('level')}", {"config": e, "values": {}, "predicted": {}})
        for k, v in _event_values(e).items():
            lv["values"].setdefault(k, v)
    return list(by.values())


def _err_pct(predicted: float | None, measured: float | None) -> float | None:
    """The prediction's error against the measurement: (predicted - measured) / measured x 100."""
    if predicted is None or not measured:
        return None
    return (predicted - measured) / measured * 100.0


def level_row(raw: dict[str, Any], slo: dict[str, Any]) -> dict[str, Any]:
    """One level: load, counts, latencies (s), rates, in flight, energy, prediction and error %, SLO verdict."""
    v = raw["values"]
    mode, load, label = load_of(raw["config"])
    row: dict[str, Any] = {"label": label, "mode": mode, "load": load}
    for name in ("completed_requests", "failed_requests", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s",
                 "ttft_mean_s", "tpot_mean_s", "output_tokens_per_s", "request_throughput_per_s",
                 "mean_concurrent_requests", "peak_concurrent_requests", "energy_per_output_token_j",
                 "energy_net_per_output_token_j", "power_w_mean"):
        row[name] = level_value(v, name)
    predicted = {k: level_value(raw["predicted"], k) for k in PREDICTED}
    row["predicted"] = {k: x for k, x in predicted.items() if x is not None}
    row["error_pct"] = {k: _err_pct(x, row[k]) for k, x in row["predicted"].items()}
    row["meets_slo"] = meets(row, slo)
    return row


def meets(row: dict[str, Any], slo: dict[str, Any]) -> bool | None:
    """True when every SLO threshold given holds at p99 and no request failed; None when a p99 it needs is
    missing (fewer than 100 requests: :func:`gpumatch.stats.min_samples`)."""
    checks = []
    for key in ("ttft_p99_s", "tpot_p99_s"):
        if slo.get(key) is None:
            continue
        if row.get(key) is None:
            return None
        checks.append(row[key] <= slo[key])
    return bool(checks) and all(checks) and not row.get("failed_requests")


_ORDER = {"concurrency": 0, "rate": 1, "other": 2}


def slo_for(runs: list[dict[str, Any]], ttft_ms: float | None, tpot_ms: float | None) -> dict[str, Any]:
    """The page's SLO: the flags, else the first serve run's settings (``bench serve --slo-ttft-ms``...), else
    :data:`DEFAULT_SLO`; with the sentence that says where it came from."""
    if ttft_ms is not None or tpot_ms is not None:
        return {"ttft_p99_s": None if ttft_ms is None else ttft_ms / 1e3,
                "tpot_p99_s": None if tpot_ms is None else tpot_ms / 1e3,
                "source": "given with --slo-ttft-ms/--slo-tpot-ms"}
    for r in runs:
        s = (r["run"].get("config") or {}).get("slo") or {}
        if s.get("ttft_ms") is not None or s.get("tpot_ms") is not None:
            return {"ttft_p99_s": None if s.get("ttft_ms") is None else s["ttft_ms"] / 1e3,
                    "tpot_p99_s": None if s.get("tpot_ms") is None else s["tpot_ms"] / 1e3,
                    "source": f"from run {r['run']['run_id']}'s settings: bench serve --slo-*-ms"}
    return {**DEFAULT_SLO, "source": DEFAULT_SLO_SOURCE}


def card_of(data: dict[str, Any]) -> str:
    """The card a run measured: the catalog name of the manifest's (or the run settings') card, else the name as
    recorded, else ``unknown card``; with ``× N`` for more than one GPU."""
    from gpumatch.lab.predict import catalog_gpu

    m, cfg = data.get("manifest") or {}, data["run"].get("config") or {}
    raw = m.get("gpu.name") or cfg.get("gpu") or (m.get("server") or {}).get("gpu") or m.get("device.name")
    name = catalog_gpu(raw) or raw or "unknown card"
    count = m.get("gpu.count")
    return f"{name} × {count}" if isinstance(count, int) and count > 1 else str(name)


def run_facts(data: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any]:
    """Who measured what: card, model, tool, and how the prediction was made."""
    m, cfg = data.get("manifest") or {}, data["run"].get("config") or {}
    source = m.get("source") or {}
    tool = source.get("tool") or ("gpumatch bench serve" if data["run"].get("kind") == "serve" else "imported")
    if source.get("tool_version"):
        tool += f" {source['tool_version']}"
    pred = next((e.get("predicted_by") for e in events if e.get("predicted_by")), None)
    note = next((e.get("prediction_note") for e in events if e.get("prediction_note")), None)
    return {"card": card_of(data), "model": m.get("model") or cfg.get("model") or "unknown model", "tool": tool,
            "predicted_by": pred, "prediction_note": note,
            "basis": next((e.get("basis") for e in events if e.get("basis")), None)}


def _serve_run(data: dict[str, Any], events: list[dict[str, Any]], slo: dict[str, Any]) -> dict[str, Any]:
    rows = [level_row(raw, slo) for raw in group_levels(data["results"], events)]
    rows.sort(key=lambda r: (_ORDER[r["mode"]], r["load"] or 0.0, r["label"]))
    run = data["run"]
    return {"run_id": run["run_id"], "name": run.get("name"), **run_facts(data, events), "levels": rows}


def serving_section(store: Path | None, runs: list[dict[str, Any]], slo_ttft_ms: float | None = None,
                    slo_tpot_ms: float | None = None) -> dict[str, Any] | None:
    """The page's serving part for the serve runs among ``runs`` (:func:`gpumatch.usecases.report.run_section`
    dicts), None without one: ``{"slo", "runs": [{run_id, card, model, tool, predicted_by, levels}], "modes",
    "energy", "tails"}`` (``energy``: a level has J/token; ``tails``: a level has a p99)."""
    serve = [r for r in runs if is_serve_run(r)]
    if not serve:
        return None
    slo = slo_for(serve, slo_ttft_ms, slo_tpot_ms)
    out = [_serve_run(r, _level_events(store, r), slo) for r in serve]
    modes = sorted({lv["mode"] for r in out for lv in r["levels"] if lv["mode"] != "other"}, key=_ORDER.__getitem__)
    tails = any(lv["ttft_p99_s"] is not None or lv["tpot_p99_s"] is not None for r in out for lv in r["levels"])
    return {"slo": slo, "runs": out, "modes": modes, "tails": tails,
            "energy": any(lv["energy_per_output_token_j"] is not None for r in out for lv in r["levels"])}


def _level_events(store: Path | None, data: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``level`` events of a gpumatch serve run (its summaries, predictions, verdicts); none for imports."""
    if data["run"].get("kind") != "serve":
        return []
    from gpumatch.store import open_existing_store

    with open_existing_store(store) as st:
        events = st.export_run(int(data["run"]["run_id"]))["events"]
    return [dict(e["data"]) for e in events if e["kind"] == "level"]
