"""Convergence, not only step speed: train on learnable synthetic data and record the loss curve per variant.

The seed: 训练任务应比较收敛速度和最终质量 (training should compare convergence speed and final quality). A
precision or recompute setting that steps faster but learns worse is not faster; this measures both.

Data: token sequences from a fixed random Markov chain (a bigram source) over ``states`` tokens (ids
0..states-1 of the model's vocabulary). Each state moves to ``branch`` successors drawn at random, with
probabilities softmax(``spread`` · N(0,1)). The first token of each sequence is drawn from the chain's stationary
distribution π, so every target is predicted from its previous token and the lowest expected cross-entropy any model
can reach is the chain's entropy rate, H = Σᵢ πᵢ · H(Pᵢ) nats per token (reported as ``entropy_nats``; the gap to
it says how close to optimal a variant got). Every step draws fresh sequences (never repeated), so the training loss
is also the held-out loss. All batches are drawn before the clock starts from a seeded generator, and the model is
built after ``torch.manual_seed(seed)``, so every variant sees the same data from the same initial weights.

Variants (the row's ``precision`` and ``recompute``):

- ``fp32``: fp32 parameters and math (TF32 as the process has it; recorded);
- ``bf16``: fp32 master parameters, forward and backward under ``torch.autocast(bfloat16)``;
- ``fp16``: the same under ``torch.autocast(float16)`` with ``torch.amp.GradScaler``;
- ``fp8``: as ``bf16``, and the projections of every block (qkv, o, gate_up, down; the LM head stays bf16) run
  their forward GEMM in e4m3 through ``torch._scaled_mm`` with per-tensor dynamic scales (amax / 448); their
  backward GEMMs run in bf16 (an fp8-forward recipe, not torchao's full float8 training). Where the fp8 path is
  unavailable the row has status 'skipped' and the reason;
- ``recompute="full"``: every block under ``torch.utils.checkpoint`` (the same math, more time, less memory).

Optimizer: AdamW (lr ``lr``, betas (0.9, 0.95), weight decay 0), constant learning rate, gradients clipped at
norm 1. The clock runs from the first step to the last (one forward+backward without an optimizer step runs
before it, so allocator growth and kernel selection stay out); it is read at each logging point after a device
synchronize, and each curve point's loss is the mean of the steps since the previous point.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gpumatch.bench.decode import free
from gpumatch.bench.dtypes import autocast_dtype
from gpumatch.bench.kernelpath import fp8_available
from gpumatch.bench.llama import Block, Llama, build_model, rope_tables
from gpumatch.bench.shapes import LlamaShape

PRECISIONS = ("bf16", "fp16", "fp32", "fp8")
"""Training precisions :func:`convergence_case` accepts; any other name is refused with ValueError."""
RECOMPUTE = ("none", "full")


def _check(precision: str, recompute: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    if recompute not in RECOMPUTE:
        raise ValueError(f"unknown recompute {recompute!r}; choose one of {', '.join(RECOMPUTE)}")


class MarkovSource:
    """A fixed random Markov chain over ``states`` tokens (module docstring), sampled with torch generators."""

    def __init__(self, states: int = 64, branch: int = 4, spread: float = 1.0, seed: int = 0) -> None:
        if states < 2 or not 1 <= branch <= states:
            raise ValueError(f"need states >= 2 and 1 <= branch <= states, not states={states} branch={branch}")
        g = torch.Generator().manual_seed(seed)
        self.states, self.branch, self.spread, self.seed = states, branch, spread, seed
        self.successors = torch.stack([torch.randperm(states, generator=g)[:branch] for _ in range(states)])
        self.probs = torch.softmax(spread * torch.randn(states, branch, generator=g, dtype=torch.float64), dim=-1)
        dense = torch.zeros(states, states, dtype=torch.float64)
        dense.scatter_add_(1, self.successors, self.probs)
        self.transition = dense
        pi = torch.full((states,), 1.0 / states, dtype=torch.float64)
        for _ in range(10_000):  # power iteration (lazy, so periodic chains converge too)
            nxt = 0.5 * pi + 0.5 * (pi @ dense)
            if float((nxt - pi).abs().sum()) < 1e-13:
                pi = nxt
                break
            pi = nxt
        self.stationary = pi / pi.sum()

    @property
    def entropy_nats(self) -> float:
        """The entropy rate Σᵢ πᵢ H(Pᵢ) in nats: the lowest expected next-token cross-entropy."""
        h = -(self.probs * self.probs.log()).sum(-1)
        return float((self.stationary * h).sum())

    def sample(self, batch: int, length: int, generator: torch.Generator) -> torch.Tensor:
        """``batch`` sequences of ``length`` tokens (int64, CPU), the first from π."""
        out = torch.empty(batch, length, dtype=torch.int64)
        cur = torch.multinomial(self.stationary.float(), batch, replacement=True, generator=generator)
        out[:, 0] = cur
        cum = self.probs.float().cumsum(-1)
        cum[:, -1] = 1.0
        for t in range(1, length):
            u = torch.rand(batch, 1, generator=generator)
            pick = torch.searchsorted(cum[cur], u).squeeze(1).clamp_max(self.branch - 1)
            cur = self.successors[cur, pick]
            out[:, t] = cur
        return out

    def describe(self) -> dict[str, Any]:
        return {"kind": "markov-bigram", "states": self.states, "branch": self.branch, "spread": self.spread,
                "seed": self.seed, "entropy_nats": self.entropy_nats, "uniform_nats": math.log(self.states)}


_E4M3_MAX = 448.0


def _fp8_scale(t: torch.Tensor) -> torch.Tensor:
    return (t.abs().amax().float() / _E4M3_MAX).clamp_min(1e-12)


class _Fp8Linear(torch.autograd.Function):
    """y = x · Wᵀ with an e4m3 forward (per-tensor dynamic scales) and a bf16 backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]).to(torch.bfloat16)
        wb = w.to(torch.bfloat16)
        ctx.save_for_backward(x2, wb)
        ctx.x_dtype, ctx.w_dtype, ctx.x_shape = x.dtype, w.dtype, x.shape
        sx, sw = _fp8_scale(x2), _fp8_scale(wb)
        xq = (x2.float() / sx).to(torch.float8_e4m3fn)
        wq = (wb.float() / sw).to(torch.float8_e4m3fn)
        y = torch._scaled_mm(xq, wq.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)
        return y.reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x2, wb = ctx.saved_tensors
        g = grads[0].reshape(-1, grads[0].shape[-1]).to(torch.bfloat16)
        gx = (g @ wb).reshape(ctx.x_shape).to(ctx.x_dtype)
        gw = (g.t() @ x2).to(ctx.w_dtype)
        return gx, gw


