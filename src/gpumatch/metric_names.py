"""The field's serving-benchmark names and gpumatch's SI result names, mapped once.

vLLM's ``vllm bench serve --save-result`` JSON (``benchmarks/benchmark_serving.py`` / ``vllm/benchmarks/serve.py``)
names a latency statistic ``<stat>_<metric>_ms``: ``mean_ttft_ms``, ``median_tpot_ms``, ``p99_itl_ms``,
``std_e2el_ms``... in milliseconds, and throughputs per second. gpumatch stores results in SI units with the unit in
the name: ``<metric>_<stat>_s`` in seconds, ``median`` written ``p50``. gpumatch's own ``bench serve`` JSON uses
vLLM's keys (so existing tools read it); both land in the store under the names below, so an imported vLLM file and
a gpumatch run compare metric by metric.

What each vLLM metric is (benchmark-method.md section 1): TTFT = first streamed chunk minus send time; TPOT =
(E2E - TTFT) / (output tokens - 1) per request, then averaged over requests; ITL = every gap between chunks, pooled
over requests; E2EL = last chunk minus send time.
"""

from __future__ import annotations

import re

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
