"""The Prometheus metrics of ``gpumatch serve`` (prometheus-client, one registry per engine).

Two families, side by side:

1. ``gpumatch_*`` (the server's own; unlabelled):

- ``gpumatch_num_requests_running`` / ``_waiting`` (gauges): admitted (holding a slot) / queued requests;
- ``gpumatch_kv_cache_usage_perc`` (gauge, 0..1 despite the name, as vLLM's): tokens held / slot capacity;
- ``gpumatch_kv_cache_slots_used`` / ``gpumatch_kv_cache_slots`` (gauges);
- ``gpumatch_prompt_tokens_total`` / ``gpumatch_generation_tokens_total`` (counters): prompt tokens computed and
  output tokens sampled;
- ``gpumatch_iterations_total{kind}`` (counter): passes by kind ``decode``, ``prefill``, ``mixed``;
- ``gpumatch_iteration_seconds`` (histogram): wall time of a pass (scheduling, forward, sampled ids back);
- ``gpumatch_requests_finished_total{reason}`` (counter): ``length``, ``stop``, ``abort``, ``error``.

2. ``vllm:*`` with vLLM's names, labels (``model_name``, ``engine="0"``) and bucket edges, so dashboards and tools
   that scrape vLLM read this server too. Names, help and buckets as in vLLM V1's ``PrometheusStatLogger``
   (``vllm/v1/metrics/loggers.py``; https://docs.vllm.ai/en/latest/usage/metrics.html): the gauges
   ``vllm:num_requests_running``, ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc`` and its older name
   ``vllm:gpu_cache_usage_perc``; the counters ``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``,
   ``vllm:num_preemptions_total`` (always 0: a slot is never taken back), ``vllm:request_success_total
   {finished_reason}``; the histograms of :class:`RequestTimes` and of per-request token counts. Times are
   measured in the engine thread (``time.monotonic``) when a pass's tokens are sampled, not when the HTTP layer
   sends them.

The ``vllm:*`` histograms are observed once per token, so they are not prometheus-client ``Histogram`` objects
(a lock and a linear bucket scan per observation, several microseconds: at 256 running sequences that multiplied
the engine's host time per pass, ``benchmarks/bench_serve_host.py``) but :class:`Hist`: bucket counts that only
the engine thread writes (a ``bisect`` per observation), read by a collector when ``/metrics`` is scraped.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

ITERATION_BUCKETS_S = (0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048)
TTFT_BUCKETS_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                  40.0, 80.0, 160.0, 640.0, 2560.0)
"""vLLM's ``vllm:time_to_first_token_seconds`` edges."""
TOKEN_BUCKETS_S = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                   40.0, 80.0)
"""vLLM's ``vllm:inter_token_latency_seconds`` / ``time_per_output_token_seconds`` edges."""
REQUEST_BUCKETS_S = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                     480.0, 960.0, 1920.0, 7680.0)
"""vLLM's edges of the per-request phase histograms (e2e, queue, prefill, decode, inference)."""
FINISH_REASONS = ("stop", "length", "abort", "error")
VLLM_LABELS = ("model_name", "engine")


def build_1_2_5_buckets(max_value: int) -> list[int]:
    """1, 2, 5, 10, 20, 50, ... up to ``max_value`` (vLLM's token-count histogram edges)."""
    out: list[int] = []
    scale = 1
    while True:
        for m in (1, 2, 5):
            if m * scale > max_value:
                return out
            out.append(m * scale)
        scale *= 10


@dataclass(frozen=True)
class RequestTimes:
    """One finished request's phases, seconds (vLLM's ``FinishedRequestStats``): ``queue_s`` arrival to first
    scheduled; ``prefill_s`` first scheduled to first token; ``decode_s`` first token to the last;
    ``e2e_s`` arrival to the last token; ``inference_s`` = prefill + decode."""

    e2e_s: float
    queue_s: float
    prefill_s: float
    decode_s: float
    prompt_tokens: int
    generation_tokens: int
    max_tokens: int

    @property
    def inference_s(self) -> float:
        return self.prefill_s + self.decode_s


