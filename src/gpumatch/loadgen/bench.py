"""``gpumatch bench serve`` as one library call: :func:`run_serve_bench`.

1. The server is asked what it serves (:mod:`.server_info`); nothing answering is a bad ``--endpoint`` (exit 2).
2. Each level gets the estimator's prediction (:mod:`.predict`) and, unless turned off, the client self-test
   against the loopback server (:mod:`.selftest`). The tokenizer and the dataset are read once, before anything
   is sent (:mod:`.inputs`); a bad one is an input error (exit 2).
3. The levels run one after another (:mod:`.runner`): the concurrency ladder, then the rates, then, with an SLO
   and ``search``, the rate search (:mod:`.search`). Each level is recorded through
   :class:`gpumatch.record.Recording` (kind ``serve``) as soon as it ends, raw first:

   - one event ``request`` per request (``t_s`` = its scheduled time from the run start; ``data`` = the raw
     :class:`~.metrics.RequestRecord` with its level), failed and incomplete ones included;
   - one event ``warmup_request`` per warm-up request (its raw record with its level; never in the figures);
   - one failure per level and error class (count, first message);
   - one result per level and figure under the canonical serving names of :mod:`gpumatch.metric_names`
     (``ttft_p50_s``, ``e2e_p99_s``, ``request_throughput_per_s``...), its ``extra`` holding the vLLM key,
     ``n``, the formula, the prediction and the ratio;
   - one event ``level`` with the level's whole summary (vLLM names), prediction, self-test and verdict.

A server that disappears (connection refused) ends the run: the level is kept with its errors, the run is
closed ``failed``, and :attr:`ServeRun.server_gone` says why (the CLI exits 1 with one line). Ctrl-C closes the
run ``interrupted`` with the levels finished. The server's token counts are checked against the requests
(:mod:`.usage`); :attr:`ServeRun.warnings` holds at most one warning per kind, with its numbers.
"""

from __future__ import annotations

import datetime as dt
import math
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpumatch.errors import InputError
from gpumatch.loadgen import metrics
from gpumatch.loadgen.client import APIS, Target, target_url
from gpumatch.loadgen.inputs import Inputs, check_load_options, load_inputs, ticker, warmup_count
from gpumatch.loadgen.metrics import RequestRecord, Slo
from gpumatch.loadgen.predict import PredictionSetup, detect_gpu, predict_level, ratios
from gpumatch.loadgen.runner import Level, run_level
from gpumatch.loadgen.selftest import ClientCheck, Limits, lag_reason, self_test
from gpumatch.loadgen.usage import run_warnings, usage_summary
from gpumatch.metric_names import canonical_metric, serve_result_name

Progress = Callable[..., None]
"""``progress(phase, text, done=0, total=0)``: phase ``probe``, ``selftest``, ``level`` (starting), ``warmup``
(warm-up requests done of total), ``requests`` (requests done of total), ``seconds`` (a time-limited level:
seconds done of its duration, and a fifth argument, the requests done), ``done``."""

SCHEMA = "gpumatch.bench.serve/1"
DEFAULT_LADDER = (1, 4, 16)
MAX_PROMPTS = 1_000_000
STORED = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2el"}
STATS = ("mean", "median", "p90", "p99")
RATES = {"request_throughput": "1/s", "output_throughput": "token/s", "total_token_throughput": "token/s",
         "request_goodput": "1/s", "error_rate": "1"}


@dataclass(frozen=True)
class ServeRequest:
    """What ``gpumatch bench serve`` was asked (see ``docs/serving-bench.md`` for each field)."""

    endpoint: str
    model: str
    api: str = "completions"
    concurrency: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    arrival: str = "poisson"
    num_prompts: int = 200
    prompt_tokens: int = 512
    output_tokens: int = 128
    range_ratio: float = 1.0
    dataset: Path | None = None
    enforce_length: bool = True
    seed: int = 0
    timeout_s: float = 600.0
    max_in_flight: int = 0
    slo: Slo = field(default_factory=Slo)
    attainment: float = 0.9
    search: bool = False
    search_steps: int = 4
    selftest: bool = True
    selftest_itl_s: float | None = None
    limits: Limits = field(default_factory=Limits)
    arch: str | None = None
    gpu: str | None = None
    engine: str = "vllm"
    api_key: str | None = None
    store: Path | str | None = None
    use_store: bool = True
    dataset_format: str = "jsonl"
    tokenizer: Path | None = None
    warmup: int | None = None
    """Warm-up requests per level (None: the ``auto`` rule of :mod:`.inputs`)."""
    duration_s: float | None = None
    """Time-limited levels: send for this long (None: ``num_prompts`` per level)."""
    grace_s: float = 30.0
    burstiness: float = 1.0
    extra_body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    prompt_tolerance: int | None = None
    """Tokens the server may add to a prompt (None: 2 for completions, 48 for chat; :mod:`.usage`)."""


