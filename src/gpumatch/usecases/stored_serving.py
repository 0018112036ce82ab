"""Stored serving runs read back, read-only: ``gpumatch bench show`` of a ``serve`` run and the serving side of
``gpumatch bench compare``.

Every serving run — measured by ``gpumatch bench serve`` or imported by ``gpumatch runs import`` from vLLM, GuideLLM
or AIPerf — is of kind ``serve`` (:data:`gpumatch.metric_names.SERVE_KIND`); stores written before that hold imported
serving files as kind ``bench`` runs whose every result has ``config.case == "serve"``, and those read here too.
Result names pass through :func:`gpumatch.metric_names.canonical_metric` (the read-time alias map), so runs stored
under the older names (``ttft_median_s``, ``e2el_p99_s``, ``request_throughput``) read under the canonical ones.

A level of a gpumatch run comes back from its ``level`` event (its summary with vLLM names, prediction, self-test,
verdict) and its raw requests from the ``request`` events, so every figure can be recomputed from the records
(:func:`gpumatch.loadgen.metrics.summarize`). An imported run has no ``level`` event: its levels are built from
its results, grouped by load (:func:`gpumatch.usecases.stored_bench.load_key`), under vLLM's keys
(:func:`vllm_levels`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from gpumatch.metric_names import SERVE_KIND, canonical_metric, source_tool, vllm_key

SAMPLE_METRICS = ("ttft", "tpot", "itl", "e2e")
"""The per-request quantities whose raw samples (s) a serving run may hold, by canonical metric prefix."""


def load_serve_run(store: Path | str | None, run_id: int, raw: bool = False) -> dict[str, Any]:
    """``{"run", "manifest", "config", "source", "levels", "failures"}``; each level with ``requests`` when ``raw``
    (gpumatch runs; imported runs keep no per-request records in that shape)."""
    from gpumatch.usecases.stored import read_run

    data = read_run(store, run_id, "serve run", "'gpumatch bench list' lists the runs", is_serving)
    run = data["run"]
    levels = [dict(e["data"]) for e in data["events"] if e["kind"] == "level"]
    if raw:
        by_level: dict[int, list[dict[str, Any]]] = {}
        for e in data["events"]:
            if e["kind"] == "request":
                by_level.setdefault(int(e["data"]["level"]), []).append(e["data"])
        for lv in levels:
            lv["requests"] = by_level.get(int(lv["level"]), [])
    if not levels:
        levels = vllm_levels(data["results"])
    summary = run.get("summary") or {}
    manifest = run.get("manifest") or {}
    return {"run": {k: v for k, v in run.items() if k != "manifest"}, "manifest": manifest,
            "config": run.get("config") or {}, "source": source_tool(manifest), "levels": levels,
            "max_rate_meeting_slo": summary.get("max_rate_meeting_slo"),
            "server_gone": summary.get("server_gone"), "search_note": summary.get("search_note"),
            "warnings": summary.get("warnings") or [],
            "failures": [{"error_class": f["error_class"], "message": f["message"], "config": f.get("config")}
                         for f in data["failures"]]}


def is_serving_run(store: Path | str | None, run_id: int) -> bool:
    """Whether stored run ``run_id`` is a serving run (:func:`is_serving`)."""
    from gpumatch.store import open_existing_store

    with open_existing_store(store) as st:
        kind = st.run(run_id).kind
        if kind != "bench":
            return kind == SERVE_KIND
        results = [{"config": r.config} for r in st.results(run_id)]
    return is_serving({"kind": kind}, results)


def is_serving(run: dict[str, Any], results: list[dict[str, Any]]) -> bool:
    """A serving run: kind ``serve``, or (stores before one kind) a ``bench`` run imported from a serving tool,
    every result of which is a serving level (``config.case == "serve"``, or a ``bench serve`` level's ``mode``:
    :func:`gpumatch.usecases.stored_bench.serving_config`)."""
    from gpumatch.usecases.stored_bench import serving_config

    if run.get("kind") == SERVE_KIND:
        return True
    return run.get("kind") == "bench" and bool(results) and all(serving_config(r.get("config") or {})
                                                                for r in results)


def level_label(config: dict[str, Any]) -> str:
    """A load as a person reads it: ``c=8`` (closed loop, 8 clients), ``4/s`` (open loop, 4 requests/s),
    ``c=8 4/s`` (both), ``unlimited`` (neither: every request at once)."""
    from gpumatch.usecases.stored_bench import load_key

    parts = []
    for part in load_key(config).split():
        name, _, value = part.partition("=")
        parts.append(f"c={value}" if name == "max_concurrency" else f"{value}/s" if name == "request_rate"
                     else part)
    return " ".join(parts) or "unlimited"


def vllm_levels(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An imported run's levels in the shape of a ``bench serve`` level summary: one per load, its results under
    vLLM's keys and units (``ttft_p50_s`` 0.021 -> ``median_ttft_ms`` 21.0; ``request_throughput_per_s`` ->
    ``request_throughput``), ``completed``/``failed`` from ``completed_requests``/``failed_requests``."""
    from gpumatch.usecases.stored_bench import load_key

    by_load: dict[str, dict[str, Any]] = {}
    for r in results:
        config = r.get("config") or {}
        key = load_key(config)
        lv = by_load.setdefault(key, {"level": len(by_load), "label": level_label(config), "completed": None,
                                      "failed": None, "client_checked": False,
                                      **{k: config[k] for k in ("max_concurrency", "request_rate") if k in config}})
        metric = canonical_metric(str(r["metric"]))
        value = r.get("value")
        if metric in ("completed_requests", "failed_requests") and isinstance(value, int | float):
            lv[metric.split("_")[0]] = int(value)
        elif (vkey := vllm_key(metric)) is not None and isinstance(value, int | float):
            lv[vkey] = float(value) * (1000.0 if vkey.endswith("_ms") else 1.0)
    return list(by_load.values())


