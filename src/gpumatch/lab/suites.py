"""The suites as data: which cases ``gpumatch bench run --suite quick|standard|soak`` runs, with each case's
time limit and expected duration (for the ETA).

Budgets (an H200, compile included; each case is one child process, ~5 s of start-up each):

- ``quick`` (at most 5 minutes): GEMM at bf16 / fp16 / tf32 / fp32 / fp8 at 4096³, 8192³ and a decode-shaped
  16×14336×4096; device copy bandwidth (64 MiB, 1 GiB); pinned host<->device (256 MiB); launch overhead; decode
  of the model (default the Llama-3-8B shape) at batch 1 and 16, context 2048 and 8192, compiled per layer with
  split-KV attention at batch 1 and replayed as one CUDA graph (``fused-graph``); one prefill
  (batch 1 × 2048); one Llama-3.2-1B training step set (batch 4 × 1024, AMP fp32 master); the kernel-path check
  of the model's GEMMs at bf16 (``bench.kernelpath``); loss curves of bf16 with and without full recompute on a
  Markov source (``bench.convergence``, 300 steps of a 4-layer model).
- ``standard`` (at most 15 minutes): quick's microbenchmarks on larger ladders (GEMM 1024³..16384³ and the
  model's layer shapes, copies 1 MiB..4 GiB), decode over batch 1/4/16/64 × context 2048/8192 with CUDA graphs
  and with torch.compile + graphs (one child per ladder: one model, one compilation), prefill over 4 shapes,
  training with and without full recompute, bf16 and AMP; the kernel-path check at bf16, fp8 and fp32; convergence
  of five variants (bf16, bf16 + full recompute, fp16, fp32, fp8).
- ``soak`` (``--duration``, default 30 minutes, plus the warm-up): a sustained 8192³ GEMM loop; warm-up ends when
  the GPU temperature's slope over the last 60 s is under 1 °C/min (at least 60 s, at most 15 minutes), then the
  loop runs ``--duration`` seconds; warm-up chunks are reported apart.

With ``--weights`` and ``--text``, ``quick`` and ``standard`` end with the ``quality`` case (``bench.quality``:
perplexity, top-1 agreement and KL of simulated int8/fp8 weight-only variants against bf16 on the user's text);
with ``--weights`` the decode and prefill cases load the folder's weights.

``tiny`` (``--tiny``, and automatically on a machine without CUDA): the same case list on a 2-layer model and
small shapes, so a suite runs on a CPU in seconds (the CI smoke test). Cases the device cannot run (fp8, TF32 and
pinned memory on CPU, CUDA graphs) come back skipped with their reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SUITES = ("quick", "standard", "soak")
PRECISIONS = ("bf16", "fp16", "tf32", "fp32", "fp8")
DEFAULT_SOAK_S = 1800.0
TRAIN_MODEL = "llama-3.2-1b"


@dataclass(frozen=True)
class Case:
    """One case: ``case_id`` (unique in the suite), the bench ``kind`` and its ``params``, the child's
    ``timeout_s`` and the ``expected_s`` the ETA counts on."""

    case_id: str
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 300.0
    expected_s: float = 10.0

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.case_id, "kind": self.kind, "params": self.params}


@dataclass(frozen=True)
class SuiteSpec:
    """What to run: the suite's name, the model shape for decode/prefill (a bench shape dict), the training
    shape, the GEMM precisions, ``tiny``, the soak duration and the data seed."""

    name: str
    model: dict[str, Any]
    train_model: dict[str, Any]
    precisions: tuple[str, ...] = PRECISIONS
    tiny: bool = False
    duration_s: float = DEFAULT_SOAK_S
    seed: int = 0
    extra_cases: tuple[Case, ...] = ()
    max_warmup_s: float = 900.0
    weights: dict[str, Any] | None = None
    """``{"weights": folder, "files": tensor -> file}``: decode and prefill load these instead of random ones."""
    quality: dict[str, Any] | None = None
    """The quality case's parameters (``tokens``, ``window``, ``stride``, ``variants``); None: no quality case."""

    def model_params(self) -> dict[str, Any]:
        """``model`` (and the weights, when given) of the decode and prefill cases."""
        return {"model": self.model, **(self.weights or {})}


