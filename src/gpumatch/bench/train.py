"""One training step of a Llama-shaped model: forward, cross-entropy, backward, AdamW step, zero_grad.

Variants (recorded in every result):

- ``master="fp32"``: PyTorch AMP, parameters fp32, forward/backward under ``torch.autocast(bfloat16)``,
  gradients fp32, AdamW moments fp32 (4 + 4 + 8 = 16 bytes per parameter, plus autocast's bf16 weight
  copies while the step runs);
- ``master="none"``: the model cast to bf16 — parameters, gradients and AdamW moments all bf16
  (2 + 2 + 4 = 8 bytes per parameter), the meaning of ``--master-weights none`` in issue 3.
- ``recompute="full"``: every block wrapped in ``torch.utils.checkpoint`` (non-reentrant), so only block
  inputs are kept and each block's forward runs again in backward; ``"none"`` keeps everything.

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
from gpumatch.bench.shapes import LlamaShape
from gpumatch.bench.timing import time_fn


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
) -> dict[str, Any]:
    """Time training steps and record peak memory; an out-of-memory case is returned with status 'oom'."""
    s = LlamaShape.from_dict(shape)
    if recompute not in ("none", "full") or master not in ("fp32", "none"):
        raise ValueError(f"recompute must be none|full and master fp32|none, not {recompute!r}/{master!r}")
    row: dict[str, Any] = {
        "kind": "train", "model": s.name, "params": s.params_total, "batch": batch, "seq": seq,
        "recompute": recompute, "master": master, "optimizer": "adamw",
    }
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    try:
        _run(s, row, batch, seq, recompute, master, device, warmup, iters, max_s)
        row["status"] = "ok"
    except torch.cuda.OutOfMemoryError as exc:
        row["status"] = "oom"
        row["error"] = str(exc)[:300]
        row.update(_memory(device))
    free(device)
    return row


def make_step(s: LlamaShape, batch: int, seq: int, recompute: str, master: str,
              device: torch.device) -> Callable[[], None]:
    """Build the model, optimizer and data on ``device`` and return one training step (the module docstring's
    variants). The closure holds everything; dropping it frees the memory."""
    param_dtype = torch.float32 if master == "fp32" else torch.bfloat16
    model = build_model(s, device, param_dtype)
    model.recompute = recompute == "full"
    fused = device.type == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=fused, foreach=None if fused else True)
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

    return step


def _run(s: LlamaShape, row: dict[str, Any], batch: int, seq: int, recompute: str, master: str,
         device: torch.device, warmup: int, iters: int, max_s: float | None) -> None:
    """Build, step once, then time; fills ``row``. Locals die with this frame, so memory frees after it."""
    step = make_step(s, batch, seq, recompute, master, device)
    row["after_init"] = _memory(device)
    t0 = time.perf_counter()
    step()
    row["first_step_s"] = time.perf_counter() - t0
    row["after_first_step"] = _memory(device)
    row["timing"] = time_fn(step, device, warmup=max(warmup - 1, 0), iters=iters, max_s=max_s)
    row.update(_memory(device))
    row["tokens_per_s"] = batch * seq / row["timing"]["median_s"]
    row["attention_path"] = attention_path()