def serving_run(store: Path | str | None, run_id: int) -> dict[str, Any]:
    """A serving run for comparison: ``run``, ``manifest``, ``source`` (the tool), ``model``, ``results`` (one
    row per stored result: canonical ``metric``, ``value`` (SI), ``unit``, ``config``, ``load`` (its
    :func:`~gpumatch.usecases.stored_bench.load_key`), ``n``) and ``samples`` (load -> metric prefix -> raw per-request
    values in s, where the run keeps them: gpumatch's ``request`` events, vLLM's per-request arrays)."""
    from gpumatch.usecases.stored import read_run
    from gpumatch.usecases.stored_bench import load_key

    data = read_run(store, run_id, "serving run", "'gpumatch bench list' lists the runs; 'bench compare' compares "
                    "two bench runs or two serving runs", is_serving)
    run = data["run"]
    manifest = run.get("manifest") or {}
    rows = [{"metric": canonical_metric(str(r["metric"])), "value": r["value"], "unit": r["unit"],
             "config": r.get("config") or {}, "load": load_key(r.get("config") or {}),
             "n": (r.get("extra") or {}).get("n")} for r in data["results"]]
    return {"run": {k: v for k, v in run.items() if k != "manifest"}, "manifest": manifest,
            "source": source_tool(manifest), "model": _model(manifest, run.get("config") or {}),
            "results": rows, "samples": _samples(data["events"], run.get("config") or {})}


def _model(manifest: dict[str, Any], config: dict[str, Any]) -> str | None:
    """The served model: an imported file's ``model``, a gpumatch run's ``--model`` (its config)."""
    got = manifest.get("model") or config.get("model")
    return str(got) if got else None


def _samples(events: list[dict[str, Any]], run_config: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """load -> {ttft, tpot, itl, e2e} -> per-request seconds of the successful requests (ITL: every gap, pooled)."""
    from gpumatch.usecases.stored_bench import load_key

    level_cfg = {int(e["data"]["level"]): e["data"] for e in events if e["kind"] == "level" and "level" in e["data"]}
    out: dict[str, dict[str, list[float]]] = {}
    for e in events:
        d = e["data"]
        if e["kind"] == "request" and d.get("status", "ok") == "ok" and int(d.get("level", -1)) in level_cfg:
            _add_record(out.setdefault(load_key(level_cfg[int(d["level"])]), {}), d)
        elif e["kind"] == "requests":
            _add_arrays(out.setdefault(load_key(d.get("config") or run_config), {}), d)
    return out


def _add_record(into: dict[str, list[float]], d: dict[str, Any]) -> None:
    """One gpumatch request record's TTFT, TPOT, E2E and ITL gaps (:class:`~.metrics.RequestRecord`)."""
    from gpumatch.loadgen.metrics import RequestRecord

    rec = RequestRecord.from_dict(d)
    for name, value in (("ttft", rec.ttft_s), ("tpot", rec.tpot_s), ("e2e", rec.e2el_s)):
        if math.isfinite(value):
            into.setdefault(name, []).append(value)
    into.setdefault("itl", []).extend(rec.itl_s)


def _add_arrays(into: dict[str, list[float]], d: dict[str, Any]) -> None:
    """vLLM's per-request arrays (s; any of them may be absent: without ``--save-detailed`` newer releases keep only
    ``latencies``): a request vLLM counted as failed has TTFT and latency 0 and is left out; TPOT = (E2E - TTFT) /
    (output tokens - 1) as vLLM computes it."""
    ttfts, e2els = d.get("ttfts_s") or [], d.get("e2els_s") or []
    outs, itls = d.get("output_lens") or [], d.get("itls_s") or []
    for i in range(max(len(ttfts), len(e2els))):
        ttft = _positive(ttfts, i)
        e2e = _positive(e2els, i)
        if ttft is not None:
            into.setdefault("ttft", []).append(ttft)
            if i < len(itls) and isinstance(itls[i], list):
                into.setdefault("itl", []).extend(float(x) for x in itls[i] if isinstance(x, int | float))
        if e2e is not None:
            into.setdefault("e2e", []).append(e2e)
            n = outs[i] if i < len(outs) else None
            if ttft is not None and isinstance(n, int) and n > 1:
                into.setdefault("tpot", []).append((e2e - ttft) / (n - 1))


def _positive(values: list[Any], i: int) -> float | None:
    """``values[i]`` when it is a number above 0 (vLLM writes 0 for a failed request), else None."""
    v = values[i] if i < len(values) else None
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 else None
