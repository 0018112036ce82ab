"""Probe: a fused-MoE Triton kernel of the serving engines' design, against a dense GEMM of the same shapes.

Usage (device): ``python3 benchmarks/gpu/probe_moe_triton.py --out FILE.json``; ``--smoke`` checks the kernel against
PyTorch on tiny shapes (``TRITON_INTERPRET=1`` runs it on the CPU).

vLLM and SGLang run an MoE layer's routed experts as two launches of one Triton kernel (gate+up, then down): the
``T·k`` (token, expert) rows are sorted by expert and each expert's run is padded to a multiple of the row tile
``BLOCK_M``; every program takes one row tile of one expert and one column tile, gathers its rows of the activations
by index (no dense copy of them), loops over the reduction dimension with ``tl.dot`` and scatters its outputs back to
the rows' places; the down projection multiplies by the router weight and a sum over the ``k`` rows of a token ends
the layer. This probe implements that design itself (written for gpumatch, no engine code), bf16 and fp8 e4m3 with
128 × 128 block scales (DeepSeek-V3's checkpoint format), takes the fastest of a few tile configurations per case
(the engines ship tuned tables instead), and times the two GEMMs, the activation and the sum eagerly, against one dense
``mm`` (``torch._scaled_mm`` for fp8, row-wise scales) of the same ``T·k`` rows and weight shapes: ``*_of_dense`` is the
dense time over the fused path's time. Sorting and padding the rows (the engines' ``moe_align_block_size`` kernel) is
done once per case and not timed. Shapes are one GPU's expert slice, as ``probe_moe_prefill.py`` has them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl
from moe_probe_common import PREFILL_TOKENS, SLICES, cli, fp8_dense_mlp, seconds, sweep

SHAPES = {name: s for name, s in SLICES.items() if name != "gpt-oss-120b tp1"}  # its fp8 blocks do not fit
TOKENS = PREFILL_TOKENS
SMOKE_SHAPES = {"tiny": (8, 2, 256, 128)}
SMOKE_TOKENS = (24,)
CONFIGS = (  # BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages
    (64, 64, 64, 8, 4, 4),
    (64, 128, 64, 8, 4, 3),
    (128, 128, 64, 8, 8, 3),
    (128, 64, 64, 8, 4, 4),
    (16, 64, 128, 1, 4, 4),
)
FP8_CONFIGS = (  # BLOCK_K = 128 = the scale block; BLOCK_N divides 128
    (64, 128, 128, 8, 4, 3),
    (128, 128, 128, 8, 8, 3),
    (64, 64, 128, 8, 4, 3),
    (16, 128, 128, 1, 4, 3),
)
SCALE_BLOCK = 128


@triton.jit
def _moe_gemm(a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, route_w_ptr, sorted_ptr, expert_ptr,
              num_padded, num_valid, N, K, stride_am, stride_be, stride_bn, stride_cm, stride_asm, stride_bse,
              stride_bsn, TOP_K: tl.constexpr, MUL_ROUTE: tl.constexpr, SCALED: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """One (row tile of one expert, column tile) of C[rows] = A[rows // TOP_K] @ B[expert]^T (B is (E, N, K))."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(num_padded, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    size_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ids = tl.load(sorted_ptr + rows)
    valid = row_ids < num_valid
    expert = tl.load(expert_ptr + pid_m).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    src = tl.where(valid, row_ids // TOP_K, 0).to(tl.int64)
    a_ptrs = a_ptr + src[:, None] * stride_am + ks[None, :]
    b_ptrs = b_ptr + expert * stride_be + (cols % N)[None, :].to(tl.int64) * stride_bn + ks[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kb = k0 // BLOCK_K
        left = K - k0
        a = tl.load(a_ptrs, mask=valid[:, None] & (ks[None, :] < left), other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < left, other=0.0)
        if SCALED:  # one scale per (row, 128 columns of K) of A and per (128 rows of N, 128 of K) of B
            sa = tl.load(a_scale_ptr + src * stride_asm + kb, mask=valid, other=0.0)
            sb = tl.load(b_scale_ptr + expert * stride_bse + (pid_n * BLOCK_N // 128) * stride_bsn + kb)
            acc += tl.dot(a, b) * sa[:, None] * sb
        else:
            acc += tl.dot(a, b)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    if MUL_ROUTE:
        acc = acc * tl.load(route_w_ptr + row_ids, mask=valid, other=0.0)[:, None]
    c_ptrs = c_ptr + row_ids[:, None].to(tl.int64) * stride_cm + cols[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=valid[:, None] & (cols[None, :] < N))


def align(topk_ids: torch.Tensor, experts: int, block_m: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(row ids sorted by expert, each expert's run padded to ``block_m`` with the sentinel ``T·k``; the expert of
    each row tile; rows after padding) -- what the engines' ``moe_align_block_size`` kernel computes."""
    flat = topk_ids.flatten()
    valid = flat.numel()
    order = torch.sort(flat, stable=True).indices
    counts = torch.bincount(flat, minlength=experts).tolist()
    ids, tiles, start = [], [], 0
    for e, n in enumerate(counts):
        padded = -(-n // block_m) * block_m
        run = torch.full((padded,), valid, dtype=torch.int32)
        run[:n] = order[start:start + n].to(torch.int32)
        ids.append(run)
        tiles += [e] * (padded // block_m)
        start += n
    sorted_ids = torch.cat(ids).to(topk_ids.device)
    return sorted_ids, torch.tensor(tiles, dtype=torch.int32, device=topk_ids.device), int(sorted_ids.numel())


def grouped_gemm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, routing: tuple[torch.Tensor, torch.Tensor, int],
                 top_k: int, cfg: tuple[int, ...], route_w: torch.Tensor | None = None,
                 scales: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """``out[r] = a[r // top_k] @ b[expert(r)]^T`` for every routed row ``r`` (times its router weight if given)."""
    sorted_ids, experts, padded = routing
    bm, bn, bk, gm, warps, stages = cfg
    n, k = b.shape[1], b.shape[2]
    sa, sb = scales if scales is not None else (a, b)
    grid = (triton.cdiv(padded, bm) * triton.cdiv(n, bn),)
    _moe_gemm[grid](a, b, out, sa, sb, route_w if route_w is not None else out, sorted_ids, experts, padded,
                    out.shape[0], n, k, a.stride(0), b.stride(0), b.stride(1), out.stride(0),
                    sa.stride(0) if scales else 0, sb.stride(0) if scales else 0, sb.stride(1) if scales else 0,
                    TOP_K=top_k, MUL_ROUTE=route_w is not None, SCALED=scales is not None,
                    BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, num_warps=warps, num_stages=stages)
    return out


def _quant_blocks(x: torch.Tensor, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """fp8 e4m3 of ``x`` (…, R, C) with one fp32 scale per (``rows`` rows, 128 columns) block."""
    *lead, r, c = x.shape
    blocks = x.float().reshape(*lead, r // rows, rows, c // SCALE_BLOCK, SCALE_BLOCK)
    amax = blocks.abs().amax(dim=(-3, -1), keepdim=True).clamp(min=1e-6)
    scale = amax / 448.0
    q = (blocks / scale).reshape(*lead, r, c).to(torch.float8_e4m3fn)
    return q, scale.reshape(*lead, r // rows, c // SCALE_BLOCK).contiguous()


def _fused(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, topk_ids: torch.Tensor, topk_w: torch.Tensor,
           cfg: tuple[int, ...], fp8: bool) -> Callable[[], torch.Tensor]:
    """The MoE layer's routed part: gate+up GEMM, SiLU·up, down GEMM × router weight, sum over the top-k."""
    t, k = topk_ids.shape
    e, two_n, hidden = w1.shape
    n = two_n // 2
    routing = align(topk_ids, e, cfg[0])
    h1 = torch.empty(t * k, two_n, device=x.device, dtype=x.dtype)
    h2 = torch.empty(t * k, hidden, device=x.device, dtype=x.dtype)
    flat_w = topk_w.flatten().float()
    if fp8:
        w1q, s1 = _quant_blocks(w1, SCALE_BLOCK)
        w2q, s2 = _quant_blocks(w2, SCALE_BLOCK)

        def run8() -> torch.Tensor:
            xq, sx = _quant_blocks(x, 1)
            grouped_gemm(xq, w1q, h1, routing, k, cfg, scales=(sx, s1))
            act = torch.nn.functional.silu(h1[:, :n]) * h1[:, n:]
            aq, sa = _quant_blocks(act, 1)
            grouped_gemm(aq, w2q, h2, routing, 1, cfg, route_w=flat_w, scales=(sa, s2))
            return h2.view(t, k, hidden).sum(dim=1)

        return run8

    def run() -> torch.Tensor:
        grouped_gemm(x, w1, h1, routing, k, cfg)
        act = torch.nn.functional.silu(h1[:, :n]) * h1[:, n:]
        grouped_gemm(act, w2, h2, routing, 1, cfg, route_w=flat_w)
        return h2.view(t, k, hidden).sum(dim=1)

    return run


def reference(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, topk_ids: torch.Tensor,
              topk_w: torch.Tensor) -> torch.Tensor:
    """The same layer in plain PyTorch (fp32), token by token over its top-k experts."""
    n = w1.shape[1] // 2
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for j in range(topk_ids.shape[1]):
        g = torch.einsum("th,tnh->tn", x.float(), w1[topk_ids[:, j]].float())
        act = torch.nn.functional.silu(g[:, :n]) * g[:, n:]
        out += topk_w[:, j:j + 1].float() * torch.einsum("tn,thn->th", act, w2[topk_ids[:, j]].float())
    return out


def _dense(rows: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, fp8: bool) -> Callable[[], object]:
    """One expert's weights against all ``T·k`` rows: the same GEMM shapes and FLOPs without the grouping."""
    if fp8:
        return fp8_dense_mlp(rows, w1[0].t(), w2[0].t())
    n = w1.shape[1] // 2
    b1, b2 = w1[0].t(), w2[0].t()
    return lambda: (torch.nn.functional.silu((g := rows @ b1)[:, :n]) * g[:, n:]) @ b2


def probe(name: str, e: int, k: int, hidden: int, inter: int, t: int, dev: torch.device,
          reps: int, bf: torch.dtype = torch.bfloat16) -> dict[str, object]:
    """One shape at ``t`` tokens: the best configuration's seconds, TFLOP/s and ratio to dense, 16-bit (``bf``) and
    fp8."""
    w1 = torch.randn(e, 2 * inter, hidden, device=dev, dtype=bf) * 0.02  # gate+up, (E, 2N, H) as the engines hold it
    w2 = torch.randn(e, hidden, inter, device=dev, dtype=bf) * 0.02  # down, (E, H, N)
    x = torch.randn(t, hidden, device=dev, dtype=bf)
    gen = torch.Generator(device="cpu").manual_seed(2000 + t)
    topk_ids = torch.rand(t, e, generator=gen).topk(k, dim=1).indices.to(dev)
    topk_w = torch.softmax(torch.rand(t, k, generator=gen), dim=1).to(dev)
    flop = 2.0 * t * k * hidden * 3 * inter
    rows = x.repeat_interleave(k, dim=0)
    out: dict[str, object] = {"shape": name, "experts": e, "top_k": k, "hidden": hidden, "inter_per_gpu": inter,
                              "tokens": t, "rows_per_expert": t * k / e, "flop": flop}
    want = reference(x, w1, w2, topk_ids, topk_w) if t * hidden * inter <= 2**26 else None  # (t, 2N, H) in fp32
    for label, fp8, configs in (("bf16", False, CONFIGS), ("fp8", True, FP8_CONFIGS)):
        if fp8 and (dev.type != "cuda" or inter % SCALE_BLOCK or hidden % SCALE_BLOCK):
            continue
        best: tuple[float, tuple[int, ...]] | None = None
        for cfg in configs:
            try:
                fn = _fused(x, w1, w2, topk_ids, topk_w, cfg, fp8)
                s = seconds(fn, dev, reps)
            except Exception as exc:  # a probe: a configuration that does not compile is recorded, not fatal
                out[f"{label}_error_{'x'.join(map(str, cfg))}"] = f"{type(exc).__name__}: {exc}"[:160]
                continue
            if best is None or s < best[0]:
                best = (s, cfg)
        if best is None:
            continue
        s, cfg = best
        got = _fused(x, w1, w2, topk_ids, topk_w, cfg, fp8)().float()
        if want is not None:
            out[f"{label}_max_rel_err"] = float((got - want).abs().max() / want.abs().max())
        dense_s = seconds(_dense(rows, w1, w2, fp8), dev, reps)
        out.update({f"{label}_config": list(cfg), f"{label}_s": s, f"{label}_tflops": flop / s / 1e12,
                    f"{label}_dense_s": dense_s, f"{label}_of_dense": dense_s / s})
    return out


def main() -> None:
    out, smoke, dev = cli(__doc__.splitlines()[0], "tiny shapes, checked against PyTorch")
    shapes, tokens = (SMOKE_SHAPES, SMOKE_TOKENS) if smoke else ({**SMOKE_SHAPES, **SHAPES}, TOKENS)
    reps = 1 if smoke else 10
    dtype = torch.float16 if smoke else torch.bfloat16  # the CPU interpreter has no bf16
    sweep(out, "probe_moe_triton", shapes, tokens, lambda name, s, t: probe(name, *s, t, dev, reps, dtype),
          ("_of_dense", "_tflops", "_rel_err", "_config", "error"), extra={"triton": triton.__version__})


if __name__ == "__main__":
    main()