@dataclass
class LevelResult:
    """One measured level: its summary (vLLM names), prediction, self-test and verdict, and the raw records."""

    level: Level
    summary: dict[str, Any]
    prediction: dict[str, Any]
    check: ClientCheck | None
    in_run_lag: str
    records: list[RequestRecord]
    not_sent: int = 0
    aborted: str = ""
    start_s: float = 0.0
    """The level's time 0, in seconds from the run's start."""
    energy: dict[str, Any] = field(default_factory=dict)
    """The serving GPU's energy over the level (:mod:`.energy`); empty when the server publishes none."""
    warmup: list[RequestRecord] = field(default_factory=list)
    """The warm-up's records (never in the figures)."""
    passes: dict[str, Any] = field(default_factory=dict)
    """The server's log of the passes it ran for the level, warm-up first (:mod:`.passes`); empty when the server
    keeps none. Written with the raw records only."""

    @property
    def client_bound(self) -> bool:
        return bool(self.in_run_lag) or (self.check is not None and self.check.client_bound)

    @property
    def client_checked(self) -> bool:
        return self.check is not None

    def meets_slo(self, slo: Slo, attainment: float) -> bool:
        """No request failed and at least ``attainment`` of them met every SLO."""
        n = self.summary["completed"] + self.summary["failed"]
        good = self.summary.get("good_requests") or 0
        return slo.given and n > 0 and self.summary["failed"] == 0 and good >= attainment * n

    def to_dict(self, raw: bool = True) -> dict[str, Any]:
        """A flat vLLM-style level object (``mean_ttft_ms``, ...) plus gpumatch's keys."""
        d: dict[str, Any] = {**self.level.to_dict(), **self.summary, "not_sent": self.not_sent,
                             "aborted": self.aborted or None, "client_bound": self.client_bound,
                             "client_checked": self.client_checked,
                             "client_self_test": self.check.to_dict() if self.check else None,
                             "client_lag_in_run": self.in_run_lag or None,
                             "errors": metrics.error_counts(self.records), **self.energy, **self.prediction}
        if "predicted" in self.prediction:
            d["ratio"] = ratios(self.summary, self.prediction)
        if raw:
            d["requests"] = [r.to_dict() for r in self.records]
            if self.passes:
                d["server_passes"] = self.passes
        return d


@dataclass
class ServeRun:
    """The recorded run: its store id, manifest, each level, the search's answer and how it ended."""

    run_id: int | None
    store_path: Path | str | None
    status: str
    manifest: dict[str, Any]
    config: dict[str, Any]
    levels: list[LevelResult]
    max_rate_meeting_slo: float | None = None
    server_gone: str = ""
    store_error: str = ""
    search_note: str = ""
    warnings: list[str] = field(default_factory=list)
    """At most one prompt-length and one output-length warning for the run (:mod:`.usage`)."""

    def to_json(self, raw: bool = True) -> dict[str, Any]:
        """The run as JSON: metadata as vLLM writes it at the top (``date``, ``backend``, ``model_id``,
        ``num_prompts``), the definitions of every figure, and one flat object per level."""
        return {"schema": SCHEMA, "date": self.manifest["started_utc"], "backend": self.config["backend"],
                "model_id": self.config["model"], "endpoint": self.config["url"],
                "num_prompts": self.config["num_prompts"], "run_id": self.run_id, "status": self.status,
                "server_gone": self.server_gone or None, "max_rate_meeting_slo": self.max_rate_meeting_slo,
                "search_note": self.search_note or None, "warnings": self.warnings,
                "slo": self.config["slo"], "definitions": metrics.FORMULAS, "manifest": self.manifest,
                "config": self.config, "levels": [lv.to_dict(raw) for lv in self.levels]}


