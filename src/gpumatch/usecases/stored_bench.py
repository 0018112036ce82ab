"""Stored bench runs read back: ``bench list``, ``show``, ``compare`` and ``export`` as library calls.

Everything here opens the store read-only. A run's cases come from its ``case`` events, its measured values
from its results (``extra`` holds ``n``, the percentiles ``n`` supports, ``predicted`` / ``datasheet`` and
``ratio``), its failed and skipped cases from its failures.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from gpumatch.errors import InputError
from gpumatch.metric_names import canonical_metric
from gpumatch.outfiles import write_file
from gpumatch.stats import ratio_bootstrap

PERCENTILE_KEYS = ("p50_s", "p90_s", "p99_s")
WORK_KEYS = ("bytes_per_step", "flops_per_step", "power_w_mean", "power_basis")
"""A step's work (:mod:`gpumatch.bench.work`) and an energy row's mean power over its power window, carried into a
row for its ratio to the card's ceiling and the reason of a low one (:mod:`gpumatch.lab.ceiling`)."""


def list_bench_runs(store: Path | str | None, limit: int = 50) -> list[dict[str, Any]]:
    """Bench runs (``bench run``) and serve runs (``bench serve``), newest first (``[]`` when the default store
    does not exist yet)."""
    from gpumatch.store import list_runs

    _, runs = list_runs(store, "bench", limit)
    runs = sorted([*runs, *list_runs(store, "serve", limit)[1]], key=lambda r: r.run_id, reverse=True)[:limit]
    return [{"run_id": r.run_id, "kind": r.kind, "name": r.name, "status": r.status,
             "started_at": r.started_at[:19].replace("T", " "),
             "duration_s": r.duration_s, "results": r.n_results, "failures": r.n_failures,
             "manifest": r.manifest_sha256[:12]} for r in runs]


def run_kind(store: Path | str | None, run_id: int) -> str:
    """The kind of stored run ``run_id`` (``bench``, ``serve``, ...)."""
    from gpumatch.store import open_existing_store

    with open_existing_store(store) as st:
        return str(st.run(run_id).kind)


def load_run(store: Path | str | None, run_id: int, raw: bool = False) -> dict[str, Any]:
    """One bench run: ``run`` (the record), ``manifest``, ``cases``, ``results`` (flat rows), ``failures`` and
    ``ceilings`` (each result against the card's catalog ceiling: :func:`gpumatch.lab.ceiling.ceiling_rows`); with
    ``raw``, each row also carries its raw timings ``raw_s`` (seconds) when stored."""
    from gpumatch.usecases.stored import of_kind, read_run

    data = read_run(store, run_id, "bench run", "'gpumatch bench list' lists the bench runs", of_kind("bench"))
    run = data["run"]
    manifest = run.get("manifest") or {}
    out = {"run": {k: v for k, v in run.items() if k != "manifest"}, "manifest": manifest,
           "cases": [e["data"] for e in data["events"] if e["kind"] == "case"],
           "results": [result_row(r, manifest, raw) for r in data["results"]],
           "failures": [{"case": (f.get("config") or {}).get("case"), "error_class": f["error_class"],
                         "message": f["message"], "config": f.get("config"), "log_tail": f.get("log_excerpt", "")}
                        for f in data["failures"]]}
    from gpumatch.lab.ceiling import ceiling_rows

    out["ceilings"] = ceiling_rows(out)
    return out


SERVING_LOAD = ("max_concurrency", "request_rate")
"""What identifies a serving load level across tools: the concurrency cap (clients) and the request rate (1/s)."""


def serving_config(config: dict[str, Any]) -> bool:
    """A serving level: an imported tool's (``case: serve``) or gpumatch ``bench serve``'s (``mode`` concurrency or
    rate, :class:`gpumatch.loadgen.runner.Level`)."""
    return config.get("case") == "serve" or config.get("mode") in ("concurrency", "rate")


