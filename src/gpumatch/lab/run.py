"""``gpumatch bench run`` as one library call: :func:`run_bench`.

Each case of the suite (:mod:`gpumatch.lab.suites`) runs in its own child process (:mod:`gpumatch.lab.child`);
the run is recorded through :class:`gpumatch.record.Recording` (kind ``bench``) as it goes, so every finished
case is in the store whatever happens next:

- a case's results with, in ``extra``, ``n``, the percentiles ``n`` supports, the raw timings, gpumatch's
  ``predicted`` value and ``ratio`` = measured / predicted (or the ``datasheet`` figure and its ratio);
- a failed case (``oom``, ``error``, ``timeout``, ``crash``) as a failure with its message and log tail; a
  skipped case (the device cannot run it) as a failure of class ``skipped`` with the reason; the suite goes on;
- an event ``case`` per case (status, seconds, its telemetry window and summary);
- the idle power before the first case (``idle_power_w``, when NVML is there);
- derived results at the end: ``decode_mbu`` = (bytes per step / step time) / the best measured copy bandwidth,
  and each decode, prefill and training row's energy per token, gross and idle-subtracted (:data:`ENERGY_FORMULA`).

Ctrl-C (KeyboardInterrupt, also SIGTERM through the CLI): the running case's child is killed, the run is
closed ``interrupted`` with what finished, and the interrupt propagates (the CLI exits 130).
The parent never imports torch: the environment manifest is collected in a child too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpumatch.errors import GpumatchError, InputError
from gpumatch.lab.child import ChildOutcome, run_in_child
from gpumatch.lab.inputs import arch_shape, load_weights_folder, quality_params
from gpumatch.lab.predict import annotate, catalog_gpu
from gpumatch.lab.suites import DEFAULT_SOAK_S, PRECISIONS, SUITES, TRAIN_MODEL, Case, SuiteSpec, build_cases
from gpumatch.lab.telemetry import CaseTelemetry
from gpumatch.lab.workload import WorkloadPlan, load_plan, workload_cases
from gpumatch.record import Recording
from gpumatch.telemetry.window import MIN_WINDOW_SAMPLES

Progress = Callable[[str, int, int, str, float], None]
"""``progress(phase, done, total, case_id, eta_s)``: phase ``probe``, ``case`` (starting ``case_id``) or ``done``."""

MBU_FORMULA = "(bytes_per_step / decode_step_s) / max(copy_bytes_per_s)"


@dataclass(frozen=True)
class BenchRequest:
    """What ``gpumatch bench run`` was asked. ``tiny`` None: tiny exactly when the machine has no CUDA."""

    suite: str = "quick"
    model: str | None = None
    hf_config: Path | None = None
    precisions: tuple[str, ...] = ()
    """Empty: the workload's compute format with ``workload``, else all of :data:`PRECISIONS`."""
    tiny: bool | None = None
    store: Path | str | None = None
    duration_s: float = DEFAULT_SOAK_S
    seed: int = 0
    decode_batches: tuple[int, ...] = ()
    extra_cases: tuple[Case, ...] = ()
    only: tuple[str, ...] = ()
    use_store: bool = True
    max_warmup_s: float = 900.0
    weights: Path | None = None
    text: Path | None = None
    window: int | None = None
    stride: int | None = None
    max_tokens: int | None = None
    workload: Path | None = None


@dataclass(frozen=True)
class CaseReport:
    """How one case ended: ``status`` ok | partial (some of its parts failed, e.g. one batch of a ladder) |
    skipped | failed, with the (first) failure's class and message."""

    case_id: str
    kind: str
    status: str
    wall_s: float
    results: int = 0
    error_class: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class BenchRun:
    """The recorded run: its id and store, how it closed, its manifest hash and each case's report."""

    run_id: int | None
    store_path: Path | str | None
    status: str
    manifest_sha256: str
    cases: tuple[CaseReport, ...] = field(default_factory=tuple)
    notes: tuple[str, ...] = field(default_factory=tuple)


def check_request(req: BenchRequest) -> None:
    """Refuse a bad request before anything runs (one-line InputError)."""
    if req.suite not in SUITES:
        raise InputError(f"unknown suite {req.suite!r}", f"one of {', '.join(SUITES)}")
    bad = [p for p in req.precisions if p not in PRECISIONS]
    if bad:
        raise InputError(f"unknown precision {bad[0]!r}", f"one of {', '.join(PRECISIONS)}")
    if sum(x is not None for x in (req.model, req.hf_config, req.weights)) > 1:
        raise InputError("give one of --model, --hf-config and --weights", "--weights takes the model from its "
                         "config.json")
    if req.text is not None and req.weights is None:
        raise InputError("--text needs --weights", "the quality check scores the text with a model's real weights "
                         "and its tokenizer.json")
    if req.duration_s <= 0:
        raise InputError(f"--duration must be positive, not {req.duration_s}")
    if req.max_warmup_s <= 0:
        raise InputError(f"--max-warmup must be positive, not {req.max_warmup_s}")
    if any(b < 1 for b in req.decode_batches):
        raise InputError("--decode-batch must be 1 or more")