def check_request(req: ServeRequest) -> None:
    """Refuse a bad request before anything is sent (one-line InputError)."""
    if req.api not in APIS:
        raise InputError(f"unknown --api {req.api!r}", "completions or chat")
    if not 1 <= req.num_prompts <= MAX_PROMPTS:
        raise InputError(f"--num-prompts must be 1 to {MAX_PROMPTS}, got {req.num_prompts}")
    for name in ("prompt_tokens", "output_tokens"):
        if getattr(req, name) < 1:
            raise InputError(f"--{name.replace('_', '-')} must be at least 1")
    if not 0.0 < req.range_ratio <= 1.0:
        raise InputError(f"--range-ratio must be in (0, 1], got {req.range_ratio}")
    if any(c < 1 for c in req.concurrency) or any(not r > 0 or math.isinf(r) for r in req.rates):
        raise InputError("--concurrency must be 1 or more and --rate a positive finite number")
    if req.arrival not in ("poisson", "constant"):
        raise InputError(f"unknown --arrival {req.arrival!r}", "poisson or constant")
    if req.search and not req.slo.given:
        raise InputError("--search needs an SLO", "add --slo-ttft-ms, --slo-tpot-ms or --slo-e2el-ms")
    if not 0.0 < req.attainment <= 1.0:
        raise InputError(f"--slo-attainment must be in (0, 1], got {req.attainment}")
    if req.timeout_s <= 0:
        raise InputError("--timeout must be positive")
    check_load_options(req)
    from gpumatch.vocab import ENGINES

    if req.engine not in ENGINES:
        raise InputError(f"unknown --engine {req.engine!r}", f"one of {', '.join(ENGINES)}")


def plan_levels(req: ServeRequest) -> list[Level]:
    """The ladder: each concurrency, then each rate (the default ladder when neither nor a search is asked)."""
    conc = req.concurrency or (() if req.rates or req.search else DEFAULT_LADDER)
    levels = [Level(i, "concurrency", float(c), duration_s=req.duration_s) for i, c in enumerate(conc)]
    return levels + [Level(len(levels) + i, "rate", r, req.arrival, burstiness=req.burstiness,
                           duration_s=req.duration_s) for i, r in enumerate(req.rates)]


def manifest_of(req: ServeRequest, server: dict[str, Any], gpu: str | None) -> dict[str, Any]:
    from gpumatch.telemetry.manifest import git_commit, host_facts

    try:
        import aiohttp

        aiohttp_version: str | None = aiohttp.__version__
    except ImportError:
        aiohttp_version = None
    return {"started_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "endpoint": req.endpoint,
            "model": req.model, "server": server, "gpu.name": gpu, "client.host": host_facts(),
            "client.python": platform.python_version(), "client.aiohttp": aiohttp_version,
            "kit": git_commit()}


def config_of(req: ServeRequest, target: Target, levels: Sequence[Level], inputs: Inputs) -> dict[str, Any]:
    """What was asked, for the store and the JSON: header names only (their values may be secrets)."""
    return {"url": target.url, "model": req.model, "api": req.api,
            "backend": "openai-chat" if req.api == "chat" else "openai", "num_prompts": req.num_prompts,
            "prompt_tokens": req.prompt_tokens, "output_tokens": req.output_tokens, "range_ratio": req.range_ratio,
            "dataset": str(req.dataset) if req.dataset else None, "enforce_length": req.enforce_length,
            "seed": req.seed, "timeout_s": req.timeout_s, "max_in_flight": req.max_in_flight,
            "slo": req.slo.to_dict(), "slo_attainment": req.attainment, "search": req.search,
            "selftest": req.selftest, "engine": req.engine, "arch": req.arch, "gpu": req.gpu,
            "levels": [lv.to_dict() for lv in levels], "dataset_format": req.dataset_format if req.dataset else None,
            "dataset_rows": inputs.dataset.describe() if inputs.dataset else None,
            "tokenizer": str(inputs.counter.path) if inputs.counter else None,
            "warmup": "auto" if req.warmup is None else req.warmup, "duration_s": req.duration_s,
            "grace_s": req.grace_s if req.duration_s is not None else None, "burstiness": req.burstiness,
            "extra_body": req.extra_body, "header_names": sorted(req.headers),
            "prompt_tolerance_tokens": _tolerance(req)}


def _tolerance(req: ServeRequest) -> int:
    from gpumatch.loadgen.usage import DEFAULT_TOLERANCE

    return req.prompt_tolerance if req.prompt_tolerance is not None else DEFAULT_TOLERANCE[req.api]


