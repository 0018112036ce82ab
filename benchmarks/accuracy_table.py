"""Regenerate docs/accuracy.md: gpumatch and llm-analysis against the committed H200 measurements.

Usage: ``python benchmarks/accuracy_table.py [--out docs/accuracy.md]`` (needs ``pip install llm-analysis`` for
the llm-analysis column; without it that column says why it is empty).

llm-analysis (cli99/llm-analysis 0.2.2) is run on the same shapes through its Python API with an H200 entry it
lacks built in (141 GB, 4.8 TB/s, 989 dense bf16 TFLOP/s) and the efficiencies its own sources suggest:
``flops_efficiency=0.5`` (constant.py: "FLOPS efficiency achieved by Megatron-LM is ~0.5") and
``hbm_memory_efficiency=0.65`` (its warning: "benchmarks show closer to 0.6-0.7 hbm_memory_efficiency in
inference workloads"). Its ModelConfig asserts that the FFN width divides by the hidden size, which
Llama-3-8B (14336/4096) and Llama-3.2-3B (8192/3072) fail, so ``expansion_ratio`` is passed explicitly.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpumatch.calibrate.cases import MeasuredCase, load_cases
from gpumatch.calibrate.compare import rows
from gpumatch.calibrate.residuals import coverage
from gpumatch.estimate import Calibration

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "measurements"
LLMA_FLOPS_EFFICIENCY = 0.5
LLMA_HBM_EFFICIENCY = 0.65
REFUSED: dict[str, str] = {}
"""Cases llm-analysis refused (it asserts instead of answering), with its message."""


def llm_analysis_predictor() -> tuple[Callable[[MeasuredCase], float | None] | None, str]:
    """A function giving llm-analysis's value for a case, or None and the reason it is unavailable."""
    try:
        from llm_analysis.analysis import ActivationRecomputation, LLMAnalysis
        from llm_analysis.config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig
        from llm_analysis.logger import logger
    except ImportError as exc:
        return None, f"llm-analysis not importable: {exc}"
    logger.setLevel(logging.ERROR)
    gpu = GPUConfig(name="h200-sxm-141gb", mem_per_GPU_in_GB=141, hbm_bandwidth_in_GB_per_sec=4800,
                    intra_node_bandwidth_in_GB_per_sec=450, intra_node_min_message_latency=8e-6,
                    peak_fp16_TFLOPS=989)

    def analysis(shape: dict[str, Any]) -> Any:
        model = ModelConfig(name=shape["name"], num_layers=shape["layers"], n_head=shape["heads"],
                            hidden_dim=shape["hidden"], vocab_size=shape["vocab"], max_seq_len=65536,
                            num_key_value_heads=shape["kv_heads"], ffn_embed_dim=shape["ffn"],
                            expansion_ratio=shape["ffn"] / shape["hidden"], model_type="llama")
        return LLMAnalysis(model, gpu, DtypeConfig(), ParallelismConfig(),
                           flops_efficiency=LLMA_FLOPS_EFFICIENCY, hbm_memory_efficiency=LLMA_HBM_EFFICIENCY)

    def predict(case: MeasuredCase) -> float | None:
        try:
            return _predict(case)
        except AssertionError as exc:  # llm-analysis asserts when it thinks a case does not fit
            REFUSED[case.case_id] = str(exc).split(",")[0][:120]
            return None

    def _predict(case: MeasuredCase) -> float | None:
        o = case.options
        a = analysis(case.shape)
        if o["task"] == "infer":
            r = a.inference(batch_size_per_gpu=o["concurrency"], seq_len=o["prompt"], num_tokens_to_generate=1)
            return float(r["decode_latency" if case.metric == "tpot_s" else "prefill_latency"])
        if o["task"] != "train":  # LoRA/QLoRA: compared with gpumatch only
            return None
        master = o["master_weights"] in ("fp32", "amp")  # llm-analysis has no AMP recipe: its fp32 master, as before
        r = a.training(batch_size_per_gpu=o["micro_batch"], seq_len=o["seq"], gradient_accumulation_steps=1,
                       activation_recomputation=(ActivationRecomputation.FULL if o["recompute"] == "full"
                                                 else ActivationRecomputation.NONE),
                       master_weights_dtype_bytes=4 if master else 0, other_op_bytes=None if master else 4,
                       flash_attn=True, mlp_gated_linear_units=True)
        if case.metric == "step_s":
            return float(r["latency_per_iter"])
        if case.metric == "fits":
            return 1.0 if r["memory_left_per_gpu"] >= 0 else 0.0
        return float(r["(weight+op_state+grad+act)_memory_per_gpu"])

    return predict, ""


