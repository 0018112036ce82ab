"""The model side of ``gpumatch serve``: slot KV cache, one flat forward per iteration, CUDA graphs for decode.

KV cache: per layer one K and one V tensor of ``slots x (max_len + 1)`` rows of ``(kv_heads, head_dim)``
(``(slots, max_len + 1, kv_heads, head_dim)`` viewed flat, the layout flash attention reads). Row ``max_len`` of
every slot is scratch: slots inside the decode span that do not decode this pass write their K/V there.

Forward of one pass (:meth:`Runner.step`): the tokens of the pass form one flat batch ``(n, hidden)``: first one row
per slot ``0 .. span-1`` (the decode rows; idle slots ride along and are discarded), then every prompt chunk's
tokens. The projections and the MLP run once over all ``n`` rows, so prompt tokens share the weight reads of the
decode rows (the ``mixed`` pass of vLLM V1 / TensorRT-LLM in-flight batching). Attention is split:

- decode rows: the query heads of each KV group laid out as a length-G query against the slot's cache up to a
  context bucket (:func:`context_buckets`, the first >= the longest context in the pass), keys past each row's
  length masked;
- a chunk at prompt offset ``s`` of ``t`` tokens: its ``G t`` queries per KV head against positions ``0 .. s+t-1``
  of its slot, causal (query ``i`` sees keys ``<= s + i``).

Decode-only passes on CUDA replay a CUDA graph captured per (batch bucket, context bucket), batch buckets 1, 2,
4, ... up to the slot count (the span is rounded up to a bucket); other passes, and every pass on a CPU, run eagerly.

``compile`` (opt-in): the two per-layer stretches between cache and attention -- norm, QKV projection and
RoPE before; output projection, residual, norm, MLP and residual after -- go through ``torch.compile`` (inductor,
dynamic shapes: one compilation serves every pass size and every layer), so their elementwise work is fused
instead of a dozen small kernels per layer. Cache writes and attention stay outside the compiled code (an in-place
write to the cache inside it could be functionalised into a copy of the whole cache). Graphs capture the compiled
code. A compilation failure leaves the runner eager and says why in :attr:`Runner.compile_error`.
Sampling is greedy (argmax), done on the device; only the sampled ids come back to the host.

Log-probabilities (:meth:`Runner.sample`): a pass in which some request asked for them runs eagerly; the
log-softmax (fp32) of the rows those requests sample, and of every prompt row of a request that wants prompt
log-probabilities (row ``p`` scores prompt token ``p + 1``), gives each wanted token's log-prob and the top-k.

Positions use RoPE tables of ``max_len + 1`` entries (:func:`gpumatch.bench.llama.rope_tables`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F

from gpumatch.bench.llama import Block, Llama, rope_tables
from gpumatch.bench.server.logprobs import Sampled, score, wants_logprobs
from gpumatch.bench.server.scheduler import Plan, Seq

MIN_CONTEXT_BUCKET = 16
COMPILED_REL_L2_MAX = 2e-2
"""Largest relative L2 error of a compiled stretch against eager code: a few bf16 ulps (2^-8 = 3.9e-3 each)."""


def buckets(top: int, low: int = 1) -> list[int]:
    """Powers of two from ``low`` below ``top``, and ``top``: 1, 2, 4, ..., top."""
    out = [b for b in (2 ** k for k in range(int(math.log2(max(low, 1))), 64)) if b < top]
    return [*out, top]


def context_buckets(max_len: int) -> list[int]:
    """Decode context buckets: powers of two from :data:`MIN_CONTEXT_BUCKET` to 512, then steps of
    ``max(512, max_len / 8)`` up to ``max_len`` (so a long context is read at most one step past its length)."""
    if max_len <= MIN_CONTEXT_BUCKET:
        return [max_len]
    low = buckets(min(max_len, 512), MIN_CONTEXT_BUCKET)
    step = max(512, -(-max_len // 8))
    return sorted({*low, *range(low[-1] + step, max_len, step), max_len})


def kv_cache_bytes(model: Llama, slots: int, max_len: int) -> int:
    """Bytes of the slot cache: K and V, every layer, ``slots x (max_len + 1)`` rows of kv_heads x head_dim."""
    s = model.s
    return 2 * s.layers * slots * (max_len + 1) * s.kv_heads * s.head_dim * model.embed.weight.element_size()


@dataclass
class _Batch:
    """Device inputs of one pass (flat rows: ``span`` decode rows, then the chunk tokens)."""

    tokens: torch.Tensor
    positions: torch.Tensor
    write_rows: torch.Tensor
    span: int
    context: int
    lengths: torch.Tensor
    chunks: list[tuple[int, int, int, int]]
    """(row offset, slot, start, length) of each chunk."""
    sample_rows: torch.Tensor


class Runner:
    """Owns the cache and runs passes (module docstring). ``use_graphs``: capture decode graphs (CUDA only)."""

    def __init__(self, model: Llama, slots: int, max_len: int, use_graphs: bool, compile: bool = False) -> None:
        s = model.s
        self.model, self.slots, self.max_len = model, slots, max_len
        self.dev, self.dtype = model.embed.weight.device, model.embed.weight.dtype
        self.group = s.heads // s.kv_heads
        rows = slots * (max_len + 1)
        self.k = [torch.zeros(rows, s.kv_heads, s.head_dim, device=self.dev, dtype=self.dtype)
                  for _ in range(s.layers)]
        self.v = [torch.zeros_like(t) for t in self.k]
        self.rope = rope_tables(s, max_len + 1, self.dev, self.dtype)
        self.batch_buckets = buckets(slots)
        self.context_buckets = context_buckets(max_len)
        self.graphs: dict[tuple[int, int], tuple[Any, torch.Tensor]] = {}
        self._static: dict[str, torch.Tensor] = {}
        self.graph_error: str | None = None
        self.last_shape: tuple[int, int, bool] = (0, 0, False)
        """(batch bucket, context bucket, replayed from a graph) of the last pass (the engine's iteration log)."""
        self.compile_error: str | None = None
        self._pre: Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = _pre_attention
        self._post: Callable[..., torch.Tensor] = _post_attention
        if compile:
            self._compile()
        self._host: torch.Tensor | None = None
        if self.dev.type == "cuda":
            torch.cuda.set_device(self.dev)
            self._host = torch.empty(max(slots, 1) + 1, dtype=torch.long, pin_memory=True)
            if use_graphs:
                self._capture_all()

    def _compile(self) -> None:
        """Compile the per-layer stretches (module docstring) and run one eager-vs-compiled check of a small pass;
        on any failure go back to eager code and keep the reason."""
        import torch._dynamo

        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        pre, post = torch.compile(_pre_attention, dynamic=True), torch.compile(_post_attention, dynamic=True)
        try:
            with torch.inference_mode():
                self._check_compiled(pre, post)
        except Exception as exc:  # inductor raises many types (BackendCompilerFailed, CalledProcessError, ...)
            self.compile_error = f"{type(exc).__name__}: {str(exc)[:300]}"
            return
        self._pre, self._post = pre, post

    def _check_compiled(self, pre: Callable[..., Any], post: Callable[..., Any]) -> None:
        """Compile for passes of 1 and 3 rows and compare with the eager stretches of layer 0: relative L2 error
        of each output below :data:`COMPILED_REL_L2_MAX` (fusion reorders bf16 roundings; elementwise bounds
        fail on random weights whose outputs reach tens)."""
        s, block = self.model.s, cast(Block, self.model.layers[0])
        for n in (3, 1):
            x = torch.randn(n, s.hidden, device=self.dev, dtype=self.dtype)
            cs = self.rope[:, :n].unsqueeze(2)
            want, got = _pre_attention(block, x, cs, s.heads, s.kv_heads), pre(block, x, cs, s.heads, s.kv_heads)
            o = torch.randn(n, s.heads * s.head_dim, device=self.dev, dtype=self.dtype)
            for a, b in zip((*want, _post_attention(block, x, o)), (*got, post(block, x, o)), strict=True):
                err = float((a.float() - b.float()).norm() / a.float().norm().clamp_min(1e-30))
                if not err < COMPILED_REL_L2_MAX:
                    raise RuntimeError(f"compiled layer differs from eager at {n} rows (relative L2 {err:.2g})")

    def bind_thread(self) -> None:
        """Make the calling thread's current CUDA device the runner's (the engine thread calls it first)."""
        if self.dev.type == "cuda":
            torch.cuda.set_device(self.dev)

    def _to_host(self, ids: torch.Tensor) -> list[int]:
        """``ids`` as a list; on CUDA through a pinned buffer and an event wait, which lets other Python threads
        (the HTTP event loop) run while the GPU finishes the pass."""
        if self._host is None or ids.numel() > self._host.numel():
            return cast(list[int], ids.tolist())
        out = self._host[: ids.numel()]
        out.copy_(ids, non_blocking=True)
        done = torch.cuda.Event()  # type: ignore[no-untyped-call]
        done.record()
        done.synchronize()
        return cast(list[int], out.tolist())

    # --- layout ----------------------------------------------------------------------------------
    def _view(self, t: torch.Tensor) -> torch.Tensor:
        s = self.model.s
        return t.view(self.slots, self.max_len + 1, s.kv_heads, s.head_dim)

    def _row(self, slot: int, pos: int) -> int:
        return slot * (self.max_len + 1) + pos

    def _bucket(self, values: list[int], need: int) -> int:
        return next(b for b in values if b >= need)

    # --- one pass ------------------------------------------------------------------------------
    def step(self, plan: Plan) -> dict[int, int]:
        """Run ``plan``; the sampled token of every row that samples, by request id."""
        return self.sample(plan).ids

    def sample(self, plan: Plan) -> Sampled:
        """Run ``plan``; sampled tokens, and log-probs where a request asked (module docstring)."""
        span = self._bucket(self.batch_buckets, plan.decode_span) if plan.decode else 0
        need = max((s.kv_tokens + 1 for s in plan.decode), default=1)
        context = self._bucket(self.context_buckets, need)
        rids = [s.rid for s in plan.decode] + [c.seq.rid for c in plan.chunks if c.completes]
        graphed = not plan.chunks and not wants_logprobs(plan) and (span, context) in self.graphs
        self.last_shape = (span, context, graphed)
        with torch.inference_mode():
            if wants_logprobs(plan):
                return self._eager_logprobs(plan, span, context, rids)
            if graphed:
                ids = self._replay(plan, span, context)
            else:
                ids = self._to_host(self._forward(self._batch(plan, span, context)))
        return Sampled(dict(zip(rids, ids, strict=True)))

    def _decode_inputs(self, plan: Plan, span: int) -> tuple[list[int], list[int], list[int], list[int]]:
        """Per decode row (slots 0..span-1): token, position, cache row written, length attended."""
        tok, pos, write, length = [0] * span, [0] * span, [0] * span, [1] * span
        for slot in range(span):
            write[slot] = self._row(slot, self.max_len)  # scratch unless the slot decodes
        for s in plan.decode:
            p = s.kv_tokens
            tok[s.slot], pos[s.slot], write[s.slot], length[s.slot] = s.out[-1], p, self._row(s.slot, p), p + 1
        return tok, pos, write, length

    def _batch(self, plan: Plan, span: int, context: int) -> _Batch:
        """The flat batch of an eager pass: decode rows, then each chunk's tokens (module docstring)."""
        tok, pos, write, length = self._decode_inputs(plan, span)
        chunks: list[tuple[int, int, int, int]] = []
        sample = [s.slot for s in plan.decode]
        for c in plan.chunks:
            off = len(tok)
            chunks.append((off, c.seq.slot, c.start, c.length))
            tok += c.seq.prompt[c.start:c.start + c.length]
            pos += list(range(c.start, c.start + c.length))
            write += [self._row(c.seq.slot, p) for p in range(c.start, c.start + c.length)]
            if c.completes:
                sample.append(off + c.length - 1)

        def as_tensor(v: list[int]) -> torch.Tensor:
            return torch.tensor(v, device=self.dev, dtype=torch.long)

        return _Batch(as_tensor(tok), as_tensor(pos), as_tensor(write), span, context, as_tensor(length), chunks,
                      as_tensor(sample))

    def _eager_logprobs(self, plan: Plan, span: int, context: int, rids: list[int]) -> Sampled:
        """An eager pass that also scores: the sampled rows of requests that asked and their prompt rows."""
        b = self._batch(plan, span, context)
        x = self._hidden(b)
        samplers = [*plan.decode, *(c.seq for c in plan.chunks if c.completes)]
        rows = cast(list[int], b.sample_rows.tolist())
        want: list[tuple[Seq, int, int | None]] = [(s, rows[i], None) for i, s in enumerate(samplers)
                                                   if s.logprobs is not None]
        for (off, _, start, t), c in zip(b.chunks, plan.chunks, strict=True):
            if c.seq.prompt_logprobs is not None:  # row of position p scores prompt[p + 1]
                last = min(start + t, len(c.seq.prompt) - 1)
                want += [(c.seq, off + p - start, c.seq.prompt[p + 1]) for p in range(start, last)]
        m = self.model
        ids = self._to_host(m.head(m.norm(x.index_select(0, b.sample_rows))).argmax(dim=-1))
        out = Sampled(dict(zip(rids, ids, strict=True)))
        if want:
            sel = torch.tensor([r for _, r, _ in want], device=self.dev, dtype=torch.long)
            logp = torch.log_softmax(m.head(m.norm(x.index_select(0, sel))).float(), dim=-1)
            score(out, logp, want)
        return out

    def _forward(self, b: _Batch) -> torch.Tensor:
        """Greedy next token of each of ``b.sample_rows``."""
        m = self.model
        h = m.norm(self._hidden(b).index_select(0, b.sample_rows))
        return m.head(h).argmax(dim=-1)

    def _hidden(self, b: _Batch) -> torch.Tensor:
        """The last layer's output of every row of ``b`` (n, hidden), before the final norm."""
        m = self.model
        x: torch.Tensor = m.embed(b.tokens)
        cos_sin = self.rope.index_select(1, b.positions).unsqueeze(2)  # (2, n, 1, D)
        mask = None
        if b.span:
            mask = (torch.arange(b.context, device=self.dev)[None, :] < b.lengths[:, None]).view(b.span, 1, 1, -1)
        for i, layer in enumerate(m.layers):
            x = self._layer(cast(Block, layer), i, x, cos_sin, b, mask)
        return x

    def _layer(self, block: Block, i: int, x: torch.Tensor, cos_sin: torch.Tensor, b: _Batch,
               mask: torch.Tensor | None) -> torch.Tensor:
        s = self.model.s
        g = self.group
        q, k, v = self._pre(block, x, cos_sin, s.heads, s.kv_heads)
        self.k[i].index_copy_(0, b.write_rows, k)
        self.v[i].index_copy_(0, b.write_rows, v)
        kc, vc = self._view(self.k[i]), self._view(self.v[i])
        outs = []
        if b.span:
            qd = q[: b.span].view(b.span, s.kv_heads, g, s.head_dim)
            kd, vd = kc[: b.span, : b.context].transpose(1, 2), vc[: b.span, : b.context].transpose(1, 2)
            outs.append(F.scaled_dot_product_attention(qd, kd, vd, attn_mask=mask).reshape(b.span, -1))
        for off, slot, start, t in b.chunks:
            outs.append(self._chunk_attention(q[off: off + t], kc[slot], vc[slot], start, t))
        o = outs[0] if len(outs) == 1 else torch.cat(outs)
        return self._post(block, x, o)

    def _chunk_attention(self, q: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor, start: int, t: int) -> torch.Tensor:
        """Causal attention of a chunk's queries ``q`` (t, H, D) at positions start..start+t-1 over its slot."""
        s, g = self.model.s, self.group
        end = start + t
        qc = q.view(t, s.kv_heads, g, s.head_dim).permute(1, 2, 0, 3).reshape(1, s.kv_heads, g * t, s.head_dim)
        keys = torch.arange(end, device=self.dev)
        allowed = keys[None, :] <= (start + torch.arange(t, device=self.dev))[:, None]
        # 4-D, as the fused (memory-efficient) kernels want; the mask broadcasts over the KV heads
        out = F.scaled_dot_product_attention(qc, kc[:end].transpose(0, 1)[None], vc[:end].transpose(0, 1)[None],
                                             attn_mask=allowed.repeat(g, 1))
        return out.view(s.kv_heads, g, t, s.head_dim).permute(2, 0, 1, 3).reshape(t, -1)

    # --- CUDA graphs ---------------------------------------------------------------------------
    def _static_batch(self, span: int, context: int) -> _Batch:
        st = self._static["inputs"]
        return _Batch(st[0, :span], st[1, :span], st[2, :span], span, context, st[3, :span], [],
                      self._static["rows"][:span])

    def make_static(self) -> None:
        """The graphs' input buffers: one (4, slots) tensor of tokens, positions, cache rows written (scratch until
        set), lengths attended; and the rows sampled (all)."""
        n = self.slots
        inputs = torch.zeros(4, n, dtype=torch.long, device=self.dev)
        inputs[2] = torch.tensor([self._row(i, self.max_len) for i in range(n)], device=self.dev)
        inputs[3] = 1
        self._static = {"inputs": inputs, "rows": torch.arange(n, device=self.dev)}

    def static_batch(self, span: int, context: int) -> _Batch:
        return self._static_batch(span, context)

    def _capture_all(self) -> None:
        """Capture a decode graph per (batch bucket, context bucket), largest first, sharing one memory pool.
        A failure leaves the remaining shapes eager and says why in :attr:`graph_error`."""
        self.make_static()
        pool = torch.cuda.graph_pool_handle()
        try:
            with torch.inference_mode():
                for span in reversed(self.batch_buckets):
                    for context in reversed(self.context_buckets):
                        self.graphs[(span, context)] = self._capture(span, context, pool)
        except RuntimeError as exc:
            self.graph_error = f"{type(exc).__name__}: {str(exc)[:300]}"

    def _capture(self, span: int, context: int, pool: Any) -> tuple[Any, torch.Tensor]:
        b = self._static_batch(span, context)

        def run() -> torch.Tensor:
            return self._forward(b)

        stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                run()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            out = run()
        return graph, out

    def _replay(self, plan: Plan, span: int, context: int) -> list[int]:
        host = torch.tensor(self._decode_inputs(plan, span), dtype=torch.long)
        self._static["inputs"][:, :span].copy_(host)  # one copy of the four input rows
        graph, out = self.graphs[(span, context)]
        graph.replay()
        ids = self._to_host(out)
        return [ids[s.slot] for s in plan.decode]


def _pre_attention(block: Block, x: torch.Tensor, cos_sin: torch.Tensor, heads: int,
                   kv_heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Norm, fused QKV projection and RoPE of ``x`` (n, hidden): q (n, heads, D), k and v (n, kv_heads, D)."""
    n = x.shape[0]
    d = block.attn.wqkv.out_features // (heads + 2 * kv_heads)
    q, k, v = block.attn.wqkv(block.attn_norm(x)).split([heads * d, kv_heads * d, kv_heads * d], -1)
    return _rotate(q.view(n, heads, d), cos_sin), _rotate(k.view(n, kv_heads, d), cos_sin), v.view(n, kv_heads, d)


def _post_attention(block: Block, x: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
    """Output projection and residual, then norm, MLP and residual: the layer's output (n, hidden)."""
    x = x + block.attn.wo(o)
    return x + block.mlp(block.mlp_norm(x))  # type: ignore[no-any-return]


def _rotate(x: torch.Tensor, cos_sin: torch.Tensor) -> torch.Tensor:
    """RoPE (rotate-half) of ``x`` (n, heads, D) with cos/sin (2, n, 1, D)."""
    half = x.shape[-1] // 2
    rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos_sin[0] + rot * cos_sin[1]


