"""From a :class:`~gpumatch.estimate.request.Request` (validated there) to the numbers of a :class:`Case`.

Training precision conventions, the mixed-precision recipe ``master_weights`` (issue 3 contract; issue 12
item 4), bytes per parameter with AdamW:
- ``"fp32"`` (the default): 16-bit parameters (2), an fp32 master copy and fp32 moments inside the optimizer
  state (4 + 4 + 4 = 12), gradients accumulated in fp32 (4): 18 bytes, the Megatron-LM recipe (its
  ``main_grad`` fp32 gradient buffer and the fp32 master copy of the distributed optimizer, Megatron-LM docs
  "Distributed Optimizer") and DeepSpeed's bf16/fp16 optimizers. The ZeRO paper (Rajbhandari et al. 2020,
  section 3.1) counts the same recipe with fp16 gradients, 2 + 2 + 12 = 16 bytes: pass ``grad_bytes=2``.
  It stays the default because it is the recipe of multi-GPU training frameworks and the larger count (a plan
  that fits under it fits under ``"amp"`` too, up to the casts below).
- ``"amp"``: PyTorch automatic mixed precision, a model left in fp32 under ``torch.autocast(bfloat16)``
  (PyTorch docs "Automatic Mixed Precision package - torch.amp"; HF Trainer ``bf16=True``): the fp32
  parameters (4) are the master weights, gradients are fp32 (4, the parameters' dtype), AdamW moments fp32
  (8): 16 bytes. Autocast also caches a 16-bit cast of every fp32 weight a matmul reads, from its first use
  in the forward until the outermost autocast region exits (aten/src/ATen/autocast_mode.cpp ``cached_cast``,
  ``torch.clear_autocast_cache`` in ``torch.autocast.__exit__``; ``cache_enabled`` in the torch.autocast
  docs), and autograd keeps those casts for backward: 2 bytes per matmul weight alive with the activations,
  freed as backward creates the gradients (:func:`gpumatch.estimate.memory.autocast_copy_bytes`). Measured
  on an H200 (2026-12-04-h200-heldout5-train.json): Llama-3-8B peaked at 128.8 GB allocated = 16.0 bytes x
  8.03e9 parameters, with the casts' 2 bytes not on top. Full training in bf16/fp16 only.
- ``"none"``: parameters, gradients and optimizer moments all in the training precision
  (a model cast to bf16: 2 + 2 + 4 bytes for AdamW).
- 8-bit Adam (Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization"): 2 bytes of moments;
  SGD with momentum: one moment.
- LoRA/QLoRA adapters are kept in fp32 (PEFT's default ``autocast_adapter_dtype``): 4 bytes of weights,
  4 of gradients, 8 of AdamW moments per adapter parameter; the QLoRA base is NF4.
"""

from __future__ import annotations

from gpumatch.catalog import GpuSpec
from gpumatch.catalog.prices import DEFAULT_BASIS, HOURLY_BASES, select_price
from gpumatch.errors import InputError
from gpumatch.estimate.case import Case
from gpumatch.estimate.engine_profiles import engine_profile
from gpumatch.estimate.precision import (
    LOW_PRECISION_COMPUTE_KEYS,
    activation_precision,
    bytes_per_element,
    compute_path,
    edge_precision,
    moe_attention_precision,
)
from gpumatch.estimate.request import AMP_PRECISIONS, Request, check_against
from gpumatch.models.arch import ModelArch
from gpumatch.vocab import ADAPTER_TASKS, FULL_TRAINING_TASKS

SCALEUP_DOMAIN = {"nvlink": 8.0, "infinity-fabric": 8.0, "ethernet": 8.0, "nvlink-bridge": 2.0, "none": 1.0}


def _amp(req: Request, weight_prec: str) -> bool:
    """True when ``req`` trains every weight under PyTorch AMP (fp32 parameters + 16-bit autocast).

    Only with bf16/fp16 compute; another precision (the planner's fp8 mitigation) keeps the fp32-master
    recipe, Transformer Engine's."""
    return req.master_weights == "amp" and req.task in FULL_TRAINING_TASKS and weight_prec in AMP_PRECISIONS


