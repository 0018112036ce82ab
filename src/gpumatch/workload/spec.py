"""The runtime workload: frozen values in SI units, with the defaults that depend on the task resolved.

Build one with :func:`gpumatch.workload.load_workload` (from a file) or :func:`build_workload` (from a
validated :class:`WorkloadFile` plus the resolved model). Defaults, and why:

- precision: ``weights`` bf16 (nf4 for qlora); ``compute`` = weights for float formats, bf16 for
  integer/4-bit storage (weight-only quantization dequantizes into BF16 GEMMs); ``kv_cache`` = compute
  (fp32 for tf32); training only: ``gradients`` = compute, ``optimizer`` fp32 moments, ``master_weights``
  fp32 when weights are 16-bit (mixed-precision training keeps an FP32 copy), none for fp32 weights; ``amp``
  names PyTorch AMP (fp32 parameters under autocast; recipes in :mod:`gpumatch.estimate.options`);
- shape: inference 1024 prompt + 256 output tokens; training 4096-token sequences; LoRA rank 16.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gpumatch.models import ModelArch
from gpumatch.vocab import ADAPTER_TASKS, FULL_TRAINING_TASKS
from gpumatch.workload.rules import context_problem, misplaced_options
from gpumatch.workload.schema import FOUR_BIT, TRAINING_TASKS, PrecisionSection, WorkloadFile

DEFAULT_PROMPT_TOKENS = 1024
DEFAULT_OUTPUT_TOKENS = 256
DEFAULT_TRAIN_SEQUENCE = 4096
DEFAULT_LORA_RANK = 16
_FLOAT_COMPUTE = frozenset({"fp32", "tf32", "bf16", "fp16", "fp8", "fp4"})


class WorkloadRuleError(ValueError):
    """A combination of fields that cannot go together; ``field`` is the dotted key to fix."""

    def __init__(self, field: str, message: str, hint: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class Precision:
    weights: str
    compute: str
    kv_cache: str
    gradients: str | None
    optimizer: str | None
    master_weights: str | None


@dataclass(frozen=True)
class Shape:
    batch_size: int
    micro_batch_size: int | None
    sequence_length: int
    prompt_tokens: int
    output_tokens: int
    concurrency: int
    lora_rank: int | None


@dataclass(frozen=True)
class Targets:
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_p99_s: float | None = None
    tokens_per_s: float | None = None
    train_tokens: float | None = None
    deadline_s: float | None = None

    @property
    def required_train_tokens_per_s(self) -> float | None:
        """train_tokens / deadline_s: the throughput a time-to-train target implies."""
        if self.train_tokens is None or self.deadline_s is None:
            return None
        return self.train_tokens / self.deadline_s


@dataclass(frozen=True)
class Limits:
    max_gpus: int | None
    gpus_per_node: int
    max_nodes: int | None

    @property
    def max_gpus_effective(self) -> int | None:
        """The tighter of max_gpus and gpus_per_node × max_nodes (None = unbounded)."""
        caps = [c for c in (self.max_gpus, self.max_nodes and self.max_nodes * self.gpus_per_node) if c]
        return min(caps) if caps else None


@dataclass(frozen=True)
class PowerBudget:
    w_per_node: float | None
    psu_w: float | None
    cooling: str


@dataclass(frozen=True)
class Money:
    """Money fields of a workload (USD, SI); see :class:`gpumatch.workload.schema.MoneySection`."""

    purchase_budget_usd: float | None
    usd_per_gpu_hour: dict[str, float]  # canonical GPU name -> $/GPU-hour (overrides catalog quotes)
    electricity_usd_per_kwh: float
    pue: float
    lifetime_years: float
    utilization: float
    price_basis: str = "on-demand"
    purchase_usd_per_gpu: dict[str, float] = field(default_factory=dict)  # canonical GPU name -> $ per card


@dataclass(frozen=True)
class Serving:
    """The ``[serving]`` section of a ``serve`` workload (schema.ServingSection)."""

    engine: str = "vllm"
    request_rate: float | None = None
    prefix_hit_ratio: float = 0.0


@dataclass(frozen=True)
class Workload:
    """A resolved workload. ``model`` is the architecture; ``model_spec`` what the file said."""

    name: str
    task: str
    model: ModelArch
    model_spec: str
    precision: Precision
    shape: Shape
    targets: Targets
    limits: Limits
    power: PowerBudget
    money: Money
    optimizer: str | None  # training only (adamw, adamw8bit, sgd, adafactor)
    description: str = ""
    role_weights: dict[str, dict[str, float]] = field(default_factory=dict)
    gpus_allow: tuple[str, ...] = ()
    gpus_deny: tuple[str, ...] = ()
    source: str = ""
    serving: Serving | None = None
    """Task ``serve``: the ``[serving]`` section (engine, request rate, prefix-cache hits); None otherwise."""

    @property
    def is_training(self) -> bool:
        return self.task in TRAINING_TASKS

    @property
    def is_inference(self) -> bool:
        return not self.is_training

    @property
    def context_tokens(self) -> int:
        """Tokens a sequence holds at its longest: prompt + output (inference) or sequence_length."""
        if self.is_training:
            return self.shape.sequence_length
        return self.shape.prompt_tokens + self.shape.output_tokens

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, SI names (what ``gpumatch workload check --format json`` prints)."""
        d = asdict(self)
        d["model"] = {
            "name": self.model.name,
            "spec": self.model_spec,
            "params_total": self.model.params_total,
            "params_active": self.model.params_active,
        }
        del d["model_spec"]
        d["limits"]["max_gpus_effective"] = self.limits.max_gpus_effective
        d["targets"]["required_train_tokens_per_s"] = self.targets.required_train_tokens_per_s
        d["context_tokens"] = self.context_tokens
        d["gpus_allow"], d["gpus_deny"] = list(self.gpus_allow), list(self.gpus_deny)
        return d


