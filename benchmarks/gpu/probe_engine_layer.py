"""Probe: what one decode layer costs when every op is its own kernel, as a serving engine runs it (CUDA graph).

The estimator's decode step is ``bytes / (bandwidth · eta_m(bytes per call))`` per operator plus a fixed gap per
kernel (``Calibration.kernel_overhead_s`` x ``kernels_per_layer``, both assumed until now). This probe measures the
two on the card in one call, with the kernels a serving engine launches for a Llama layer at small batch:

- per-kernel floor: a CUDA graph of 400 dependent tiny kernels (an in-place add on 4 KiB), time / 400;
- engine-like layer, Llama-3.1-8B shape (hidden 4096, 32 query / 8 KV heads of 128, MLP 14336), 32 layers with
  their own weights (so nothing stays in L2), replayed from one CUDA graph at M = 1, 8, 32, 64 rows:
  ``bf16``: RMSNorm (``F.rms_norm``), fused QKV projection (``F.linear``: cuBLAS, vLLM's unquantized path), an
  in-place op standing for RoPE, output projection, residual add, RMSNorm, fused gate/up projection, SiLU·up,
  down projection, residual add; ``fp8``: the same with each projection as ``torch._scaled_mm`` (cuBLASLt, e4m3
  weights, per-tensor scales, bf16 out) after a quantization of its input; attention left out (its bytes are a
  separate term of the estimate); ``gemm-only``: the four projections alone, back to back;
- the kernels of one layer, counted with the profiler on an eager (non-graph) run;
- a 4 GiB device-to-device copy (the bandwidth ceiling measured in the same call) and the card's clocks/power
  as found (read only).

Writes one JSON file, rewritten after every case. Usage (device, ``PYTHONPATH`` reaching ``src``):
``python benchmarks/gpu/probe_engine_layer.py --out $OUT/engine-layer.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F

from gpumatch.bench.env import nvidia_smi

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, LAYERS = 4096, 32, 8, 128, 14336, 32
QKV = (HEADS + 2 * KV_HEADS) * HEAD_DIM
PROJ = ((QKV, HIDDEN), (HIDDEN, HEADS * HEAD_DIM), (2 * FFN, HIDDEN), (HIDDEN, FFN))
"""(out, in) of the four projections of a layer: fused QKV, output, fused gate/up, down."""
ROWS = (1, 8, 32, 64)
FP8 = torch.float8_e4m3fn


SMI_FIELDS = ("name", "driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem", "power.draw", "power.limit",
              "temperature.gpu")


def smi() -> list[dict[str, str]]:
    """The card as found (read only), through the library's nvidia-smi query."""
    return nvidia_smi(SMI_FIELDS)


