"""Build the engine of ``gpumatch serve``: device, dtype, model, slot count that fits, runner, scheduler.

Weights are random (normal, std 0.02, :func:`gpumatch.bench.llama.build_model`), seeded. ``load_weights`` is the
hook for real ones: a callable that fills the built model's parameters in place (from a local folder, say); it
runs before the KV cache is allocated, so the memory check sees the loaded model.

Memory (CUDA): the server takes at most :data:`gpumatch.bench.server.engine.MEMORY_FRACTION` of the GPU's memory:
the weights (allocated), one pass's activations (a reserve for ``max_num_batched_tokens`` rows, below) and the KV
slots. When ``max_num_seqs`` slots of ``max_model_len`` tokens do not fit, the slot count is lowered to what fits
(a warning says so); none fitting is an error. Activation reserve per token of a pass, elements:
``(H + 2 Hkv) D`` (QKV) ``+ 3 ffn`` (gate/up and their product) ``+ 4 hidden`` (residual, norms, attention
output), plus 1 GiB for cuBLAS workspaces and the CUDA graphs' pool.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

from gpumatch.bench.dtypes import STORAGE_PRECISIONS, torch_dtype
from gpumatch.bench.llama import Llama, build_model
from gpumatch.bench.server.engine import MEMORY_FRACTION, Engine, EngineConfig, EngineInfo
from gpumatch.bench.server.runner import Runner, kv_cache_bytes
from gpumatch.bench.server.scheduler import Scheduler
from gpumatch.bench.shapes import LlamaShape

GRAPH_RESERVE_BYTES = 1 << 30


def resolve_device(name: str) -> torch.device:
    """``auto``: the current CUDA device when torch sees one, else the CPU; a CUDA device always with its index."""
    dev = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("--device cuda was asked for, but torch sees no CUDA device")
        index = torch.cuda.current_device() if dev.index is None else dev.index
        if index >= torch.cuda.device_count():
            raise ValueError(f"no CUDA device {index} (torch sees {torch.cuda.device_count()})")
        dev = torch.device("cuda", index)
    return dev


def resolve_dtype(name: str, dev: torch.device) -> torch.dtype:
    """``auto``: bf16 on CUDA, fp32 on a CPU (CPU bf16 matmuls are slow and only the CPU tests run there)."""
    if name == "auto":
        return torch.bfloat16 if dev.type == "cuda" else torch.float32
    if name not in STORAGE_PRECISIONS:
        raise ValueError(f"unknown dtype {name!r}; one of auto, {', '.join(STORAGE_PRECISIONS)}")
    return torch_dtype(name)


def activation_reserve_bytes(s: LlamaShape, tokens: int, element_bytes: int) -> int:
    """Bytes one pass of ``tokens`` rows needs beyond weights and cache (module docstring)."""
    per_token = (s.heads + 2 * s.kv_heads) * s.head_dim + 3 * s.ffn + 4 * s.hidden
    return tokens * per_token * element_bytes + GRAPH_RESERVE_BYTES


def fitting_slots(model: Llama, cfg: EngineConfig, dev: torch.device) -> tuple[int, list[str]]:
    """Slots that fit in the memory share (CUDA), and warnings; on a CPU the asked-for count."""
    if dev.type != "cuda":
        return cfg.max_num_seqs, []
    total = torch.cuda.get_device_properties(dev).total_memory
    used = torch.cuda.memory_allocated(dev)
    reserve = activation_reserve_bytes(model.s, cfg.max_num_batched_tokens, model.embed.weight.element_size())
    room = MEMORY_FRACTION * total - used - reserve
    per_slot = kv_cache_bytes(model, 1, cfg.max_model_len)
    slots = min(cfg.max_num_seqs, int(room // per_slot)) if room > 0 else 0
    if slots < 1:
        raise ValueError(f"no KV slot of {cfg.max_model_len} tokens fits ({per_slot / 2**30:.2f} GiB each, "
                         f"{max(room, 0) / 2**30:.2f} GiB left after weights and activations)")
    warnings = []
    if slots < cfg.max_num_seqs:
        warnings.append(f"{cfg.max_num_seqs} KV slots of {cfg.max_model_len} tokens do not fit in "
                        f"{MEMORY_FRACTION:.0%} of the GPU's memory; serving with {slots}")
    return slots, warnings


def check_host_memory(shape: LlamaShape, cfg: EngineConfig, dtype: torch.dtype) -> None:
    """On a CPU, refuse before allocating when weights + KV slots would take more than half the machine's RAM
    (``gpumatch serve`` without ``--tiny`` on a laptop would otherwise build an 8B model in fp32)."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    elem = torch.empty((), dtype=dtype).element_size()
    kv = 2 * shape.layers * cfg.max_num_seqs * (cfg.max_model_len + 1) * shape.kv_heads * shape.head_dim * elem
    need = shape.params_total * elem + kv
    if need > 0.5 * ram:
        raise ValueError(f"the model and its KV slots need {need / 2**30:.1f} GiB, more than half of this machine's "
                         f"{ram / 2**30:.1f} GiB of RAM (no CUDA device is in use); serve --tiny on a CPU")


def build_engine(cfg: EngineConfig, load_weights: Callable[[Llama], None] | None = None) -> Engine:
    """The engine, built and warmed (CUDA graphs captured) but not started. ValueError on a bad setting."""
    if min(cfg.max_num_seqs, cfg.max_model_len, cfg.max_num_batched_tokens) < 1:
        raise ValueError("--max-num-seqs, --max-model-len and --max-num-batched-tokens must be at least 1")
    dev = resolve_device(cfg.device)
    dtype = resolve_dtype(cfg.dtype, dev)
    shape = LlamaShape.from_dict(cfg.shape)
    if dev.type == "cpu":
        check_host_memory(shape, cfg, dtype)
    torch.manual_seed(cfg.seed)
    model = build_model(shape, dev, dtype).eval()
    if load_weights is not None:
        load_weights(model)
    slots, warnings = fitting_slots(model, cfg, dev)
    compile_ = cfg.compile
    runner = Runner(model, slots, cfg.max_model_len, use_graphs=cfg.cuda_graphs, compile=compile_)
    if runner.compile_error:
        warnings.append(f"torch.compile failed, the layers run uncompiled: {runner.compile_error}")
    if runner.graph_error:
        warnings.append(f"CUDA graph capture failed, decode runs eagerly: {runner.graph_error}")
    sched = Scheduler(slots, cfg.max_model_len, cfg.max_num_batched_tokens)
    info = EngineInfo(
        model=shape.name or "llama", device=str(dev), dtype=str(dtype).removeprefix("torch."),
        params=shape.params_total, slots=slots, max_model_len=cfg.max_model_len,
        max_num_batched_tokens=cfg.max_num_batched_tokens,
        kv_cache_bytes=kv_cache_bytes(model, slots, cfg.max_model_len),
        cuda_graphs=len(runner.graphs), compiled=compile_ and runner.compile_error is None, warnings=warnings)
    return Engine(runner, sched, info, cfg.eos_token_id)


