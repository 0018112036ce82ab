"""Precisions: bytes per stored element and the peak a computation actually runs at.

Sources:
- int4 group-wise quantization (GPTQ/AWQ, group 128): 4 bits per weight plus an FP16 scale and a
  packed zero per group, about +0.25 bit per weight (estimator-formulas.md section 12):
  ``0.5 + 4/128`` bytes.
- NF4 (QLoRA, Dettmers et al. 2023, section 3 "Double Quantization"): 4 bits plus 0.127 bit per
  parameter of quantization constants after double quantization: ``0.5 + 0.127/8`` bytes.
- MXFP4 (OCP Microscaling Formats (MX) Specification v1.0, 2023, section 5: MXFP4 = E2M1 elements in blocks
  of k = 32 sharing one E8M0 scale): ``(32·4 + 8) / 32 = 4.25`` bits = ``0.5 + 1/32`` bytes; computes at the
  FP4 peak (Blackwell). ``fp4`` is the short name of the same format. gpt-oss ships its MoE experts in it
  ("MoE weights are quantized to MXFP4 format (4.25 bits)": https://openai.com/index/introducing-gpt-oss/).
- NVFP4 (NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision Inference", 2025,
  https://developer.nvidia.com/blog/introducing-nvfp4-for-efficient-and-accurate-low-precision-inference/):
  E2M1 elements in blocks of 16 sharing one FP8 E4M3 scale, plus one FP32 scale per tensor:
  ``(16·4 + 8) / 16 = 4.5`` bits = ``0.5 + 1/16`` bytes (the per-tensor 4 bytes are negligible and left out);
  computes at the FP4 peak (Blackwell).
- ``mxfp4`` and ``nvfp4`` name a storage format: without an FP4 tensor path (before Blackwell) the kernels
  dequantize the blocks to 16 bit and run at the BF16/FP16 peak, as W4A16 does (vLLM serves gpt-oss's MXFP4
  experts on Hopper this way); ``fp4`` keeps meaning the FP4 compute path and has no such fallback.
- Tensors a quantized checkpoint keeps in 16 bit (:func:`edge_precision`, :func:`moe_attention_precision`): the
  token embedding and the LM head in every quantized inference format -- FP8 / INT8 (llm-compressor recipes
  ``targets: [Linear]``, ``ignore: [lm_head]``, e.g. https://huggingface.co/neuralmagic/Llama-3.2-1B-FP8
  recipe.yaml; TensorRT Model Optimizer's default configs disable the ``*lm_head*`` quantizer), INT4 AWQ/GPTQ
  (linear layers of the blocks only), NF4 (bitsandbytes, as transformers loads a QLoRA base, skips the LM head and
  keeps the embedding), MXFP4 and NVFP4 -- and, in MoE checkpoints stored in MXFP4 or NVFP4, the attention
  projections too: gpt-oss quantizes only its MoE weights ("post-trained with quantization of the MoE weights to
  MXFP4", https://openai.com/index/introducing-gpt-oss/; its ``modules_to_not_convert`` lists self_attn, the
  router, embed_tokens and lm_head), and NVIDIA's DeepSeek-R1-FP4 quantizes the MoE/MLP linears and leaves
  attention unquantized (https://huggingface.co/nvidia/DeepSeek-R1-NVFP4-v2: "Compared to nvidia/DeepSeek-R1-FP4,
  this checkpoint additionally quantizes the wo module in attention layers"). These tensors are read at 16 bit
  in every decode step; dense FP4 checkpoints (nvidia/Llama-3.3-70B-Instruct-FP4) quantize attention as well.
- Compute dtype chosen by the kernel: W4A16 and NF4 dequantize to 16 bit and run at the BF16/FP16 peak;
  W8A8 INT8 and FP8 run at their own peak; FP32 matmuls without TF32 run on the non-tensor FP32
  rate (PyTorch's default since 1.12 is ``allow_tf32 = False`` for matmuls).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpumatch.catalog import GpuSpec
from gpumatch.errors import InputError
from gpumatch.vocab import KV_PRECISIONS as KV_PRECISIONS
from gpumatch.vocab import WEIGHT_PRECISIONS as WEIGHT_PRECISIONS

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5 + 4.0 / 128.0,
    "nf4": 0.5 + 0.127 / 8.0,
    "fp4": 0.5 + 1.0 / 32.0,
    "mxfp4": 0.5 + 1.0 / 32.0,
    "nvfp4": 0.5 + 1.0 / 16.0,
}

# Which peak-FLOP/s key of the catalog a weight precision computes at (first one present wins).
_COMPUTE_PATH: dict[str, tuple[str, ...]] = {
    "fp32": ("fp32",),
    "tf32": ("tf32",),
    "bf16": ("bf16", "fp16"),
    "fp16": ("fp16", "bf16"),
    "fp8": ("fp8",),
    "int8": ("int8",),
    "int4": ("bf16", "fp16"),
    "nf4": ("bf16", "fp16"),
    "fp4": ("fp4",),
    "mxfp4": ("fp4", "bf16", "fp16"),
    "nvfp4": ("fp4", "bf16", "fp16"),
}


LOW_PRECISION_COMPUTE_KEYS = ("fp8", "int8", "fp4")
"""Compute paths whose GEMM efficiency is scaled by ``Calibration.low_precision_gemm_efficiency_ratio``."""


@dataclass(frozen=True)
class ComputePath:
    """The peak a precision runs at on one GPU. ``peak_flops_per_s`` is None when unsupported."""

    precision: str
    compute_key: str
    peak_flops_per_s: float | None
    warning: str = ""


def bytes_per_element(precision: str) -> float:
    """Stored bytes per element, including group-scale overhead for 4-bit formats."""
    try:
        return BYTES_PER_ELEMENT[precision]
    except KeyError:
        raise InputError(
            f"unknown precision {precision!r}", f"use one of {', '.join(WEIGHT_PRECISIONS)}"
        ) from None


def compute_path(gpu: GpuSpec, precision: str) -> ComputePath:
    """Peak dense FLOP/s of the path ``precision`` computes on (see module docstring)."""
    keys = _COMPUTE_PATH.get(precision)
    if keys is None:
        raise InputError(f"unknown precision {precision!r}", f"use one of {', '.join(WEIGHT_PRECISIONS)}")
    for key in keys:
        peak = gpu.peak(key)
        if peak:
            warn = ""
            if key == "fp32":
                warn = (
                    f"fp32 matmuls run on the non-tensor FP32 rate of {gpu.name} ({peak / 1e12:.0f} TFLOP/s); "
                    "enable TF32 (--precision tf32) or use bf16 to reach the tensor cores"
                )
            elif precision in ("mxfp4", "nvfp4") and key != "fp4":
                warn = (
                    f"{gpu.name} ({gpu.architecture}) has no FP4 tensor path: {precision} weights are dequantized "
                    f"to 16 bit and computed at the {key.upper()} peak (W4A16)"
                )
            elif key == "fp16" and precision == "bf16":
                warn = (
                    f"{gpu.name} ({gpu.architecture}) has no BF16 tensor path (BF16 needs Ampere or newer); "
                    "estimated as FP16 — run the model in fp16 (--precision fp16), with loss scaling for training"
                )
            return ComputePath(precision, key, peak, warn)
    return ComputePath(precision, keys[0], None, unsupported_reason(gpu, precision))


def unsupported_reason(gpu: GpuSpec, precision: str) -> str:
    """One sentence saying why ``precision`` has no hardware path on ``gpu``."""
    if precision in ("fp4", "mxfp4", "nvfp4"):
        return f"{gpu.name} ({gpu.architecture}) has no FP4 tensor path (needs Blackwell); use fp8, int4 or bf16"
    if precision == "fp8":
        return (
            f"{gpu.name} ({gpu.architecture}) has no FP8 tensor path (FP8 needs Ada, Hopper or newer); "
            f"use {'bf16' if gpu.peak('bf16') else 'fp16'}, int8 or int4 weights"
        )
    return f"{gpu.name} has no {precision} compute path in the catalog; use bf16 or fp16"


def activation_precision(weight_precision: str) -> str:
    """Activation/KV default for a weight precision: 16-bit unless the weights are fp32."""
    return "fp32" if weight_precision in ("fp32", "tf32") else "bf16"


def is_quantized_storage(weight_precision: str) -> bool:
    """True when ``weight_precision`` stores the block weights below the activations' 16 bits (FP8, INT8, INT4,
    NF4, FP4 formats): a quantized checkpoint, whose embedding and LM head stay 16-bit (module docstring)."""
    return bytes_per_element(weight_precision) < bytes_per_element(activation_precision(weight_precision))


def edge_precision(weight_precision: str) -> str:
    """Precision of the token embedding and the LM head: the activations' 16 bits for a quantized checkpoint
    (:func:`is_quantized_storage`), else the weights' own."""
    return activation_precision(weight_precision) if is_quantized_storage(weight_precision) else weight_precision


def moe_attention_precision(weight_precision: str) -> str:
    """Precision of an MoE model's attention projections: 16 bit when the experts are stored in MXFP4 or NVFP4
    (gpt-oss, NVIDIA's DeepSeek-R1-FP4: module docstring; ``fp4`` names the same format), else the weights' own.
    Dense models keep the weights' precision for attention in every format."""
    fp4_experts = weight_precision in ("mxfp4", "nvfp4", "fp4")
    return activation_precision(weight_precision) if fp4_experts else weight_precision