def model_shape(req: BenchRequest, tiny: bool, plan: WorkloadPlan | None = None) -> dict[str, Any]:
    """The bench shape of the decode/prefill model: ``--model`` / ``--hf-config``, else the workload's model,
    else the Llama-3-8B shape; with ``tiny``, a 2-layer stand-in. Models the bench decoder cannot run (MoE, MLA,
    ungated MLP) are refused."""
    from gpumatch.bench import shapes

    if tiny:
        return shapes.tiny_shape()
    source = req.model or (str(req.hf_config) if req.hf_config else None)
    if source is None:
        return arch_shape(plan.arch) if plan is not None else dict(shapes.LLAMA_3_8B)
    from gpumatch.models import resolve_model

    return arch_shape(resolve_model(source))


def _workload(req: BenchRequest) -> tuple[WorkloadPlan | None, tuple[str, ...], list[str]]:
    """The workload's plan, the effective precisions and the notes of flags that win over the file."""
    if req.workload is None:
        return None, req.precisions or PRECISIONS, []
    plan = load_plan(req.workload)
    notes = list(plan.notes)
    flag = req.model or (str(req.hf_config) if req.hf_config else None) or (str(req.weights) if req.weights else None)
    if flag:
        notes.append(f"model: the flag's {flag} wins over the workload's {plan.arch.name}")
    if req.precisions and plan.precision is not None and req.precisions != (plan.precision,):
        notes.append(f"precision: --precision {','.join(req.precisions)} wins over the workload's {plan.precision}")
    precisions = req.precisions or ((plan.precision,) if plan.precision else PRECISIONS)
    return plan, precisions, notes


def _probe(run_fields: dict[str, Any]) -> dict[str, Any]:
    got = run_in_child({"run": run_fields}, 180.0, target="gpumatch.bench.manifest:collect_case")
    if got.outcome is None:
        raise GpumatchError(f"could not describe this machine ({got.error_class}: {got.message})",
                            "is torch installed? ('pip install gpumatch[bench]'); " + got.log_tail[-300:])
    return got.outcome


def run_bench(req: BenchRequest, progress: Progress | None = None,
              telemetry: Callable[[], Any] | None = None) -> BenchRun:
    """Run the suite and record it (module docstring). ``telemetry``: a factory of the telemetry backend
    (default NVML on a GPU machine, none in a tiny run; tests give a fake one)."""
    from gpumatch.bench import shapes
    from gpumatch.telemetry.manifest import Manifest

    check_request(req)
    plan, precisions, notes = _workload(req)
    weights = load_weights_folder(req.weights) if req.weights is not None else None
    say = progress or (lambda *a: None)
    say("probe", 0, 0, "environment", 0.0)
    fields = _probe({"run.seed": req.seed, "run.precisions": list(precisions), "suite.name": req.suite})
    tiny = req.tiny if req.tiny is not None else fields.get("device.kind") != "cuda"
    model = weights.shape if weights is not None else model_shape(req, tiny, plan)
    train_model = model if tiny else shapes.PRESETS[TRAIN_MODEL]
    quality = None
    if weights is not None and req.text is not None:
        quality = quality_params(weights, req.text, tiny, req.window, req.stride, req.max_tokens)
    spec = SuiteSpec(req.suite, model, train_model, precisions, tiny, req.duration_s, req.seed,
                     weights=weights.params if weights is not None else None, quality=quality,
                     max_warmup_s=req.max_warmup_s)
    cases, more = _all_cases(req, spec, plan)
    notes += more
    fields.update({"suite.tiny": tiny, "model.name": model.get("name"), "model.architecture": model,
                   "model.train_architecture": train_model, "run.notes": notes,
                   **(plan.manifest() if plan is not None else {}),
                   **({"model.weights": weights.summary} if weights is not None else {}),
                   **({"quality.text": str(req.text), "quality.tokens": len(quality["tokens"]),
                       "quality.window": quality["window"], "quality.stride": quality["stride"]} if quality else {})})
    manifest = Manifest(fields)
    config = {"suite": req.suite, "tiny": tiny, "model": model.get("name"), "cases": [c.case_id for c in cases],
              "precisions": list(precisions), "duration_s": req.duration_s, "seed": req.seed, "notes": notes,
              "max_warmup_s": req.max_warmup_s}
    cuda = fields.get("device.kind") == "cuda"
    gpu = catalog_gpu(fields.get("gpu.name") or fields.get("device.name")) if cuda else None
    name = f"{req.suite} {model.get('name')}"
    with Recording("bench", name, manifest.to_dict(), config, use_store=req.use_store,
                   store_path=req.store) as rec, CaseTelemetry(rec, tiny, telemetry) as tele:
        stored: list[dict[str, Any]] = []
        _idle(rec, tele)
        reports = _run_cases(rec, tele, cases, gpu, say, stored)
        _derived(rec, stored, tele)
        ok = sum(r.status == "ok" for r in reports)
        outcome = rec.close("completed", {"cases": len(reports), "ok": ok, "gpu": gpu,
                                          "failed": sum(r.status == "failed" for r in reports),
                                          "skipped": sum(r.status == "skipped" for r in reports)})
    say("done", len(cases), len(cases), "", 0.0)
    if outcome.error is not None:
        raise GpumatchError(f"results store not updated: {outcome.error}",
                            f"what it did not take is in {', '.join(map(str, outcome.fallback)) or 'nowhere'}")
    return BenchRun(outcome.run_id, outcome.store_path, outcome.status, manifest.sha256, tuple(reports),
                    tuple(notes))


