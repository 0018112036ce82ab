"""``gpumatch bench run`` as one library call: :func:`run_bench`.

Each case of the suite (:mod:`gpumatch.lab.suites`) runs in its own child process (:mod:`gpumatch.lab.child`);
the run is recorded through :class:`gpumatch.record.Recording` (kind ``bench``) as it goes, so every finished
case is in the store whatever happens next:

- a case's results with, in ``extra``, ``n``, the percentiles ``n`` supports, the raw timings, gpumatch's
  ``predicted`` value and ``ratio`` = measured / predicted (or the ``datasheet`` figure and its ratio);
- a failed case (``oom``, ``error``, ``timeout``, ``crash``) as a failure with its message and log tail; a
  skipped case (the device cannot run it) as a failure of class ``skipped`` with the reason; the suite goes on;
- an event ``case`` per case (status, seconds, its telemetry window and summary);
- derived results at the end: ``decode_mbu`` = (bytes per step / step time) / the best measured copy bandwidth.

Ctrl-C (KeyboardInterrupt, also SIGTERM through the CLI): the running case's child is killed, the run is
closed ``interrupted`` with what finished, and the interrupt propagates (the CLI exits 130).
The parent never imports torch: the environment manifest is collected in a child too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpumatch.errors import GpumatchError, InputError
from gpumatch.lab.child import ChildOutcome, run_in_child
from gpumatch.lab.predict import annotate, catalog_gpu
from gpumatch.lab.suites import DEFAULT_SOAK_S, PRECISIONS, SUITES, TRAIN_MODEL, Case, SuiteSpec, build_cases
from gpumatch.lab.telemetry import CaseTelemetry
from gpumatch.record import Recording

Progress = Callable[[str, int, int, str, float], None]
"""``progress(phase, done, total, case_id, eta_s)``: phase ``probe``, ``case`` (starting ``case_id``) or ``done``."""

MBU_FORMULA = "(bytes_per_step / decode_step_s) / max(copy_bytes_per_s)"


@dataclass(frozen=True)
class BenchRequest:
    """What ``gpumatch bench run`` was asked. ``tiny`` None: tiny exactly when the machine has no CUDA."""

    suite: str = "quick"
    model: str | None = None
    hf_config: Path | None = None
    precisions: tuple[str, ...] = PRECISIONS
    tiny: bool | None = None
    store: Path | str | None = None
    duration_s: float = DEFAULT_SOAK_S
    seed: int = 0
    decode_batches: tuple[int, ...] = ()
    extra_cases: tuple[Case, ...] = ()
    only: tuple[str, ...] = ()
    use_store: bool = True


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


def check_request(req: BenchRequest) -> None:
    """Refuse a bad request before anything runs (one-line InputError)."""
    if req.suite not in SUITES:
        raise InputError(f"unknown suite {req.suite!r}", f"one of {', '.join(SUITES)}")
    bad = [p for p in req.precisions if p not in PRECISIONS]
    if bad or not req.precisions:
        raise InputError(f"unknown precision {bad[0] if bad else '(none)'!r}", f"one of {', '.join(PRECISIONS)}")
    if req.model and req.hf_config:
        raise InputError("give --model or --hf-config, not both")
    if req.duration_s <= 0:
        raise InputError(f"--duration must be positive, not {req.duration_s}")
    if any(b < 1 for b in req.decode_batches):
        raise InputError("--decode-batch must be 1 or more")


def model_shape(req: BenchRequest, tiny: bool) -> dict[str, Any]:
    """The bench shape of the decode/prefill model: ``--model`` / ``--hf-config``, else the Llama-3-8B shape;
    with ``tiny``, a 2-layer stand-in. Models the bench decoder cannot run (MoE, MLA, ungated MLP) are refused."""
    from gpumatch.bench import shapes

    if tiny:
        return shapes.tiny_shape()
    source = req.model or (str(req.hf_config) if req.hf_config else None)
    if source is None:
        return dict(shapes.LLAMA_3_8B)
    from gpumatch.models import resolve_model

    arch = resolve_model(source)
    if arch.experts or arch.q_lora_rank or arch.kv_lora_rank or not arch.gated_mlp:
        raise InputError(f"model {arch.name} is not a dense Llama-style decoder (MoE, MLA or ungated MLP)",
                         "the bench's decoder runs dense gated-MLP models; give one with --model or --hf-config")
    return {"name": arch.name, "layers": arch.layers, "hidden": arch.hidden_size, "heads": arch.heads,
            "kv_heads": arch.kv_heads, "head_dim": arch.head_dim, "ffn": arch.ffn_size, "vocab": arch.vocab_size,
            "tied": arch.tied_embeddings}


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
    from gpumatch.bench.manifest import Manifest

    check_request(req)
    say = progress or (lambda *a: None)
    say("probe", 0, 0, "environment", 0.0)
    fields = _probe({"run.seed": req.seed, "run.precisions": list(req.precisions), "suite.name": req.suite})
    tiny = req.tiny if req.tiny is not None else fields.get("device.kind") != "cuda"
    model = model_shape(req, tiny)
    train_model = model if tiny else shapes.PRESETS[TRAIN_MODEL]
    fields.update({"suite.tiny": tiny, "model.name": model.get("name"), "model.architecture": model,
                   "model.train_architecture": train_model})
    manifest = Manifest(fields)
    spec = SuiteSpec(req.suite, model, train_model, req.precisions, tiny, req.duration_s, req.seed)
    cases = _select(build_cases(replace(spec, extra_cases=_extra(req, spec))), req.only)
    config = {"suite": req.suite, "tiny": tiny, "model": model.get("name"), "cases": [c.case_id for c in cases],
              "precisions": list(req.precisions), "duration_s": req.duration_s, "seed": req.seed}
    cuda = fields.get("device.kind") == "cuda"
    gpu = catalog_gpu(fields.get("gpu.name") or fields.get("device.name")) if cuda else None
    name = f"{req.suite} {model.get('name')}"
    with Recording("bench", name, manifest.to_dict(), config, use_store=req.use_store,
                   store_path=req.store) as rec, CaseTelemetry(rec, tiny, telemetry) as tele:
        stored: list[dict[str, Any]] = []
        reports = _run_cases(rec, tele, cases, gpu, say, stored)
        _derived(rec, stored, tele.by_case)
        ok = sum(r.status == "ok" for r in reports)
        outcome = rec.close("completed", {"cases": len(reports), "ok": ok, "gpu": gpu,
                                          "failed": sum(r.status == "failed" for r in reports),
                                          "skipped": sum(r.status == "skipped" for r in reports)})
    say("done", len(cases), len(cases), "", 0.0)
    if outcome.error is not None:
        raise GpumatchError(f"results store not updated: {outcome.error}",
                            f"what it did not take is in {', '.join(map(str, outcome.fallback)) or 'nowhere'}")
    return BenchRun(outcome.run_id, outcome.store_path, outcome.status, manifest.sha256, tuple(reports))


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
    added = tuple(Case(f"decode-b{b}-extra", "decode", {"model": spec.model, "batch": b, "context": ctx,
                                                        "variant": variant, "seed": spec.seed}, 300.0, 15.0)
                  for b in req.decode_batches)
    return added + req.extra_cases


def _run_cases(rec: Recording, tele: CaseTelemetry, cases: Sequence[Case], gpu: str | None,
               say: Progress, stored: list[dict[str, Any]]) -> list[CaseReport]:
    reports: list[CaseReport] = []
    remaining = sum(c.expected_s for c in cases)
    for i, case in enumerate(cases):
        say("case", i, len(cases), case.case_id, remaining)
        t0 = tele.now()
        got = run_in_child(case.to_dict(), case.timeout_s)
        window = (t0, tele.now())
        report = _record_case(rec, case, got, gpu, stored)
        rec.add_event(window[1], "case", {**report.to_dict(), "window_s": list(window),
                                          "telemetry": tele.flush(case.case_id, window)})
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


def _derived(rec: Recording, stored: Sequence[dict[str, Any]], telemetry: dict[str, dict[str, Any]]) -> None:
    """Results computed from this run's stored rows (raw first: recomputable from them): ``decode_mbu``
    (:data:`MBU_FORMULA`) and, where the case's window has power samples, the gross energy per token
    ``*_energy_j_per_token`` = mean power in the case's window × step time / tokens per step."""
    copies = [r["value"] for r in stored if r["metric"] == "copy_bytes_per_s"]
    best = max(copies) if copies else None
    for r in stored:
        extra = r["extra"]
        if r["metric"] == "decode_step_s" and best and extra.get("bytes_per_step"):
            rec.add_result("decode_mbu", extra["bytes_per_step"] / r["value"] / best, "1", config=r["config"],
                           extra={"formula": MBU_FORMULA, "copy_bytes_per_s": best,
                                  "bytes_per_step": extra["bytes_per_step"]})
        tokens = _tokens_per_step(r)
        power = (telemetry.get(r["config"].get("case", "")) or {}).get("power_w_mean")
        if tokens and power:
            name = r["metric"].removesuffix("_step_s").removesuffix("_s")
            rec.add_result(f"{name}_energy_j_per_token", power * r["value"] / tokens, "J/token", config=r["config"],
                           extra={"formula": ENERGY_FORMULA, "power_w_mean": power, "basis": "gross"})


ENERGY_FORMULA = "mean(power_instant_w in the case's window) * step_s / tokens_per_step (gross: idle not subtracted)"


def _tokens_per_step(r: dict[str, Any]) -> int | None:
    c = r["config"]
    if r["metric"] == "decode_step_s":
        return int(c["batch"])
    if r["metric"] in ("prefill_s", "train_step_s"):
        return int(c["batch"]) * int(c["seq"])
    return None
