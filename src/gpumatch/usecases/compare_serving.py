"""Two serving runs compared level by level (``gpumatch bench compare A B`` when both are serving runs).

Either run may come from any tool: gpumatch ``bench serve``, or a ``vllm bench serve``, GuideLLM or AIPerf file
imported by ``gpumatch runs import`` (:func:`gpumatch.usecases.stored_serving.serving_run`: one kind, one naming).
Levels pair by load only (:func:`gpumatch.usecases.stored_bench.load_key`: the concurrency cap and/or the request rate);
within a level, results pair by canonical metric name. Each row gives A, B and B/A; where both runs keep the raw
per-request samples of the metric (gpumatch's request records, vLLM's per-request arrays; GuideLLM and AIPerf
summaries keep none), the 95% interval of B/A is a bootstrap of the ratio of the same statistic (mean, median or
percentile) of the two sets of samples (:func:`ratio_interval`), ``significant`` when it excludes 1.

The manifests of two tools' runs share few fields: the comparison is refused (InputError, exit 2) only when a
performance-relevant field (:data:`gpumatch.telemetry.manifest.PERFORMANCE_FIELDS`) or the model is recorded in both
runs and differs, unless ``force``; fields recorded on one side only are listed in ``unrecorded``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gpumatch.errors import InputError
from gpumatch.metric_names import SERVING_LABELS
from gpumatch.stats import METHOD, min_samples, ratio_bootstrap

_STAT = re.compile(r"^(ttft|tpot|itl|e2e)_(mean|p\d+(?:_\d+)?)_s$")

def compare_serving(store: Path | str | None, run_a: int, run_b: int, force: bool = False) -> dict[str, Any]:
    """``{"kind": "serve", "run_a", "run_b", "source_a", "source_b", "model_a", "model_b", "differing_fields",
    "unrecorded", "forced", "levels_only_in_a", "levels_only_in_b", "rows"}``; each row: ``load``, ``level`` (its
    label), ``metric``, ``quantity``, ``unit``, ``a``, ``b``, ``b_over_a``, ``n_a``, ``n_b``, ``b_over_a_low``,
    ``b_over_a_high``, ``significant``, ``samples_a``, ``samples_b`` (raw samples behind the interval)."""
    from gpumatch.usecases.stored_serving import level_label, serving_run

    a, b = serving_run(store, run_a), serving_run(store, run_b)
    differing, unrecorded = _manifest_check(a, b)
    if differing and not force:
        raise InputError(f"runs {run_a} and {run_b} differ in {', '.join(differing)}",
                         "compare runs of one setup, or add --force to compare anyway")
    rows = _rows(a, b)
    labels = {r["load"]: level_label(r["config"]) for r in a["results"] + b["results"]}
    loads_a = {r["load"] for r in a["results"]}
    loads_b = {r["load"] for r in b["results"]}
    return {"kind": "serve", "run_a": run_a, "run_b": run_b, "source_a": a["source"], "source_b": b["source"],
            "model_a": a["model"], "model_b": b["model"], "differing_fields": differing, "unrecorded": unrecorded,
            "forced": bool(differing and force),
            "levels_only_in_a": [labels[x] for x in sorted(loads_a - loads_b)],
            "levels_only_in_b": [labels[x] for x in sorted(loads_b - loads_a)], "rows": rows}


def _manifest_check(a: dict[str, Any], b: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(fields recorded in both runs that differ, fields recorded in one run only): the performance fields of the
    manifests and the model."""
    from gpumatch.telemetry.manifest import PERFORMANCE_FIELDS, compare_manifests

    diff = compare_manifests({**a["manifest"], "model": a["model"]}, {**b["manifest"], "model": b["model"]},
                             (*PERFORMANCE_FIELDS, "model"))
    return list(diff.differing), list(diff.unrecorded)


