"""The field's serving-benchmark names and gpumatch's SI result names, mapped once: the ONE naming of serving runs.

Every serving run in the store — gpumatch ``bench serve``, and ``gpumatch runs import`` of ``vllm bench serve
--save-result``, GuideLLM ``benchmarks.json`` and AIPerf/GenAI-Perf ``profile_export_aiperf.json`` — is of kind
:data:`SERVE_KIND` (the tool in its manifest's ``source.tool``, :func:`source_tool`) and names its results as below
(docs/serving-bench.md, "Canonical metric names"). Readers pass stored names through :func:`canonical_metric` so runs
written before this naming (``ttft_median_s``, ``e2el_p99_s``, ``request_throughput``... from ``bench serve``) read
under the same names.

vLLM's ``vllm bench serve --save-result`` JSON (``benchmarks/benchmark_serving.py`` / ``vllm/benchmarks/serve.py``)
names a latency statistic ``<stat>_<metric>_ms``: ``mean_ttft_ms``, ``median_tpot_ms``, ``p99_itl_ms``,
``std_e2el_ms``... in milliseconds, and throughputs per second. gpumatch stores results in SI units with the unit in
the name: ``<metric>_<stat>_s`` in seconds, ``median`` written ``p50``, ``e2el`` written ``e2e``. gpumatch's own
``bench serve`` JSON (``--out``) keeps vLLM's keys (so existing tools read it); :func:`si_name` and
:func:`vllm_key` convert between the two.

What each vLLM metric is (benchmark-method.md section 1): TTFT = first streamed chunk minus send time; TPOT =
(E2E - TTFT) / (output tokens - 1) per request, then averaged over requests; ITL = every gap between chunks, pooled
over requests; E2EL = last chunk minus send time.
"""

from __future__ import annotations

import re
from typing import Any

SERVE_KIND = "serve"
"""The store kind of every serving run, measured here or imported."""

GPUMATCH_SERVE_TOOL = "gpumatch bench serve"
"""``source.tool`` of a run ``gpumatch bench serve`` measured (its manifest has no ``source`` section)."""

LATENCY_METRICS = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2e"}
"""vLLM's latency metric names and gpumatch's (``e2el`` -> ``e2e``)."""

_LATENCY_KEY = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")

SCALAR_KEYS: dict[str, tuple[str, str, float]] = {
    # vLLM key: (gpumatch result name, SI unit, factor to SI)
    "duration": ("duration_s", "s", 1.0),
    "completed": ("completed_requests", "1", 1.0),
    "failed": ("failed_requests", "1", 1.0),
    "total_input_tokens": ("input_tokens", "token", 1.0),
    "total_output_tokens": ("output_tokens", "token", 1.0),
    "request_throughput": ("request_throughput_per_s", "1/s", 1.0),
    "request_goodput": ("goodput_requests_per_s", "1/s", 1.0),
    "output_throughput": ("output_tokens_per_s", "token/s", 1.0),
    "total_token_throughput": ("total_tokens_per_s", "token/s", 1.0),
    "max_output_tokens_per_s": ("peak_output_tokens_per_s", "token/s", 1.0),
    "max_concurrent_requests": ("peak_concurrent_requests", "1", 1.0),
}
"""vLLM's summary keys that are not latency statistics, with gpumatch's name, unit and conversion factor."""


LEGACY_KEYS: dict[str, tuple[str, str, float]] = {
    # vLLM benchmarks/benchmark_serving.py of 2024 (v0.4 era) wrote the request rate under a misspelt key and an input
    # token rate that later versions dropped (its result dict)
    "request_inthroughput": ("request_throughput_per_s", "1/s", 1.0),
    "input_throughput": ("input_tokens_per_s", "token/s", 1.0),
}
"""Keys only older vLLM files carry; read on import, never written (:func:`vllm_key` ignores them)."""

GPUMATCH_KEYS: dict[str, tuple[str, str, float]] = {
    # gpumatch bench serve summary keys vLLM does not write
    "error_rate": ("error_fraction", "1", 1.0),  # failed / (completed + failed): a fraction, not a rate per second
    "p99_client_lag_ms": ("client_lag_p99_s", "s", 1e-3),
    "energy_per_output_token_j": ("output_energy_j_per_token", "J/token", 1.0),
    "energy_net_per_output_token_j": ("output_energy_net_j_per_token", "J/token", 1.0),
}
"""``bench serve`` summary keys outside vLLM's set, with their stored name, unit and factor."""

