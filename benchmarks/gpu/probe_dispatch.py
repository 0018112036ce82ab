"""CPU cost of dispatching one kernel from Python, by kind: what an eagerly dispatched engine forward pays per op.

Usage (device): ``python3 benchmarks/gpu/probe_dispatch.py --out FILE.json``. For each kind, N launches of a
kernel whose GPU time is tiny are issued back to back; the CPU wall time of the loop (before the final
synchronisation) divided by N is the dispatch cost per launch, median of R repeats. Kinds: a bare in-place ATen op;
``F.linear`` on one row; an ``nn.Module`` call wrapping a linear; a trivial Triton kernel (its Python launcher); an
op registered through ``torch.library`` (the custom-op path engines use), when available. Bears on
``prefill_dispatch_s`` in estimate/data/engines.toml (SGLang's eager prefill; docs/estimators.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime

import torch


def per_launch_s(fn: Callable[[], object], launches: int, repeats: int) -> float:
    """Median over ``repeats`` of the CPU seconds per call of ``launches`` back-to-back calls of ``fn``."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(launches):
            fn()
        out.append((time.perf_counter() - t0) / launches)
        torch.cuda.synchronize()
    return statistics.median(out)


def kinds() -> dict[str, Callable[[], object]]:
    dev = torch.device("cuda")
    x = torch.zeros(1024, device=dev)
    a = torch.randn(1, 4096, device=dev, dtype=torch.bfloat16)
    w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    lin = torch.nn.Linear(4096, 4096, bias=False, device=dev, dtype=torch.bfloat16)
    out: dict[str, Callable[[], object]] = {
        "aten_add_inplace": lambda: x.add_(1.0),
        "functional_linear_1row": lambda: torch.nn.functional.linear(a, w),
        "module_linear_1row": lambda: lin(a),
    }
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def _inc(p, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = i < n
            tl.store(p + i, tl.load(p + i, mask=m) + 1.0, mask=m)

        out["triton_launch"] = lambda: _inc[(1,)](x, 1024, BLOCK=1024)
    except Exception as e:
        print(f"triton: {e}")
    try:
        lib = torch.library.Library("gmprobe", "DEF")
        lib.define("inc(Tensor x) -> Tensor")

        def _impl(t: torch.Tensor) -> torch.Tensor:
            return t + 1.0

        lib.impl("inc", _impl, "CUDA")
        op = torch.ops.gmprobe.inc
        out["torch_library_op"] = lambda: op(x)
    except Exception as e:
        print(f"torch.library: {e}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    res: dict[str, float] = {}
    for name, fn in kinds().items():
        try:
            res[name] = per_launch_s(fn, args.launches, args.repeats)
        except Exception as e:
            print(f"{name}: {e}")
    for name, s in res.items():
        print(f"{name:<24} {s * 1e6:7.2f} us per launch")
    doc = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "gpu": torch.cuda.get_device_name(0),
           "torch": torch.__version__, "launches": args.launches, "repeats": args.repeats,
           "per_launch_s": res, "method": __doc__}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