def _rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (load, canonical metric) in either run: the shared ones first, in the order of
    :data:`~gpumatch.metric_names.SERVING_LABELS` within each load."""
    from gpumatch.usecases.stored_serving import level_label

    by_a = {(r["load"], r["metric"]): r for r in a["results"]}
    by_b = {(r["load"], r["metric"]): r for r in b["results"]}
    order = {m: i for i, m in enumerate(SERVING_LABELS)}
    keys = sorted(set(by_a) | set(by_b), key=lambda k: (k[0], order.get(k[1], len(order)), k[1]))
    rows = []
    for key in keys:
        ra, rb = by_a.get(key), by_b.get(key)
        some = ra or rb or {}
        rows.append(_pair(key[0], level_label(some["config"]), key[1], ra, rb, a["samples"], b["samples"]))
    return sorted(rows, key=lambda r: r["a"] is None or r["b"] is None)


def _pair(load: str, level: str, metric: str, ra: dict[str, Any] | None, rb: dict[str, Any] | None,
          samples_a: dict[str, dict[str, list[float]]], samples_b: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    va, vb = (ra or {}).get("value"), (rb or {}).get("value")
    raw_a, raw_b = _raw(samples_a, load, metric), _raw(samples_b, load, metric)
    ci = ratio_interval(raw_a, raw_b, metric) if ra and rb else None
    return {"key": f"serve {metric} {load}".strip(), "load": load, "level": level, "metric": metric,
            "quantity": SERVING_LABELS.get(metric, metric),
            "unit": (ra or rb or {}).get("unit"), "config": (ra or rb or {}).get("config"),
            "case": "serve", "a": va, "b": vb,
            "b_over_a": vb / va if isinstance(va, int | float) and va and isinstance(vb, int | float) else None,
            "n_a": (ra or {}).get("n"), "n_b": (rb or {}).get("n"),
            "b_over_a_low": ci[0] if ci else None, "b_over_a_high": ci[1] if ci else None,
            "significant": (not ci[0] <= 1.0 <= ci[1]) if ci else None,
            "samples_a": len(raw_a) if raw_a else 0, "samples_b": len(raw_b) if raw_b else 0}


def _raw(samples: dict[str, dict[str, list[float]]], load: str, metric: str) -> list[float] | None:
    m = _STAT.match(metric)
    return (samples.get(load) or {}).get(m.group(1)) if m else None


def statistic_of(metric: str) -> tuple[str, float] | None:
    """The statistic a canonical latency name states: ``("mean", 0)`` or ``("percentile", q)`` (``p50`` -> 50,
    ``p99_9`` -> 99.9); None for a name without one (a rate, a count, a standard deviation)."""
    m = _STAT.match(metric)
    if m is None:
        return None
    if m.group(2) == "mean":
        return "mean", 0.0
    return "percentile", float(m.group(2)[1:].replace("_", "."))


def enough_samples(n: int, metric: str) -> bool:
    """Enough samples for an interval of ``metric``'s statistic: at least
    :data:`gpumatch.usecases.stored_bench.MIN_BOOTSTRAP_SAMPLES`, and for the q-th percentile at least
    ``1 / (1 - q/100)`` (:func:`gpumatch.stats.min_samples`, the rule ``bench serve`` reports percentiles by:
    p99 needs 100 samples)."""
    from gpumatch.usecases.stored_bench import MIN_BOOTSTRAP_SAMPLES

    stat = statistic_of(metric)
    if stat is None or n < MIN_BOOTSTRAP_SAMPLES:
        return False
    return stat[0] == "mean" or n >= min_samples(stat[1])


def ratio_interval(raw_a: list[float] | None, raw_b: list[float] | None, metric: str,
                   seed: int = 0) -> tuple[float, float] | None:
    """95% bootstrap interval of stat(B) / stat(A), stat being ``metric``'s statistic (:func:`statistic_of`), each
    run's samples (s) resampled on their own (:func:`scipy.stats.bootstrap`, BCa, 2000 resamples; the percentile
    method where BCa gives no finite bounds). None without enough samples on a side (:func:`enough_samples`) or
    without scipy."""
    stat = statistic_of(metric)
    if stat is None or not raw_a or not raw_b or not (enough_samples(len(raw_a), metric)
                                                      and enough_samples(len(raw_b), metric)):
        return None
    import numpy as np

    kind, q = stat

    def value(x: Any, axis: int) -> Any:
        return np.mean(x, axis=axis) if kind == "mean" else np.percentile(x, q, axis=axis, method=METHOD)

    def ratio(x: Any, y: Any, axis: int = -1) -> Any:
        return value(y, axis) / value(x, axis)

    if not value(np.asarray(raw_a, float), -1) > 0:
        return None
    return ratio_bootstrap(raw_a, raw_b, ratio, seed=seed, methods=("BCa", "percentile"))
