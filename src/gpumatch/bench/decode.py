"""Decode-step and prefill timing of a Llama-shaped model with a static KV cache.

Decode: one greedy step for ``batch`` sequences whose K/V caches hold ``context`` tokens
(cache length = context, the new token written at position context-1, attention over all of it).
Variants:

- ``eager``: the step run op by op (launch-bound at small batch; the only variant on CPU);
- ``graph``: the eager step captured once in a CUDA graph and replayed;
- ``compiled``: the compiled layers below without a graph (CPU smoke tests);
- ``compiled-graph``: each layer through ``torch.compile`` (inductor, default mode, dynamic shapes so one
  compilation serves every batch and context), the whole step then captured in a CUDA graph;
- ``fused`` / ``fused-graph``: each layer and the final norm + LM head through ``torch.compile`` with static
  shapes (one compilation per batch and context) and inductor's ``coordinate_descent_tuning``, under which a
  batch-1 projection (an M = 1 matrix product) becomes a Triton reduction that inductor fuses with the RMSNorm,
  rotary, SiLU·up and residual kernels around it and tunes for bandwidth (gpt-fast's recipe,
  https://github.com/pytorch-labs/gpt-fast); ``fused-graph`` captures the whole step in one CUDA graph;
- ``whole`` / ``whole-graph``: the whole step (every layer unrolled) as one ``torch.compile`` graph (fullgraph,
  static shapes, same options): fusion across layer boundaries, at the price of a compilation that grows with
  the layer count; ``whole-graph`` replays it from one CUDA graph.

Q, K and V are one projection and gate and up another (:mod:`gpumatch.bench.llama`); the KV cache is static
and written in place (``index_copy_``) at the step's position.

Prefill: one causal pass over ``batch × seq`` tokens under ``inference_mode``, logits of the last
position only.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from gpumatch.bench.llama import Llama, attention_path, decode_logits, decode_step, final_logits, rope_tables
from gpumatch.bench.timing import power_window, synchronize, time_fn

VARIANTS = ("eager", "compiled", "graph", "compiled-graph", "fused", "fused-graph", "whole", "whole-graph")
"""The decode variants :func:`decode_case` times (module docstring); any other name is refused."""


def _layer_call(block: Any, x: torch.Tensor, rope: torch.Tensor, pos: torch.Tensor,
                k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return block.forward_cached(x, rope, pos, k, v)  # type: ignore[no-any-return]


def _raise_cache_limits() -> None:
    """Let dynamo keep a compilation per layer call site and shape (its default limit is 8)."""
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 256)
    if hasattr(torch._dynamo.config, "accumulated_cache_size_limit"):
        torch._dynamo.config.accumulated_cache_size_limit = max(
            torch._dynamo.config.accumulated_cache_size_limit, 1024)


def compiled_layer_fn() -> Callable[..., torch.Tensor]:
    """``_layer_call`` through torch.compile (inductor, dynamic shapes); raises the dynamo cache limit."""
    _raise_cache_limits()
    return torch.compile(_layer_call, dynamic=True)


def fused_options(autotune: bool = False) -> dict[str, Any]:
    """Inductor options of the ``fused`` and ``whole`` variants: coordinate-descent tuning (which also turns
    M = 1 matrix products into fusable reductions), and with ``autotune`` max-autotune without inductor's own
    CUDA graphs (the caller captures the step in one graph)."""
    opts: dict[str, Any] = {"coordinate_descent_tuning": True}
    if autotune:
        opts.update({"max_autotune": True, "triton.cudagraphs": False})
    return opts


def _head_call(model: Llama, x: torch.Tensor) -> torch.Tensor:
    return final_logits(model, x)


def fused_fns(autotune: bool = False) -> tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]:
    """(layer_fn, head_fn) of the ``fused`` variants: each compiled with static shapes and
    :func:`fused_options`."""
    _raise_cache_limits()
    opts = fused_options(autotune)
    return (torch.compile(_layer_call, dynamic=False, options=opts),
            torch.compile(_head_call, dynamic=False, options=opts))


def whole_logits_fn(autotune: bool = False) -> Callable[..., torch.Tensor]:
    """:func:`gpumatch.bench.llama.decode_logits` compiled as one graph (fullgraph, static shapes,
    :func:`fused_options`): the ``whole`` variants' step."""
    _raise_cache_limits()
    return torch.compile(decode_logits, fullgraph=True, dynamic=False, options=fused_options(autotune))


