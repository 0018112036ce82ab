"""Probe: how fast do a prefill pass's MoE expert GEMMs run, against a dense GEMM of the same size?

Usage (device): ``python3 benchmarks/gpu/probe_moe_prefill.py --out FILE.json``; ``--smoke`` runs tiny shapes on
whatever device there is (the CPU included) to check the code paths.

Until 2026-12-07 the estimator timed a layer's GEMMs as one operator at the dense GEMM's efficiency, the longer of
compute and weight reads (:func:`gpumatch.estimate.roofline.op`); this probe's data is the basis of the weight stream
it now adds for the experts (:func:`gpumatch.estimate.roofline._expert_overlap_lost`).

In an MoE layer the expert GEMMs are many small problems: ``T`` prompt tokens routed to ``k`` of ``E`` experts
give each expert about ``T·k/E`` rows, and at tensor parallelism each GPU holds ``1/tp`` of every expert's
intermediate width. This probe routes ``T`` tokens uniformly at random and times, eagerly (prefill passes are not
graphed), on one GPU's slice of several MoE models:

- ``grouped``: ``torch._grouped_mm`` (bf16, CUTLASS) over the rows sorted by expert: gate+up, SiLU·up, down;
- ``grouped_fp8``: the same with ``torch._scaled_grouped_mm`` (fp8 e4m3, row-wise scales), where the card has it;
- ``per_expert``: one ``mm`` per touched expert (cuBLAS), each call a GEMM of its own;
- ``dense``: one ``mm`` of all ``T·k`` rows against one expert-sized weight of the same shape: the same FLOPs and
  operand shapes without the grouping (``dense_fp8``: with ``torch._scaled_mm``, the base of ``grouped_fp8``);
- ``permute`` / ``combine``: gathering the rows by expert, and the weighted sum of each token's ``k`` outputs.

Each result gives seconds and TFLOP/s; ``*_of_dense`` is the ratio of the dense time to the path's time (1 = as
fast as a dense GEMM of the same size). One JSON document with the card, driver, torch version and the date.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from moe_probe_common import PREFILL_TOKENS, SLICES, cli, fp8_dense_mlp, seconds, sweep

SHAPES = SLICES
TOKENS = PREFILL_TOKENS
SMOKE_SHAPES = {"tiny": (8, 2, 64, 32)}
SMOKE_TOKENS = (16,)


def _route(t: int, e: int, k: int, dev: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(source token of each sorted row, rows per expert, cumulative offsets int32) of a uniform top-k router."""
    gen = torch.Generator(device="cpu").manual_seed(1000 + t)
    choice = torch.rand(t, e, generator=gen).topk(k, dim=1).indices.flatten()
    order = torch.sort(choice, stable=True)
    counts = torch.bincount(order.values, minlength=e)
    token = torch.div(order.indices, k, rounding_mode="floor").to(dev)
    return token, counts, torch.cumsum(counts, 0).to(dev, torch.int32)


def _fp8_path(rows: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, offs: torch.Tensor,
              inter: int) -> Callable[[], object]:
    """The expert GEMMs in fp8 e4m3 with row-wise scales (``torch._scaled_grouped_mm``); weights column-major."""
    f8 = torch.float8_e4m3fn
    a = rows.to(f8)
    b1 = w1.transpose(1, 2).contiguous().to(f8).transpose(1, 2)  # (E, K, 2N), column-major per expert
    b2 = w2.transpose(1, 2).contiguous().to(f8).transpose(1, 2)  # (E, N, K)
    sa = torch.ones(a.shape[0], device=a.device, dtype=torch.float32)
    s1 = torch.ones(w1.shape[0], w1.shape[2], device=a.device, dtype=torch.float32)
    s2 = torch.ones(w2.shape[0], w2.shape[2], device=a.device, dtype=torch.float32)

    def run() -> object:
        g = torch._scaled_grouped_mm(a, b1, sa, s1, offs=offs, out_dtype=torch.bfloat16)
        h = (torch.nn.functional.silu(g[:, :inter]) * g[:, inter:]).to(f8)
        return torch._scaled_grouped_mm(h, b2, sa, s2, offs=offs, out_dtype=torch.bfloat16)

    return run


