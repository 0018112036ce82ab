"""The Prometheus metrics of ``gpumatch serve`` (prometheus-client, one registry per engine).

Names follow vLLM's ``vllm:`` metrics where one exists (https://docs.vllm.ai/en/latest/design/metrics.html), with
the prefix ``gpumatch_`` (a colon is legal in Prometheus names but reserved for recording rules):

- ``gpumatch_num_requests_running`` / ``_waiting`` (gauges): admitted (holding a slot) / queued requests;
- ``gpumatch_kv_cache_usage_perc`` (gauge, 0..1 despite the name, as vLLM's): tokens held / slot capacity;
- ``gpumatch_kv_cache_slots_used`` / ``gpumatch_kv_cache_slots`` (gauges);
- ``gpumatch_prompt_tokens_total`` / ``gpumatch_generation_tokens_total`` (counters): prompt tokens computed and
  output tokens sampled;
- ``gpumatch_iterations_total{kind}`` (counter): passes by kind ``decode``, ``prefill``, ``mixed``;
- ``gpumatch_iteration_seconds`` (histogram): wall time of a pass (scheduling, forward, sampled ids back);
- ``gpumatch_requests_finished_total{reason}`` (counter): ``length``, ``stop``, ``abort``, ``error``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

ITERATION_BUCKETS_S = (0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048)


class Metrics:
    """The registry and its metrics (module docstring); every method is thread-safe (prometheus-client's)."""

    def __init__(self, slots: int) -> None:
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
        for reason in ("length", "stop", "abort", "error"):
            self.finished.labels(reason)

    def text(self) -> bytes:
        """The Prometheus text exposition (format 0.0.4)."""
        return generate_latest(self.registry)