def compiled_for(variant: str, autotune: bool = False) -> Any:
    """What :func:`decode_case` needs as ``compiled`` for ``variant``: None (eager, graph), the layer function
    (compiled*), the (layer, head) pair (fused*) or the compiled whole step (whole*)."""
    if variant.startswith("compiled"):
        return compiled_layer_fn()
    if variant.startswith("fused"):
        return fused_fns(autotune)
    if variant.startswith("whole"):
        return whole_logits_fn(autotune)
    return None


def _step_fn(variant: str, compiled: Any, model: Llama, tokens: torch.Tensor, pos: torch.Tensor,
             rope_all: torch.Tensor, caches: list[tuple[torch.Tensor, torch.Tensor]]) -> Callable[[], torch.Tensor]:
    """The greedy step of ``variant`` with its ``compiled`` parts (:func:`compiled_for`)."""
    if variant in ("eager", "graph"):
        return lambda: decode_step(model, tokens, pos, rope_all, caches)
    if compiled is None:
        raise RuntimeError(f"no compiled function given for variant {variant!r}")
    if variant.startswith("compiled"):
        return lambda: decode_step(model, tokens, pos, rope_all, caches, compiled)
    if variant.startswith("fused"):
        layer_fn, head_fn = compiled
        return lambda: decode_step(model, tokens, pos, rope_all, caches, layer_fn, head_fn)
    return lambda: compiled(model, tokens, pos, rope_all, caches).argmax(dim=-1)