def _gemms(spec: SuiteSpec, shapes: list[tuple[int, int, int]], timeout: float) -> list[Case]:
    return [Case(f"gemm-{p}", "gemm", {"precision": p, "shapes": shapes}, timeout, 8.0) for p in spec.precisions]


def _model_gemm_shapes(model: dict[str, Any], ms: tuple[int, ...]) -> list[tuple[int, int, int]]:
    h, f = int(model["hidden"]), int(model["ffn"])
    return [(m, n, k) for m in ms for (n, k) in ((2 * f, h), (h, f))]


CONVERGENCE_MODEL = {"name": "convergence-small", "layers": 4, "hidden": 256, "heads": 4, "kv_heads": 2,
                     "head_dim": 64, "ffn": 768, "vocab": 512, "tied": False}
"""The model of the convergence cases (a 512-state Markov source: its vocabulary is the chain's states)."""


def _kernel_path(spec: SuiteSpec, precisions: tuple[str, ...], t: float) -> list[Case]:
    """The kernel-path check of the model's own GEMMs at 2048 tokens (16 tiny), one case per precision."""
    tokens, iters = (16, 2) if spec.tiny else (2048, 10)
    return [Case(f"kernelpath-{p}", "kernelpath", {"model": spec.model, "precision": p, "tokens": tokens,
                                                   "iters": iters}, t, 8.0) for p in precisions]


def _convergence(spec: SuiteSpec, variants: list[list[str]], t: float) -> Case:
    """Loss curves per (precision, recompute) variant on a learnable Markov source."""
    if spec.tiny:
        params: dict[str, Any] = {"model": {**CONVERGENCE_MODEL, "layers": 1, "hidden": 64, "head_dim": 16,
                                            "ffn": 128, "vocab": 32}, "states": 32, "steps": 40, "batch": 8,
                                  "seq": 32, "lr": 1e-2}
    else:
        params = {"model": CONVERGENCE_MODEL, "states": 512, "steps": 300, "batch": 16, "seq": 256, "lr": 2e-3}
    return Case("convergence", "convergence", {**params, "variants": variants}, t, 6.0 * len(variants))


POWER_WINDOW_S = 1.5
"""Seconds each decode, prefill and training case steps on after its timed samples, so the 10 Hz sampler sees
its steady power (energy per token); 0.2 s in a tiny run (the code path, not the number)."""


def _pw(spec: SuiteSpec) -> float:
    return 0.2 if spec.tiny else POWER_WINDOW_S


def _quality(spec: SuiteSpec, t: float) -> list[Case]:
    """The quality check of weight-only variants on the user's text, when ``--weights`` and ``--text`` are given:
    one child for all variants (the tokens and windows are shared)."""
    if spec.quality is None or spec.weights is None:
        return []
    q = spec.quality
    return [Case("quality", "quality", {**spec.model_params(), **q}, max(t, 600.0),
                 10.0 + 4 * len(q["variants"]) * len(q["tokens"]) / 2048)]


def _quick(spec: SuiteSpec) -> list[Case]:
    if spec.tiny:
        gemm_shapes = [(64, 64, 64), (16, 128, 64)]
        copies, pinned, ctx, seq, train = [2**16, 2**20], 2**20, 64, 32, (2, 32)
    else:
        gemm_shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (16, 14336, 4096)]
        copies, pinned, ctx, seq, train = [2**26, 2**30], 2**28, 2048, 2048, (4, 1024)
    t = 120.0 if spec.tiny else 300.0
    m, seed = spec.model_params(), spec.seed
    # fused-graph: each layer compiled (norm, rotary, SiLU, residual fused into the projections), split-KV
    # attention at batch 1, the whole step one CUDA graph (docs/bench.md, "Decode variants")
    variant = "eager" if spec.tiny else "fused-graph"
    long_ctx = 2 * ctx if spec.tiny else 8192
    return [
        *_gemms(spec, gemm_shapes, t),
        Case("copy", "copy", {"sizes": copies}, t, 4.0),
        Case("pinned", "pinned", {"size_bytes": pinned}, t, 4.0),
        Case("launch", "launch", {}, t, 4.0),
        *(Case(f"decode-b{b}" + ("" if c == ctx else f"-c{c}"), "decode", {
            **m, "batch": b, "context": c, "variant": variant, "seed": seed, "power_window_s": _pw(spec)}, t,
            15.0 if spec.tiny else 40.0) for c in (ctx, long_ctx) for b in (1, 16)),
        Case("prefill", "prefill", {**m, "batch": 1, "seq": seq, "seed": seed, "power_window_s": _pw(spec)},
             t, 12.0),
        Case("train", "train", {"model": spec.train_model, "batch": train[0], "seq": train[1], "recompute": "none",
                                "master": "fp32", "seed": seed, "power_window_s": _pw(spec)}, t, 20.0),
        *_kernel_path(spec, ("bf16",), t),
        _convergence(spec, [["bf16", "none"], ["bf16", "full"]], t),
        *_quality(spec, t),
    ]