def load_key(config: dict[str, Any]) -> str:
    """A serving level as ``max_concurrency=8`` / ``request_rate=4``: only the load, numbers written alike
    (8 == 8.0; an infinite rate, vLLM's ``"inf"``, means no rate limit and is left out), plus ``phase=search``
    for gpumatch's search levels; labels, level indexes and each tool's own settings do not split levels."""
    parts = [f"{k}={float(v):g}" for k in SERVING_LOAD
             if isinstance(v := config.get(k), int | float) and not isinstance(v, bool) and math.isfinite(v)]
    if config.get("phase") == "search":
        parts.append("phase=search")
    return " ".join(parts)


def case_key(row: dict[str, Any]) -> str:
    """What a result measures, as one line: the case, the metric and its configuration. A serving level keys on
    its load only (:func:`load_key`), so a gpumatch ``bench serve`` level pairs with the same load imported from
    vLLM, GuideLLM or AIPerf (``gpumatch runs import``)."""
    config = row.get("config") or {}
    if serving_config(config):
        return f"serve {row['metric']} {load_key(config)}".strip()
    cfg = {k: v for k, v in config.items() if k not in ("case", "kind")}
    parts = " ".join(f"{k}={v}" for k, v in cfg.items() if not isinstance(v, dict | list))
    return f"{(row.get('config') or {}).get('case', '')} {row['metric']} {parts}".strip()


def _predict_now(r: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any]:
    """The prediction of a result stored without one (a run on a machine without the catalog's pydantic): made
    now from the manifest's card and model shapes, marked ``predicted_when: read``."""
    from gpumatch.lab.predict import annotate, catalog_gpu

    if manifest.get("device.kind") != "cuda":
        return {}
    gpu = catalog_gpu(manifest.get("gpu.name"))
    shape = manifest.get("model.train_architecture" if r["metric"].startswith("train") else "model.architecture")
    got = annotate(r["metric"], float(r["value"]), r.get("config") or {}, shape, gpu)
    return {**got, "predicted_when": "read"} if got else {}


def result_row(r: dict[str, Any], manifest: dict[str, Any] | None = None, raw: bool = False) -> dict[str, Any]:
    """A stored result as a flat row: measured, predicted (or the datasheet), ratio, n and percentiles."""
    extra = r.get("extra") or {}
    if manifest is not None and "ratio" not in extra:
        extra = {**extra, **_predict_now(r, manifest)}
    config = r.get("config") or {}
    # a serving result reads under its canonical name, whichever gpumatch version stored it (metric_names.py)
    metric = canonical_metric(r["metric"]) if serving_config(config) else r["metric"]
    row = {"case": config.get("case") or ("serve" if serving_config(config) else None), "metric": metric,
           "measured": r["value"], "unit": r["unit"], "predicted": extra.get("predicted"),
           "datasheet": extra.get("datasheet"), "ratio": extra.get("ratio"), "n": extra.get("n"),
           "config": r.get("config")}
    for key in (*PERCENTILE_KEYS, "p50_flops_per_s", "p90_flops_per_s", "p99_flops_per_s", *WORK_KEYS):
        if key in extra:
            row[key] = extra[key]
    row["key"] = case_key(row)
    if raw and isinstance(extra.get("raw_s"), list):
        row["raw_s"] = extra["raw_s"]
    return row