def _optimizer_bytes(req: Request, train_bytes: float) -> tuple[float, float, float]:
    """(optimizer state per trainable parameter, gradient bytes, adapter optimizer bytes), module docstring.

    ``"amp"`` keeps no master copy in the optimizer (the fp32 parameters are it) and fp32 moments."""
    fp32_states = req.master_weights in ("fp32", "amp")
    master = 4.0 if req.master_weights == "fp32" else 0.0
    moment = 4.0 if fp32_states else train_bytes
    if req.optimizer == "adamw":
        opt, adapter_opt = master + 2.0 * moment, 8.0
    elif req.optimizer == "adamw-8bit":
        opt, adapter_opt = master + 2.0, 2.0
    else:
        opt, adapter_opt = master + moment, 4.0
    grads = req.grad_bytes if req.grad_bytes is not None else (4.0 if fp32_states else train_bytes)
    return opt, grads, adapter_opt


def gpu_link_fields(gpu: GpuSpec) -> dict[str, float]:
    """Per-direction link bandwidths of one GPU (datasheet NVLink figures are bidirectional totals)."""
    return {
        "scaleup_bytes_per_s": gpu.nvlink_bytes_per_s / 2.0,
        "scaleup_domain": SCALEUP_DOMAIN.get(gpu.scale_up, 1.0),
        "pcie_bytes_per_s": gpu.pcie_bytes_per_s,
        "pcie_p2p": 1.0 if gpu.pcie_p2p else 0.0,
    }


def prices(gpu: GpuSpec, basis: str = DEFAULT_BASIS) -> tuple[float, float]:
    """($/GPU-hour on ``basis``, purchase $ per card), both by :func:`gpumatch.catalog.prices.select_price` (the
    rule the planner uses); NaN where no quote exists. The hourly figure is NaN on the purchase basis."""
    hourly = select_price(gpu, basis).value if basis in HOURLY_BASES else None
    buy = select_price(gpu, "purchase").value
    return (float("nan") if hourly is None else hourly), (float("nan") if buy is None else buy)


def weight_precision(req: Request) -> str:
    """The stored weight format: NF4 for a QLoRA base unless another 4/8-bit format is named."""
    return "nf4" if req.task == "qlora" and req.precision in ("bf16", "fp16", "int4") else req.precision


CHECKPOINT_FP8_KV = ("fp8", "nvfp4", "fp4")
"""Weight formats whose ModelOpt checkpoints carry an FP8 KV cache (``kv_cache_quant_algo``), which an engine
with ``kv_dtype = "checkpoint"`` (engines.toml) follows."""


def kv_precision(req: Request) -> tuple[str, str]:
    """(KV-cache precision, why) of ``req``: the one asked for, else the default of the engine that serves it
    (its profile's ``kv_dtype``, engines.toml).

    - ``--kv-precision`` given: that one;
    - ``kv_dtype = "checkpoint"`` (TensorRT-LLM) with FP8 or NVFP4 weights: ``fp8``. ``KvCacheConfig.dtype =
      "auto"`` follows the checkpoint's ``kv_cache_quant_algo`` (TensorRT-LLM PR #16240), and NVIDIA's ModelOpt
      FP8/NVFP4 checkpoints are exported with an FP8 KV cache (Model Optimizer ``hf_ptq.py --kv_cache_qformat``,
      default ``fp8``);
    - ``kv_dtype = "model"`` (vLLM, SGLang): the activation dtype (``--kv-cache-dtype auto`` = the model's dtype;
      their FP8 recipes pass ``--kv-cache-dtype fp8`` explicitly: give ``--kv-precision fp8`` for those);
    - everything else (plain PyTorch, gpumatch serve): the activation dtype.
    """
    act = activation_precision(weight_precision(req))
    if req.kv_precision is not None:
        return req.kv_precision, "--kv-precision"
    if req.task != "serve":
        return act, f"{act}: the activations' dtype (plain PyTorch keeps K/V as computed)"
    engine = req.serving_engine
    profile = engine_profile(engine)
    if profile.kv_dtype == "checkpoint" and req.precision in CHECKPOINT_FP8_KV:
        return "fp8", (f"fp8: {engine}'s KV dtype 'auto' follows the {req.precision} ModelOpt checkpoint's "
                       "kv_cache_quant_algo (FP8)")
    if profile.kv_dtype == "model":
        hint = "; an fp8 recipe's --kv-cache-dtype fp8 is --kv-precision fp8" if req.precision != act else ""
        return act, f"{act}: {engine} --kv-cache-dtype auto = the model's dtype{hint}"
    return act, f"{act}: {engine} keeps K/V in the activations' dtype"