class Fp8Linear(nn.Module):
    """Wraps an ``nn.Linear`` (no bias), sharing its weight, so its forward GEMM runs in fp8."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        if linear.bias is not None:
            raise ValueError("Fp8Linear takes a linear layer without bias")
        self.weight: nn.Parameter = linear.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y: torch.Tensor = _Fp8Linear.apply(x, self.weight)  # type: ignore[no-untyped-call]
        return y


def to_fp8(model: Llama) -> int:
    """Replace the four projections of every block with :class:`Fp8Linear`; returns how many were replaced."""
    count = 0
    for layer in model.layers:
        block = layer if isinstance(layer, Block) else None
        if block is None:
            continue
        for owner, attr in ((block.attn, "wqkv"), (block.attn, "wo"), (block.mlp, "w13"), (block.mlp, "w2")):
            lin = getattr(owner, attr)
            if isinstance(lin, nn.Linear):
                setattr(owner, attr, Fp8Linear(lin))
                count += 1
    return count


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def convergence_case(
    shape: dict[str, Any] | LlamaShape,
    precision: str,
    device: torch.device,
    recompute: str = "none",
    steps: int = 200,
    batch: int = 8,
    seq: int = 128,
    lr: float = 1e-3,
    seed: int = 0,
    source: MarkovSource | None = None,
    target_loss: float | None = None,
    log_every: int = 10,
) -> dict[str, Any]:
    """Train ``steps`` steps of one variant on the Markov source; one row (module docstring for the method).

    The row: kind 'convergence', model, precision, recompute, steps, batch, seq, lr, seed, source (its
    description, with entropy_nats), status ('ok', 'skipped' with reason, 'oom', or 'diverged' when the loss
    became NaN/inf); curve [{step, wall_s, loss, tokens}], initial_loss (the first step's), final_loss (the last
    point's), entropy_nats, gap_to_entropy (final − entropy), fraction_learned ((initial − final) / (initial −
    entropy)), target_loss (default: entropy + 10 % of the way from ln(vocab) down to entropy) with
    time_to_target_s and steps_to_target (None when not reached), wall_s, tokens_per_s, step_s (mean), and
    loss_drop_per_s ((initial − final) / wall_s).
    """
    _check(precision, recompute)
    if steps < 1 or batch < 1 or seq < 2 or log_every < 1:
        raise ValueError(f"need steps, batch, log_every >= 1 and seq >= 2 (got {steps}, {batch}, {log_every}, {seq})")
    s = shape if isinstance(shape, LlamaShape) else LlamaShape.from_dict(shape)
    src = source or MarkovSource(states=min(64, s.vocab), seed=seed)
    if src.states > s.vocab:
        raise ValueError(f"the source has {src.states} states but the model's vocabulary is {s.vocab}")
    entropy = src.entropy_nats
    target = target_loss if target_loss is not None else entropy + 0.1 * (math.log(s.vocab) - entropy)
    row: dict[str, Any] = {
        "kind": "convergence", "model": s.name, "params": s.params_total, "precision": precision,
        "recompute": recompute, "steps": steps, "batch": batch, "seq": seq, "lr": lr, "seed": seed,
        "optimizer": "adamw", "source": src.describe(), "entropy_nats": entropy, "target_loss": target,
        "torch": torch.__version__, "device_type": device.type,
    }
    if precision == "fp8":
        ok, why = fp8_available(device)
        if not ok:
            row.update(status="skipped", reason=f"fp8 path unavailable on this device: {why}")
            return row
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    try:
        _train(s, row, src, precision, recompute, steps, batch, seq, lr, seed, log_every, device)
    except torch.cuda.OutOfMemoryError as exc:
        row.update(status="oom", error=str(exc)[:300])
    free(device)
    return row


def _train(s: LlamaShape, row: dict[str, Any], src: MarkovSource, precision: str, recompute: str, steps: int,
           batch: int, seq: int, lr: float, seed: int, log_every: int, device: torch.device) -> None:
    gen = torch.Generator().manual_seed(seed + 1)
    data = src.sample(batch * (steps + 1), seq + 1, gen).view(steps + 1, batch, seq + 1).to(device)
    torch.manual_seed(seed)
    model = build_model(s, device, torch.float32)
    model.recompute = recompute == "full"
    if precision == "fp8":
        row["fp8_linears"] = to_fp8(model)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0,
                            foreach=True)
    amp_dtype = autocast_dtype(precision)
    rope = rope_tables(s, seq, device, amp_dtype or torch.float32)
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None
    row["tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)

    def loss_of(batch_tokens: torch.Tensor) -> torch.Tensor:
        amp = torch.autocast(device.type, dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()
        with amp:
            logits = model(batch_tokens[:, :-1], rope)
            return F.cross_entropy(logits.float().reshape(-1, s.vocab), batch_tokens[:, 1:].reshape(-1))

    def step(i: int) -> torch.Tensor:
        loss = loss_of(data[i])
        if scaler is not None:
            scaler.scale(loss).backward()  # type: ignore[no-untyped-call]
            scaler.unscale_(opt)
        else:
            loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    # Warm-up outside the clock: forward and backward of the spare batch, no optimizer step.
    loss_of(data[steps]).backward()  # type: ignore[no-untyped-call]
    opt.zero_grad(set_to_none=True)
    _sync(device)
    curve: list[dict[str, Any]] = []
    pending: list[torch.Tensor] = []
    tokens_per_step = batch * seq
    t0 = time.perf_counter()
    for i in range(steps):
        pending.append(step(i))
        if (i + 1) % log_every == 0 or i + 1 == steps or i == 0:
            _sync(device)
            wall = time.perf_counter() - t0
            loss = float(torch.stack(pending).float().mean())
            curve.append({"step": i + 1, "wall_s": wall, "loss": loss, "tokens": (i + 1) * tokens_per_step})
            pending = []
            if not math.isfinite(loss):
                break
    wall = curve[-1]["wall_s"]
    row["curve"] = curve
    _summarize(row, curve, s.vocab, wall, tokens_per_step)
    if device.type == "cuda":
        row["max_memory_allocated_bytes"] = int(torch.cuda.max_memory_allocated(device))


def _summarize(row: dict[str, Any], curve: list[dict[str, Any]], vocab: int, wall: float,
               tokens_per_step: int) -> None:
    entropy, target = row["entropy_nats"], row["target_loss"]
    initial, final = curve[0]["loss"], curve[-1]["loss"]
    row["status"] = "ok" if math.isfinite(final) else "diverged"
    hit = next((p for p in curve if p["loss"] <= target), None)
    done = curve[-1]["step"]
    row.update(
        initial_loss=initial, final_loss=final, uniform_loss=math.log(vocab), gap_to_entropy=final - entropy,
        fraction_learned=(initial - final) / (initial - entropy) if initial > entropy else None,
        time_to_target_s=hit["wall_s"] if hit else None, steps_to_target=hit["step"] if hit else None,
        wall_s=wall, steps_done=done, tokens_per_s=done * tokens_per_step / wall if wall > 0 else None,
        step_s=wall / done, loss_drop_per_s=(initial - final) / wall if wall > 0 else None,
    )


def _loss_at(curve: Sequence[dict[str, Any]], t: float) -> float:
    """The loss of the last curve point at or before wall time ``t`` (the first point's when none is)."""
    best = curve[0]["loss"]
    for p in curve:
        if p["wall_s"] <= t:
            best = p["loss"]
    return float(best)


def _time_to(curve: Sequence[dict[str, Any]], loss: float) -> float | None:
    hit = next((p for p in curve if p["loss"] <= loss), None)
    return float(hit["wall_s"]) if hit else None


def compare_convergence(rows: Sequence[dict[str, Any]], baseline: int = 0) -> dict[str, Any]:
    """Compare variants' loss reached per second (rows of :func:`convergence_case` on the same source and model).

    Returns {common_time_s, common_loss, baseline, variants: [...]}: ``common_time_s`` is the shortest wall time of
    the finished runs and each variant's ``loss_at_common_time`` is the loss it had reached by then (the fair "loss
    per second" comparison); ``common_loss`` is the highest final loss, which every variant reached, and
    ``time_to_common_loss_s`` how long each took to reach it, with ``speedup_vs_baseline`` (the baseline's time /
    this one's) and ``final_loss_vs_baseline`` (difference in nats). Skipped or failed rows are listed with their
    status only.
    """
    ok = [r for r in rows if r.get("status") == "ok"]
    if not ok:
        return {"common_time_s": None, "common_loss": None, "baseline": None,
                "variants": [_label(r) | {"status": r.get("status")} for r in rows]}
    entropies = {round(float(r["entropy_nats"]), 9) for r in ok}
    if len(entropies) > 1:
        raise ValueError("rows come from different synthetic sources (entropies differ); compare like with like")
    base = rows[baseline] if 0 <= baseline < len(rows) and rows[baseline].get("status") == "ok" else ok[0]
    common_t = min(float(r["wall_s"]) for r in ok)
    common_loss = max(float(r["final_loss"]) for r in ok)
    base_t = _time_to(base["curve"], common_loss)
    variants = []
    for r in rows:
        v = _label(r) | {"status": r.get("status")}
        if r.get("status") == "ok":
            t = _time_to(r["curve"], common_loss)
            v.update(final_loss=r["final_loss"], gap_to_entropy=r["gap_to_entropy"], tokens_per_s=r["tokens_per_s"],
                     loss_at_common_time=_loss_at(r["curve"], common_t), time_to_common_loss_s=t,
                     time_to_target_s=r["time_to_target_s"], loss_drop_per_s=r["loss_drop_per_s"],
                     speedup_vs_baseline=base_t / t if base_t and t else None,
                     final_loss_vs_baseline=r["final_loss"] - base["final_loss"])
        else:
            v["reason"] = r.get("reason") or r.get("error")
        variants.append(v)
    return {"common_time_s": common_t, "common_loss": common_loss, "entropy_nats": ok[0]["entropy_nats"],
            "baseline": _label(base), "variants": variants}


def _label(r: dict[str, Any]) -> dict[str, Any]:
    return {"precision": r.get("precision"), "recompute": r.get("recompute")}


def convergence_suite(
    shape: dict[str, Any] | LlamaShape,
    device: torch.device,
    variants: Sequence[tuple[str, str]] = (("bf16", "none"), ("bf16", "full"), ("fp16", "none"), ("fp32", "none"),
                                           ("fp8", "none")),
    on_row: Callable[[dict[str, Any]], None] | None = None,
    **kwargs: Any,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """:func:`convergence_case` for each (precision, recompute) with the same source, seed and settings, then
    :func:`compare_convergence` (baseline: the first variant). ``on_row`` sees each row as it finishes."""
    for p, r in variants:
        _check(p, r)
    s = shape if isinstance(shape, LlamaShape) else LlamaShape.from_dict(shape)
    if "source" not in kwargs:
        kwargs["source"] = MarkovSource(states=min(64, s.vocab), seed=int(kwargs.get("seed", 0)))
    rows = []
    for p, r in variants:
        row = convergence_case(s, p, device, recompute=r, **kwargs)
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows, compare_convergence(rows)
