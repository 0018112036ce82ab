"""``vllm bench serve --save-result`` JSON into one run (the keys: vLLM ``vllm/benchmarks/serve.py``, formerly
``benchmarks/benchmark_serving.py``, ``save_result``/``result_json``).

Summary keys become results under gpumatch's SI names (:mod:`gpumatch.metric_names`: ``mean_ttft_ms`` ->
``ttft_mean_s`` in seconds, ``median_*`` -> ``*_p50_s``, ``output_throughput`` -> ``output_tokens_per_s``...), each
with ``config = {"case": "serve", ...}`` (the load: request rate, concurrency, prompts) and ``extra`` =
``{"source_key", "source_value", "source_unit"}``. The run's configuration is the load and the model; the manifest
records the source and the endpoint's model. The per-request arrays (``ttfts``, ``itls``, ``input_lens``,
``output_lens``; vLLM writes seconds and token counts) are kept as one ``requests`` event, renamed with units
(``ttfts_s``, ``itls_s``); generated texts are dropped; non-empty ``errors`` are counted (``failed_requests``).
``date`` (``%Y%m%d-%H%M%S``, the benchmark host's local time) is taken as UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gpumatch.errors import InputError
from gpumatch.metric_names import si_name
from gpumatch.store.formats import ImportedResult, ImportedRun, number, utc

_LOAD_KEYS = ("backend", "endpoint_type", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate",
              "burstiness", "max_concurrency", "request_goodput_config")
_ARRAYS = {"ttfts": "ttfts_s", "itls": "itls_s", "input_lens": "input_lens", "output_lens": "output_lens"}


def parse_vllm(data: dict[str, Any], source: dict[str, Any]) -> ImportedRun:
    """One vLLM save-result object as an :class:`ImportedRun` (InputError when it holds no metric)."""
    load = {k: data[k] for k in _LOAD_KEYS if k in data and data[k] is not None}
    config = {"case": "serve", **{k: v for k, v in load.items() if k not in ("model_id", "tokenizer_id")}}
    results = []
    for key, value in data.items():
        mapped, v = si_name(key), number(value)
        if mapped is None or v is None:
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
    manifest = {"source": {**source, "tool": "vllm bench serve"}, "model": data.get("model_id"),
                "tokenizer": data.get("tokenizer_id"), "backend": data.get("backend")}
    started = utc(data.get("date"), ("%Y%m%d-%H%M%S",)) or datetime.now(UTC)
    model = data.get("model_id") or "unknown model"
    return ImportedRun(f"serve {model} (vllm bench serve)", manifest, config, results, started,
                       number(data.get("duration")), [("requests", arrays)] if arrays else [])


def _unit(key: str) -> str:
    if key.endswith("_ms"):
        return "ms"
    return "s" if key == "duration" else ("1/s" if "request" in key and "put" in key else "as written")
