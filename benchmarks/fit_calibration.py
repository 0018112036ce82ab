"""Fit Calibration defaults to the fit set of the committed H200 measurements (coordinate search, log error).

Usage: ``python benchmarks/fit_calibration.py [--fields a,b,...] [--rounds N]``. Prints the fitted values and
the error on the fit set and the held-out set; it changes no file (the values are copied into
``src/gpumatch/estimate/calibration.py`` by hand, with their provenance).

Objective: mean squared log error (predicted/measured) over the fit cases of :mod:`gpumatch.bench.accuracy`,
plus the square of the largest log error so no fit case is sacrificed. Each field is searched in turn over a
multiplicative grid around its current value, within bounds, for a few rounds.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path

from gpumatch.bench.accuracy import MeasuredCase, load_cases, predict
from gpumatch.estimate import Calibration

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "measurements"
BOUNDS: dict[str, tuple[float, float]] = {
    "gemm_efficiency_max": (0.4, 0.9),
    "gemm_half_flops": (1e8, 1e11),
    "attention_efficiency_max": (0.15, 0.9),
    "memory_efficiency_max": (0.5, 0.95),
    "elementwise_bytes_per_token_hidden": (10.0, 400.0),
    "elementwise_bytes_per_token_ffn": (2.0, 40.0),
    "kernel_overhead_s": (0.0, 3e-5),
    "train_step_overhead_s": (0.0, 0.05),
    "optimizer_traffic_factor": (1.0, 5.0),
    "fragmentation_fraction": (0.0, 0.3),
    "logits_bytes_per_element": (4.0, 20.0),
    "decode_step_overhead_s": (0.0, 1e-3),
    "eager_launch_s": (1e-6, 5e-5),
    "eager_kernels_per_layer": (5.0, 120.0),
    "norm_saved_bytes_per_element": (2.0, 12.0),
    "prefill_overhead_s": (0.0, 5e-3),
}


def objective(cal: Calibration, cases: list[MeasuredCase]) -> float:
    errs = [math.log(predict(c, cal) / c.measured) for c in cases]
    return sum(e * e for e in errs) / len(errs) + max(abs(e) for e in errs) ** 2


def fit(cal: Calibration, cases: list[MeasuredCase], names: list[str], rounds: int) -> Calibration:
    best = objective(cal, cases)
    for _ in range(rounds):
        for name in names:
            lo, hi = BOUNDS[name]
            cur = float(getattr(cal, name))
            grid = {min(max(cur * f, lo), hi) for f in (0.5, 0.7, 0.8, 0.9, 0.95, 1.05, 1.1, 1.25, 1.5, 2.0)}
            if cur == 0.0:
                grid |= {lo + (hi - lo) * f for f in (0.05, 0.1, 0.2, 0.4)}
            for value in sorted(grid):
                trial = replace(cal, **{name: value})
                score = objective(trial, cases)
                if score < best:
                    best, cal = score, trial
    return cal


def report(cal: Calibration, cases: list[MeasuredCase], label: str) -> str:
    errs = [abs(predict(c, cal) / c.measured - 1.0) for c in cases]
    return f"{label}: n={len(errs)} max {max(errs) * 100:.1f}% mean {sum(errs) / len(errs) * 100:.1f}%"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fields", default=",".join(BOUNDS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kinds", default="decode,prefill,train-time,train-memory")
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    cases = [c for c in load_cases(DATA) if c.kind in kinds and c.metric != "fits"]
    fit_set = [c for c in cases if c.fit]
    held = [c for c in cases if not c.fit]
    cal = Calibration()
    print(report(cal, fit_set, "defaults, fit set"), "|", report(cal, held, "held-out"))
    cal = fit(cal, fit_set, args.fields.split(","), args.rounds)
    for name in args.fields.split(","):
        print(f"{name} = {getattr(cal, name)!r}")
    print(report(cal, fit_set, "fitted, fit set"), "|", report(cal, held, "held-out"))
    for kind in kinds:
        f = [c for c in fit_set if c.kind == kind]
        h = [c for c in held if c.kind == kind]
        print(" ", kind, report(cal, f, "fit") if f else "", "|", report(cal, h, "held-out") if h else "")


if __name__ == "__main__":
    main()