LEGACY_RESULT_NAMES: dict[str, str] = {
    # result names gpumatch bench serve stored before one naming (tests/data/stores/serve-names-v1.sqlite)
    "request_throughput": "request_throughput_per_s",
    "output_throughput": "output_tokens_per_s",
    "total_token_throughput": "total_tokens_per_s",
    "request_goodput": "goodput_requests_per_s",
    "error_rate": "error_fraction",
    "energy_per_output_token_j": "output_energy_j_per_token",
    "energy_net_per_output_token_j": "output_energy_net_j_per_token",
}
"""Stored result names of older runs and the canonical name each reads as (besides the pattern rule of
:func:`canonical_metric`)."""

_LEGACY_LATENCY = re.compile(r"^(ttft|tpot|itl|e2el|e2e)_(median|mean|std|p\d+(?:_\d+)?)_s$")


def canonical_metric(name: str) -> str:
    """The canonical name of a stored serving result name (the read-time alias map): ``ttft_median_s`` ->
    ``ttft_p50_s``, ``e2el_p99_s`` -> ``e2e_p99_s``, ``request_throughput`` -> ``request_throughput_per_s``...;
    a canonical or unknown name is returned unchanged.

    >>> canonical_metric("e2el_median_s")
    'e2e_p50_s'
    >>> canonical_metric("ttft_p99_s")
    'ttft_p99_s'
    """
    if name in LEGACY_RESULT_NAMES:
        return LEGACY_RESULT_NAMES[name]
    m = _LEGACY_LATENCY.match(name)
    if m is None:
        return name
    metric = "e2e" if m.group(1) == "e2el" else m.group(1)
    stat = "p50" if m.group(2) == "median" else m.group(2)
    return f"{metric}_{stat}_s"


def serve_result_name(summary_key: str) -> tuple[str, str, float] | None:
    """(stored name, SI unit, factor) of a ``bench serve`` level summary key (vLLM's keys and
    :data:`GPUMATCH_KEYS`), None for a key that is not stored as a result.

    >>> serve_result_name("median_ttft_ms")
    ('ttft_p50_s', 's', 0.001)
    >>> serve_result_name("error_rate")
    ('error_fraction', '1', 1.0)
    """
    return GPUMATCH_KEYS.get(summary_key) or si_name(summary_key)


def source_tool(manifest: dict[str, Any]) -> str:
    """The tool that measured a serving run: the manifest's ``source.tool`` (an imported file), else
    :data:`GPUMATCH_SERVE_TOOL`."""
    source = manifest.get("source")
    tool = source.get("tool") if isinstance(source, dict) else None
    return str(tool) if tool else GPUMATCH_SERVE_TOOL


SERVING_LABELS: dict[str, str] = {
    "request_throughput_per_s": "req/s", "output_tokens_per_s": "out tok/s", "total_tokens_per_s": "total tok/s",
    "goodput_requests_per_s": "goodput req/s", "ttft_mean_s": "TTFT mean", "ttft_p50_s": "TTFT p50",
    "ttft_p90_s": "TTFT p90", "ttft_p99_s": "TTFT p99", "tpot_mean_s": "TPOT mean", "tpot_p50_s": "TPOT p50",
    "tpot_p90_s": "TPOT p90", "tpot_p99_s": "TPOT p99", "itl_mean_s": "ITL mean", "itl_p50_s": "ITL p50",
    "itl_p90_s": "ITL p90", "itl_p99_s": "ITL p99", "e2e_mean_s": "E2E mean", "e2e_p50_s": "E2E p50",
    "e2e_p90_s": "E2E p90", "e2e_p99_s": "E2E p99", "completed_requests": "completed", "failed_requests": "failed",
    "error_fraction": "error share", "duration_s": "duration", "output_energy_j_per_token": "J/out tok",
    "output_energy_net_j_per_token": "J/out tok net", "power_w_mean": "mean power",
}
"""Short labels of the canonical serving names a person compares first (tables, the HTML page)."""


def si_name(vllm_key: str) -> tuple[str, str, float] | None:
    """gpumatch's (name, unit, factor) for one vLLM save-result key, None for a key that is not a metric.

    >>> si_name("mean_ttft_ms")
    ('ttft_mean_s', 's', 0.001)
    >>> si_name("median_e2el_ms")
    ('e2e_p50_s', 's', 0.001)
    >>> si_name("p99.9_itl_ms")
    ('itl_p99_9_s', 's', 0.001)
    """
    if vllm_key in SCALAR_KEYS:
        return SCALAR_KEYS[vllm_key]
    if vllm_key in LEGACY_KEYS:
        return LEGACY_KEYS[vllm_key]
    m = _LATENCY_KEY.match(vllm_key)
    if m is None:
        return None
    stat = "p50" if m.group(1) == "median" else m.group(1).replace(".", "_")
    return f"{LATENCY_METRICS[m.group(2)]}_{stat}_s", "s", 1e-3


