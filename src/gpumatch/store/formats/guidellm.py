"""GuideLLM ``benchmarks.json`` into one run, one load level per benchmark (the schema: vllm-project/guidellm
``src/guidellm/benchmark/schemas/generative/report.py`` ``GenerativeBenchmarksReport``: ``metadata``, ``args``,
``benchmarks``; each benchmark's ``config.strategy`` and ``metrics``, ``metrics.py`` ``GenerativeMetrics``; older
reports keep the strategy under ``args.strategy``).

Every metric is a ``StatusDistributionSummary``: ``successful``/``incomplete``/``errored``/``total`` each a
``DistributionSummary`` (``mean``, ``median``, ``std_dev``, ``percentiles.p001``...``p999``). Only ``successful``
is stored (vLLM's statistics are over successful requests too), under gpumatch's SI names
(:data:`gpumatch.metric_names.GUIDELLM_LATENCIES`, ``GUIDELLM_RATES``); each result's ``config`` is the level
(``case: serve``, ``strategy``, ``request_rate`` or ``max_concurrency``) so levels stay apart and pair with a
gpumatch run at the same load; ``extra`` keeps the source path, value and unit. Times are Unix seconds.

Layouts by version (vllm-project/guidellm tags; docs/store.md, "GuideLLM versions"): 0.2-0.3 ``{benchmarks}`` only,
each benchmark with ``args.strategy``, ``worker.backend_model``/``backend_target`` and ``request_totals`` beside
``metrics``; 0.4 adds top-level ``args`` and moves the strategy to ``config.strategy`` and the totals into
``metrics``; 0.5-0.6 add ``metadata`` (``version`` 1); 0.7 replaces ``args`` with ``config.spec`` (``backend.model``,
``backend.target``, ``profile.kind``; ``version`` 2); 0.8 leaves ``config.spec.backend.model`` empty when the
model was not named (it asks the server's ``/v1/models``) and keeps the model it sent in each benchmark's
``config.backend.model``. The metric names and ``StatusDistributionSummary`` shape are
the same in all of them; 0.2-0.3 percentiles have no ``p50`` (``median`` is used, as always).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gpumatch.errors import InputError
from gpumatch.metric_names import DIST_STATS, GUIDELLM_LATENCIES, GUIDELLM_RATES, SERVE_KIND
from gpumatch.store.formats import ImportedResult, ImportedRun, number, obj

KNOWN_VERSIONS = (1, 2)
"""``metadata.version`` values gpumatch reads: 1 (GuideLLM 0.5-0.6, ``args`` at the top), 2 (0.7+, ``config.spec``).
Reports before 0.5 have no ``metadata``."""


def parse_guidellm(data: dict[str, Any], source: dict[str, Any]) -> ImportedRun:
    """A GuideLLM report as an :class:`ImportedRun` (InputError when no benchmark holds a latency metric)."""
    _check_version(data, source)
    benchmarks = data.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        raise InputError(f"{source['file']}: a GuideLLM report without benchmarks",
                         "give the benchmarks.json 'guidellm benchmark' wrote")
    results: list[ImportedResult] = []
    levels, starts, ends = [], [], []
    for i, bench in enumerate(benchmarks):
        if not isinstance(bench, dict) or not isinstance(bench.get("metrics"), dict):
            raise InputError(f"{source['file']}: benchmark {i} has no metrics", "give an unmodified benchmarks.json")
        config = _level(bench)
        levels.append(config)
        results += _results(bench["metrics"], config, f"benchmarks[{i}].metrics")
        results += _totals(bench, config, i)
        start, end = _times(bench)
        starts += [start] if start is not None else []
        ends += [end] if end is not None else []
    if not any(r.metric.startswith(("ttft", "tpot", "e2e")) for r in results):
        raise InputError(f"{source['file']}: a GuideLLM report without latency metrics (time_to_first_token_ms...)",
                         "give the benchmarks.json 'guidellm benchmark' wrote")
    meta = obj(data.get("metadata"))
    model, target, profile = _endpoint(data, benchmarks)
    manifest = {"source": {**source, "tool": "guidellm benchmark", "tool_version": meta.get("guidellm_version"),
                           "schema_version": meta.get("version")},
                "model": model, "target": target, "levels": levels}
    started = datetime.fromtimestamp(min(starts), UTC) if starts else datetime.now(UTC)
    duration = max(ends) - min(starts) if starts and ends else None
    config = {"case": "serve", "profile": profile, "levels": len(levels)}
    missing = [] if model else ["model"]
    manifest["source"]["missing"] = missing
    return ImportedRun(f"serve {model or 'unknown model'} (guidellm)", manifest, config, results, started, duration,
                       kind=SERVE_KIND, missing=missing)


def _check_version(data: dict[str, Any], source: dict[str, Any]) -> None:
    """Refuse a report whose ``metadata.version`` (the report schema, GuideLLM 0.5+) gpumatch does not know."""
    version = obj(data.get("metadata")).get("version")
    if version is not None and version not in KNOWN_VERSIONS:
        raise InputError(f"{source['file']}: GuideLLM report schema version {version!r} is not one gpumatch reads "
                         f"({', '.join(map(str, KNOWN_VERSIONS))})",
                         "re-save it with a GuideLLM release gpumatch knows, or report the new layout")


def _endpoint(data: dict[str, Any], benchmarks: list[Any]) -> tuple[Any, Any, Any]:
    """(model, target, profile) wherever the report's version keeps them: ``config.spec.backend`` and
    ``config.spec.profile.kind`` (0.7+; the first benchmark's ``config.backend`` when the spec's model is empty),
    top-level ``args`` (0.4-0.6), the first benchmark's ``worker`` and
    ``args.profile.type_`` (0.2-0.3)."""
    spec = obj(obj(data.get("config")).get("spec"))
    if spec:
        backend = obj(spec.get("backend"))
        ran = obj(obj(obj(benchmarks[0]).get("config")).get("backend"))  # 0.8: the model it resolved and sent
        return (backend.get("model") or ran.get("model") or None, backend.get("target") or ran.get("target"),
                obj(spec.get("profile")).get("kind"))
    args = obj(data.get("args"))
    if args:
        profile = args.get("profile")
        return args.get("model"), args.get("target"), obj(profile).get("type_") if isinstance(profile, dict) \
            else profile
    first = obj(benchmarks[0])
    worker = obj(first.get("worker"))
    return (worker.get("backend_model"), worker.get("backend_target"),
            obj(obj(first.get("args")).get("profile")).get("type_"))


def _level(bench: dict[str, Any]) -> dict[str, Any]:
    """The benchmark's load as a result config: the strategy type and its rate (req/s) or streams."""
    holder = obj(bench.get("config")) or obj(bench.get("args"))
    strategy = holder.get("strategy")
    if not isinstance(strategy, dict):
        return {"case": "serve", "strategy": "unknown"}
    kind = str(strategy.get("type_", "unknown"))
    config: dict[str, Any] = {"case": "serve", "strategy": kind}
    if number(strategy.get("rate")) is not None:
        config["request_rate"] = strategy["rate"]
    if number(strategy.get("streams")) is not None:
        config["max_concurrency"] = strategy["streams"]
    elif number(strategy.get("max_concurrency")) is not None:  # throughput (and capped rate) strategies
        config["max_concurrency"] = strategy["max_concurrency"]
    if kind == "synchronous":
        config["max_concurrency"] = 1
    return config