def _all_cases(req: BenchRequest, spec: SuiteSpec, plan: WorkloadPlan | None) -> tuple[list[Case], list[str]]:
    """The suite's cases, the workload's and the extra ones, narrowed to ``--case``; notes of the workload's."""
    suite = build_cases(spec)
    added: tuple[Case, ...] = ()
    notes: tuple[str, ...] = ()
    if plan is not None:
        added, notes = workload_cases(plan, spec, req.decode_batches, {c.case_id for c in suite})
    extra = _extra(req, spec) if plan is None or not plan.decode_batch else req.extra_cases
    return _select([*suite, *added, *extra], req.only), list(notes)


def _select(cases: list[Case], only: tuple[str, ...]) -> list[Case]:
    """The cases named in ``only`` (all when empty); an unknown name is refused with the suite's names."""
    if not only:
        return cases
    names = [c.case_id for c in cases]
    unknown = [o for o in only if o not in names]
    if unknown:
        raise InputError(f"no case {unknown[0]!r} in this suite", f"its cases: {', '.join(names)}")
    return [c for c in cases if c.case_id in only]


def _extra(req: BenchRequest, spec: SuiteSpec) -> tuple[Case, ...]:
    ctx = 64 if spec.tiny else 2048
    variant = "eager" if spec.tiny else "graph"
    added = tuple(Case(f"decode-b{b}-extra", "decode", {**spec.model_params(), "batch": b, "context": ctx,
                                                        "variant": variant, "seed": spec.seed}, 300.0, 15.0)
                  for b in req.decode_batches)
    return added + req.extra_cases


def _run_cases(rec: Recording, tele: CaseTelemetry, cases: Sequence[Case], gpu: str | None,
               say: Progress, stored: list[dict[str, Any]]) -> list[CaseReport]:
    reports: list[CaseReport] = []
    remaining = sum(c.expected_s for c in cases)
    for i, case in enumerate(cases):
        say("case", i, len(cases), case.case_id, remaining)
        tele.begin(case.case_id)
        got = run_in_child(case.to_dict(), case.timeout_s)
        window = tele.end(case.case_id)
        report = _record_case(rec, case, got, gpu, stored)
        rec.add_event(window[1], "case", {**report.to_dict(), "window_s": list(window),
                                          "telemetry": tele.flush(case.case_id)})
        reports.append(report)
        remaining = max(0.0, remaining - case.expected_s)
    return reports


def _record_case(rec: Recording, case: Case, got: ChildOutcome, gpu: str | None,
                 stored: list[dict[str, Any]]) -> CaseReport:
    base = {"case": case.case_id, "kind": case.kind}
    if got.outcome is None:
        rec.add_failure(base, got.error_class, got.message, got.log_tail)
        return CaseReport(case.case_id, case.kind, "failed", got.wall_s, 0, got.error_class, got.message)
    out = got.outcome
    if out["status"] == "skipped":
        rec.add_failure(base, "skipped", out["reason"])
        return CaseReport(case.case_id, case.kind, "skipped", got.wall_s, 0, "skipped", out["reason"])
    shape = case.params.get("model")
    for r in out["results"]:
        extra = {**r["extra"], **annotate(r["metric"], float(r["value"]), r["config"],
                                          shape if isinstance(shape, dict) else None, gpu)}
        rec.add_result(r["metric"], r["value"], r["unit"], config={**base, **r["config"]}, extra=extra)
        stored.append({**r, "config": {**base, **r["config"]}})
    for f in out["failures"]:
        rec.add_failure({**base, **f["config"]}, f["error_class"], f["message"])
    if not out["failures"]:
        return CaseReport(case.case_id, case.kind, "ok", got.wall_s, len(out["results"]))
    first = out["failures"][0]
    status = "partial" if out["results"] else "failed"
    return CaseReport(case.case_id, case.kind, status, got.wall_s, len(out["results"]), first["error_class"],
                      f"{len(out['failures'])} part(s) failed, first: {first['message']}")