def compare_runs(store: Path | str | None, run_a: int, run_b: int, force: bool = False) -> dict[str, Any]:
    """Side by side per result: A, B and B/A; two serving runs (any tool's) go to
    :func:`gpumatch.usecases.compare_serving.compare_serving`, a serving run against a bench run is refused. Refuses
    (InputError, exit 2) runs whose manifests differ in a performance-relevant field
    (:data:`gpumatch.telemetry.manifest.PERFORMANCE_FIELDS`, older stored shapes read alike) unless ``force``;
    with ``force`` they are listed in ``differing_fields``."""
    from gpumatch.telemetry.manifest import differing_fields
    from gpumatch.usecases.stored_serving import is_serving_run

    serving = (is_serving_run(store, run_a), is_serving_run(store, run_b))
    if all(serving):
        from gpumatch.usecases.compare_serving import compare_serving

        return compare_serving(store, run_a, run_b, force)
    if any(serving):
        one, other = (run_a, run_b) if serving[0] else (run_b, run_a)
        raise InputError(f"run {one} is a serving run and run {other} is not",
                         "compare two bench runs, or two serving runs (bench serve or 'runs import')")
    a, b = load_run(store, run_a, raw=True), load_run(store, run_b, raw=True)
    differing = differing_fields(a["manifest"], b["manifest"])
    if differing and not force:
        raise InputError(f"runs {run_a} and {run_b} differ in performance-relevant manifest fields: "
                         f"{', '.join(differing)}", "compare runs of one setup, or add --force to compare anyway")
    by_b = {r["key"]: r for r in b["results"]}
    rows = []
    for r in a["results"]:
        other = by_b.pop(r["key"], None)
        rows.append(_pair(r, other))
    rows += [_pair(None, r) for r in by_b.values()]
    return {"run_a": run_a, "run_b": run_b, "differing_fields": differing, "forced": bool(differing and force),
            "rows": rows}


def _pair(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any]:
    some = a or b or {}
    va, vb = (a or {}).get("measured"), (b or {}).get("measured")
    ci = ratio_interval((a or {}).get("raw_s"), (b or {}).get("raw_s"), some.get("unit") == "s")
    return {"case": some.get("case"), "metric": some.get("metric"), "key": some.get("key"), "unit": some.get("unit"),
            "config": some.get("config"),
            "a": va, "b": vb, "b_over_a": vb / va if va and vb is not None else None,
            "n_a": (a or {}).get("n"), "n_b": (b or {}).get("n"),
            "b_over_a_low": ci[0] if ci else None, "b_over_a_high": ci[1] if ci else None,
            "significant": (not ci[0] <= 1.0 <= ci[1]) if ci else None}


MIN_BOOTSTRAP_SAMPLES = 5
CONFIDENCE = 0.95


def ratio_interval(raw_a: Any, raw_b: Any, is_time: bool, seed: int = 0) -> tuple[float, float] | None:
    """95% bootstrap interval of B/A from the raw timings of both runs (seconds; BCa, 2000 resamples, each run
    resampled on its own: :func:`scipy.stats.bootstrap`). The statistic is the ratio of the medians: B/A of a
    time metric is median(B) / median(A); of a rate computed from those timings (flop/s, B/s) median(A) /
    median(B). None with fewer than :data:`MIN_BOOTSTRAP_SAMPLES` timings on a side (or without scipy)."""
    if not (isinstance(raw_a, list) and isinstance(raw_b, list)) or min(len(raw_a), len(raw_b)) < MIN_BOOTSTRAP_SAMPLES:
        return None
    import numpy as np

    def stat(x: Any, y: Any, axis: int = -1) -> Any:
        ma, mb = np.median(x, axis=axis), np.median(y, axis=axis)
        return mb / ma if is_time else ma / mb

    return ratio_bootstrap(raw_a, raw_b, stat, seed=seed, confidence=CONFIDENCE)


def export_run(store: Path | str | None, run_id: int, out: Path, force: bool = False) -> Path:
    """Write the run (:func:`load_run`) as JSON to ``out``; refuses an existing file unless ``force``."""
    if out.exists() and not force:
        raise InputError(f"{out} exists", "give another --out or add --force to overwrite it")
    if not out.parent.is_dir():
        raise InputError(f"no folder {out.parent}", "create it first")
    data = load_run(store, run_id)
    text = json.dumps({"schema": "gpumatch.bench.run/1", **data}, indent=1, default=str) + "\n"
    return write_file(out, text, force=force, hint="give another --out or add --force to overwrite it")
