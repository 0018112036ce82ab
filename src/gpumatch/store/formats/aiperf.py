"""AIPerf ``profile_export_aiperf.json`` into one run (the schema: ai-dynamo/aiperf
``docs/tutorials/working-with-profile-exports.md``, "Aggregated Statistics (JSON)"; metric definitions
``docs/metrics_reference.md``).

Each metric is a top-level record ``{"unit": ..., "avg": ..., "p1"..."p99", "min", "max", "std"}``. Latency
records (:data:`gpumatch.metric_names.AIPERF_LATENCIES`) become ``<metric>_<stat>_s`` in seconds (the record's
``unit`` gives the factor: ms, us, ns, sec); single-value records (:data:`~gpumatch.metric_names.AIPERF_SCALARS`)
become one result from their ``avg``. The result config is the load (``case: serve``, ``max_concurrency`` and
``request_rate`` from ``input_config.loadgen``; in AIPerf 0.13, whose ``input_config`` is the resolved
``BenchmarkConfig``, from the ``profiling`` entry of ``phases`` (``concurrency``, ``rate``), the model from
``models.items[].name`` and the command from ``run_info.cli_command``); a model or load the file does not carry is
listed in the manifest's ``source.missing`` and in the import summary; ``extra`` keeps the source key, value and
unit. ``start_time`` has no zone and is taken as UTC. ``min``/``max``, ``output_token_throughput_per_user``, GPU
telemetry and the error summary's messages are not stored as results (the error count is, as ``failed_requests``).

GenAI-Perf (triton-inference-server/perf_analyzer ``genai-perf``, AIPerf's predecessor) writes the same record shape
to ``profile_export_genai_perf.json`` (AIPerf's ``JsonMetricResult`` was made to mimic it): time records in ``ms``,
throughputs with ``avg`` only, no ``benchmark_duration``, ``start_time`` or ``error_summary``; its
``input_config`` is either the config-file layout (``model_names``, ``perf_analyzer.stimulus.concurrency``) or, in
older releases, the flat argument namespace (``model`` list, ``concurrency``, ``request_rate``). Both are read;
the manifest's ``source.tool`` says which tool wrote the file.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gpumatch.errors import InputError
from gpumatch.metric_names import AIPERF_LATENCIES, AIPERF_SCALARS, DIST_STATS, SERVE_KIND, TIME_UNIT_TO_S
from gpumatch.store.formats import ImportedResult, ImportedRun, number, obj

KNOWN_SCHEMA_MAJOR = "1"
"""AIPerf ``schema_version`` major gpumatch reads (``JsonExportData.SCHEMA_VERSION``, "1.1" in 2026: records gained
``count`` and ``sum``, not stored; AIPerf bumps it on breaking changes). Files before it have no ``schema_version``."""


def parse_aiperf(data: dict[str, Any], source: dict[str, Any]) -> ImportedRun:
    """One AIPerf aggregate export as an :class:`ImportedRun` (InputError when it holds no latency record). The
    model and the load (concurrency or request rate) the file does not carry are listed in ``missing``, never
    dropped silently."""
    _check_schema(data, source)
    cfg = obj(data.get("input_config"))
    tool = _tool(cfg)
    load, endpoint, names = _layout(cfg)
    config: dict[str, Any] = {"case": "serve"}
    if number(load.get("concurrency")) is not None:
        config["max_concurrency"] = load["concurrency"]
    for key in ("request_rate", "rate"):
        if number(load.get(key)) is not None:
            config["request_rate"] = load[key]
            break
    results = _latencies(data, config, source) + _scalars(data, config)
    if not any(r.metric.startswith(("ttft", "tpot", "e2e")) for r in results):
        raise InputError(f"{source['file']}: an {tool} export without latency records (time_to_first_token...)",
                         f"give the profile_export_{tool.replace('-', '_')}.json '{tool} profile' wrote")
    model = _model(names)
    missing = [name for name, absent in (("model", model is None), (
        "load (concurrency or request rate)", "max_concurrency" not in config and "request_rate" not in config))
        if absent]
    run_info = obj(data.get("run_info"))
    manifest = {"source": {**source, "tool": f"{tool} profile",
                           "cli_command": cfg.get("cli_command") or run_info.get("cli_command"),
                           "tool_version": data.get("aiperf_version"), "schema_version": data.get("schema_version"),
                           "missing": missing},
                "model": model, "endpoint_type": endpoint.get("type") or cfg.get("endpoint_type"),
                "streaming": endpoint.get("streaming", cfg.get("streaming"))}
    started = _iso_utc(data.get("start_time")) or datetime.now(UTC)
    duration = data.get("benchmark_duration")
    seconds = _avg_seconds(duration) if isinstance(duration, dict) else None
    return ImportedRun(f"serve {model or 'unknown model'} ({tool})", manifest, config, results, started, seconds,
                       kind=SERVE_KIND, missing=missing)


def _model(names: Any) -> str | None:
    """The first model name: a string, a list of strings, or AIPerf 0.13's ``models`` object (``ModelsAdvanced``:
    ``{"strategy", "items": [{"name", ...}]}``)."""
    if isinstance(names, dict):
        names = [i.get("name") for i in names.get("items") or [] if isinstance(i, dict)]
    if isinstance(names, list):
        names = next((n for n in names if isinstance(n, str) and n), None)
    return names if isinstance(names, str) and names else None


def _tool(cfg: dict[str, Any]) -> str:
    """``genai-perf`` when ``input_config`` is GenAI-Perf's (its ``perf_analyzer`` section, or the flat argument
    namespace of releases before the config file: ``model`` and ``concurrency`` at the top), else ``aiperf``."""
    if "loadgen" in cfg or "phases" in cfg or "models" in cfg:
        return "aiperf"
    return "genai-perf" if "perf_analyzer" in cfg or "model" in cfg or "subcommand" in cfg else "aiperf"


def _layout(cfg: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """(load settings, endpoint section, model names) of an ``input_config``: AIPerf 0.13's ``BenchmarkConfig``
    (config v2: ``models.items[].name``, ``phases`` a list whose ``profiling`` entry holds ``concurrency`` and
    ``rate``); earlier AIPerf ``loadgen`` and ``endpoint.model_names``; GenAI-Perf's config file
    ``perf_analyzer.stimulus`` and ``model_names``; GenAI-Perf's older flat arguments ``concurrency``/``request_rate``
    and ``model`` (a list)."""
    if isinstance(cfg.get("phases"), list):
        return _profiling_phase(cfg["phases"]), obj(cfg.get("endpoint")), cfg.get("models")
    if "loadgen" in cfg or "model_names" in obj(cfg.get("endpoint")):
        endpoint = obj(cfg.get("endpoint"))
        return obj(cfg.get("loadgen")), endpoint, endpoint.get("model_names")
    stimulus = obj(obj(cfg.get("perf_analyzer")).get("stimulus"))
    if stimulus or "model_names" in cfg:
        return stimulus, obj(cfg.get("endpoint")), cfg.get("model_names")
    return cfg, {}, cfg.get("model")


def _profiling_phase(phases: list[Any]) -> dict[str, Any]:
    """The measured phase of AIPerf 0.13's ``phases`` list: the one named ``profiling``, else the last one that is
    not the warm-up (the export's metrics are the profiling phase's, ``docs/reference/json-export-schema.md``)."""
    entries = [p for p in phases if isinstance(p, dict)]
    named = [p for p in entries if p.get("name") == "profiling"]
    rest = [p for p in entries if p.get("name") != "warmup"]
    return named[0] if named else (rest[-1] if rest else {})


def _factor(unit: Any, key: str, source: dict[str, Any]) -> float:
    if unit not in TIME_UNIT_TO_S:
        raise InputError(f"{source['file']}: {key} in unknown time unit {unit!r}", "expected ms, us, ns or sec")
    return TIME_UNIT_TO_S[unit]


def _latencies(data: dict[str, Any], config: dict[str, Any], source: dict[str, Any]) -> list[ImportedResult]:
    out = []
    for key, base in AIPERF_LATENCIES.items():
        rec = data.get(key)
        if not isinstance(rec, dict):
            continue
        factor = _factor(rec.get("unit"), key, source)
        for stat, value in rec.items():
            if stat in DIST_STATS and (v := number(value)) is not None:
                out.append(ImportedResult(f"{base}_{DIST_STATS[stat]}_s", v * factor, "s", config,
                                          {"source_key": f"{key}.{stat}", "source_value": v,
                                           "source_unit": rec.get("unit")}))
    return out


def _scalars(data: dict[str, Any], config: dict[str, Any]) -> list[ImportedResult]:
    out = []
    for key, (name, unit) in AIPERF_SCALARS.items():
        rec = data.get(key)
        if not isinstance(rec, dict) or (v := number(rec.get("avg"))) is None:
            continue
        src_unit = rec.get("unit")
        value = v * TIME_UNIT_TO_S.get(str(src_unit), 1.0) if unit == "s" else v
        out.append(ImportedResult(name, value, unit, config, {"source_key": f"{key}.avg", "source_value": v,
                                                              "source_unit": src_unit}))
    if "failed_requests" not in {r.metric for r in out} and isinstance(data.get("error_summary"), list):
        n = float(sum(number(e.get("count")) or 0.0 for e in data["error_summary"] if isinstance(e, dict)))
        out.append(ImportedResult("failed_requests", n, "1", config, {"source_key": "error_summary[].count",
                                                                     "source_value": n, "source_unit": "requests"}))
    return out


def _avg_seconds(rec: dict[str, Any]) -> float | None:
    v = number(rec.get("avg"))
    return None if v is None else v * TIME_UNIT_TO_S.get(str(rec.get("unit")), 1.0)


def _check_schema(data: dict[str, Any], source: dict[str, Any]) -> None:
    """Refuse an export whose ``schema_version`` major is not :data:`KNOWN_SCHEMA_MAJOR`."""
    version = data.get("schema_version")
    if version is not None and str(version).split(".")[0] != KNOWN_SCHEMA_MAJOR:
        raise InputError(f"{source['file']}: AIPerf export schema_version {version!r} is not one gpumatch reads "
                         f"({KNOWN_SCHEMA_MAJOR}.x)", "check its records against that AIPerf release's "
                         "docs/reference/json-export-schema.md, then report the new layout")


def _iso_utc(text: Any) -> datetime | None:
    """An ISO 8601 time (AIPerf writes a naive local ``datetime``, taken as UTC; an offset, when written, is used)."""
    if not isinstance(text, str):
        return None
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
