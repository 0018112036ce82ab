"""``vllm bench serve --save-result`` JSON into one run (the keys: vLLM ``vllm/benchmarks/serve.py``, formerly
``benchmarks/benchmark_serving.py``, ``save_result``/``result_json``).

Summary keys become results under gpumatch's SI names (:mod:`gpumatch.metric_names`: ``mean_ttft_ms`` ->
``ttft_mean_s`` in seconds, ``median_*`` -> ``*_p50_s``, ``output_throughput`` -> ``output_tokens_per_s``...), each
with ``config = {"case": "serve", ...}`` (the load: request rate, concurrency, prompts) and ``extra`` =
``{"source_key", "source_value", "source_unit"}``. The run's configuration is the load and the model; the manifest
records the source and the endpoint's model. The per-request arrays (``ttfts``, ``itls``, ``input_lens``,
``output_lens``, in newer releases ``latencies``; vLLM writes seconds and token counts) are kept as one
``requests`` event, renamed with units (``ttfts_s``, ``itls_s``, ``e2els_s``) with the level's ``config`` (the raw
samples ``bench compare`` bootstraps its intervals from); generated texts are dropped;
non-empty ``errors`` are counted (``failed_requests``). ``date`` (``%Y%m%d-%H%M%S``, the benchmark host's local time,
stamped when the result is saved, after the run) is taken as UTC; the run starts ``duration`` seconds before it.

Versions (docs/store.md, "vLLM versions"): the 2024 ``benchmark_serving.py`` (v0.4 era) wrote ``request_inthroughput``
(sic) and ``input_throughput`` and no ``failed``/``std_*``/``e2el`` keys; both old keys are read
(:data:`gpumatch.metric_names.LEGACY_KEYS`). Keys vLLM added later and gpumatch has no name for
(``rtfx``, ``spec_decode_*``, ``*_client_queue_time_ms``, ``probe_*``) stay in the source file only.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from gpumatch.errors import InputError
from gpumatch.metric_names import SERVE_KIND, si_name
from gpumatch.store.formats import ImportedResult, ImportedRun, number, utc

_LOAD_KEYS = ("backend", "endpoint_type", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate",
              "burstiness", "max_concurrency", "request_goodput_config")
_ARRAYS = {"ttfts": "ttfts_s", "itls": "itls_s", "latencies": "e2els_s", "input_lens": "input_lens",
           "output_lens": "output_lens"}
_PER_S = {"request_throughput": "1/s", "request_goodput": "1/s", "request_inthroughput": "1/s",
          "output_throughput": "token/s", "total_token_throughput": "token/s", "input_throughput": "token/s",
          "max_output_tokens_per_s": "token/s"}


def parse_vllm(data: dict[str, Any], source: dict[str, Any]) -> ImportedRun:
    """One vLLM save-result object as an :class:`ImportedRun` (InputError when it holds no metric)."""
    if data.get("completed") == 0:
        raise InputError(f"{source['file']}: every request of this vLLM run failed (completed 0); vLLM writes its "
                         "latencies as 0 then, which are no measurement", "see the file's 'errors', fix the server "
                         "or client and measure again")
    load = {k: data[k] for k in _LOAD_KEYS if k in data and data[k] is not None}
    config = {"case": "serve", **{k: v for k, v in load.items() if k not in ("model_id", "tokenizer_id")}}
    results = []
    unmeasured = _unmeasured(data)
    for key, value in data.items():
        mapped, v = si_name(key), number(value)
        if mapped is None or v is None or (key.endswith("_ms") and key.split("_")[-2] in unmeasured):
            continue
        name, unit, factor = mapped
        results.append(ImportedResult(name, v * factor, unit, config,
                                      {"source_key": key, "source_value": v, "source_unit": _unit(key)}))
    errors = data.get("errors")
    if isinstance(errors, list) and "failed" not in data:
        results.append(ImportedResult("failed_requests", float(sum(1 for e in errors if e)), "1", config,
                                      {"source_key": "errors", "source_value": None, "source_unit": "list"}))
    if not any(r.metric.startswith(("ttft", "tpot", "itl", "e2e")) for r in results):
        raise InputError(f"{source['file']}: a vLLM result file without latency metrics (mean_ttft_ms...)",
                         "give the file 'vllm bench serve --save-result' wrote")
    arrays = {new: data[old] for old, new in _ARRAYS.items() if isinstance(data.get(old), list)}
    missing = [] if data.get("model_id") else ["model"]
    manifest = {"source": {**source, "tool": "vllm bench serve", "unmeasured": sorted(unmeasured),
                           "missing": missing},
                "model": data.get("model_id"),
                "tokenizer": data.get("tokenizer_id"), "backend": data.get("backend")}
    duration = number(data.get("duration"))
    saved = utc(data.get("date"), ("%Y%m%d-%H%M%S",))
    # vLLM stamps ``date`` when it saves, after the benchmark: the run started ``duration`` seconds before
    started = saved - timedelta(seconds=duration or 0.0) if saved else datetime.now(UTC)
    model = data.get("model_id") or "unknown model"
    return ImportedRun(f"serve {model} (vllm bench serve)", manifest, config, results, started, duration,
                       [("requests", {**arrays, "config": config})] if arrays else [], kind=SERVE_KIND,
                       missing=missing)


def _unit(key: str) -> str:
    """The unit vLLM writes ``key`` in (``serve.py``: ``*_ms`` milliseconds, ``duration`` seconds, rates per s)."""
    if key.endswith("_ms"):
        return "ms"
    if key == "duration":
        return "s"
    return _PER_S.get(key, "tokens" if key.endswith("_tokens") else "requests")


def parse_vllm_appended(objects: list[dict[str, Any]], source: dict[str, Any]) -> ImportedRun:
    """A file ``--append-result`` grew over several runs (one object per line, usually one load level each) as one
    run: every object's results keep their own load as ``config``, so levels stay apart (as GuideLLM levels do)."""
    runs = [parse_vllm(o, {**source, "line": i + 1}) for i, o in enumerate(objects)]
    first = runs[0]
    started = min(r.started_at for r in runs)
    ended = max(r.ended_at for r in runs)
    levels = [{k: v for k, v in r.config.items()} for r in runs]
    missing = sorted({m for r in runs for m in r.missing})
    manifest = {**first.manifest, "source": {**source, "tool": "vllm bench serve", "appended_results": len(runs),
                                             "missing": missing},
                "levels": levels}
    config = {"case": "serve", "levels": len(runs)}
    results = [res for r in runs for res in r.results]
    events = [ev for r in runs for ev in r.events]
    return ImportedRun(first.name, manifest, config, results, started, (ended - started).total_seconds(), events,
                       kind=SERVE_KIND, missing=missing)


def _unmeasured(data: dict[str, Any]) -> set[str]:
    """vLLM's latency metrics (``ttft``, ``tpot``, ``itl``, ``e2el``) whose mean is exactly 0 ms: vLLM computes
    ``np.mean(values or 0)``, so an empty list (no streamed chunks from a non-streaming endpoint: no TTFT, no ITL;
    every output one token long: no TPOT) is written as 0 for every statistic. Not measured, not stored."""
    return {m for m in ("ttft", "tpot", "itl", "e2el") if data.get(f"mean_{m}_ms") == 0}
