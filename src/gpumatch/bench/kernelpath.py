"""Kernel-path check: does each of the workload's own GEMMs run on the fast path of this card?

The seed: 算子没有走到加速路径时，还要查看内核形状、数据布局和框架版本 (when an operator misses the accelerated
path, look at the kernel's shape, the data layout and the framework version). For a Llama-shaped model at a token
count M this lists the GEMMs one decoder layer and the LM head run (nn.Linear: ``y = x · Wᵀ``, x (M,K) row-major,
the weight (N,K) row-major read transposed, cuBLAS "TN"):

- ``qkv``: N = (heads + 2·kv_heads)·head_dim, K = hidden (Q, K and V fused, as :mod:`.llama` does);
- ``o``: N = hidden, K = heads·head_dim;
- ``gate_up``: N = 2·ffn, K = hidden (gate and up fused);
- ``down``: N = hidden, K = ffn;
- ``lm_head``: N = vocab, K = hidden.

Each is timed at the workload's precision and so is an ALIGNED comparison shape of (nearly) the same FLOPs:
N and K rounded to the nearest multiple of 128 (64 for dimensions up to 96), M scaled so that M·N·K stays the same
and rounded to a multiple of 64 from 256 rows (of 16 below; an M under 64, a decode batch, is kept), so the FLOPs
match within a few per cent (``aligned.flops_ratio`` says how closely). A shape whose achieved FLOP/s is below
``threshold`` (default 0.8) of the aligned shape's is flagged, with the reasons its dimensions give (K or N not a
multiple of 128 or of 16 bytes, odd; M not a multiple of 64). Precision checks, flagged with their reason too:

- ``fp8``: e4m3 through ``torch._scaled_mm`` (per-tensor scales, bf16 out); where that path does not run (a card
  before sm_89, a build without it, or K, N not multiples of 16) the shape is timed in bf16 and the row says
  'fp8 path unavailable …: fell back to bf16';
- ``fp32``: timed with TF32 off (``torch.backends.cuda.matmul.allow_tf32 = False``, PyTorch's default) and
  on; when TF32 is much faster the row says 'dtype fp32 without TF32: off the tensor path';
- ``tf32``: fp32 tensors with TF32 on; the TF32-off time is recorded beside it.

On CUDA the names of the kernels one call launched are recorded (torch.profiler), which show the tile shape and
the instruction path cuBLAS chose. On CPU there are no tensor cores: the tensor-path checks are recorded as
'skipped: no CUDA' and fp8 falls back to bf16; the shapes are still listed and timed (use tiny shapes there).

Every row records the torch version, the device name and the layout (strides, contiguity) of both operands.
``timer`` replaces the timing (tests inject a fake one so they do not depend on the CPU's speed).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from gpumatch.bench.dtypes import torch_dtype
from gpumatch.bench.shapes import LlamaShape
from gpumatch.bench.timing import time_fn
from gpumatch.units import MIB

PRECISIONS = ("bf16", "fp16", "fp8", "fp32", "tf32")
"""The precisions :func:`kernel_path_case` accepts; any other name is refused with ValueError."""

DEFAULT_THRESHOLD = 0.8
"""A shape is flagged when its FLOP/s is below this fraction of its aligned comparison shape's."""

NO_CUDA = "skipped: no CUDA"

_ROTATE_BYTES = 256 * MIB  # rotate input sets past the L2 (as micro.gemm_case does)

Timer = Callable[[Callable[[], object], torch.device, dict[str, Any]], dict[str, Any]]
"""``timer(fn, device, info)`` returns :func:`gpumatch.bench.stats.summarize` of seconds per call of ``fn``;
``info`` names what is timed: name, m, n, k, precision (the one that ran) and role ('own', 'aligned', 'tf32')."""


def _check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")