def attention_precision(req: Request) -> str:
    """The precision the attention core (QK^T, softmax, PV) computes in: the activations' dtype whatever the
    weights are (FP8 and FP4 weight formats quantize the linear layers only: FlashAttention, FlashInfer and
    TensorRT-LLM's FMHA take 16-bit Q/K/V), except a serving engine with an FP8 KV cache, whose attention runs
    in FP8 (vLLM docs, "Quantized KV Cache": with FlashAttention 3 and an FP8 KV cache "attention operations are
    also performed in the quantized (FP8) domain"; TensorRT-LLM's FP8 context FMHA)."""
    kv = kv_precision(req)[0]
    if req.task == "serve" and kv == "fp8":
        return "fp8"
    return activation_precision(weight_precision(req))


def precision_numbers(req: Request) -> dict[str, float]:
    """Bytes per element of weights, activations, KV, gradients and optimizer state for ``req``.

    ``weight_bytes`` is the copy the kernels read; ``autocast`` 1 marks PyTorch AMP, whose parameters are stored
    in fp32 and read through 16-bit casts (module docstring). ``edge_weight_bytes`` (embedding, LM head) and
    ``moe_attention_weight_bytes`` (an MoE model's attention projections) are the tensors a quantized checkpoint
    keeps at 16 bit (:mod:`gpumatch.estimate.precision`)."""
    weight_prec = weight_precision(req)
    act_prec = activation_precision(weight_prec)
    train_b = bytes_per_element(req.precision if req.task in FULL_TRAINING_TASKS else act_prec)
    weight_b = bytes_per_element(weight_prec)
    edge_b, moe_attn_b = bytes_per_element(edge_precision(weight_prec)), bytes_per_element(
        moe_attention_precision(weight_prec))
    if req.training and weight_prec == "fp8":
        # FP8 training (Transformer Engine) keeps bf16 weights and caches their fp8 casts
        train_b, weight_b = 2.0, 3.0
        edge_b, moe_attn_b = weight_b, weight_b
    amp = _amp(req, weight_prec)
    if req.master_weights == "amp" and not amp:
        # fp8 compute, adapters: the fp32-master recipe (``_amp``)
        req = req.model_copy(update={"master_weights": "fp32"})
    opt, grads, adapter_opt = _optimizer_bytes(req, train_b)
    if req.training and req.master_weights == "fp32" and weight_prec in ("fp32", "tf32"):
        opt -= 4.0  # the fp32 weights are the master copy
    return {
        "weight_bytes": weight_b,
        "edge_weight_bytes": edge_b,
        "moe_attention_weight_bytes": moe_attn_b,
        "autocast": 1.0 if amp else 0.0,
        "act_bytes": bytes_per_element(act_prec),
        "kv_bytes": bytes_per_element(kv_precision(req)[0]),
        "grad_bytes": grads,
        "opt_bytes": opt,
        "adapter_opt_bytes": adapter_opt,
    }