def vllm_key(si: str) -> str | None:
    """The vLLM save-result key of a gpumatch result name (the inverse of :func:`si_name`), or None.

    >>> vllm_key("tpot_p99_s")
    'p99_tpot_ms'
    """
    for key, (name, _, _) in SCALAR_KEYS.items():
        if name == si:
            return key
    m = re.match(r"^(ttft|tpot|itl|e2e)_(mean|std|p\d+(?:_\d+)?)_s$", si)
    if m is None:
        return None
    metric = "e2el" if m.group(1) == "e2e" else m.group(1)
    stat = "median" if m.group(2) == "p50" else m.group(2).replace("_", ".")
    return f"{stat}_{metric}_ms"


# --- GuideLLM and AIPerf (docs/store.md, "Imported formats") -------------------------------------------------------

DIST_STATS = {"mean": "mean", "median": "p50", "std_dev": "std", "std": "std", "avg": "mean", "p001": "p0_1",
              "p01": "p1", "p05": "p5", "p1": "p1", "p5": "p5", "p10": "p10", "p25": "p25", "p50": "p50",
              "p75": "p75", "p90": "p90", "p95": "p95", "p99": "p99", "p999": "p99_9"}
"""A distribution statistic's key in GuideLLM (``mean``, ``median``, ``std_dev``, ``percentiles.p001``...``p999``:
GuideLLM ``guidellm/schemas`` ``DistributionSummary``/``Percentiles``) or AIPerf (``avg``, ``std``, ``p1``...``p99``:
AIPerf ``profile_export_aiperf.json``) and gpumatch's suffix (``p001`` = 0.1th percentile -> ``p0_1``). ``mode``,
``variance``, ``min``, ``max``, ``count`` have no gpumatch name and stay in the source file only."""

GUIDELLM_LATENCIES: dict[str, tuple[str, float]] = {
    # GuideLLM GenerativeMetrics field: (gpumatch metric, factor to seconds)
    "time_to_first_token_ms": ("ttft", 1e-3),
    # GuideLLM's ITL is per request (last token - first token) / (output tokens - 1): vLLM's TPOT, not vLLM's ITL
    "inter_token_latency_ms": ("tpot", 1e-3),
    # GuideLLM's TPOT is per request (last token - request start) / output tokens: it includes the TTFT
    "time_per_output_token_ms": ("e2e_per_output_token", 1e-3),
    "request_latency": ("e2e", 1.0),  # seconds already
}
"""GuideLLM ``benchmarks.json`` latency distributions (``guidellm/benchmark/schemas/generative/metrics.py``,
per-request definitions in ``guidellm/schemas/request_stats.py``) and gpumatch's names: ``<metric>_<stat>_s``."""

GUIDELLM_RATES: dict[str, tuple[str, str]] = {
    "requests_per_second": ("request_throughput_per_s", "1/s"),
    "output_tokens_per_second": ("output_tokens_per_s", "token/s"),
    "tokens_per_second": ("total_tokens_per_s", "token/s"),
    "request_concurrency": ("mean_concurrent_requests", "1"),
}
"""GuideLLM rate/concurrency distributions whose ``successful.mean`` is the level's headline figure (the rate over
the measured window), with gpumatch's name and unit; their other statistics are not stored."""

AIPERF_LATENCIES = {"time_to_first_token": "ttft", "inter_token_latency": "tpot", "request_latency": "e2e",
                    "inter_chunk_latency": "itl"}
"""AIPerf ``profile_export_aiperf.json`` latency records and gpumatch's metric. AIPerf's ``inter_token_latency`` is
per request (request latency - TTFT) / (output tokens - 1) (AIPerf ``docs/metrics_reference.md``): vLLM's TPOT;
AIPerf's ``inter_chunk_latency`` (gaps between streamed chunks) is vLLM's ITL."""

AIPERF_SCALARS: dict[str, tuple[str, str]] = {
    "request_throughput": ("request_throughput_per_s", "1/s"),
    "output_token_throughput": ("output_tokens_per_s", "token/s"),
    "total_token_throughput": ("total_tokens_per_s", "token/s"),
    "benchmark_duration": ("duration_s", "s"),
    "request_count": ("completed_requests", "1"),
    "error_request_count": ("failed_requests", "1"),
    "total_isl": ("input_tokens", "token"),
    "total_osl": ("output_tokens", "token"),
}
"""AIPerf single-value records (their ``avg``) and gpumatch's name and SI unit."""

TIME_UNIT_TO_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}
"""Factor from a source's time unit to seconds."""