def workload_gemms(shape: Mapping[str, Any] | LlamaShape, tokens: int) -> list[dict[str, Any]]:
    """The GEMMs of one decoder layer and the LM head for ``tokens`` rows (M): name, m, n, k and flops (2·M·N·K),
    in the order qkv, o, gate_up, down, lm_head (module docstring)."""
    if tokens < 1:
        raise ValueError(f"tokens must be at least 1, not {tokens}")
    s = shape if isinstance(shape, LlamaShape) else LlamaShape.from_dict(shape)
    dims = (
        ("qkv", (s.heads + 2 * s.kv_heads) * s.head_dim, s.hidden),
        ("o", s.hidden, s.heads * s.head_dim),
        ("gate_up", 2 * s.ffn, s.hidden),
        ("down", s.hidden, s.ffn),
        ("lm_head", s.vocab, s.hidden),
    )
    return [{"name": name, "m": tokens, "n": n, "k": k, "flops": 2.0 * tokens * n * k} for name, n, k in dims]


def _round_to(x: float, multiple: int) -> int:
    return max(multiple, round(x / multiple) * multiple)


def _align(d: int) -> int:
    return _round_to(d, 64) if d <= 96 else _round_to(d, 128)


def aligned_shape(m: int, n: int, k: int) -> tuple[int, int, int]:
    """N, K rounded to the nearest multiple of 128 (of 64 up to 96); M scaled to keep M·N·K, rounded to a multiple
    of 64 from 256 rows (of 16 from 64; kept as is under 64: a decode batch is not a tile question)."""
    n2, k2 = _align(n), _align(k)
    if m < 64:
        return m, n2, k2
    scaled = m * n * k / (n2 * k2)
    return _round_to(scaled, 64 if m >= 256 else 16), n2, k2


def alignment_issues(m: int, n: int, k: int, precision: str) -> list[str]:
    """Why these dimensions may miss the tensor-core fast path (empty when all are multiples of 128)."""
    out: list[str] = []
    elem = 1 if precision == "fp8" else 4 if precision in ("fp32", "tf32") else 2
    vec = 16 // elem  # elements in 16 bytes, the alignment cuBLAS's vectorized / TMA loads need
    for label, d in (("K", k), ("N", n)):
        if d % 2:
            out.append(f"{label}={d} odd: rows not 16-byte aligned, no vectorized loads")
        elif d % vec:
            out.append(f"{label}={d} not a multiple of {vec} ({precision}: 16-byte rows): no vectorized loads")
        elif d % 128 and d != 64:
            also = " (a multiple of 64)" if d % 64 == 0 else " nor 64"
            out.append(f"{label}={d} not a multiple of 128{also}: tensor-core tiles partially filled")
    if m >= 64 and m % 64:
        out.append(f"M={m} not a multiple of 64: the last row of tiles partially filled")
    if precision == "fp8" and (k % 16 or n % 16):
        out.append(f"fp8 needs K and N multiples of 16 (K={k}, N={n})")
    return out


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return str(torch.cuda.get_device_name(device))
    return "cpu"