def run_serve_bench(req: ServeRequest, progress: Progress | None = None) -> ServeRun:
    """Run and record the benchmark (module docstring)."""
    from gpumatch.loadgen import server_info
    from gpumatch.loadgen.search import Search
    from gpumatch.record import Recording

    check_request(req)
    say = progress or (lambda *a: None)
    target = Target(target_url(req.endpoint, req.api), req.model, req.api, req.enforce_length, req.timeout_s,
                    req.api_key, req.extra_body, req.headers)
    levels = plan_levels(req)
    inputs = load_inputs(req)
    say("probe", target.base_url)
    server = server_info.probe(target.base_url, req.api_key)
    gpu = req.gpu or detect_gpu(target.base_url)
    setup = PredictionSetup(req.arch or req.model, gpu, req.engine, req.prompt_tokens, req.output_tokens,
                            req.range_ratio)
    manifest, config = manifest_of(req, server, gpu), config_of(req, target, levels, inputs)
    checks = _self_test(req, target, levels, setup, say, inputs)
    done: list[LevelResult] = []
    with Recording("serve", f"{req.model} {target.base_url}", manifest, config, use_store=req.use_store,
                   store_path=req.store) as rec:
        search = Search(req, levels) if req.search else None
        run_t0 = time.perf_counter()
        for level in _levels(levels, search):
            say("level", level.label)
            check = checks.get(level.index)
            if check is None and req.selftest:  # a search probe: its self-test right before it
                check = _self_test(req, target, [level], setup, say, inputs).get(level.index)
            result = _measure(req, target, level, setup, check, run_t0, inputs, say)
            _record(rec, result)
            done.append(result)
            if search is not None:
                search.observe(result)
            if result.aborted:
                break
        gone = next((lv.aborted for lv in done if lv.aborted), "")
        best = search.best if search is not None else None
        note = _search_note(search, req) if search is not None else ""
        warnings = run_warnings([(lv.level.label, lv.summary) for lv in done],
                                str(inputs.counter.path) if inputs.counter else None, req.enforce_length)
        outcome = rec.close("failed" if gone else "completed",
                            {"levels": len(done), "server_gone": gone or None, "max_rate_meeting_slo": best,
                             "search_note": note or None, "warnings": warnings,
                             "client_bound_levels": [lv.level.label for lv in done if lv.client_bound]})
    say("done", "")
    return ServeRun(outcome.run_id, outcome.store_path, outcome.status, manifest, config, done, best, gone,
                    str(outcome.error) if outcome.error else "", note, warnings)


def _search_note(search: Any, req: ServeRequest) -> str:
    if search.capped:
        return (f"stopped at {search.lo:g}/s: its {req.num_prompts} requests all arrived within one request's "
                "lifetime (more --num-prompts probes higher rates)")
    if search.best is None and not search.stopped:
        return "no rate tried met the SLO"
    return ""


def _levels(ladder: list[Level], search: Any) -> Any:
    yield from ladder
    if search is not None:
        yield from search.probes(len(ladder))


def _self_test(req: ServeRequest, target: Target, levels: list[Level], setup: PredictionSetup,
               say: Progress, inputs: Inputs) -> dict[int, ClientCheck]:
    if not req.selftest or not levels:
        return {}
    itls = [req.selftest_itl_s or _predicted_tpot(setup, lv, req.num_prompts) or 0.01 for lv in levels]
    say("selftest", f"{len(levels)} level(s) against the loopback server")
    specs = list(inputs.level(Level(-1, "concurrency", 1.0)))
    return {c.level: c for c in self_test(target, levels, specs, itls, req.seed, req.max_in_flight, req.limits)}


def _predicted_tpot(setup: PredictionSetup, level: Level, n: int) -> float | None:
    ms = (predict_level(setup, level, n).get("predicted") or {}).get("mean_tpot_ms")
    return None if ms is None else max(ms / 1000.0, 0.001)