def make_caches(model: Llama, batch: int, context: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per-layer K and V caches (B, Hkv, context, D), filled with random values (never zeros)."""
    s = model.s
    dev, dt = model.embed.weight.device, model.embed.weight.dtype
    caches = []
    for _ in range(s.layers):
        k = torch.empty(batch, s.kv_heads, context, s.head_dim, device=dev, dtype=dt).normal_(0, 1)
        v = torch.empty(batch, s.kv_heads, context, s.head_dim, device=dev, dtype=dt).normal_(0, 1)
        caches.append((k, v))
    return caches


def _capture(step: Callable[[], torch.Tensor], warmup: int) -> Callable[[], None]:
    """Warm ``step`` on a side stream, capture it in a CUDA graph; return the replay function."""
    stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(max(warmup, 2)):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def decode_case(
    model: Llama,
    batch: int,
    context: int,
    variants: Sequence[str],
    warmup: int = 5,
    iters: int = 30,
    compiled: Callable[..., torch.Tensor] | None = None,
    caches: list[tuple[torch.Tensor, torch.Tensor]] | None = None,
    power_window_s: float = 0.0,
) -> list[dict[str, Any]]:
    """Time one decode step at (batch, context) for each variant; one result dict per variant (with
    ``power_window_s`` > 0, then step on for that long: :func:`gpumatch.bench.timing.power_window`).
    ``compiled`` is :func:`compiled_for` of the variants' family (one family per call).

    A variant not in :data:`VARIANTS` is a ValueError before anything runs (it would otherwise be timed as
    ``graph`` under a wrong name)."""
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown decode variant {unknown[0]!r}; one of {', '.join(VARIANTS)}")
    dev = model.embed.weight.device
    s = model.s
    if caches is None:
        caches = make_caches(model, batch, context)
    rope_all = rope_tables(s, context, dev, model.embed.weight.dtype)
    tokens = torch.randint(0, s.vocab, (batch, 1), device=dev)
    pos = torch.tensor([context - 1], device=dev)
    results = []
    for variant in variants:
        row: dict[str, Any] = {"kind": "decode", "batch": batch, "context": context, "variant": variant}
        try:
            step = _step_fn(variant, compiled, model, tokens, pos, rope_all, caches)
            t0 = time.perf_counter()
            with torch.inference_mode():
                if not variant.endswith("graph"):
                    fn: Callable[[], Any] = step
                else:
                    if dev.type != "cuda":
                        raise RuntimeError("CUDA graphs need a CUDA device")
                    fn = _capture(step, warmup)
                row["setup_s"] = time.perf_counter() - t0
                row["timing"] = time_fn(fn, dev, warmup=warmup, iters=iters)
                if power_window_s > 0:
                    row["power_window"] = power_window(fn, dev, power_window_s)
            row["status"] = "ok"
            row["tokens_per_s"] = batch / row["timing"]["median_s"]
        except Exception as exc:  # a failed variant is a result too (recorded, not raised)
            row["status"] = "error"
            row["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        results.append(row)
    return results


def compile_stats() -> dict[str, Any]:
    """Dynamo's counters (graphs compiled, recompiles), to show that one compilation served all shapes."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return {}
    return {k: dict(v) for k, v in counters.items() if k in ("stats", "recompiles", "graph_break")}


def check_compiled(model: Llama, compiled: Any, batch: int = 2, context: int = 64,
                   variant: str = "compiled") -> dict[str, float]:
    """Relative L2 error ‖out − ref‖ / ‖ref‖ of ``variant``'s decode logits (``compiled`` from
    :func:`compiled_for`) against the eager step's, on the same fresh random caches and tokens; the caches are
    copied so both write into the same starting state."""
    dev = model.embed.weight.device
    caches = make_caches(model, batch, context)
    twin = [(k.clone(), v.clone()) for k, v in caches]
    rope_all = rope_tables(model.s, context, dev, model.embed.weight.dtype)
    tokens = torch.randint(0, model.s.vocab, (batch, 1), device=dev)
    pos = torch.tensor([context - 1], device=dev)
    with torch.inference_mode():
        ref = decode_logits(model, tokens, pos, rope_all, caches).double()
        if variant.startswith("compiled"):
            out = decode_logits(model, tokens, pos, rope_all, twin, compiled)
        elif variant.startswith("fused"):
            out = decode_logits(model, tokens, pos, rope_all, twin, *compiled)
        else:
            out = compiled(model, tokens, pos, rope_all, twin)
        out = out.double()
        cache_err = max(float((a - b).abs().max()) for (a, b) in zip(
            [t for kv in caches for t in kv], [t for kv in twin for t in kv], strict=True))
    err = float((out - ref).norm() / ref.norm())
    return {"compiled_vs_eager_rel_l2": err, "finite": bool(torch.isfinite(out).all()),
            "cache_max_abs_diff": cache_err}


def prefill_case(model: Llama, batch: int, seq: int, warmup: int = 2, iters: int = 6,
                 power_window_s: float = 0.0) -> dict[str, Any]:
    """Time one prefill of batch × seq random tokens; logits of the last position only (then, with
    ``power_window_s`` > 0, prefill on for that long: :func:`gpumatch.bench.timing.power_window`)."""
    dev = model.embed.weight.device
    row: dict[str, Any] = {"kind": "prefill", "batch": batch, "seq": seq}
    try:
        rope = rope_tables(model.s, seq, dev, model.embed.weight.dtype)
        tokens = torch.randint(0, model.s.vocab, (batch, seq), device=dev)
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        with torch.inference_mode():
            row["timing"] = time_fn(lambda: model.prefill_logits(tokens, rope), dev, warmup=warmup, iters=iters)
            if power_window_s > 0:
                row["power_window"] = power_window(lambda: model.prefill_logits(tokens, rope), dev, power_window_s)
        if dev.type == "cuda":
            row["max_memory_allocated_bytes"] = int(torch.cuda.max_memory_allocated(dev))
        row["tokens_per_s"] = batch * seq / row["timing"]["median_s"]
        row["attention_path"] = attention_path()
        row["status"] = "ok"
    except torch.cuda.OutOfMemoryError as exc:
        row["status"] = "oom"
        row["error"] = str(exc)[:300]
    return row


def free(device: torch.device) -> None:
    """Collect garbage and hand cached blocks back so the next case starts clean."""
    gc.collect()
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.empty_cache()