class Hist:
    """A histogram with one writer (the engine thread): non-cumulative bucket counts and the sum. A scrape reads
    a copy; it may miss the observation being made at that instant, never corrupt one."""

    def __init__(self, name: str, doc: str, bounds: tuple[float, ...] | list[int]) -> None:
        self.name, self.doc, self.bounds = name, doc, tuple(float(b) for b in bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """Count ``value`` in the first bucket whose upper edge is >= it (Prometheus' ``le``)."""
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def family(self, labels: tuple[str, ...], name: str | None = None, doc: str | None = None) -> Metric:
        """The Prometheus family (under ``name`` and ``doc`` when given instead of this histogram's)."""
        counts, total = list(self.counts), self.sum
        edges = [*(repr(b) for b in self.bounds), "+Inf"]  # prometheus-client's spelling of float edges
        fam = HistogramMetricFamily(name or self.name, doc or self.doc, labels=list(VLLM_LABELS))
        fam.add_metric(list(labels), list(zip(edges, accumulate(counts), strict=True)), total)
        return fam


class Metrics:
    """The registry and its metrics (module docstring). The ``gpumatch_*`` ones are prometheus-client's
    (thread-safe); the ``vllm:*`` ones (:attr:`vllm`) are written by the engine thread only."""

    def __init__(self, slots: int, model_name: str = "llama", max_model_len: int = 2048) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.running = Gauge("gpumatch_num_requests_running", "Requests holding a KV slot", registry=r)
        self.waiting = Gauge("gpumatch_num_requests_waiting", "Requests queued for a slot", registry=r)
        self.kv_usage = Gauge("gpumatch_kv_cache_usage_perc", "KV tokens held / slot capacity (0-1)", registry=r)
        self.slots_used = Gauge("gpumatch_kv_cache_slots_used", "KV slots in use", registry=r)
        Gauge("gpumatch_kv_cache_slots", "KV slots in the cache", registry=r).set(slots)
        self.prompt_tokens = Counter("gpumatch_prompt_tokens", "Prompt tokens computed", registry=r)
        self.generation_tokens = Counter("gpumatch_generation_tokens", "Output tokens sampled", registry=r)
        self.iterations = Counter("gpumatch_iterations", "Forward passes by kind", ["kind"], registry=r)
        self.iteration_s = Histogram("gpumatch_iteration_seconds", "Wall time of one pass",
                                     buckets=ITERATION_BUCKETS_S, registry=r)
        self.finished = Counter("gpumatch_requests_finished", "Requests finished by reason", ["reason"],
                                registry=r)
        for kind in ("decode", "prefill", "mixed"):
            self.iterations.labels(kind)
        for reason in FINISH_REASONS:
            self.finished.labels(reason)
        self.vllm = VllmMetrics(r, model_name, max_model_len)

    def text(self) -> bytes:
        """The Prometheus text exposition (format 0.0.4)."""
        return generate_latest(self.registry)


class VllmMetrics:
    """The ``vllm:*`` family (module docstring), bound to one model name and engine ``0``. Gauges and counters
    are plain numbers the engine thread sets; :meth:`collect` (the registry calls it at scrape time) turns them
    and the :class:`Hist` objects into Prometheus families."""

    def __init__(self, r: CollectorRegistry, model: str, max_model_len: int) -> None:
        self.labels = (model, "0")
        self.running = self.waiting = 0
        self.kv_usage = 0.0
        self.prompt_tokens = self.generation_tokens = 0
        self.success = dict.fromkeys(FINISH_REASONS, 0)
        self.ttft = Hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                         TTFT_BUCKETS_S)
        self.itl = Hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                        TOKEN_BUCKETS_S)
        self.request_tpot = Hist("vllm:request_time_per_output_token_seconds",
                                 "Histogram of time_per_output_token_seconds per request.", TOKEN_BUCKETS_S)
        phases = {"e2e": ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds."),
                  "queue": ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request."),
                  "inference": ("vllm:request_inference_time_seconds",
                                "Histogram of time spent in RUNNING phase for request."),
                  "prefill": ("vllm:request_prefill_time_seconds",
                              "Histogram of time spent in PREFILL phase for request."),
                  "decode": ("vllm:request_decode_time_seconds",
                             "Histogram of time spent in DECODE phase for request.")}
        self.phase = {k: Hist(n, d, REQUEST_BUCKETS_S) for k, (n, d) in phases.items()}
        counts = build_1_2_5_buckets(max_model_len)
        self.req_prompt = Hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", counts)
        self.req_generation = Hist("vllm:request_generation_tokens", "Number of generation tokens processed.", counts)
        self.req_max_tokens = Hist("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
                                   counts)
        self.iteration_tokens = Hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                                     [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384])
        r.register(self)

    def finished(self, reason: str, t: RequestTimes | None) -> None:
        """A request ended with ``reason``; its phases when it got at least one token."""
        self.success[reason] += 1
        if t is None:
            return
        for k, v in (("e2e", t.e2e_s), ("queue", t.queue_s), ("inference", t.inference_s),
                     ("prefill", t.prefill_s), ("decode", t.decode_s)):
            self.phase[k].observe(v)
        if t.generation_tokens > 1:
            self.request_tpot.observe(t.decode_s / (t.generation_tokens - 1))
        self.req_prompt.observe(t.prompt_tokens)
        self.req_generation.observe(t.generation_tokens)
        self.req_max_tokens.observe(t.max_tokens)

    def collect(self) -> Iterator[Metric]:
        """The families, as vLLM names them (``vllm:time_per_output_token_seconds``, vLLM's older name of the
        inter-token histogram, is the same observations under that name)."""
        lab, names = list(self.labels), list(VLLM_LABELS)
        for name, doc, v in (
                ("vllm:num_requests_running", "Number of requests in model execution batches.", self.running),
                ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", self.waiting),
                ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", self.kv_usage),
                ("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use "
                 "vllm:kv_cache_usage_perc instead.", self.kv_usage)):
            g = GaugeMetricFamily(name, doc, labels=names)
            g.add_metric(lab, v)
            yield g
        for name, doc, v in (("vllm:prompt_tokens", "Number of prefill tokens processed.", self.prompt_tokens),
                             ("vllm:generation_tokens", "Number of generation tokens processed.",
                              self.generation_tokens),
                             ("vllm:num_preemptions", "Cumulative number of preemption from the engine.", 0)):
            c = CounterMetricFamily(name, doc, labels=names)
            c.add_metric(lab, v)
            yield c
        ok = CounterMetricFamily("vllm:request_success", "Count of successfully processed requests.",
                                 labels=[*names, "finished_reason"])
        for reason, n in list(self.success.items()):
            ok.add_metric([*lab, reason], n)
        yield ok
        yield self.ttft.family(self.labels)
        yield self.itl.family(self.labels)
        yield self.itl.family(self.labels, "vllm:time_per_output_token_seconds",
                              "Histogram of time per output token in seconds.")
        for h in (self.request_tpot, *self.phase.values(), self.req_prompt, self.req_generation,
                  self.req_max_tokens, self.iteration_tokens):
            yield h.family(self.labels)