def _measure(req: ServeRequest, target: Target, level: Level, setup: PredictionSetup, check: ClientCheck | None,
             run_t0: float, inputs: Inputs, say: Progress) -> LevelResult:
    from gpumatch.loadgen import energy, passes

    specs = inputs.level(level)
    warm = inputs.warmup(level, warmup_count(req.warmup, level, req.num_prompts))
    before = passes.mark(target.base_url, req.api_key)
    run = run_level(target, level, specs, req.seed + level.index, req.max_in_flight, ticker(say, level, specs),
                    warm, req.grace_s, ticker(say, level, warm, "warmup"))
    t1, now = time.time(), time.perf_counter()
    t0 = t1 - (now - run.t0) if run.t0 else t1  # the measurement's start (after the warm-up), wall clock
    summary = {**metrics.summarize(run.records, req.slo), **usage_summary(run.records, _tolerance(req)),
               "warmup_requests": len(run.warmup), "warmup_failed": sum(not r.ok for r in run.warmup),
               "warmup_s": run.warmup_s}
    doc = energy.fetch(target.base_url, t0, req.api_key)
    joined = energy.level_energy(doc, t0, t1, int(summary.get("total_output_tokens") or 0)) if doc else {}
    n = len(specs) if isinstance(specs, list) else len(run.records)
    closed = level.mode == "concurrency"
    about = {"concurrency": level.value if closed else None, "request_rate": None if closed else level.value,
             "requests": n, "prompt_tokens": req.prompt_tokens, "output_tokens": req.output_tokens}
    logged = passes.collect(target.base_url, req.api_key, before, about)
    return LevelResult(level, summary, predict_level(setup, level, n), check,
                       lag_reason(run.records, req.limits), run.records, run.not_sent, run.aborted,
                       run.t0 - run_t0, joined, run.warmup, logged)


def _record(rec: Any, lv: LevelResult) -> None:
    """The level into the run (module docstring), raw records first."""
    cfg = lv.level.to_dict()
    base = lv.start_s
    for r in lv.warmup:
        rec.add_event(base, "warmup_request", {**r.to_dict(), "level": lv.level.index})
    for r in lv.records:
        rec.add_event(base + r.scheduled_s, "request", {**r.to_dict(), "level": lv.level.index})
    for cls, n in metrics.error_counts(lv.records).items():
        first = next(r for r in lv.records if r.error_class == cls)
        rec.add_failure({**cfg, "error_class": cls}, cls, f"{n} of {len(lv.records)} requests: {first.message}")
    if lv.not_sent:
        rec.add_failure({**cfg, "error_class": "not_sent"}, "not_sent",
                        f"{lv.not_sent} requests not sent: {lv.aborted}")
    ratio = ratios(lv.summary, lv.prediction)
    predicted = lv.prediction.get("predicted") or {}
    for key, metric, unit, scale in stored_figures():
        value = lv.summary.get(key)
        if not isinstance(value, int | float) or not math.isfinite(value):
            continue
        extra: dict[str, Any] = {"vllm_key": key, "client_bound": lv.client_bound}
        name = key.split("_")[1] if key.endswith("_ms") else key
        extra["n"] = lv.summary.get(f"n_{name}", lv.summary["completed"])
        if key in predicted:
            extra.update(predicted=predicted[key] * scale, ratio=ratio.get(key))
        rec.add_result(metric, value * scale, unit, config=cfg, extra=extra)
    for key, unit in (("energy_per_output_token_j", "J/token"), ("energy_net_per_output_token_j", "J/token"),
                      ("power_w_mean", "W")):
        if lv.energy.get(key) is not None:
            rec.add_result(canonical_metric(key), lv.energy[key], unit, config=cfg,
                           extra={k: v for k, v in lv.energy.items() if not k.startswith("energy_per")
                                  and not k.startswith("energy_net")})
    rec.add_event(base, "level", lv.to_dict(raw=False))


def stored_figures() -> list[tuple[str, str, str, float]]:
    """(summary key, stored metric, unit, scale to SI) for every figure stored as a result, under the canonical
    serving names (:func:`gpumatch.metric_names.serve_result_name`: ``median_ttft_ms`` -> ``ttft_p50_s``,
    ``request_throughput`` -> ``request_throughput_per_s``), the names imported runs carry too."""
    keys = [f"{stat}_{name}_ms" for name in STORED for stat in STATS]
    keys += ["p99_client_lag_ms", *RATES, "completed", "failed", "duration"]
    return [(k, *got) for k in keys if (got := serve_result_name(k)) is not None]


def write_json(run: ServeRun, out: Path) -> Path:
    """Write :meth:`ServeRun.to_json` (raw records included) to ``out``; refuses an existing file."""
    import json

    if not out.parent.is_dir():
        raise InputError(f"no folder {out.parent}", "create it first")
    from gpumatch.outfiles import write_file

    if out.exists():
        raise InputError(f"{out} exists", "give another --out")
    return write_file(out, json.dumps(run.to_json(raw=True), indent=1, default=str) + "\n", hint="give another --out")