def shape_numbers(req: Request) -> dict[str, float]:
    """Tokens, layout and flags of ``req`` (defaults: training seq 2048; inference prompt 512, gen 256)."""
    seq = req.seq or 2048
    if req.training:
        prompt, gen = seq, 1
    else:
        prompt, gen = req.prompt or req.seq or 512, req.gen or 256
    sp = req.sequence_parallel if req.sequence_parallel is not None else req.tp > 1
    rc = req.recompute
    serve = req.task == "serve"
    engine_kernels = serve and engine_profile(req.serving_engine).attention == "engine"
    fused = req.fused_kernels if req.fused_kernels is not None else serve
    split = req.fused_kernels if req.fused_kernels is not None else engine_kernels
    return {
        "tp": float(req.tp), "pp": float(req.pp), "dp": float(req.dp), "zero": float(req.zero),
        "micro_batches": float(req.grad_accum), "gpus_per_node": float(req.gpus_per_node),
        "seqs_per_replica": float(req.seqs_per_replica), "seq": float(seq), "prompt": float(prompt), "gen": float(gen),
        "kv_block": float(req.kv_block or (16 if req.task == "serve" else 1)),
        "split_kv": 1.0 if split else 0.0,
        "fused": 1.0 if fused else 0.0,
        "engine_attention": 1.0 if engine_kernels else 0.0,
        "offload": 1.0 if req.offload_optimizer else 0.0,
        "prefill_chunk": float(req.prefill_chunk),
        "engine_memory_fraction": float("nan") if req.memory_fraction is None else float(req.memory_fraction),
        "in_flight": float("inf") if req.training else float(req.in_flight),
        "graphs": 1.0 if (req.cuda_graphs if req.cuda_graphs is not None else not req.training) else 0.0,
        "rc_full": 1.0 if rc == "full" else 0.0, "rc_selective": 1.0 if rc == "selective" else 0.0,
        "flash": 1.0 if req.flash else 0.0, "seq_parallel": 1.0 if sp else 0.0,
        "full_train": 1.0 if req.task in FULL_TRAINING_TASKS else 0.0,
        "lora_rank": float(req.lora_rank if req.task in ADAPTER_TASKS else 0),
    }


def gpu_numbers(gpu: GpuSpec, price_basis: str = DEFAULT_BASIS) -> dict[str, float]:
    """Memory, bandwidth, power, links and prices of one GPU (peak FLOP/s depends on the precision)."""
    cloud, buy = prices(gpu, price_basis)
    return {
        "capacity_bytes": float(gpu.memory_usable_bytes),
        "bandwidth_bytes_per_s": gpu.memory_bandwidth_bytes_per_s,
        "tdp_w": gpu.tdp_w,
        "usd_per_gpu_hour": cloud,
        "purchase_usd": buy,
        **gpu_link_fields(gpu),
    }


def build_case(arch: ModelArch, gpu: GpuSpec, req: Request) -> tuple[Case, tuple[str, ...]]:
    """The :class:`Case` of one request on one GPU, and the warnings it raises (the model's rules checked:
    :func:`gpumatch.estimate.request.check_against`)."""
    check_against(arch, req)
    path = compute_path(gpu, weight_precision(req))
    if path.peak_flops_per_s is None:
        raise InputError(path.warning)
    warnings = list(req.warnings) + ([path.warning] if path.warning else [])
    attn = (compute_path(gpu, attention_precision(req)).peak_flops_per_s  # no FP8 path: 16-bit attention
            or compute_path(gpu, activation_precision(weight_precision(req))).peak_flops_per_s)
    case = Case(
        peak_flops_per_s=path.peak_flops_per_s,
        low_precision_gemm=1.0 if path.compute_key in LOW_PRECISION_COMPUTE_KEYS else 0.0,
        attention_peak_flops_per_s=attn if attn else path.peak_flops_per_s,
        **gpu_numbers(gpu, req.price_basis),
        **shape_numbers(req),
        **precision_numbers(req),
    )
    return case, tuple(warnings)
