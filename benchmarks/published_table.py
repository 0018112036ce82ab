"""Regenerate docs/published-serving.md: gpumatch against TensorRT-LLM's published serving measurements.

Usage: ``python benchmarks/published_table.py [--out docs/published-serving.md]``. The data and the comparison
rules are in ``tests/data/published/trtllm-serving.toml`` and :mod:`gpumatch.calibrate.published`; the reference
test ``tests/reference/test_published_serving.py`` holds the same cases to their tolerances.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import statistics
from pathlib import Path
from typing import Any

from gpumatch.calibrate.published import EngineCase, load, load_engine_cases, rows

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "published" / "trtllm-serving.toml"
ENGINE_DATA = ROOT / "tests" / "data" / "published" / "engine-serving.toml"
ENGINE_PREDICTIONS = ROOT / "tests" / "data" / "published" / "engine-predictions.json"


def _fmt(metric: str, v: float) -> str:
    if metric == "ttft_s":
        return f"{v * 1e3:.1f} ms"
    return f"{v:,.0f} tok/s"


def _pct(x: float) -> str:
    return "–" if math.isnan(x) else f"{x * 100:+.1f}%"


def summary(table: list[dict[str, Any]]) -> list[str]:
    lines = ["| source | scenario | GPU | n | median abs err | max abs err | within 10% | within 25% |",
             "|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str, str], list[float]] = {}
    for r in table:
        groups.setdefault((r["source"], r["scenario"], r["gpu"]), []).append(abs(r["error"]))
    for (src, scen, gpu), errs in groups.items():
        ok = [e for e in errs if not math.isnan(e)]
        lines.append(f"| {src} | {scen} | {gpu} | {len(errs)} | {statistics.median(ok) * 100:.1f}% | "
                     f"{max(ok) * 100:.1f}% | {sum(e <= 0.10 for e in ok)}/{len(errs)} | "
                     f"{sum(e <= 0.25 for e in ok)}/{len(errs)} |")
    return lines


def _span(table: list[dict[str, Any]], **match: Any) -> str:
    """The error range of the rows whose fields contain the given substrings, e.g. ``case="llama-2-70b"``."""
    errs = [r["error"] for r in table if all(v in str(r[k]) for k, v in match.items()) and not math.isnan(r["error"])]
    if not errs:
        return "–"
    return _pct(errs[0]) if len(errs) == 1 else f"{_pct(min(errs))} to {_pct(max(errs))}"


def misses(table: list[dict[str, Any]]) -> list[str]:
    """What the large errors have in common, with the ranges computed from the table."""
    old70 = [r for r in table if r["source"] == "performance-v0.6.1" and "llama-2-70b H100" in r["case"]
             and r["case"].endswith(("/2048",))]
    ratio = [(1 + r["error"]) for r in old70]
    a100_70 = [r for r in table if "llama-2-70b A100" in r["case"] and r["scenario"] == "static-batch"]
    a100_span = _span(table, scenario="static-batch", case="llama-2-70b A100")
    per_gpu = [(r["gpumatch"] - r["published"] * 4) / (r["published"] * 4) for r in a100_70]
    return [
        f"- TensorRT-LLM 0.6.1's Llama-2-70B static-batch rows with 2048 output tokens ran "
        f"{min(ratio):.2f}–{max(ratio):.2f}× slower than gpumatch predicts, while its Llama-2-7B rows on H100 "
        f"(MHA, no grouped KV heads) are at {_span(table, source='performance-v0.6.1', case='llama-2-7b H100')} and "
        f"TensorRT-LLM 1.0's Llama-3-70B rows at {_span(table, source='perf-overview-v1', case='llama-3.1-70b')}. "
        "The 70B model uses grouped-query attention (8 KV heads); TensorRT-LLM's 0.10.0 release notes list "
        "\"Integrated the new NVIDIA Hopper XQA kernels for LLaMA 2 70B\" "
        "(https://github.com/NVIDIA/TensorRT-LLM/releases/tag/v0.10.0), the GQA decode kernel these 0.6.1 "
        "numbers predate. gpumatch predicts a GQA-aware kernel (each KV head read once per step).",
        "- The A100 throughput table is headed \"out tok/s\" (per system) while the H100 one says "
        f"\"out tok/s/GPU\". Read per system, the A100 70B TP4 rows are {a100_span}; "
        f"read per GPU they would be {_pct(min(per_gpu))} to {_pct(max(per_gpu))}. Per system, 1280 × 128 tokens "
        "in 245 s would be below the compute bound of 4 × 312 TFLOP/s, so the header is likely wrong; the rows are "
        "kept as headed, and A100 efficiencies are not calibrated anyway (H200-fitted defaults).",
        "- Llama-3.1-405B on eight 80 GB H100s with long outputs (128/4096 at "
        f"{_span(table, case='405b H100 SXM tp8 fp8 128/4096')}, 1000/2000 at "
        f"{_span(table, case='405b H100 SXM tp8 fp8 1000/2000')}): the weights take 47 of 80 GiB per GPU, so the "
        "batch is set by what is left for the KV cache. gpumatch keeps ~1 GiB of runtime reserve; a TensorRT-LLM "
        "engine also holds activation workspace for max_num_tokens and CUDA-graph pools, which gpumatch does not "
        "model, so its largest batch (and throughput) is too high. On H200s the same lengths are within 25%.",
        "- First-token latency at 128 tokens on H100 (published 7 ms and 26 ms) is at "
        f"{_span(table, scenario='first-token', case='H100 SXM tp1 fp8 b1 128/')} (7B) and "
        f"{_span(table, scenario='first-token', case='H100 SXM tp4 fp8 b1 128/')} (70B TP4): at batch 1 and 128 "
        "tokens a 2023 engine's fixed costs (launches, TP all-reduce latency, runtime overhead) dominate; gpumatch's "
        "host model was fitted on CUDA-graph decode and eager PyTorch, not on TensorRT engines.",
    ]


def engine_section(cases: list[EngineCase], sources: dict[str, dict[str, str]], frozen_at: str) -> list[str]:
    """The engine steady state (``--task serve --engine``) against published fixed-concurrency rows."""
    def mean_abs(xs: list[float]) -> str:
        return f"{100 * sum(abs(x) for x in xs) / len(xs):.1f}%"

    return [
        "## Serving engines at a fixed concurrency (predictions frozen first)",
        "",
        "`gpumatch estimate --task serve --engine ENGINE --concurrency C` against published closed-loop runs "
        "(`--max-concurrency C`). The predictions were computed and committed (`tests/data/published/"
        f"engine-predictions.json`, commit `{frozen_at[:10]}`) before the measured values were transcribed "
        "(`tests/data/published/engine-serving.toml`); the errors below are the errors as predicted. Reference test: "
        "`tests/reference/test_published_engines.py` (goal: TPOT within 15 %, TTFT within 25 %; misses are strict "
        "xfails with the reason).",
        "",
        *[f"- `{k}`: {v.get('engine', '')} — {v['url']} — {v['says']}" for k, v in sources.items()],
        "",
        f"{len(cases)} rows; mean absolute error TPOT {mean_abs([c.tpot_error for c in cases])}, TTFT "
        f"{mean_abs([c.ttft_error for c in cases])}.",
        "",
        "| case | engine | C | TTFT published | TTFT gpumatch | error | TPOT published | TPOT gpumatch | error |",
        "|---|---|---|---|---|---|---|---|---|",
        *[f"| {c.case_id} | {c.engine} | {c.concurrency} | {c.ttft_s * 1e3:.1f} ms | {c.predicted_ttft_s * 1e3:.1f} ms "
          f"| {_pct(c.ttft_error)} | {c.tpot_s * 1e3:.1f} ms | {c.predicted_tpot_s * 1e3:.1f} ms | "
          f"{_pct(c.tpot_error)} |" for c in cases],
        "",
        "Reading them: the TPOT miss is the decode step, not the scheduler -- the static-batch step of the same "
        "model at the same batch is already 20 % below the measurement (9.9 ms at batch 8, 23.8 ms at 64); the "
        "alternating prefill passes add 4-11 % on top. The TTFT miss is not explained: the published mean (330-427 "
        "ms, p99 about 2 s) exceeds one prompt's prefill (35 ms) and what the first burst of C simultaneous "
        "requests can add over 10 × C requests (the prefill of all C prompts, 0.14-1.05 s, for a tenth of them).",
        "",
        "The TensorRT-LLM max-throughput cases above stay on the static model: scanned with `--engine trtllm` (the "
        "ladder's value as the requests in flight) their median absolute error rises from 6.2 % to 8.8 % (H200) "
        "and from 7.0 % to 12.1 % (H100), the 128/128 cases by +55 % to +88 % (2048 requests in flight; not "
        "investigated -- one candidate is a per-request host cost of TensorRT-LLM 1.0's PyTorch backend above the "
        "profile's figure).",
        "",
    ]


def render(table: list[dict[str, Any]], sources: dict[str, dict[str, str]]) -> str:
    out = [
        "# Accuracy: estimates against published serving measurements",
        "",
        f"_Generated by `benchmarks/published_table.py` ({dt.date.today().isoformat()}) from "
        "`tests/data/published/trtllm-serving.toml`; do not edit by hand._",
        "",
        "These are the vendor's own measurements of TensorRT-LLM on H100, H200, L40S and A100, taken with engines "
        "gpumatch never ran; nothing here was fitted on (the efficiencies come from one H200 with PyTorch, "
        "docs/accuracy.md). Error = (predicted − published) / published. How each scenario is predicted: "
        "`src/gpumatch/calibrate/published.py` (max-throughput: the best batch of a ladder that fits in gpumatch's "
        "memory model; static-batch: the stated batch; first-token: batch 1).",
        "",
        "## Sources",
        "",
        *[f"- `{k}`: {v.get('engine', '')} — {v['url']} — {v['says']}" for k, v in sources.items()],
        "",
        "## Summary",
        "",
        *summary(table),
        "",
        "## Reading the misses",
        "",
        *misses(table),
        "",
        *engine_section(*load_engine_cases(ENGINE_DATA, ENGINE_PREDICTIONS)),
        "## All cases",
        "",
        "| case | source | published | gpumatch | batch used | error |",
        "|---|---|---|---|---|---|",
        *[f"| {r['case']} | {r['source']} | {_fmt(r['metric'], r['published'])} | "
          f"{_fmt(r['metric'], r['gpumatch']) if r['batch'] else 'does not fit'} | {r['batch'] or '–'} | "
          f"{_pct(r['error'])} |" for r in table],
    ]
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "published-serving.md")
    args = ap.parse_args()
    cases, sources = load(DATA)
    args.out.write_text(render(rows(cases), sources))


if __name__ == "__main__":
    main()