def graph_time_s(fn: Callable[[], Any], reps: int = 20, warmup: int = 3) -> float:
    """Median seconds of one replay of ``fn`` captured in a CUDA graph (events around each replay)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(warmup):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    times.sort()
    return times[len(times) // 2]


def copy_bandwidth(dev: torch.device) -> float:
    """Bytes/s of a 4 GiB device-to-device copy (read + write counted)."""
    n = 4 << 30
    a = torch.empty(n, dtype=torch.uint8, device=dev)
    b = torch.empty_like(a)
    t = graph_time_s(partial(b.copy_, a), reps=10)
    return 2 * n / t


def kernel_floor(dev: torch.device, n: int = 400) -> float:
    """Seconds per kernel of ``n`` dependent tiny kernels replayed from one graph."""
    x = torch.zeros(1024, device=dev)

    def chain() -> None:
        for _ in range(n):
            x.add_(1.0)

    return graph_time_s(chain) / n


class Layers:
    """32 layers of weights in ``kind`` (bf16 or fp8) and the step functions over them."""

    def __init__(self, kind: str, dev: torch.device) -> None:
        self.kind = kind
        self.w: list[list[torch.Tensor]] = []
        self.scale = torch.ones((), device=dev, dtype=torch.float32)
        for _ in range(LAYERS):
            mats = []
            for out_f, in_f in PROJ:
                w = torch.randn(out_f, in_f, device=dev, dtype=torch.bfloat16) * in_f ** -0.5
                mats.append(w.to(FP8).t() if kind == "fp8" else w)  # fp8: (in, out) column-major for _scaled_mm
            self.w.append(mats)
        self.norm_w = torch.ones(HIDDEN, device=dev, dtype=torch.bfloat16)

    def weight_bytes(self) -> int:
        return sum(w.numel() * w.element_size() for mats in self.w for w in mats)

    def proj(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if self.kind == "fp8":
            xq = (x * 1.0).to(FP8)  # dynamic quantization of the input (scale 1 here: the kernel count is the point)
            return torch._scaled_mm(xq, w, scale_a=self.scale, scale_b=self.scale, out_dtype=torch.bfloat16)
        return F.linear(x, w)

    def layer(self, x: torch.Tensor, mats: list[torch.Tensor], gemm_only: bool) -> torch.Tensor:
        if gemm_only:
            y = self.proj(x, mats[0])
            y = self.proj(x, mats[1])
            y = self.proj(x, mats[2])
            return self.proj(y[:, :FFN], mats[3])
        h = F.rms_norm(x, (HIDDEN,), self.norm_w)
        qkv = self.proj(h, mats[0])
        qkv.mul_(1.0)  # stands for RoPE (one in-place kernel on q and k)
        o = self.proj(qkv[:, :HIDDEN].contiguous(), mats[1])
        x = x + o
        h = F.rms_norm(x, (HIDDEN,), self.norm_w)
        gu = self.proj(h, mats[2])
        a = F.silu(gu[:, :FFN]) * gu[:, FFN:]
        return x + self.proj(a, mats[3])

    def step(self, x: torch.Tensor, gemm_only: bool) -> torch.Tensor:
        for mats in self.w:
            x = self.layer(x, mats, gemm_only)
        return x


def kernels_per_layer(layers: Layers, x: torch.Tensor, gemm_only: bool) -> tuple[int, list[str]]:
    """CUDA kernels one eager layer launches (profiler), and their names."""
    from torch.profiler import ProfilerActivity, profile

    layers.layer(x, layers.w[0], gemm_only)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        layers.layer(x, layers.w[0], gemm_only)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
    return len(names), names


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    dev = torch.device("cuda")
    doc: dict[str, Any] = {"schema": "gpumatch.engine-layer-probe/1", "date": datetime.now(UTC).isoformat(),
                           "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "shape": {"hidden": HIDDEN, "heads": HEADS, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM,
                                     "ffn": FFN, "layers": LAYERS},
                           "nvidia_smi_before": smi(), "cases": []}

    def save() -> None:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)

    t0 = time.time()
    doc["copy_bytes_per_s"] = copy_bandwidth(dev)
    doc["kernel_floor_s"] = kernel_floor(dev)
    save()
    for kind in ("bf16", "fp8"):
        try:
            layers = Layers(kind, dev)
        except (RuntimeError, TypeError) as e:
            doc["cases"].append({"kind": kind, "error": str(e)[:300]})
            save()
            continue
        wb = layers.weight_bytes()
        for gemm_only in (False, True):
            for m in ROWS:
                x = torch.randn(m, HIDDEN, device=dev, dtype=torch.bfloat16)
                case: dict[str, Any] = {"kind": kind, "gemm_only": gemm_only, "rows": m, "weight_bytes": wb}
                try:
                    n, names = kernels_per_layer(layers, x, gemm_only)
                    case["kernels_per_layer"] = n
                    if m == ROWS[0]:
                        case["kernel_names"] = names
                    case["step_s"] = graph_time_s(partial(layers.step, x, gemm_only))
                    case["per_layer_s"] = case["step_s"] / LAYERS
                    case["weight_time_at_copy_bw_s"] = wb / doc["copy_bytes_per_s"]
                    case["mbu_copy"] = case["weight_time_at_copy_bw_s"] / case["step_s"]
                except (RuntimeError, TypeError) as e:
                    case["error"] = str(e)[:300]
                doc["cases"].append(case)
                print(json.dumps({k: v for k, v in case.items() if k != "kernel_names"}), flush=True)
                save()
        del layers
        torch.cuda.empty_cache()
    doc["nvidia_smi_after"] = smi()
    doc["wall_s"] = time.time() - t0
    save()


if __name__ == "__main__":
    main()