def resolve_precision(task: str, p: PrecisionSection) -> Precision:
    """Fill absent formats from the task (module docstring) and refuse impossible combinations."""
    training = task in TRAINING_TASKS
    weights = p.weights or ("nf4" if task == "qlora" else "bf16")
    _check_task_weights(task, weights)
    compute = p.compute or (weights if weights in _FLOAT_COMPUTE else "bf16")
    if compute in ("int4", "nf4"):
        raise WorkloadRuleError(
            "precision.compute", f"{compute} is a storage format, not a compute format", "set compute = 'bf16'"
        )
    kv = p.kv_cache or ("fp32" if compute == "tf32" else compute)
    _check_task_fields(task, {"precision.gradients": p.gradients, "precision.optimizer": p.optimizer,
                              "precision.master_weights": p.master_weights, "precision.kv_cache": p.kv_cache})
    if not training:
        return Precision(weights, compute, kv, None, None, None)
    master = p.master_weights or ("fp32" if weights in ("bf16", "fp16", "fp8") else "none")
    return Precision(weights, compute, kv, p.gradients or compute, p.optimizer or "fp32", master)


#: Workload fields -> the request options of gpumatch.workload.rules they set.
_FIELD_OPTIONS = {
    "precision.gradients": "grad_bytes", "precision.optimizer": "optimizer",
    "precision.master_weights": "master_weights", "precision.kv_cache": "kv_precision",
    "shape.micro_batch_size": "micro_batches", "shape.prompt_tokens": "prompt", "shape.output_tokens": "gen",
}  # fmt: skip


def _check_task_fields(task: str, values: dict[str, object]) -> None:
    """Fields set in the file that do not apply to ``task`` (the rules the CLI flags follow too)."""
    given = {_FIELD_OPTIONS[f]: f for f, v in values.items() if v is not None}
    for option, kind in misplaced_options(task, given):
        field_name = given[option]
        raise WorkloadRuleError(field_name, f"{field_name} applies to {kind} only, but task is {task!r}", "remove it")


