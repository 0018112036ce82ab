"""One request from a workload file and the command-line flags: the ONE mapping ``estimate`` and ``plan`` share.

:func:`resolve_request` reads the shared concepts of a workload file, puts the flags the user gave on top and
returns a :class:`WorkRequest`. ``gpumatch estimate`` turns that into one estimate's request
(:func:`gpumatch.estimate.query.request_of`, a :class:`gpumatch.estimate.Request` with the same concept names),
``gpumatch plan`` into a planning question
(:func:`gpumatch.plan.request.from_request`); neither reads the file's shape or precision fields itself.

Each concept has one name, the same as a flag, a request field and (where the file has it) a workload field:

========================  =======================  ===========================================================
concept (flag)            workload field           meaning
========================  =======================  ===========================================================
concurrency               shape.concurrency,       inference (infer, serve, dev): sequences in flight over
(``--concurrency``)       shape.batch_size         all replicas; from a file ``max(batch_size, concurrency)``
global_batch              shape.batch_size         training: sequences per optimizer step over all DP ranks
(``--global-batch``)
micro_batch               shape.micro_batch_size   training: sequences per DP rank per forward/backward pass
(``--micro-batch``)
seq / prompt / gen        shape.sequence_length /  training tokens per sequence / prompt and generated tokens
                          prompt/output_tokens     per request (a file's ``output_tokens = 0`` counts as 1)
precision, kv_precision   precision.weights,       stored weights; KV cache (the file's kv_cache only when it
                          precision.kv_cache       differs from its compute format, else the estimator default)
optimizer                 training.optimizer       the estimator's name (``adamw8bit`` -> ``adamw-8bit``; an
                          (precision.optimizer)    int8 ``precision.optimizer`` -> ``adamw-8bit``)
========================  =======================  ===========================================================

Why ``max(batch_size, concurrency)`` for a file's sequences in flight: ``concurrency`` is requests in flight and
``batch_size`` sequences per forward pass; a forward of ``batch_size`` sequences has at least that many in flight,
so the KV cache and the decode step see the larger, whichever field the file used (the schema defaults both to 1).

The deprecated ``--batch`` keeps its old meaning per command (``batch_means``): for ``estimate`` the micro-batch
per DP rank (training) or the sequences per replica (inference: :attr:`WorkRequest.replica_batch`); for ``plan``
the global batch (training) or the sequences in flight (inference).

Flags override the file. A flag ``--task`` of the other kind (training vs inference) drops the file's fields of
its own kind, which no longer apply; ``--seq`` on an inference task (the prompt length) replaces the file's
prompt, ``--prompt`` its sequence length.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

from gpumatch.errors import InputError
from gpumatch.models import ModelArch, resolve_model
from gpumatch.vocab import OPTIMIZER_OF_WORKLOAD, TASKS, WORKLOAD_OPTIMIZERS, is_training
from gpumatch.workload.rules import MAX_BATCH, check_size
from gpumatch.workload.spec import Workload

BatchMeaning = Literal["per-rank", "per-step"]
"""What the deprecated ``--batch`` means: ``per-rank`` (estimate) or ``per-step`` (plan); module docstring."""


@dataclass(frozen=True)
class RequestFlags:
    """The flags ``estimate`` and ``plan`` share, one field per concept (module docstring); None = not given."""

    model: str | None = None
    task: str | None = None
    concurrency: int | None = None
    global_batch: int | None = None
    micro_batch: int | None = None
    batch: int | None = None
    """The deprecated ``--batch``; ``batch_means`` says which concept it is."""
    batch_means: BatchMeaning = "per-step"
    seq: int | None = None
    prompt: int | None = None
    gen: int | None = None
    precision: str | None = None
    kv_precision: str | None = None
    optimizer: str | None = None
    master_weights: str | None = None
    price_basis: str | None = None
    gpus_per_node: int | None = None
    engine: str | None = None
    request_rate: float | None = None
    prefix_hit_ratio: float | None = None


@dataclass(frozen=True)
class WorkRequest:
    """The shared concepts of one request, file and flags merged (module docstring); None = neither set it.

    ``from_flags`` names the fields a flag set (``model`` and ``task`` included; the rest came from the file);
    ``spelling`` how the user wrote
    each flag (``--batch`` for the deprecated spelling), so messages name what was typed.
    """

    task: str
    model: ModelArch | None = None
    workload: Workload | None = None
    concurrency: int | None = None
    replica_batch: int | None = None
    """Inference, deprecated ``estimate --batch`` only: sequences per replica (in flight = this × replicas)."""
    global_batch: int | None = None
    micro_batch: int | None = None
    seq: int | None = None
    prompt: int | None = None
    gen: int | None = None
    precision: str | None = None
    kv_precision: str | None = None
    optimizer: str | None = None
    master_weights: str | None = None
    lora_rank: int | None = None
    train_tokens: float | None = None
    price_basis: str | None = None
    gpus_per_node: int | None = None
    engine: str | None = None
    """Task ``serve``: the serving engine (``[serving] engine``, ``--engine``)."""
    request_rate: float | None = None
    prefix_hit_ratio: float | None = None
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    """Task ``serve`` from a file: ``targets.ttft_p50_s`` / ``tpot_p50_s``, the targets goodput is measured against."""
    from_flags: frozenset[str] = frozenset()
    spelling: dict[str, str] = field(default_factory=dict)

    @property
    def training(self) -> bool:
        return is_training(self.task)

    def flag(self, name: str) -> str:
        """How the user wrote the option behind field ``name``: the flag (``--concurrency``, ``--batch``) or, for
        a value from the file, its field (``shape.concurrency``)."""
        if name not in self.spelling and self.workload is not None and name in FILE_FIELDS:
            return FILE_FIELDS[name]
        return self.spelling.get(name, f"--{name.replace('_', '-')}")

    def given(self) -> dict[str, Any]:
        """The concept fields set by the file or a flag (field name -> value)."""
        skip = {"task", "model", "workload", "from_flags", "spelling"}
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in skip and getattr(self, f.name) is not None}


#: The workload field each concept comes from (for messages).
FILE_FIELDS = {
    "concurrency": "shape.concurrency", "global_batch": "shape.batch_size", "micro_batch": "shape.micro_batch_size",
    "seq": "shape.sequence_length", "prompt": "shape.prompt_tokens", "gen": "shape.output_tokens",
    "precision": "precision.weights", "kv_precision": "precision.kv_cache", "optimizer": "training.optimizer",
    "engine": "serving.engine", "request_rate": "serving.request_rate", "prefix_hit_ratio": "serving.prefix_hit_ratio",
    "slo_ttft_s": "targets.ttft_p50_s", "slo_tpot_s": "targets.tpot_p50_s",
}  # fmt: skip
#: Concepts only one kind of task reads (a file's fields of the other kind are dropped; a flag is an error).
TRAINING_CONCEPTS = ("global_batch", "micro_batch", "seq", "optimizer", "master_weights", "lora_rank", "train_tokens")
INFERENCE_CONCEPTS = ("concurrency", "replica_batch", "prompt", "gen", "kv_precision")
#: Concepts of task ``serve`` only (a serving engine's steady state); a file's are dropped for other tasks.
SERVING_CONCEPTS = ("engine", "request_rate", "prefix_hit_ratio", "slo_ttft_s", "slo_tpot_s")
_BATCHES = ("concurrency", "replica_batch", "global_batch", "micro_batch")


def resolve_request(workload: Workload | None, flags: RequestFlags) -> WorkRequest:
    """The request of ``workload`` (if any) with ``flags`` on top (module docstring has every mapping).

    Raises :class:`InputError` for an unknown task, a batch flag that does not apply to the task, a batch out of
    range, ``--batch`` given with the flag that replaces it, and a file optimizer the estimator does not model.
    """
    task = flags.task or (workload.task if workload is not None else "infer")
    if task not in TASKS:
        raise InputError(f"unknown task {task!r}", f"use one of {', '.join(TASKS)}")
    values = {k: v for k, v in file_fields(workload).items() if _applies(k, task)} if workload else {}
    given, spelling = _flag_fields(flags, task)
    if "seq" in given and not is_training(task):
        values.pop("prompt", None)
    if "prompt" in given:
        values.pop("seq", None)
    values.update(given)
    model = resolve_model(flags.model) if flags.model else (workload.model if workload is not None else None)
    named = {k for k in ("model", "task") if getattr(flags, k)}
    return WorkRequest(task=task, model=model, workload=workload, from_flags=frozenset(given) | named,
                       spelling=spelling, **values)


def file_fields(wl: Workload) -> dict[str, Any]:
    """The shared concepts a resolved workload sets (module docstring), both kinds; None values left out."""
    p, s = wl.precision, wl.shape
    out: dict[str, Any] = {
        "precision": p.weights, "price_basis": wl.money.price_basis, "gpus_per_node": wl.limits.gpus_per_node,
        "concurrency": max(s.batch_size, s.concurrency), "prompt": s.prompt_tokens, "gen": max(1, s.output_tokens),
        "kv_precision": None if wl.is_training or p.kv_cache == p.compute else p.kv_cache,
    }
    if wl.serving is not None:
        out.update(engine=wl.serving.engine, request_rate=wl.serving.request_rate,
                   prefix_hit_ratio=wl.serving.prefix_hit_ratio or None, slo_ttft_s=wl.targets.ttft_p50_s,
                   slo_tpot_s=wl.targets.tpot_p50_s)
    if wl.is_training:
        out.update(global_batch=s.batch_size, micro_batch=s.micro_batch_size, seq=s.sequence_length,
                   optimizer=workload_optimizer(wl), master_weights=p.master_weights, lora_rank=s.lora_rank,
                   train_tokens=wl.targets.train_tokens)
    return {k: v for k, v in out.items() if v is not None}


def workload_optimizer(wl: Workload) -> str:
    """The estimator's optimizer for a training workload: ``training.optimizer`` by its map, 8-bit AdamW when
    ``precision.optimizer = int8``; one the estimator does not model (adafactor) is an error."""
    name = wl.optimizer or "adamw"
    optimizer = OPTIMIZER_OF_WORKLOAD.get(name)
    if optimizer is None:
        known = [n for n in WORKLOAD_OPTIMIZERS if n in OPTIMIZER_OF_WORKLOAD]
        raise InputError(f"{wl.source or wl.name}: optimizer {name!r} is not modelled by the estimator",
                         f"use {', '.join(known[:-1])} or {known[-1]} in training.optimizer")
    return "adamw-8bit" if wl.precision.optimizer == "int8" else optimizer


def _applies(name: str, task: str) -> bool:
    if name in SERVING_CONCEPTS:
        return task == "serve"
    return name not in (INFERENCE_CONCEPTS if is_training(task) else TRAINING_CONCEPTS)


def _flag_fields(flags: RequestFlags, task: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(concept -> value, concept -> flag as written) of the flags given, the deprecated ``--batch`` resolved;
    batch flags checked against the task and their bounds."""
    skip = {"model", "task", "batch", "batch_means"}
    given = {f.name: getattr(flags, f.name) for f in fields(flags)
             if f.name not in skip and getattr(flags, f.name) is not None}
    spelling = {name: f"--{name.replace('_', '-')}" for name in given}
    if flags.batch is not None:
        name = _legacy_batch(flags.batch_means, task)
        new = "concurrency" if name == "replica_batch" else name  # the flag that replaces --batch
        if new in given:
            raise InputError(f"--batch and {spelling[new]} both set {new.replace('_', ' ')}",
                             f"give {spelling[new]} only (--batch is deprecated)")
        given[name], spelling[name] = flags.batch, "--batch"
    for name in _BATCHES:
        if name in given and not _applies(name, task):
            kind, other = ("inference", "--task infer or serve") if is_training(task) else \
                ("training", "--task train, finetune, lora or qlora")
            raise InputError(f"{spelling[name]} is for {kind} only, but the task is {task!r}",
                             f"drop {spelling[name]} or use {other}")
        value = given.get(name)
        check_size(spelling.get(name, name), value if isinstance(value, int) else None, MAX_BATCH)
    return given, spelling


def _legacy_batch(means: BatchMeaning, task: str) -> str:
    """The concept the deprecated ``--batch`` sets for ``task`` (module docstring)."""
    if is_training(task):
        return "micro_batch" if means == "per-rank" else "global_batch"
    return "replica_batch" if means == "per-rank" else "concurrency"


#: What the deprecated ``--batch`` became, and the flag to use instead.
_REPLACED_BY = {
    "concurrency": "--concurrency (sequences in flight)",
    "replica_batch": "--concurrency (sequences in flight over all replicas: --batch × replicas)",
    "global_batch": "--global-batch (sequences per optimizer step)",
    "micro_batch": "--micro-batch (sequences per DP rank per step)",
}


def deprecation_notes(work: WorkRequest) -> tuple[str, ...]:
    """One line per deprecated flag ``work`` was given with, naming the flag that replaces it."""
    return tuple(f"--batch is deprecated; for task {work.task!r} use {_REPLACED_BY[name]}"
                 for name, written in work.spelling.items() if written == "--batch")
