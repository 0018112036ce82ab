"""``gpumatch bench run --workload W.toml``: the suite measures the user's configuration.

The workload file is read by :func:`gpumatch.workload.load_workload` and its shared concepts by
:func:`gpumatch.workload.request.file_fields` (the one mapping ``estimate`` and ``plan`` use too). From it:

- the decode/prefill model (the workload's ``model``; refused like ``--model`` when the bench decoder cannot run
  it), and the GEMM precisions: the workload's compute format (``precision.compute``);
- inference tasks (infer, serve, dev): a decode case at the sequences in flight (``max(batch_size,
  concurrency)``) over a KV cache of prompt + output tokens (the longest context of a request: the TPOT of its
  last token), and a prefill case of one prompt (batch 1 × ``prompt_tokens``: TTFT without queueing);
- training tasks: a training step at the micro-batch (``micro_batch_size``, else 1 sequence) × ``sequence_length``
  on the bench's training model (every parameter trained, AMP with fp32 master weights when the workload keeps
  them); the workload's own model is not trained (a 70B step does not fit one card);
- the kernel-path check of the model's GEMMs at the workload's compute format.

Flags win over the file (``--model``, ``--hf-config``, ``--weights``, ``--precision``, ``--decode-batch``); each
such conflict, and each adjustment (``--tiny`` caps, a format the bench does not run), is a note in the run's
manifest (``run.notes``) and printed after the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpumatch.lab.suites import PRECISIONS, Case, SuiteSpec

TINY_CAPS = {"batch": 16, "context": 256, "train_batch": 2, "train_seq": 64}
"""``--tiny`` caps of the workload's sizes (the CPU smoke test stays seconds long)."""


@dataclass(frozen=True)
class WorkloadPlan:
    """What a workload file asks of the bench (module docstring); ``notes`` say what was changed and why."""

    name: str
    source: str
    task: str
    arch: Any
    precision: str | None
    decode_batch: int | None = None
    context: int | None = None
    prompt: int | None = None
    train: dict[str, Any] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def manifest(self) -> dict[str, Any]:
        return {"workload.name": self.name, "workload.source": self.source, "workload.task": self.task}


def load_plan(path: Path) -> WorkloadPlan:
    """Read ``path`` (a bad file is a one-line DataFileError, exit 2) into a plan."""
    from gpumatch.workload import load_workload
    from gpumatch.workload.request import file_fields

    wl = load_workload(path, resolve_gpus=False)
    f = file_fields(wl)
    compute = wl.precision.compute
    notes: list[str] = []
    precision: str | None = compute if compute in PRECISIONS else None
    if precision is None:
        notes.append(f"precision: the workload computes in {compute}, which the bench does not run; GEMMs at all "
                     "its precisions")
    if wl.precision.weights != compute:
        notes.append(f"precision: weights stored as {wl.precision.weights} run as {compute} weights here (the "
                     "quality check with --weights and --text shows int8/fp8 weight effects)")
    common: dict[str, Any] = {"name": wl.name, "source": str(path), "task": wl.task, "arch": wl.model,
                              "precision": precision}
    if wl.is_training:
        micro = f.get("micro_batch")
        if micro is None:
            notes.append("training: the workload leaves micro_batch_size to the planner; 1 sequence per step here")
        master = "fp32" if wl.precision.master_weights == "fp32" else "none"
        train = {"batch": int(micro or 1), "seq": int(f["seq"]), "master": master}
        return WorkloadPlan(**common, train=train, notes=tuple(notes))
    prompt = int(f.get("prompt", 0))
    return WorkloadPlan(**common, decode_batch=int(f["concurrency"]), context=prompt + int(f["gen"]),
                        prompt=prompt, notes=tuple(notes))


def workload_cases(plan: WorkloadPlan, spec: SuiteSpec, decode_batches: tuple[int, ...],
                   suite_ids: set[str]) -> tuple[tuple[Case, ...], tuple[str, ...]]:
    """The cases of the workload's configuration (module docstring) and the notes of what changed."""
    notes: list[str] = []
    cases: list[Case] = []

    def cap(value: int, key: str, what: str) -> int:
        if spec.tiny and value > TINY_CAPS[key]:
            notes.append(f"tiny: {what} {value} capped at {TINY_CAPS[key]}")
            return TINY_CAPS[key]
        return value

    t = 120.0 if spec.tiny else 300.0
    if plan.train is not None:
        b, s = cap(plan.train["batch"], "train_batch", "training batch"), cap(plan.train["seq"], "train_seq", "seq")
        cases.append(Case("workload-train", "train", {"model": spec.train_model, "batch": b, "seq": s,
                                                      "recompute": "none", "master": plan.train["master"],
                                                      "seed": spec.seed}, t, 20.0))
    if plan.decode_batch is not None and plan.context is not None:
        batches = list(decode_batches) or [plan.decode_batch]
        if decode_batches:
            notes.append(f"decode batch: --decode-batch {', '.join(map(str, decode_batches))} wins over the "
                         f"workload's {plan.decode_batch}")
        ctx = cap(plan.context, "context", "decode context")
        variant = "eager" if spec.tiny else "graph"
        cases.append(Case("workload-decode", "decode", {**spec.model_params(), "batches": [
            cap(b, "batch", "decode batch") for b in batches], "context": ctx, "variant": variant,
            "seed": spec.seed}, 540.0, 30.0))
    if plan.prompt:
        seq = cap(plan.prompt, "context", "prompt")
        cases.append(Case("workload-prefill", "prefill", {**spec.model_params(), "batch": 1, "seq": seq,
                                                          "seed": spec.seed}, t, 12.0))
    for p in spec.precisions if plan.precision is not None else ():
        if f"kernelpath-{p}" not in suite_ids:
            tokens, iters = (16, 2) if spec.tiny else (2048, 10)
            cases.append(Case(f"workload-kernelpath-{p}", "kernelpath", {"model": spec.model, "precision": p,
                                                                        "tokens": tokens, "iters": iters}, t, 8.0))
    return tuple(cases), tuple(notes)