def _standard(spec: SuiteSpec) -> list[Case]:
    if spec.tiny:
        return [*_quick(spec), Case("train-recompute", "train", {
            "model": spec.train_model, "batch": 2, "seq": 32, "recompute": "full", "master": "none",
            "seed": spec.seed, "power_window_s": _pw(spec)}, 120.0, 5.0)]
    m, seed, t = spec.model_params(), spec.seed, 420.0
    squares = [(s, s, s) for s in (1024, 2048, 4096, 8192, 16384)]
    cases = [*_gemms(spec, squares + _model_gemm_shapes(spec.model, (1, 16, 128, 2048)), t),
             Case("copy", "copy", {"sizes": [2**p for p in range(20, 33, 2)]}, t, 10.0),
             Case("pinned", "pinned", {"size_bytes": 2**30}, t, 6.0), Case("launch", "launch", {}, t, 4.0)]
    for variant in ("graph", "compiled-graph"):  # one child per ladder: one model, one compilation
        for ctx in (2048, 8192):
            cases.append(Case(f"decode-{variant}-ctx{ctx}", "decode", {
                **m, "batches": [1, 4, 16, 64], "context": ctx, "variant": variant, "seed": seed,
                "power_window_s": POWER_WINDOW_S}, 540.0,
                90.0 if variant.startswith("compiled") else 30.0))
    cases += [Case(f"prefill-b{b}-s{s}", "prefill", {**m, "batch": b, "seq": s, "seed": seed,
                                                     "power_window_s": POWER_WINDOW_S}, t, 12.0)
              for b, s in ((1, 512), (1, 2048), (1, 8192), (4, 2048))]
    for b, s, rc, master in ((4, 1024, "none", "fp32"), (4, 1024, "full", "fp32"), (4, 2048, "none", "none"),
                             (8, 2048, "full", "none")):
        cases.append(Case(f"train-b{b}-s{s}-rc{rc}-{master}", "train", {
            "model": spec.train_model, "batch": b, "seq": s, "recompute": rc, "master": master, "seed": seed,
            "power_window_s": POWER_WINDOW_S}, t, 20.0))
    cases += _kernel_path(spec, ("bf16", "fp8", "fp32"), t)
    cases.append(_convergence(spec, [["bf16", "none"], ["bf16", "full"], ["fp16", "none"], ["fp32", "none"],
                                     ["fp8", "none"]], t))
    return [*cases, *_quality(spec, t)]


def _soak(spec: SuiteSpec) -> list[Case]:
    warm = (1.0, 2.0) if spec.tiny else (min(60.0, spec.max_warmup_s), spec.max_warmup_s)
    params = {"size": 256 if spec.tiny else 8192, "duration_s": spec.duration_s, "min_warmup_s": warm[0],
              "max_warmup_s": warm[1], "chunk_s": 0.2 if spec.tiny else 1.0}
    return [Case("soak-gemm", "soak", params, spec.duration_s + warm[1] + 120.0, spec.duration_s + warm[0])]


def build_cases(spec: SuiteSpec) -> list[Case]:
    """The suite's cases in order, then ``spec.extra_cases``."""
    builders = {"quick": _quick, "standard": _standard, "soak": _soak}
    return [*builders[spec.name](spec), *spec.extra_cases]
