"""The one request of an estimate: what to estimate, in the concepts' own names, validated here and only here.

``gpumatch estimate`` builds it from a :class:`~gpumatch.workload.request.WorkRequest` (a workload file and the
flags, merged); the planner builds one per shortlisted candidate (:func:`gpumatch.plan.entries.estimate_options`
are its fields, so ``gpumatch estimate`` with them reproduces the entry). :func:`gpumatch.estimate.estimate`
takes it, and :func:`gpumatch.estimate.options.build_case` turns it into the numbers of a
:class:`~gpumatch.estimate.case.Case`.

The batch concepts keep the names of the flags and the workload file:

==================  ===========================================================================================
field               meaning
==================  ===========================================================================================
``concurrency``     inference: sequences in flight over all ``dp`` replicas (None = one per replica)
``global_batch``    training: sequences per optimizer step over all ``dp`` ranks
``micro_batch``     training: sequences per DP rank per forward/backward pass
``micro_batches``   training: micro-batches per optimizer step (gradient accumulation) when given explicitly
``tp, pp, dp``      tensor, pipeline and data-parallel degrees; ``dp`` is the number of inference replicas;
                    ``count`` (an input only) = tp × pp × dp, from which ``dp`` follows when not given
==================  ===========================================================================================

The two split rules are written once, here, as functions on numbers or numpy arrays, so the planner's
enumeration (:mod:`gpumatch.plan.enumeration`) applies them to 10^5 candidates with the same code:

- :func:`seqs_per_replica`: ``ceil(concurrency / replicas)``, at least 1 (the last replica may run part-empty;
  fewer sequences than replicas put one on each: :attr:`Request.in_flight` = ``max(concurrency, dp)``);
- :func:`grad_accum`: ``max(1, ceil(global_batch / (micro_batch × dp)))`` micro-batches per step.

A training request resolves its micro-batch (:attr:`Request.seqs_per_replica`) and its accumulation
(:attr:`Request.grad_accum`) so: ``micro_batch`` when given, else ``ceil(global_batch / (dp × micro_batches))``
(``micro_batches`` 1 when not given: the global batch split over the ranks without accumulation); the
accumulation is ``micro_batches`` when given, else :func:`grad_accum` when both batches are given, else 1.

Rules that need the model (TP dividing the heads, the context within its positions) are checked by
:func:`check_against` when the request meets its model. Rules on an option fire only when it was given
(pydantic's ``model_fields_set``): defaults never trigger them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator

from gpumatch.catalog.prices import DEFAULT_BASIS, check_basis
from gpumatch.errors import InputError
from gpumatch.estimate.precision import KV_PRECISIONS, WEIGHT_PRECISIONS
from gpumatch.estimate.replay import MAX_NUM_PROMPTS
from gpumatch.models.arch import ModelArch
from gpumatch.vocab import (
    ENGINES,
    ESTIMATOR_TASKS,
    FOUR_BIT,
    FULL_TRAINING_TASKS,
    MASTER_WEIGHTS,
    OPTIMIZERS,
    RECOMPUTE_MODES,
    is_training,
)
from gpumatch.workload.rules import (
    MAX_BATCH,
    MAX_GPUS,
    MAX_MICRO_BATCHES,
    MAX_TOKENS_PER_SEQUENCE,
    check_context,
    check_size,
    misplaced_options,
)

AMP_PRECISIONS = ("bf16", "fp16")
"""Compute precisions ``master_weights="amp"`` autocasts to (``torch.autocast`` dtypes on CUDA)."""


def seqs_per_replica(concurrency: Any, replicas: Any) -> Any:
    """Sequences each of ``replicas`` inference replicas holds for ``concurrency`` in flight over all of them:
    ``ceil(concurrency / replicas)``, at least 1 (ints or numpy integer arrays)."""
    per = -(-concurrency // replicas)
    return np.maximum(per, 1) if isinstance(per, np.ndarray) else max(int(per), 1)


def grad_accum(global_batch: Any, micro_batch: Any, dp: Any) -> Any:
    """Micro-batches per optimizer step (gradient accumulation) of ``global_batch`` sequences in micro-batches of
    ``micro_batch`` on each of ``dp`` ranks: ``max(1, ceil(global_batch / (micro_batch × dp)))``."""
    steps = -(-global_batch // (micro_batch * dp))
    return np.maximum(steps, 1) if isinstance(steps, np.ndarray) else max(int(steps), 1)


#: How each option is named on the command line, where it is not ``--`` + its name (messages name what was typed).
_FLAG = {"grad_bytes": "grad_bytes", "slo_ttft_s": "--slo-ttft-s", "slo_tpot_s": "--slo-tpot-s"}
#: Options of one kind of task only, beyond :func:`gpumatch.workload.rules.misplaced_options`.
_TRAINING_BATCHES = ("global_batch", "micro_batch")
#: Sizes and their bounds (tp, pp, dp and count are checked first, in ``Request._layout``).
_SIZES = (("concurrency", MAX_BATCH), ("global_batch", MAX_BATCH), ("micro_batch", MAX_BATCH),
          ("micro_batches", MAX_MICRO_BATCHES), ("seq", MAX_TOKENS_PER_SEQUENCE),
          ("prompt", MAX_TOKENS_PER_SEQUENCE), ("gen", MAX_TOKENS_PER_SEQUENCE))


def flag_name(option: str) -> str:
    """The command-line spelling of request field ``option`` (``micro_batches`` -> ``--micro-batches``)."""
    return _FLAG.get(option, f"--{option.replace('_', '-')}")


class Request(BaseModel):
    """What to estimate, in the user's terms (module docstring has the batch concepts and their split rules).

    Frozen; every field is optional with the estimator's default. ``count`` may be given instead of (or with)
    ``dp``: ``dp = count / (tp × pp)``. Raises :class:`~gpumatch.errors.InputError` (one line and a hint) for
    an unknown option, a name outside its vocabulary, an option the task does not read, a size out of range or
    a conflict; :func:`check_against` adds the rules that need the model.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str = "infer"
    concurrency: int | None = None
    """Inference: sequences in flight over all ``dp`` replicas; None = one per replica."""
    global_batch: int | None = None
    """Training: sequences per optimizer step over all DP ranks."""
    micro_batch: int | None = None
    """Training: sequences per DP rank per forward/backward pass; None = from ``global_batch``, else 1."""
    micro_batches: int | None = None
    """Training: micro-batches per optimizer step and pipeline (gradient accumulation); None = :func:`grad_accum`."""
    seq: int | None = None
    prompt: int | None = None
    gen: int | None = None
    precision: str = "bf16"
    kv_precision: str | None = None
    optimizer: str = "adamw"
    master_weights: str = "fp32"
    grad_bytes: float | None = None
    recompute: str = "none"
    flash: bool = True
    tp: int = 1
    pp: int = 1
    dp: int = 1
    zero: int = 0
    sequence_parallel: bool | None = None
    lora_rank: int = 16
    kv_block: int | None = None
    gpus_per_node: int = 8
    cuda_graphs: bool | None = None
    fused_kernels: bool | None = None
    """Inference: the decoder runs split-KV decode attention and fused elementwise kernels (the bench's compiled
    decoders set it, :data:`gpumatch.lab.predict.FUSED_VARIANTS`). None = the task's default: ``serve`` fuses the
    elementwise work and splits the cache when the engine profile's ``attention`` is ``engine`` (vLLM, SGLang,
    TensorRT-LLM; not ``gpumatch`` or ``static``, whose SDPA does not split it); ``infer`` neither. Without split-KV
    a decode step's attention gets one thread block per sequence and KV head
    (:func:`gpumatch.estimate.roofline.decode_step`)."""
    offload_optimizer: bool = False
    prefill_chunk: int = 8192
    price_basis: str = DEFAULT_BASIS
    """Which quotes price the GPU (:mod:`gpumatch.catalog.prices`): on-demand, reserved, spot or purchase."""
    engine: str | None = None
    """Task ``serve``: the serving engine whose steady state is estimated (:mod:`gpumatch.estimate.serving`);
    None = ``vllm`` for ``serve``; ``static`` = the static-batch model (the only one for ``infer``)."""
    request_rate: float | None = None
    """Task ``serve``: open-loop Poisson arrivals, requests/s over all replicas; None = closed loop at
    ``concurrency``."""
    prefix_hit_ratio: float = 0.0
    """Task ``serve``: share of each prompt found in the engine's prefix cache (not recomputed)."""
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    """Task ``serve``: targets for goodput (the highest request rate meeting both)."""
    num_prompts: int | None = None
    """Task ``serve``, closed loop: requests of the benchmark replayed pass by pass
    (:mod:`gpumatch.estimate.replay`, first burst and convoys included); None = 10 × the requests in flight (the
    published sweeps' setting); 0 = the long-run steady state (what the planner ranks)."""
    length_low: float = 1.0
    """Task ``serve``, replay: prompt and output lengths drawn uniformly in ``[length_low × L, L]`` (1 = fixed,
    as ``vllm bench serve`` by default; 0.8 as InferenceX's ``--random-range-ratio``)."""
    memory_fraction: float | None = None
    """Task ``serve``: the share of GPU memory the engine takes, 0 < f <= 1 (vLLM ``--gpu-memory-utilization``,
    SGLang ``--mem-fraction-static``: of the whole card; TensorRT-LLM ``free_gpu_memory_fraction``: of what the
    weights and activations leave); None = the engine profile's (``estimate/data/engines.toml``). It sizes the KV
    pool, so the requests admitted at once."""

    @model_validator(mode="before")
    @classmethod
    def _layout(cls, data: Any) -> Any:
        """Unknown options are refused by name; ``count`` gives ``dp`` (``count / (tp × pp)``) or is checked."""
        if not isinstance(data, dict):
            return data
        unknown = set(data) - set(cls.model_fields) - {"count"}
        if unknown:
            raise InputError(f"unknown option(s): {', '.join(sorted(unknown))}")
        data = {k: v for k, v in data.items() if v is not None}
        for name in ("tp", "pp", "dp", "count"):  # before they divide each other
            check_size(flag_name(name), data.get(name), MAX_GPUS)
        count = data.pop("count", None)
        if count is None:
            return data
        tp, pp = int(data.get("tp", 1)), int(data.get("pp", 1))
        if "dp" not in data:
            if count % (tp * pp):
                raise InputError(f"count {count} is not a multiple of tp×pp = {tp * pp}", "set --count = tp × pp × dp")
            return {**data, "dp": count // (tp * pp)}
        if count != tp * pp * int(data["dp"]):
            raise InputError(f"count {count} != tp×pp×dp = {tp}×{pp}×{data['dp']} = {tp * pp * int(data['dp'])}",
                             "set --count to the product, or leave one of them out")
        return data

    @model_validator(mode="after")
    def _check(self) -> Request:
        """Every rule of the request alone (the module docstring; :func:`check_against` adds the model's)."""
        _check_given(self)
        _check_choices(self)
        _check_layout(self)
        _check_serving(self)
        return self

    # the split rules (module docstring)

    @property
    def training(self) -> bool:
        return is_training(self.task)

    @property
    def count(self) -> int:
        """GPUs: tp × pp × dp."""
        return self.tp * self.pp * self.dp

    @property
    def seqs_per_replica(self) -> int:
        """Sequences one replica (one DP rank) holds in one forward pass: training, the micro-batch; inference,
        :func:`seqs_per_replica` of ``concurrency`` over the ``dp`` replicas (module docstring)."""
        if self.training:
            if self.micro_batch is not None:
                return self.micro_batch
            if self.global_batch is not None:
                return math.ceil(self.global_batch / (self.dp * (self.micro_batches or 1)))
            return 1
        return int(seqs_per_replica(self.concurrency, self.dp)) if self.concurrency is not None else 1

    @property
    def in_flight(self) -> int:
        """Inference: sequences in flight over all replicas, ``max(concurrency, dp)`` (one per replica at least)."""
        return max(self.concurrency or 1, self.dp)

    @property
    def grad_accum(self) -> int:
        """Training: micro-batches per optimizer step, ``micro_batches`` or :func:`grad_accum` (module docstring)."""
        if self.micro_batches is not None:
            return self.micro_batches
        if self.training and self.global_batch is not None and self.micro_batch is not None:
            return int(grad_accum(self.global_batch, self.micro_batch, self.dp))
        return 1

    @property
    def serving_engine(self) -> str:
        """The engine the estimate models: ``engine``, else ``vllm`` for ``serve`` and ``static`` otherwise."""
        if self.engine is not None:
            return self.engine
        return "vllm" if self.task == "serve" else "static"

    @property
    def given(self) -> dict[str, Any]:
        """The fields set explicitly (field -> value): the options the user gave."""
        return {k: getattr(self, k) for k in self.model_fields_set}

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the estimate assumed of the request: fewer sequences in flight than replicas."""
        if not self.training and self.concurrency is not None and self.concurrency < self.dp:
            return (f"concurrency {self.concurrency} cannot fill {self.dp} replicas: estimated with one sequence "
                    f"per replica ({self.dp} in flight)",)
        return ()

    def but(self, **changes: Any) -> Request:
        """This request with ``changes`` (field names; ``None`` unsets one), validated again, the changed fields
        counted as given."""
        return Request(**{**self.given, **changes})


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise InputError(f"unknown {name} {value!r}", f"use one of {', '.join(allowed)}")


def _check_given(req: Request) -> None:
    """Options the user set that the task does not read, that conflict, or are out of range."""
    given = req.model_fields_set
    if "seq" in given and "prompt" in given:
        raise InputError("give --seq (training) or --prompt/--gen (inference), not both",
                         "--seq is the training sequence length; --prompt the prompt tokens of inference")
    wrong = misplaced_options(req.task, given)
    wrong += [(n, "training") for n in _TRAINING_BATCHES if n in given and not req.training]
    wrong += [("concurrency", "inference")] if "concurrency" in given and req.training else []
    for name, kind in wrong:
        other = "--task train, finetune, lora or qlora" if kind == "training" else "--task infer or serve"
        raise InputError(f"{flag_name(name)} applies to {kind} only, but the task is {req.task!r}",
                         f"drop {flag_name(name)} or use {other}")
    if req.task == "qlora" and "precision" in given and req.precision not in FOUR_BIT:
        raise InputError(f"task 'qlora' keeps the frozen base in 4 bits, but --precision is {req.precision!r}",
                         "use --precision nf4, or --task lora for a 16-bit base")
    for name, top in _SIZES:
        check_size(flag_name(name), getattr(req, name), top)


def _check_choices(req: Request) -> None:
    """Every name within its vocabulary; the mixed-precision and training recipes that exist."""
    _choice("task", req.task, ESTIMATOR_TASKS)
    _choice("precision", req.precision, WEIGHT_PRECISIONS)
    if req.kv_precision is not None:
        _choice("kv precision", req.kv_precision, KV_PRECISIONS)
    _choice("optimizer", req.optimizer, OPTIMIZERS)
    _choice("master weights", req.master_weights, MASTER_WEIGHTS)
    _check_amp(req)
    _choice("recompute", req.recompute, RECOMPUTE_MODES)
    check_basis(req.price_basis)
    if req.training and req.precision in ("int8", *FOUR_BIT) and req.task != "qlora":
        raise InputError(f"{req.task} with {req.precision} weights is not a training recipe",
                         "use --task qlora for a 4-bit base, or bf16/fp8 for full training")


def _check_amp(req: Request) -> None:
    """``master_weights="amp"`` is a recipe of full training with 16-bit autocast (:mod:`.options` docstring)."""
    if req.master_weights != "amp" or not req.training:
        return
    if req.task not in FULL_TRAINING_TASKS:
        raise InputError(f"master weights 'amp' apply to full training, but the task is {req.task!r} (adapters "
                         "are fp32 already)", "drop --master-weights or use --task train or finetune")
    if req.precision not in AMP_PRECISIONS:
        raise InputError(f"master weights 'amp' autocast to bf16 or fp16, not {req.precision}",
                         "use --precision bf16 (or fp16), or --master-weights fp32")


def _check_layout(req: Request) -> None:
    """The prefill chunk and ZeRO stage in range; ZeRO and offload for training only (sizes: ``_check_given``)."""
    if req.prefill_chunk < 0:
        raise InputError(f"prefill chunk must be >= 0 tokens (0 = whole batch), got {req.prefill_chunk}")
    if req.zero not in (0, 1, 2, 3):
        raise InputError(f"zero stage must be 0, 1, 2 or 3, got {req.zero}")
    if req.zero and not req.training:
        raise InputError("ZeRO stages apply to training only", "drop --zero or use --task train")
    if req.offload_optimizer and not req.training:
        raise InputError("optimizer offload applies to training only", "drop --offload-optimizer")


def _check_serving(req: Request) -> None:
    """The engine, its open-loop rate, targets and prefix cache, and the replayed benchmark."""
    if req.engine is not None:
        _choice("engine", req.engine, ENGINES)
        if req.engine != "static" and req.task != "serve":
            raise InputError(f"engine {req.engine!r} applies to task 'serve', but the task is {req.task!r}",
                             "use --task serve, or drop --engine")
    serving_only = {"request_rate": req.request_rate, "slo_ttft_s": req.slo_ttft_s, "slo_tpot_s": req.slo_tpot_s,
                    "prefix_hit_ratio": req.prefix_hit_ratio or None}
    for name, value in serving_only.items():
        if value is not None and req.serving_engine == "static":
            raise InputError(f"{name.replace('_', '-')} needs a serving engine, but the engine is static",
                             "use --task serve with --engine vllm, sglang or trtllm")
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise InputError(f"{name.replace('_', '-')} must be a positive finite number, got {value}")
    if not 0.0 <= req.prefix_hit_ratio < 1.0:
        raise InputError(f"prefix-cache hit ratio must be in [0, 1), got {req.prefix_hit_ratio}")
    asked = req.num_prompts is not None or req.length_low != 1.0
    if asked and req.serving_engine == "static":
        raise InputError("--num-prompts and --length-low replay a benchmark of a serving engine",
                         "use --task serve with --engine vllm, sglang or trtllm")
    if req.num_prompts is not None and not 0 <= req.num_prompts <= MAX_NUM_PROMPTS:
        raise InputError(f"--num-prompts must be 0 (steady state) to {MAX_NUM_PROMPTS}, got {req.num_prompts}")
    if req.memory_fraction is not None:
        if req.serving_engine == "static":
            raise InputError("--memory-fraction sizes a serving engine's KV pool, but the engine is static",
                             "use --task serve with --engine vllm, sglang, trtllm or gpumatch")
        if not (0.0 < req.memory_fraction <= 1.0):
            raise InputError(f"--memory-fraction must be in (0, 1], got {req.memory_fraction}",
                             "vLLM's --gpu-memory-utilization default is 0.9")
    if not 0.0 < req.length_low <= 1.0:
        raise InputError(f"--length-low must be in (0, 1], got {req.length_low}",
                         "1 = fixed lengths; 0.8 draws each length in [0.8 L, L]")


def check_against(arch: ModelArch, req: Request) -> None:
    """The rules that need the model: TP divides the attention heads, PP at most the layers, and the context the
    request holds (training: seq; inference: prompt + gen) within the model's positions when a length was given
    (the defaults are not the user's to fix)."""
    if arch.heads % req.tp:
        raise InputError(f"tensor parallel {req.tp} does not divide the {arch.heads} attention heads of {arch.name}",
                         f"use a divisor of {arch.heads}")
    if req.pp > arch.layers:
        raise InputError(f"pipeline parallel {req.pp} exceeds the {arch.layers} layers of {arch.name}")
    if not req.model_fields_set & {"seq", "prompt", "gen"}:
        return
    if req.training:
        check_context(arch, req.seq or 2048, "--seq")
    else:
        check_context(arch, (req.prompt or req.seq or 512) + (req.gen or 256), "--prompt + --gen")
