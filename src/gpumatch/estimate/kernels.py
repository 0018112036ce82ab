"""Kernels a serving engine launches per decoder layer, by block type (attention, MLP, MoE) and precision.

A decode step at small batch is not only its bytes: every kernel of a layer runs after the one before it, and each
costs ``Calibration.kernel_overhead_s`` beyond its bytes (launch, ramp-up and tail inside a CUDA graph). The
estimator charged every layer ``Calibration.kernels_per_layer`` (10) whatever its architecture; an engine's
MoE or MLA layer, or an fp8 layer that quantizes each GEMM input, launches far more.

The dense counts follow vLLM's ``LlamaDecoderLayer.forward`` (``vllm/model_executor/models/llama.py``: fused
add + RMSNorm, ``qkv_proj``, ``rotary_emb``, ``attn`` with its cache write, ``o_proj``, add + RMSNorm, ``gate_up_proj``,
``act_fn``, ``down_proj``) plus the split-K reductions cuBLAS adds at small batch (the probe below); the MLA, MoE and
quantization counts follow the structure of vLLM's ``deepseek_v2.py``, its ``FusedMoE`` layer and its fp8 linear
method, not a profile. SGLang's and TensorRT-LLM's paths launch the same kinds of kernels, fused in places (TensorRT-
LLM most), so these are upper counts for them:

- dense attention block, 8: fused residual-add + RMSNorm; fused QKV GEMM; rotary embedding; KV-cache write;
  split-KV decode attention and its combine; output GEMM, split-K, and its reduction;
- MLA attention block, 14: RMSNorm; the fused q-down / kv-down GEMM; RMSNorm of each latent (2); the q-up GEMM;
  rotary; the absorbed key projection (a batched GEMM); the concatenation of the query parts; the latent cache
  write; the MLA decode kernel and its combine; the absorbed value projection; output GEMM, split-K, reduction;
- dense MLP block, 5: fused residual-add + RMSNorm; fused gate/up GEMM; SiLU·up; down GEMM, split-K, reduction;
- MoE block, 8: fused residual-add + RMSNorm; router GEMM; top-k; token-to-expert alignment; the two grouped
  expert GEMMs and the activation between them; the weighted sum of the top-k outputs; with shared experts 4
  more (their gate/up GEMM, activation, down GEMM, and the add to the routed sum);
- 8-bit or 4-bit activations (``Case.low_precision_gemm``: the fp8, int8 and fp4 tensor paths; weight-only
  formats dequantize inside the GEMM and add none): one quantization kernel per GEMM input: 2 per dense
  attention block (QKV, output), 3 per MLA block (q/kv-down, q-up, output; the absorbed projections stay 16-bit),
  2 per dense MLP (gate/up, down), 2 per MoE block (the expert GEMMs' inputs) and 2 more with shared experts.

Measured (``benchmarks/gpu/probe_engine_layer.py``, H100 80GB HBM3, 2026-12-07,
tests/data/measurements/2026-12-07-h100-engine-layer.json): a Llama-3.1-8B layer without attention, one kernel per
op, 32 layers in one CUDA graph: 13 kernels and 189 µs per layer in bf16 (cuBLAS) at one row, 20 kernels and 130 µs
with fp8 GEMMs whose inputs are quantized (two kernels per input there: a scale and a cast); 8-64 rows add up to
16 µs. What the layer takes beyond the estimator's byte terms for its GEMMs and elementwise work comes to 1.8-2.9
µs per kernel at one row (2.8-3.9 µs at 64), the 2.5 µs ``kernel_overhead_s`` assumed so far. Charged 10 kernels a
layer, the estimate is 7 % (bf16) and 21 % (fp8) short of the measured layer at one row; charged the 13 and 20 it
launched, 3 % and 2 % (6-11 % at 8-64 rows).
"""

from __future__ import annotations

from gpumatch.estimate._num import Num
from gpumatch.estimate.case import Case, ModelNums

DENSE_ATTENTION = 8.0
MLA_ATTENTION = 14.0
DENSE_MLP = 5.0
MOE_MLP = 8.0
SHARED_EXPERTS = 4.0
QUANT_DENSE_ATTENTION = 2.0
QUANT_MLA_ATTENTION = 3.0
QUANT_DENSE_MLP = 2.0
QUANT_MOE_MLP = 2.0
QUANT_SHARED_EXPERTS = 2.0
"""Kernel counts per block (module docstring)."""


def engine_kernels_per_layer(m: ModelNums, c: Case) -> Num:
    """Kernels a serving engine launches per decoder layer of ``m`` in a decode step, averaged over the layers
    (dense-MLP and MoE layers weighted by their count); counts in the module docstring."""
    shared = 1.0 if m.shared_experts > 0 else 0.0
    attention = MLA_ATTENTION if m.mla else DENSE_ATTENTION
    attention += c.low_precision_gemm * (QUANT_MLA_ATTENTION if m.mla else QUANT_DENSE_ATTENTION)
    dense_mlp = DENSE_MLP + c.low_precision_gemm * QUANT_DENSE_MLP
    moe_mlp = MOE_MLP + shared * SHARED_EXPERTS + c.low_precision_gemm * (QUANT_MOE_MLP + shared * QUANT_SHARED_EXPERTS)
    dense_layers = m.layers - m.moe_layers
    return attention + (dense_layers * dense_mlp + m.moe_layers * moe_mlp) / m.layers