def _fmt(metric: str, v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if metric == "fits":
        return "fits" if v >= 0.5 else "OOM"
    if metric == "reserved_bytes":
        return f"{v / 2**30:.1f} GiB"
    return f"{v * 1e3:.2f} ms"


def _pct(e: float | None) -> str:
    return "–" if e is None or math.isnan(e) else f"{e * 100:+.1f}%"


def summary(table: list[dict[str, Any]], key: str) -> list[str]:
    lines = ["| kind | set | n | gpumatch max abs err | gpumatch mean | within 10% | llm-analysis max | "
             "llm-analysis mean | within 10% |", "|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in table:
        if r["metric"] != "fits":
            groups.setdefault((r["kind"], r["set"]), []).append(r)
    for (kind, set_), rs in sorted(groups.items()):
        cells = [kind, set_, str(len(rs))]
        for col in ("gpumatch_error", key):
            errs = [abs(r[col]) for r in rs if r.get(col) is not None and not math.isnan(r[col])]
            if errs:
                within = sum(e <= 0.10 for e in errs)
                cells += [f"{max(errs) * 100:.1f}%", f"{sum(errs) / len(errs) * 100:.1f}%", f"{within}/{len(errs)}"]
            else:
                cells += ["–", "–", "–"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def findings(table: list[dict[str, Any]]) -> list[str]:
    """Counted statements under the summary (no hand-typed numbers)."""
    timed = [r for r in table if r["metric"] != "fits"]
    misses = [r for r in timed if abs(r["gpumatch_error"]) > 0.10]
    llma = [r for r in timed if r.get("llm_analysis_error") is not None and not math.isnan(r["llm_analysis_error"])]
    llma_in = sum(abs(r["llm_analysis_error"]) <= 0.10 for r in llma)
    lines = [
        "",
        "## Findings",
        "",
        f"- gpumatch: {len(timed) - len(misses)} of {len(timed)} timed or memory cases within 10% "
        f"({sum(r['set'] != 'fit' for r in timed if r not in misses)} of "
        f"{sum(r['set'] != 'fit' for r in timed)} held-out). Goal met: {'yes' if not misses else 'no'}.",
    ]
    lines += [f"  - miss: {r['case']} ({r['set']}): {_pct(r['gpumatch_error'])}" for r in misses]
    lines += [
        f"- llm-analysis: {llma_in} of {len(llma)} within 10% (it answered {len(llma)} of {len(timed)}).",
        f"- The GEMM efficiency that fits whole steps ({Calibration().gemm_efficiency_max:.2f} of the 989.5 TFLOP/s "
        f"dense peak) is below the {_best_gemm() / 989.5e12:.2f} that short GEMM bursts reached in the "
        "microbenchmark: sustained work runs at power-capped clocks (700 W cap; "
        "../shared/notes/benchmark-method.md saw 1470 MHz of 1980 under a sustained GEMM).",
        "- The plain CUDA-graph decode step (eager graph column) is 20-45% slower than the compiled one at small "
        "batch (unfused RMSNorm/RoPE/SiLU kernels); gpumatch predicts the compiled step, as engines run it.",
        *_blind_run_lines(timed),
        f"- {_card_count()} different H200 cards ran the suite runs (UUIDs above), same driver and software.",
        *_probe_lines(),
        *_precision_probe_lines(),
    ]
    return lines


def _blind_run_lines(timed: list[dict[str, Any]]) -> list[str]:
    """Errors of each blind run by kind: as predicted before measuring (the committed record) and now."""
    lines: list[str] = []
    for record in sorted(DATA.glob("*-h200-*-blind-predictions.json")):
        lines += _one_blind_run(timed, record)
    return lines


def _one_blind_run(timed: list[dict[str, Any]], record: Path) -> list[str]:
    import json

    run = record.name.split("-h200-", 1)[1].removesuffix("-blind-predictions.json")
    blind = [r for r in timed if f"-{run}-" in r["source"]]
    if not blind:
        return []
    doc = json.loads(record.read_text())
    then = {c["case"]: c["error"] for c in doc["cases"] if isinstance(c["error"], float)}
    fits = [c for c in doc["cases"] if c["metric"] == "fits"]
    lines = [f"- Blind run (`*-{run}-*`, shapes and sizes chosen and predicted before measuring; the "
             f"predictions of git {doc['commit']} are kept in `{record.name}`): "
             f"{sum(abs(e) <= 0.10 for e in then.values())} of {len(then)} within 10% as predicted, "
             f"{sum(abs(r['gpumatch_error']) <= 0.10 for r in blind)} of {len(blind)} now."]
    for kind in sorted({r["kind"] for r in blind}):
        rs = [r for r in blind if r["kind"] == kind]
        before = [then[r["case"]] for r in rs if r["case"] in then]
        now = [r["gpumatch_error"] for r in rs]
        mean_before = sum(map(abs, before)) / len(before) * 100
        lines.append(f"  - {kind}: n={len(rs)}; as predicted: mean abs {mean_before:.1f}%, "
                     f"range {_pct(min(before))} to {_pct(max(before))}; now: mean abs "
                     f"{sum(map(abs, now)) / len(now) * 100:.1f}%, range {_pct(min(now))} to {_pct(max(now))}")
    if fits:
        right = sum(c["predicted"] == c["measured"] for c in fits)
        lines.append(f"  - fits or not: {right} of {len(fits)} predicted right")
    lines.append(BLIND_NOTES.get(run, ""))
    return [x for x in lines if x]


BLIND_NOTES = {
    "heldout3": "  The training misses of the blind run (Qwen2.5-0.5B, V=152k, h=896) led to splitting the LM head "
                "from the loss kernels (a kernel profile of that case, `2026-12-03-h200-probe-train-breakdown.json`, "
                "showed the cross-entropy kernels as separate memory-bound work); the 'now' figures are no longer "
                "blind for those cases.",
    "heldout4": "  Long context (2026-12-04): as predicted, decode at 16k-32k was within 5% and prefill over 12k-32k "
                "over-predicted by 5-14%, growing with length: the attention time the runs imply is 0.32-0.42 of "
                "the bf16 peak against the one fitted attention efficiency, 0.28, which training's backward kernels "
                "held down. The attention core was then split into forward and backward kernels and both figures "
                "refitted on the unchanged fit set (0.385 forward, backward 0.86 of it; FlashAttention-2 reports "
                "63/73 on A100); the 'now' figures of this run are no longer blind.",
    "heldout5": "  7B-14B training (2026-12-04): step times within -7.0..+6.1% as predicted. The two Llama-3-8B "
                "AMP runs (master fp32) ran in 120 GiB while gpumatch predicted 147.7 GiB and 'does not fit': it "
                "counted the Megatron/DeepSpeed recipe (a persistent bf16 copy beside the fp32 master, 18 bytes per "
                "parameter) where PyTorch AMP keeps fp32 parameters as the master (16 bytes). Fixed after seeing "
                "the run: the `amp` recipe (`--master-weights amp`: 16 bytes per parameter, autocast's bf16 weight "
                "casts counted with the activations, a tied embedding's second gradient at the end of backward; "
                "phase peaks probed in `2026-12-04-h200-probe-amp-peaks.txt`), and the bench's master fp32 runs of "
                "every file are now estimated with it. Both 8B runs are now predicted to fit; the 'now' figures of "
                "this run's AMP cases are no longer blind. No Calibration field was refitted.",
    "heldout6": "  LoRA/QLoRA fine-tuning (2026-12-04, Llama-3-8B and Qwen2.5-14B shapes, ranks 16/64): all 8 ran "
                "as predicted, memory within -6.5..+9.1% as predicted; LoRA step times -10.4..-9.2%, QLoRA "
                "-27.1..-15.1% (all under-predicted). LoRA: the adapter path (thin rank-r GEMMs reading the whole "
                "input and writing a full-width output, the scale multiply, the add to the base output, an extra "
                "input-gradient add in backward) runs as memory-bound unfused kernels, while gpumatch adds only its "
                "FLOPs to the compute-bound base GEMMs; the 8B runs imply ~265 ns per token per layer unaccounted "
                "(~390 with full recompute). QLoRA: gpumatch adds the NF4 dequantization bytes to those same "
                "compute-bound GEMMs, where the roofline's max hides them, so it predicts the LoRA step time; "
                "dequantization is a separate kernel before every use (2 per step, 3 with full recompute), and the "
                "bench's plain-torch path (uint8 -> int32 cast, 2-wide embedding gather, scale multiply; ~10.5 "
                "bytes per weight counted, against ~2.5 for bitsandbytes' fused kernel) measures 5.1-5.6 ps per "
                "weight per use over the same LoRA step (72 ms 8B no recompute, 116 ms 8B full, 221 ms 14B full), "
                "~21-22 bytes per weight at 4.0 TB/s, so these steps overstate a bitsandbytes QLoRA step. Memory: "
                "gpumatch stored the QLoRA embedding and LM head in NF4 where the bench (as transformers' "
                "bitsandbytes integration) keeps them bf16, 1.45 GiB (8B) and 2.15 GiB (14B) of the 2.15-2.30 GiB "
                "by which it over-stated QLoRA's saving over LoRA (the rest: bf16 absmax without double "
                "quantization and the transient dequantized weight); LoRA memory itself is over-predicted "
                "(+1.5..+9.1%), which offset it (QLoRA -6.5..+7.0%). Since 2026-12-07 every quantized format keeps "
                "its embedding and LM head at 16 bit (docs/estimators.md, Precision), so the QLoRA cases now carry "
                "LoRA's over-prediction (+1.8..+8.5%; the 'now' figures). Not fixed: strict xfails for the five "
                "step times over 10%.",
}


def _card_count() -> int:
    import json

    uuids = set()
    for path in DATA.glob("*-h200-*.json"):
        if path.stem.rsplit("-", 1)[-1] not in ("micro", "decode", "prefill", "train"):
            continue
        smi = json.loads(path.read_text()).get("environment", {}).get("nvidia_smi") or [{}]
        uuids.add(smi[0].get("uuid"))
    return len(uuids - {None})


def _probe_lines() -> list[str]:
    """What the host-dispatch probe (benchmarks/gpu/probe_prefill_host.py) found, from its committed file."""
    import json

    path = DATA / "2026-12-02-h200-probe-prefill-host.json"
    if not path.exists():
        return []
    lines = ["- Host-dispatch probe (eager prefill, batch 1, on another H200 whose UUID the probe did not record; `"
             + path.name + "`):"]
    for r in json.loads(path.read_text())["cases"]:
        host = r["host_enqueue_s"]
        host_txt = "blocked (launch queue full)" if host > 0.5 else f"{host * 1e3:.1f} ms"
        lines.append(f"  - {r['model']} s{r['seq']}: eager {r['eager_median_s'] * 1e3:.1f} ms, host enqueue "
                     f"{host_txt}, device only (CUDA graph) {r['device_graph_median_s'] * 1e3:.1f} ms")
    lines.append("  Where host enqueue exceeds device time the eager pass is host-bound; the 8B prefill at 512 "
                 "tokens took longer here than on the first run's machine, so eager dispatch speed varies "
                 "between machines of one kind (host CPU), which bounds how well host-bound cases can be "
                 "predicted.")
    return lines


def _precision_probe_lines() -> list[str]:
    """FP8 against BF16 sustained GEMM rate (benchmarks/gpu/probe_gemm_precision.py), from its committed file."""
    import json
    import statistics

    path = DATA / "2026-12-03-h200-probe-gemm-precision.json"
    if not path.exists():
        return []
    sus = {c["dtype"]: c["windows"] for c in json.loads(path.read_text())["cases"] if c["case"] == "sustained"}
    peak = {"bf16": 989.5, "fp8": 1979.0}
    med = {k: statistics.median(w["tflops_per_s"] for w in v) for k, v in sus.items()}
    clk = {k: statistics.median(w["sm_mhz"] for w in v) for k, v in sus.items()}
    return [f"- Sustained 8192³ GEMM (`{path.name}`): bf16 {med['bf16']:.0f} TFLOP/s ({med['bf16'] / peak['bf16']:.3f} "
            f"of peak, SM {clk['bf16']:.0f} MHz), fp8 {med['fp8']:.0f} TFLOP/s ({med['fp8'] / peak['fp8']:.3f}, SM "
            f"{clk['fp8']:.0f} MHz) at the 700 W cap: fp8 keeps "
            f"{med['fp8'] / peak['fp8'] / (med['bf16'] / peak['bf16']):.2f} of bf16's efficiency "
            "(`Calibration.low_precision_gemm_efficiency_ratio`)."]


def _best_gemm() -> float:
    import json

    best = 0.0
    for path in DATA.glob("*-h200-*micro.json"):
        for r in json.loads(path.read_text())["cases"]:
            if r.get("kind") == "gemm":
                best = max(best, r["tflops_per_s"] * 1e12)
    return best


def render(table: list[dict[str, Any]], llma_note: str, env: str) -> str:
    key = "llm_analysis_error"
    out = [
        "# Accuracy: estimates against measurements on an H200",
        "",
        "_Generated by `benchmarks/accuracy_table.py` from `tests/data/measurements/` "
        f"({dt.date.today().isoformat()}); do not edit by hand._",
        "",
        env,
        "",
        "Error = (predicted − measured) / measured. **Fit** cases set the `Calibration` defaults "
        "(`gpumatch.calibrate.fit`, run by `benchmarks/fit_calibration.py`); **held-out** cases were not used to fit "
        "anything. Rules in `src/gpumatch/calibrate/cases.py`. Goal (issue 3): every prediction within 10%.",
        "",
        "What is measured: decode = one greedy step of a static-KV-cache decoder with torch.compile + CUDA graph "
        "(`compiled-graph`; the plain CUDA-graph step is listed beside it as *eager graph*), random bf16 weights, "
        "the cache holding `ctx` tokens; prefill = one causal pass, last-position logits; train = one AdamW step "
        "(fwd + bwd + optimizer) with fp32 master weights = PyTorch AMP (fp32 params, bf16 autocast; estimated "
        "as `--master-weights amp`) or master none = everything bf16; memory = `torch.cuda.max_memory_reserved` "
        "against gpumatch's total minus CUDA context and NCCL buffers, llm-analysis's weights + optimizer + "
        "gradients + activations.",
        "",
        "llm-analysis " + (llma_note or "0.2.2 with flops_efficiency 0.5 and hbm_memory_efficiency 0.65 (values "
                           "its own sources suggest; see benchmarks/accuracy_table.py)."),
        "",
        "## Summary",
        "",
        *summary(table, key),
        "",
        *findings(table),
        "",
        *interval_lines(),
        "",
        "## Fit / no-fit",
        "",
        "| case | measured | gpumatch | llm-analysis |",
        "|---|---|---|---|",
        *[f"| {r['case']} | OOM | {_fmt('fits', r['gpumatch'])} | {_fmt('fits', r.get('llm_analysis'))} |"
          for r in table if r["metric"] == "fits"],
        "",
        "## Cases llm-analysis refused",
        "",
        *([f"- {case}: {msg}" for case, msg in REFUSED.items()] or ["- none"]),
        "",
        "## All cases",
        "",
        "| case | set | measured | gpumatch | error | llm-analysis | error | eager graph |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        if r["metric"] == "fits":
            continue
        alt = r.get("measured_eager_graph_s")
        out.append(f"| {r['case']} | {r['set']} | {_fmt(r['metric'], r['measured'])} | "
                   f"{_fmt(r['metric'], r['gpumatch'])} | {_pct(r['gpumatch_error'])} | "
                   f"{_fmt(r['metric'], r.get('llm_analysis'))} | {_pct(r.get(key))} | "
                   f"{_fmt('tpot_s', alt) if alt else ''} |")
    return "\n".join(out) + "\n"


def interval_lines() -> list[str]:
    """The held-out coverage of the intervals every estimate carries (docs/estimators.md, "Intervals")."""
    cov = coverage(DATA)
    inside, n = sum(c.inside for c in cov), sum(c.n for c in cov)
    return [
        "## Intervals",
        "",
        "Every time and memory figure carries an interval (docs/estimators.md, \"Intervals\"). Its quantiles come from "
        "the residuals of the **fit** cases only (`src/gpumatch/estimate/data/residuals.json`, "
        "`benchmarks/residual_table.py`); its widening factors are assumed, with the reasons stated there, and were "
        "fixed before this coverage was first computed and not changed after. Coverage = the share of held-out "
        "measurements inside the interval of their estimate; the band aims at 90% (5th to 95th percentile).",
        "",
        "| kind | held-out n | inside | coverage | mean half-width |",
        "|---|---|---|---|---|",
        *[f"| {c.kind} | {c.n} | {c.inside} | {c.share * 100:.0f}% | {c.mean_half_width * 100:.1f}% |" for c in cov],
        f"| all | {n} | {inside} | {inside / n * 100:.0f}% | |",
        "",
        "Below the 90% aimed at: the fit set spans one model per kind (8B decode at context 2048, 8B prefill, 1B "
        "training with fp32 master weights and no recompute), so most held-out cases are extrapolations. The misses: "
        "decode of the Qwen-shaped models at context 6000 and a few 3B decode cases (measured 5-11% slower than "
        "predicted against bands of about ±5-6%); training steps of the Qwen-shaped models and a few 1B/3B cases "
        "(measured 5-9% off); training memory, mostly of recipes the fit set never ran (full recompute, bf16 master "
        "weights: 3-8% off against bands that allow the measurement 2-4% below the estimate and 6-14% above, the "
        "upper side widened by the fit set's one under-predicted case, 1B AMP at batch 1, -7.6%); LoRA/QLoRA step "
        "times (under-predicted by 9-27%, see the sixth blind run above); and the host-bound 3B prefill (+50%). "
        "The fit cases "
        "are inside their own intervals (in-sample) but two, since the bench's AMP runs are estimated as the `amp` "
        "recipe: the 1B AMP memory at batch 1 and 1024 tokens (-7.6%; every train case of the 2026-12-02/03 runs "
        "started with 1.1 GB left allocated by the suite's earlier groups, `after_init` less the parameters, which "
        "the recipe no longer hides: the same case on 2026-12-04 without them allocated 17.18 bytes per parameter, "
        "not 18.05) and the 1B step at batch 1 and 2048 tokens (measured 4.4% under the estimate, band edge 4.3%); "
        "`tests/reference/test_interval_coverage.py` pins both.",
    ]


def environment_line() -> str:
    import json

    envs = []
    for path in sorted(DATA.glob("*-h200-*micro.json")):
        e = json.loads(path.read_text())["environment"]
        smi = (e.get("nvidia_smi") or [{}])[0]
        envs.append(f"`{path.name}`: {e.get('gpu_name')} ({smi.get('uuid', '?')[:12]}…), driver "
                    f"{smi.get('driver_version')}, power limit {smi.get('enforced.power.limit')} W, torch "
                    f"{e.get('torch')} (CUDA {e.get('torch_cuda')}), Python {e.get('python')}, measured {e.get('utc')}")
    return "Cards and software: " + "; ".join(envs) + "."


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "accuracy.md")
    args = ap.parse_args()
    predictor, note = llm_analysis_predictor()
    table = rows(load_cases(DATA), other=predictor)
    args.out.write_text(render(table, note, environment_line()))


if __name__ == "__main__":
    main()