def _check_task_weights(task: str, weights: str) -> None:
    if task == "qlora" and weights not in FOUR_BIT:
        raise WorkloadRuleError(
            "precision.weights",
            f"task 'qlora' keeps the frozen base in 4 bits, but precision.weights is {weights!r}",
            "set precision.weights = 'nf4' (or use task = 'lora' for a 16-bit base)",
        )
    if task == "lora" and weights in FOUR_BIT:
        raise WorkloadRuleError("task", f"LoRA on a {weights} base is QLoRA", "set task = 'qlora'")
    if task in FULL_TRAINING_TASKS and weights in ("int8", *FOUR_BIT):
        raise WorkloadRuleError(
            "precision.weights",
            f"task {task!r} updates every weight, which cannot be stored as {weights}",
            "use bf16 (or fp8) weights, or task = 'qlora' to train adapters on a quantized base",
        )


def resolve_shape(wf: WorkloadFile, model: ModelArch) -> Shape:
    """Task-dependent defaults, and a context that fits the model's position range."""
    s, task = wf.shape, wf.task
    training = task in TRAINING_TASKS
    if s.lora_rank is not None and task not in ADAPTER_TASKS:
        raise WorkloadRuleError("shape.lora_rank", f"lora_rank is set but task is {task!r}", "remove it")
    _check_task_fields(task, {"shape.micro_batch_size": s.micro_batch_size, "shape.prompt_tokens": s.prompt_tokens,
                              "shape.output_tokens": s.output_tokens})
    prompt = s.prompt_tokens if s.prompt_tokens is not None else DEFAULT_PROMPT_TOKENS
    output = s.output_tokens if s.output_tokens is not None else DEFAULT_OUTPUT_TOKENS
    seq = s.sequence_length or (DEFAULT_TRAIN_SEQUENCE if training else prompt + output)
    context = seq if training else prompt + output
    problem = context_problem(model, context)
    if problem:
        where = "shape.sequence_length" if training else "shape.prompt_tokens"
        raise WorkloadRuleError(where, *problem)
    lora = s.lora_rank or (DEFAULT_LORA_RANK if task in ADAPTER_TASKS else None)
    return Shape(s.batch_size, s.micro_batch_size, seq, prompt, output, s.concurrency, lora)


def resolve_targets(wf: WorkloadFile) -> Targets:
    t = wf.targets
    latency = ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")
    if wf.task in TRAINING_TASKS:
        for name in latency:
            if getattr(t, name) is not None:
                raise WorkloadRuleError(
                    f"targets.{name}", f"{name} is a serving target; task is {wf.task!r}", "remove it"
                )
    elif t.train_tokens is not None:
        raise WorkloadRuleError(
            "targets.train_tokens", f"train_tokens needs a training task, not {wf.task!r}", "remove it"
        )
    return Targets(
        ttft_p50_s=t.ttft_p50_s,
        ttft_p99_s=t.ttft_p99_s,
        tpot_p50_s=t.tpot_p50_s,
        tpot_p99_s=t.tpot_p99_s,
        tokens_per_s=t.tokens_per_s,
        train_tokens=t.train_tokens,
        deadline_s=t.deadline,
    )


def resolve_limits(wf: WorkloadFile) -> Limits:
    lim = wf.limits
    if lim.max_gpus and lim.max_nodes and lim.max_gpus > lim.max_nodes * lim.gpus_per_node:
        raise WorkloadRuleError(
            "limits.max_gpus",
            f"max_gpus ({lim.max_gpus}) exceeds gpus_per_node × max_nodes ({lim.gpus_per_node} × {lim.max_nodes})",
            "raise max_nodes or lower max_gpus",
        )
    return Limits(lim.max_gpus, lim.gpus_per_node, lim.max_nodes)