def probe(name: str, e: int, k: int, hidden: int, inter: int, t: int, dev: torch.device,
          reps: int) -> dict[str, object]:
    """One shape at ``t`` tokens: seconds and TFLOP/s of every path (module docstring)."""
    bf = torch.bfloat16
    w1 = torch.randn(e, hidden, 2 * inter, device=dev, dtype=bf) * 0.02
    w2 = torch.randn(e, inter, hidden, device=dev, dtype=bf) * 0.02
    x = torch.randn(t, hidden, device=dev, dtype=bf)
    token, counts, offs = _route(t, e, k, dev)
    rows = x[token]
    flop = 2.0 * t * k * hidden * 3 * inter
    out: dict[str, object] = {"shape": name, "experts": e, "top_k": k, "hidden": hidden, "inter_per_gpu": inter,
                              "tokens": t, "rows_per_expert": t * k / e, "touched": int((counts > 0).sum()),
                              "max_rows_per_expert": int(counts.max()), "flop": flop}
    ids = [i for i in range(e) if int(counts[i]) > 0]
    starts = [int(v) for v in torch.cumsum(counts, 0) - counts]
    weight = torch.rand(t * k, 1, device=dev, dtype=bf)

    def grouped() -> object:
        g = torch._grouped_mm(rows, w1, offs=offs)
        h = torch.nn.functional.silu(g[:, :inter]) * g[:, inter:]
        return torch._grouped_mm(h, w2, offs=offs)

    def per_expert() -> object:
        y = None
        for i in ids:
            r = rows[starts[i]:starts[i] + int(counts[i])]
            g = r @ w1[i]
            y = (torch.nn.functional.silu(g[:, :inter]) * g[:, inter:]) @ w2[i]
        return y

    def dense() -> object:
        g = rows @ w1[0]
        return (torch.nn.functional.silu(g[:, :inter]) * g[:, inter:]) @ w2[0]

    y = torch.randn(t * k, hidden, device=dev, dtype=bf)
    paths: dict[str, Callable[[], object]] = {
        "dense": dense, "grouped": grouped, "per_expert": per_expert,
        "permute": lambda: x[token], "combine": lambda: torch.zeros_like(x).index_add_(0, token, y * weight)}
    if dev.type == "cuda" and hasattr(torch, "_scaled_grouped_mm"):
        try:
            paths["grouped_fp8"] = _fp8_path(rows, w1, w2, offs, inter)
            paths["dense_fp8"] = fp8_dense_mlp(rows, w1[0], w2[0])
        except Exception as exc:  # a probe: an unsupported path is recorded, not fatal
            out["grouped_fp8_error"] = f"{type(exc).__name__}: {exc}"[:200]
    for label, fn in paths.items():
        try:
            s = seconds(fn, dev, reps)
        except Exception as exc:  # a probe: one failing path does not stop the others
            out[f"{label}_error"] = f"{type(exc).__name__}: {exc}"[:200]
            continue
        out[f"{label}_s"] = s
        if label not in ("permute", "combine"):
            out[f"{label}_tflops"] = flop / s / 1e12
    for label, base in (("grouped", "dense"), ("per_expert", "dense"), ("grouped_fp8", "dense_fp8")):
        if f"{label}_s" in out and f"{base}_s" in out:
            out[f"{label}_of_dense"] = float(out[f"{base}_s"]) / float(out[f"{label}_s"])  # type: ignore[arg-type]
    return out


def main() -> None:
    out, smoke, dev = cli(__doc__.splitlines()[0], "tiny shapes, any device (a code-path check)")
    shapes, tokens = (SMOKE_SHAPES, SMOKE_TOKENS) if smoke else (SHAPES, TOKENS)
    reps = 2 if smoke else 10
    sweep(out, "probe_moe_prefill", shapes, tokens, lambda name, s, t: probe(name, *s, t, dev, reps),
          ("_of_dense", "_tflops"))


if __name__ == "__main__":
    main()