def _results(metrics: dict[str, Any], config: dict[str, Any], where: str) -> list[ImportedResult]:
    out = []
    for key, (base, factor) in GUIDELLM_LATENCIES.items():
        for stat, value, path in _stats(metrics.get(key), f"{where}.{key}.successful"):
            out.append(ImportedResult(f"{base}_{stat}_s", value * factor, "s", config,
                                      {"source_key": path, "source_value": value,
                                       "source_unit": "ms" if key.endswith("_ms") else "s"}))
    for key, (name, unit) in GUIDELLM_RATES.items():
        summary = obj(obj(metrics.get(key)).get("successful"))
        mean = number(summary.get("mean"))
        if mean is not None and summary.get("count") != 0:
            out.append(ImportedResult(name, mean, unit, config, {"source_key": f"{where}.{key}.successful.mean",
                                                                 "source_value": mean, "source_unit": unit}))
    return out


def _stats(dist: Any, path: str) -> list[tuple[str, float, str]]:
    """(gpumatch stat, value, source path) of one status distribution's ``successful`` summary."""
    summary = dist.get("successful") if isinstance(dist, dict) else None
    if not isinstance(summary, dict) or summary.get("count") == 0:
        return []  # no successful request: GuideLLM writes zeros, which are no measurement
    found = [(DIST_STATS[k], v, f"{path}.{k}") for k in ("mean", "median", "std_dev")
             if (v := number(summary.get(k))) is not None]
    pct = obj(summary.get("percentiles"))
    found += [(DIST_STATS[k], v, f"{path}.percentiles.{k}") for k in pct
              if k in DIST_STATS and k != "p50" and (v := number(pct[k])) is not None]
    return found


def _totals(bench: dict[str, Any], config: dict[str, Any], i: int) -> list[ImportedResult]:
    """Completed and failed request counts (``metrics.request_totals``; older reports: ``request_totals``)."""
    metrics = bench["metrics"]
    totals, where = metrics.get("request_totals"), f"benchmarks[{i}].metrics.request_totals"
    if not isinstance(totals, dict):
        totals, where = bench.get("request_totals"), f"benchmarks[{i}].request_totals"
    if not isinstance(totals, dict):
        return []
    out = []
    for key, name in (("successful", "completed_requests"), ("errored", "failed_requests"),
                      ("incomplete", "incomplete_requests")):
        if (v := number(totals.get(key))) is not None:
            out.append(ImportedResult(name, v, "1", config, {"source_key": f"{where}.{key}", "source_value": v,
                                                             "source_unit": "requests"}))
    return out


def _times(bench: dict[str, Any]) -> tuple[float | None, float | None]:
    """The measured window (Unix s): ``start_time``/``end_time``, else ``scheduler_metrics.measure_*``."""
    sched = obj(bench.get("scheduler_metrics"))
    start = number(bench.get("start_time")) or number(sched.get("measure_start_time"))
    end = number(bench.get("end_time")) or number(sched.get("measure_end_time"))
    return start, end