def fp8_available(device: torch.device) -> tuple[bool, str]:
    """Whether e4m3 ``torch._scaled_mm`` runs here, and why not when it does not."""
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return False, f"torch {torch.__version__} has no float8_e4m3fn/_scaled_mm"
    if device.type != "cuda":
        return False, "no CUDA (fp8 GEMMs need sm_89+ tensor cores; a CPU _scaled_mm is an emulation)"
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if (major, minor) < (8, 9):
            return False, f"compute capability {major}.{minor} < 8.9 has no fp8 tensor cores"
    try:
        a = torch.ones(16, 16, device=device).to(torch.float8_e4m3fn)
        one = torch.ones((), device=device)
        torch._scaled_mm(a, a.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    except (RuntimeError, NotImplementedError, TypeError) as exc:
        return False, f"torch._scaled_mm failed: {str(exc).splitlines()[0][:160]}"
    return True, ""


@contextlib.contextmanager
def tf32(enabled: bool) -> Iterator[None]:
    """``torch.backends.cuda.matmul.allow_tf32`` set to ``enabled`` inside, restored after."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.backends.cuda.matmul.allow_tf32 = before


def _default_timer(iters: int) -> Timer:
    def timer(fn: Callable[[], object], device: torch.device, info: dict[str, Any]) -> dict[str, Any]:
        del info
        return time_fn(fn, device, warmup=5, iters=iters, inner=5)
    return timer


def _operands(m: int, n: int, k: int, precision: str,
              device: torch.device) -> tuple[Callable[[], object], dict[str, Any]]:
    """The call ``y = x · Wᵀ`` (rotating among input sets) at ``precision`` ('fp8' means _scaled_mm), and the
    layout of its operands."""
    dt = torch.float8_e4m3fn if precision == "fp8" else torch_dtype(precision)
    elem = 1 if precision == "fp8" else torch.finfo(dt).bits // 8
    per_set = (m * k + n * k) * elem
    sets = max(1, min(8, _ROTATE_BYTES // max(per_set, 1)))
    make = torch.bfloat16 if precision == "fp8" else dt
    xs = [torch.randn(m, k, device=device, dtype=make).to(dt) for _ in range(sets)]
    ws = [torch.randn(n, k, device=device, dtype=make).to(dt) for _ in range(sets)]
    idx = [0]
    if precision == "fp8":
        one = torch.ones((), device=device)

        def fn() -> object:
            i = idx[0] % sets
            idx[0] += 1
            return torch._scaled_mm(xs[i], ws[i].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    else:
        def fn() -> object:
            i = idx[0] % sets
            idx[0] += 1
            return F.linear(xs[i], ws[i])
    x, w = xs[0], ws[0]
    layout = {
        "op": "torch._scaled_mm(x, W.t())" if precision == "fp8" else "F.linear(x, W) = x @ W.t()",
        "x": {"shape": [m, k], "strides": list(x.stride()), "order": "row-major", "contiguous": x.is_contiguous()},
        "w": {"shape": [n, k], "strides": list(w.stride()), "order": "row-major, read transposed (column-major B)",
              "contiguous": w.is_contiguous()},
        "cublas": "TN", "input_sets": sets,
    }
    return fn, layout


def _kernel_names(fn: Callable[[], object], device: torch.device) -> list[str] | str:
    """Names of the device kernels one call of ``fn`` launched (CUDA only)."""
    if device.type != "cuda":
        return NO_CUDA
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize(device)
        cuda_type = torch.autograd.DeviceType.CUDA  # type: ignore[attr-defined]
        names = [str(e.name) for e in prof.events() if getattr(e, "device_type", None) == cuda_type
                 and not str(e.name).startswith(("Memset", "Memcpy"))]
        return sorted(set(names))
    except Exception as exc:  # a profiler failure must not lose the timing
        return f"profiler failed: {str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__}"


def _time(m: int, n: int, k: int, precision: str, device: torch.device, timer: Timer,
          info: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], Callable[[], object]]:
    fn, layout = _operands(m, n, k, precision, device)
    timing = timer(fn, device, {**info, "m": m, "n": n, "k": k, "precision": precision})
    return timing, layout, fn


def kernel_path_case(
    name: str, m: int, n: int, k: int, precision: str, device: torch.device,
    threshold: float = DEFAULT_THRESHOLD, timer: Timer | None = None, iters: int = 20,
) -> dict[str, Any]:
    """Time one GEMM (M×K)·(N×K)ᵀ at ``precision`` and its aligned comparison shape; one row (module docstring).

    The row: name, m, n, k, flops, precision (asked) and ran_precision (run), torch version, device name, layout,
    timing (the summary with raw seconds) and tflops_per_s; aligned {m, n, k, flops, flops_ratio, timing,
    tflops_per_s, same_shape}; ratio_to_aligned; slow_vs_aligned; tensor_path (True / False / 'skipped: no CUDA');
    tf32 (fp32/tf32 on CUDA: times with TF32 on and off, speedup); kernels (CUDA kernel names); alignment_issues;
    reasons; flagged (slow, off the tensor path, or fell back) and status 'ok'.
    """
    _check_precision(precision)
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], not {threshold}")
    if min(m, n, k) < 1:
        raise ValueError(f"GEMM dimensions must be positive, not m={m} n={n} k={k}")
    timer = timer or _default_timer(iters)
    cuda = device.type == "cuda"
    reasons: list[str] = []
    ran = precision
    fell_back = False
    if precision == "fp8":
        ok, why = fp8_available(device)
        if ok and (k % 16 or n % 16):
            ok, why = False, f"K={k}, N={n} not multiples of 16"
        if not ok:
            ran, fell_back = "bf16", True
            reasons.append(f"fp8 path unavailable on this device ({why}): fell back to bf16")
    flops = 2.0 * m * n * k
    row: dict[str, Any] = {
        "kind": "kernel_path", "name": name, "m": m, "n": n, "k": k, "flops": flops,
        "precision": precision, "ran_precision": ran, "fell_back": fell_back, "threshold": threshold,
        "torch": torch.__version__, "torch_cuda": torch.version.cuda, "device": device_name(device),
        "device_type": device.type,
    }
    info = {"name": name, "role": "own"}
    with tf32(precision == "tf32"):
        timing, layout, fn = _time(m, n, k, ran, device, timer, info)
        kernels = _kernel_names(fn, device)
        del fn
        am, an, ak = aligned_shape(m, n, k)
        same = (am, an, ak) == (m, n, k)
        a_timing = timing if same else _time(am, an, ak, ran, device, timer, {"name": name, "role": "aligned"})[0]
    rate = flops / timing["median_s"]
    a_flops = 2.0 * am * an * ak
    a_rate = a_flops / a_timing["median_s"]
    ratio = rate / a_rate
    row.update(layout=layout, timing=timing, tflops_per_s=rate / 1e12, kernels=kernels, aligned={
        "m": am, "n": an, "k": ak, "flops": a_flops, "flops_ratio": a_flops / flops, "same_shape": same,
        "timing": a_timing, "tflops_per_s": a_rate / 1e12,
    }, ratio_to_aligned=ratio)
    issues = alignment_issues(m, n, k, ran)
    row["alignment_issues"] = issues
    slow = ratio < threshold
    row["slow_vs_aligned"] = slow
    if slow:
        reasons += issues or [
            f"{ratio:.2f} of the aligned shape's FLOP/s with no alignment cause in the dimensions: "
            "look at the kernels chosen and the torch/cuBLAS version"]
    off_path: bool | str = NO_CUDA
    if precision in ("fp32", "tf32"):
        if cuda:
            with tf32(precision != "tf32"):
                other = _time(m, n, k, "fp32", device, timer, {"name": name, "role": "tf32"})[0]
            on_t, off_t = (timing, other) if precision == "tf32" else (other, timing)
            speedup = off_t["median_s"] / on_t["median_s"]
            row["tf32"] = {"on_timing": on_t, "off_timing": off_t, "speedup": speedup}
            off_path = precision == "fp32" and speedup > 1.0 / threshold
            if off_path:
                reasons.append(f"dtype fp32 without TF32: off the tensor path (TF32 runs this shape {speedup:.1f}x "
                               "faster; torch.backends.cuda.matmul.allow_tf32 = True)")
        else:
            row["tf32"] = NO_CUDA
    elif cuda:
        off_path = fell_back if precision == "fp8" else "not measured for bf16/fp16: see kernels"
    row["tensor_path"] = off_path if isinstance(off_path, str) else not off_path
    row["reasons"] = reasons
    row["flagged"] = bool(slow or fell_back or off_path is True)
    row["status"] = "ok"
    return row


def kernel_path_suite(
    shape: Mapping[str, Any] | LlamaShape, precision: str, tokens: int, device: torch.device,
    threshold: float = DEFAULT_THRESHOLD, timer: Timer | None = None, iters: int = 20,
) -> list[dict[str, Any]]:
    """:func:`kernel_path_case` for each GEMM of :func:`workload_gemms` (shape: a bench preset dict, a dict with
    HF / ModelArch names, or a LlamaShape). An out-of-memory shape becomes a row with status 'oom'."""
    _check_precision(precision)
    s = shape if isinstance(shape, LlamaShape) else LlamaShape.from_dict(shape)
    rows: list[dict[str, Any]] = []
    for g in workload_gemms(s, tokens):
        try:
            row = kernel_path_case(g["name"], g["m"], g["n"], g["k"], precision, device, threshold, timer, iters)
        except torch.cuda.OutOfMemoryError as exc:
            row = {"kind": "kernel_path", **g, "precision": precision, "status": "oom", "error": str(exc)[:300],
                   "torch": torch.__version__, "device": device_name(device)}
        row["model"] = s.name
        row["tokens"] = tokens
        rows.append(row)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def flagged(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The flagged rows as {name, m, n, k, precision, ratio_to_aligned, reasons} (a summary for reports)."""
    return [{key: r.get(key) for key in ("name", "m", "n", "k", "precision", "ratio_to_aligned", "reasons")}
            for r in rows if r.get("flagged")]