def _idle(rec: Recording, tele: CaseTelemetry) -> None:
    """Sample the idle GPU before the first case and store ``idle_power_w`` (W): the settled idle power of that
    window (:func:`gpumatch.telemetry.window.settled_idle_power`)."""
    idle = tele.measure_idle()
    if idle is not None:
        rec.add_result("idle_power_w", idle["power_w"], "W", config={"case": "idle"},
                       extra={"n": idle["n"], "window_s": idle["window_s"], "settle_s": idle["settle_s"],
                              "formula": IDLE_FORMULA})


def _derived(rec: Recording, stored: Sequence[dict[str, Any]], tele: CaseTelemetry) -> None:
    """Results computed from this run's stored rows (raw first: recomputable from them and the samples):
    ``decode_mbu`` (:data:`MBU_FORMULA`) and, where telemetry saw the row's power, the energy per token
    ``*_energy_j_per_token`` (gross) and ``*_energy_net_j_per_token`` (idle-subtracted), :data:`ENERGY_FORMULA`,
    and per step (``*_energy_j_per_step``, ``*_energy_net_j_per_step``: mean power × step time, J)."""
    copies = [r["value"] for r in stored if r["metric"] == "copy_bytes_per_s"]
    best = max(copies) if copies else None
    for r in stored:
        extra = r["extra"]
        if r["metric"] == "decode_step_s" and best and extra.get("bytes_per_step"):
            rec.add_result("decode_mbu", extra["bytes_per_step"] / r["value"] / best, "1", config=r["config"],
                           extra={"formula": MBU_FORMULA, "copy_bytes_per_s": best,
                                  "bytes_per_step": extra["bytes_per_step"]})
        tokens = _tokens_per_step(r)
        power, n, basis = _row_power(r, tele)
        if not tokens or power is None:
            continue
        name = r["metric"].removesuffix("_step_s").removesuffix("_s")
        common = {"formula": ENERGY_FORMULA, "power_w_mean": power, "n_samples": n, "power_basis": basis,
                  "idle_power_w": tele.idle_power_w}
        net = None if tele.idle_power_w is None else power - tele.idle_power_w
        for suffix, watts, basis in (("", power, "gross"), ("_net", net, "idle-subtracted")):
            if watts is None:
                continue
            rec.add_result(f"{name}_energy{suffix}_j_per_token", watts * r["value"] / tokens, "J/token",
                           config=r["config"], extra={**common, "basis": basis})
            rec.add_result(f"{name}_energy{suffix}_j_per_step", watts * r["value"], "J/step",
                           config=r["config"], extra={**common, "basis": basis})


def _row_power(r: dict[str, Any], tele: CaseTelemetry) -> tuple[float | None, int, str]:
    """Mean power behind a row's energy: its own power window when the sampler saw
    :data:`~gpumatch.telemetry.window.MIN_WINDOW_SAMPLES` samples or more in it,
    else the whole case's window (which includes the child's start-up: a lower bound)."""
    window = r["extra"].get("power_window_monotonic_s")
    if window:
        power, n = tele.power_in(window)
        if n >= MIN_WINDOW_SAMPLES:
            return power, n, "power window"
    case = tele.by_case.get(r["config"].get("case", "")) or {}
    return case.get("power_w_mean"), int(case.get("n_samples") or 0), "case window (start-up included)"


IDLE_FORMULA = ("median(power_avg_w) over the idle samples of a window before the first case, from 1 s after "
                "the clocks settled (GpuIdle reason, else the SM clock at its floor)")
ENERGY_FORMULA = ("mean(power_instant_w, else power_avg_w, over the row's power window) * step_s / tokens_per_step; "
                  "net: (mean power - idle_power_w) * step_s / tokens_per_step")


def _tokens_per_step(r: dict[str, Any]) -> int | None:
    c = r["config"]
    if r["metric"] == "decode_step_s":
        return int(c["batch"])
    if r["metric"] in ("prefill_s", "train_step_s"):
        return int(c["batch"]) * int(c["seq"])
    return None
