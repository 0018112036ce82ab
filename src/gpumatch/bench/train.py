"""One training step of a Llama-shaped model: forward, cross-entropy, backward, AdamW step, zero_grad.

Variants (recorded in every result):

- ``master="fp32"``: PyTorch AMP, parameters fp32, forward/backward under ``torch.autocast(bfloat16)``,
  gradients fp32, AdamW moments fp32 (4 + 4 + 8 = 16 bytes per parameter, plus autocast's bf16 weight
  copies while the step runs);
- ``master="none"``: the model cast to bf16 — parameters, gradients and AdamW moments all bf16
  (2 + 2 + 4 = 8 bytes per parameter), the meaning of ``--master-weights none`` in issue 3.
- ``recompute="full"``: every block wrapped in ``torch.utils.checkpoint`` (non-reentrant), so only block
  inputs are kept and each block's forward runs again in backward; ``"none"`` keeps everything.
- ``variant="lora"`` / ``"qlora"`` with ``lora_rank=r``: the base frozen in bf16 (``master="none"``; QLoRA: its
  block projections in NF4), fp32 rank-r adapters on q, k, v, o, gate, up and down, AdamW over the adapters only
  (:mod:`gpumatch.bench.lora` says exactly what runs). Building the base (and quantizing it) allocates more than
  the step keeps, so for these variants the cached blocks are released and the peak counters reset after the
  build (``peak_reset_after_init``); ``"full"`` (the default) trains every parameter as above.

Logits are computed for every position in bf16 and upcast to fp32 for the loss (as HF's LlamaForCausalLM
does). AdamW is torch's fused implementation on CUDA (foreach on CPU).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from gpumatch.bench.decode import free
from gpumatch.bench.llama import attention_path, build_model, rope_tables
from gpumatch.bench.lora import ALPHA, BASE_FORMAT, TARGETS, VARIANTS, add_adapters
from gpumatch.bench.shapes import LlamaShape
from gpumatch.bench.timing import power_window, time_fn


def _memory(dev: torch.device) -> dict[str, int]:
    if dev.type != "cuda":
        return {}
    return {
        "max_memory_allocated_bytes": int(torch.cuda.max_memory_allocated(dev)),
        "max_memory_reserved_bytes": int(torch.cuda.max_memory_reserved(dev)),
        "memory_allocated_bytes": int(torch.cuda.memory_allocated(dev)),
    }


def train_case(
    shape: dict[str, Any],
    batch: int,
    seq: int,
    recompute: str,
    master: str,
    device: torch.device,
    warmup: int = 2,
    iters: int = 5,
    max_s: float | None = None,
    variant: str = "full",
    lora_rank: int = 0,
    power_window_s: float = 0.0,
) -> dict[str, Any]:
    """Time training steps and record peak memory; an out-of-memory case is returned with status 'oom'. With
    ``power_window_s`` > 0, step on for that long after timing (:func:`gpumatch.bench.timing.power_window`)."""
    s = LlamaShape.from_dict(shape)
    _check(recompute, master, variant, lora_rank)
    row: dict[str, Any] = {
        "kind": "train", "model": s.name, "params": s.params_total, "batch": batch, "seq": seq,
        "recompute": recompute, "master": master, "optimizer": "adamw", "variant": variant,
    }
    if variant in VARIANTS:
        row.update(lora_rank=lora_rank, lora_alpha=ALPHA, lora_targets=TARGETS, adapter_dtype="fp32",
                   base_format=BASE_FORMAT[variant], peak_reset_after_init=True)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    try:
        _run(s, row, batch, seq, recompute, master, device, warmup, iters, max_s, power_window_s)
        row["status"] = "ok"
    except torch.cuda.OutOfMemoryError as exc:
        row["status"] = "oom"
        row["error"] = str(exc)[:300]
        row.update(_memory(device))
    free(device)
    return row


def _check(recompute: str, master: str, variant: str, lora_rank: int) -> None:
    if recompute not in ("none", "full") or master not in ("fp32", "none"):
        raise ValueError(f"recompute must be none|full and master fp32|none, not {recompute!r}/{master!r}")
    if variant != "full" and (variant not in VARIANTS or lora_rank < 1 or master != "none"):
        raise ValueError(f"variant must be full, or lora|qlora with lora_rank >= 1 and master none (a bf16 base), "
                         f"not {variant!r}/{lora_rank}/{master!r}")


def make_step(s: LlamaShape, batch: int, seq: int, recompute: str, master: str,
              device: torch.device, variant: str = "full", lora_rank: int = 0) -> Callable[[], None]:
    """Build the model, optimizer and data on ``device`` and return one training step (the module docstring's
    variants). The closure holds everything; dropping it frees the memory."""
    return _build(s, batch, seq, recompute, master, device, variant, lora_rank)[0]


def _build(s: LlamaShape, batch: int, seq: int, recompute: str, master: str, device: torch.device,
           variant: str, lora_rank: int) -> tuple[Callable[[], None], int]:
    """:func:`make_step`'s step and the number of parameters it trains."""
    _check(recompute, master, variant, lora_rank)
    param_dtype = torch.float32 if master == "fp32" else torch.bfloat16
    model = build_model(s, device, param_dtype)
    model.recompute = recompute == "full"
    params = list(model.parameters()) if variant == "full" else add_adapters(model, lora_rank, variant)
    fused = device.type == "cuda"
    opt = torch.optim.AdamW(params, lr=1e-5, fused=fused, foreach=None if fused else True)
    rope = rope_tables(s, seq, device, torch.bfloat16)
    tokens = torch.randint(0, s.vocab, (batch, seq + 1), device=device)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def step() -> None:
        amp = (torch.autocast(device.type, dtype=torch.bfloat16) if master == "fp32"
               else contextlib.nullcontext())
        with amp:
            logits = model(inputs, rope)
            loss = F.cross_entropy(logits.float().view(-1, s.vocab), targets.view(-1))
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, sum(p.numel() for p in params)


def _run(s: LlamaShape, row: dict[str, Any], batch: int, seq: int, recompute: str, master: str,
         device: torch.device, warmup: int, iters: int, max_s: float | None, power_window_s: float = 0.0) -> None:
    """Build, step once, then time; fills ``row``. Locals die with this frame, so memory frees after it."""
    variant = row["variant"]
    step, row["trainable_params"] = _build(s, batch, seq, recompute, master, device, variant,
                                           row.get("lora_rank", 0))
    if variant in VARIANTS:
        free(device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
    row["after_init"] = _memory(device)
    t0 = time.perf_counter()
    step()
    row["first_step_s"] = time.perf_counter() - t0
    row["after_first_step"] = _memory(device)
    row["timing"] = time_fn(step, device, warmup=max(warmup - 1, 0), iters=iters, max_s=max_s)
    if power_window_s > 0:
        row["power_window"] = power_window(step, device, power_window_s)
    row.update(_memory(device))
    row["tokens_per_s"] = batch * seq / row["timing"]["median_s"]
    row["attention_path"] = attention_path()
