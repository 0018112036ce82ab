"""gpumatch's serving-engine steady state against published measurements at a fixed concurrency.

Data: tests/data/published/engine-serving.toml and engine-measured-2026-12-04c.toml (the third batch; sources named
there); predictions: engine-predictions*.json, frozen (committed) before the measurements were transcribed and read here
as they are -- the error is the error as predicted. The third batch was predicted by the benchmark replay
(gpumatch.estimate.replay); a median TPOT is compared with the replay's median. Comparison and discussion:
docs/published-serving.md ("Serving engines at a fixed concurrency", "Third batch (blind, replay model)").

Tolerances are the goal of the engine model: TPOT within 15 %, TTFT within 25 % of the published mean. The rows that
miss are strict xfails with the reason, so a change that fixes one shows up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumatch.calibrate.published import EngineCase, load_engine_cases

DATA = Path(__file__).resolve().parents[1] / "data" / "published"
PREDICTIONS = (DATA / "engine-predictions.json", DATA / "engine-predictions-2026-12-04.json",
               DATA / "engine-predictions-2026-12-04b.json", DATA / "engine-predictions-2026-12-04c.json")
MEASURED = (DATA / "engine-serving.toml", DATA / "engine-measured-2026-12-04c.toml")
CASES, SOURCES, FROZEN_AT = load_engine_cases(MEASURED, PREDICTIONS)
THIRD = [c for c in CASES if c.frozen_in == "engine-predictions-2026-12-04c.json"]
TPOT_TOLERANCE = 0.15
TTFT_TOLERANCE = 0.25

_TTFT_GAP = ("published mean TTFT 330-427 ms (p99 about 2 s) against a predicted 39-48 ms: the steady state has no "
             "queue for prefill; closed-loop convoys (requests that start together finish together and re-arrive "
             "together) make each prompt wait for the others' prefill (docs/published-serving.md, Reading the misses)")
_MOE_DECODE = "DeepSeek-R1 TP8 decode step under-predicted by about 20 % (MoE/MLA kernels at TP8, not the scheduler)"
_CONVOY = ("TTFT grows with C far faster than one pass: closed-loop convoys of similar-length requests re-arrive "
           "together and queue for the 2048-token budget (median above mean); the steady state has no such queue")
_BELOW_FLOOR = ("published TTFT below (4096) or near the compute floor of the prompt's prefill at the A100's dense "
                "peak, and not monotonic in the prompt: prefix-cache hits or warm-up reuse, not a cold prefill")
_SHORT_NOISE = "same 128-token prompt as the 128/128 row (35.7 ms) but 27.0 ms over 4 requests: run-to-run noise"
_SMALL_PROMPT = "1024-token prefill at batch 1 measured 70 ms, 24 % of the A100's peak for the active expert weights"
_TP8_SMALL = ("TP8 at batch 4: the predicted step (4.45 ms) is fixed costs (two all-reduces per layer and the host "
              "pass); vLLM's custom all-reduce and CUDA graphs measure 3.7-3.9 ms")
_MOE_BATCH = ("gpt-oss-120b MXFP4 on Hopper at 64 running decodes (or long prompts sharing the passes) measures "
              "15-30 % slower than predicted: the W4A16 MoE kernel (Marlin-type dequantisation) is not at the BF16 "
              "roofline once many experts are active per layer")
_SUSPECT = ("TP8 c64 at 1k/8k published 16.0 ms against 7.4 ms at 1k/1k and 9.6 ms on TP4: not physical for more "
            "GPUs; likely preemption or a CUDA-graph cap in that run")
_COLD = ("mean TTFT 2.7-3.7 s for 512-token prompts (one prefill is about 10 ms; p99 6.9-7.7 s) over 20-160 "
         "requests on a fresh Modal container: cold start and first-burst waits, not serving; reported, not fitted")
_GPTOSS20 = ("gpt-oss-20b on SGLang in its launch week (August 2025) on Hopper: decode 35-50 % slower than predicted "
             "at batch 4 and 32, the launch-era W4A16 MoE and sink-attention kernels, below the fitted roofline")
_MI300X = ("Qwen3-8B on MI300X at 32 decodes measured 9.42 ms: 33 % of the card's bandwidth for the weights; "
           "the H200-fitted efficiencies are assumed for ROCm kernels")
_MI300X_TTFT = ("fixed 1024/1024 lengths with 100 requests at C = 32: three full convoys, each request waits for the "
                "prefill of the other 31 prompts (32 k tokens) -- 645 ms against a steady-state 27 ms")
_A100_LONG = "8192-token row: decode at batch 1 with an 8k context measured 18 % above the 128-token rows"


def _ids(prefix: str, *keys: str) -> list[str]:
    return [c.case_id for c in CASES if c.case_id.startswith(prefix) and all(k in c.case_id for k in keys)]


KNOWN_MISSES: dict[tuple[str, str], str] = {
    **{(c.case_id, "ttft"): _TTFT_GAP for c in CASES if c.source == "inferencex-870"},
    **{(c.case_id, "tpot"): _MOE_DECODE for c in CASES if c.source == "inferencex-870"},
    **{(i, "ttft"): _CONVOY for s in ("c8 ", "c16 ", "c32 ", "c48 ") for i in _ids("mr4090", s)},
    **{(i, "ttft"): _BELOW_FLOOR for s in ("3072/", "4096/", "8192/") for i in _ids("tt340", s)},
    **{(i, "ttft"): _SHORT_NOISE for i in _ids("tt340", "128/1024")},
    **{(i, "ttft"): _SMALL_PROMPT for i in _ids("tt340", "1024/128")},
    **{(i, "tpot"): _A100_LONG for i in _ids("tt340", "8192/128")},
    **{(i, "tpot"): _TP8_SMALL for i in _ids("ix828", "tp8", "c4 ")},
    **{(i, "tpot"): _MOE_BATCH for t, s, ln in (("tp8", "c64 ", "922/922"), ("tp4", "c64 ", "922/922"),
                                               ("tp2", "c64 ", "922/922"), ("tp4", "c64 ", "922/7373"),
                                               ("tp4", "c8 ", "7373/"), ("tp4", "c16 ", "7373/"),
                                               ("tp4", "c64 ", "7373/"), ("tp2", "c64 ", "7373/"))
       for i in _ids("ix828", t, s, ln)},
    **{(i, "tpot"): _SUSPECT for i in _ids("ix828", "tp8", "c64 ", "922/7373")},
    **{(i, "ttft"): _COLD for i in _ids("achatbot183")},
    **{(i, "tpot"): _GPTOSS20 for i in _ids("achatbot183")},
    **{(i, "tpot"): _MI300X for i in _ids("recipes431")},
    **{(i, "ttft"): _MI300X_TTFT for i in _ids("recipes431")},
}


# --- Third batch (engine-measured-2026-12-04c.toml, predicted blind by the benchmark replay). Each reason is the
# cohort's, with the row's own numbers; the rows of a cohort that meet the goal are named in the *_WITHIN sets.


def _ms(x_s: float) -> str:
    return f"{x_s * 1e3:.1f} ms"


def _mi300x_tpot(c: EngineCase) -> str:
    return (f"TPOT {c.tpot_s / c.compared_tpot_s:.1f}x the prediction ({_ms(c.tpot_s)} against "
            f"{_ms(c.compared_tpot_s)}): ROCm MoE/attention kernels run far below the H200-fitted efficiencies the "
            "estimate assumes for an unmeasured card (basis 'assumed')")


def _dsr1_tpot(c: EngineCase) -> str:
    older = ("; the H200 TRT-LLM curve (2025-11-02, image not recorded) is also 25-35 % slower than SGLang v0.5.9 "
             "on the same card at C = 4-16, an older engine build" if c.gpu.startswith("H200") and c.engine == "trtllm"
             else "")
    return (f"TPOT {100 * (c.tpot_s / c.compared_tpot_s - 1):.0f} % above the prediction, a gap of "
            f"{_ms(c.tpot_s - c.compared_tpot_s)} per pass at C = {c.concurrency} (~2-3 ms at C = 4 growing to 5-9 ms "
            "at C = 64 across the cohort): MoE layer costs the model does not have (router, top-k, permute, grouped "
            "GEMM launch and tail per MoE layer, 58 layers) plus expert GEMM efficiency at larger batch" + older)


def _ixdash_ttft(c: EngineCase) -> str:
    assert c.ttft_s is not None and c.ttft_median_s is not None and c.predicted_ttft_p50_s is not None
    flag = (f"; this B200 SGLang FP8 8k/1k mean is dominated by a few very slow requests (p99 "
            f"{(c.ttft_p99_s or 0.0):.1f} s; source flag)" if "v0.5.6" in c.image else "")
    return (f"mean TTFT {_ms(c.ttft_s)} (median {_ms(c.ttft_median_s)}) against a replayed {_ms(c.predicted_ttft_s)} "
            f"(p50 {_ms(c.predicted_ttft_p50_s)}): the median TTFT has a fixed part of ~75-130 ms per request that "
            "does not shrink with the prompt (1k vs 8k medians differ by about what the prefill of the extra tokens "
            f"costs), which the replay does not model (here the median is "
            f"{_ms(c.ttft_median_s - c.predicted_ttft_p50_s)} above the replay's p50)" + flag)


def _aimultiple_tpot(c: EngineCase) -> str:
    card = "; on the MI300X also " + _mi300x_tpot(c) if "MI300X" in c.gpu else ""
    return (f"TPOT {_ms(c.tpot_s)} implied from client-side per-query output speed without --ignore-eos (a Python "
            f"client streaming at ~200 tok/s per request), {_ms(c.tpot_s - c.compared_tpot_s)} per token above the "
            "prediction (3-5 ms on every NVIDIA card)" + card)


def _aimultiple_ttft(c: EngineCase) -> str:
    assert c.ttft_s is not None and c.ttft_median_s is not None
    head = f"mean TTFT {_ms(c.ttft_s)} (median {_ms(c.ttft_median_s)}) against a replayed {_ms(c.predicted_ttft_s)}: "
    if c.gpu.startswith("B200"):
        return head + ("the B200 prediction of 3-4 ms assumes an FP4 tensor path for MXFP4 (vLLM runs it with "
                       "BF16/MXFP8 activations)")
    if "MI300X" in c.gpu:
        return head + ("prefill at the H200-fitted efficiencies the estimate assumes for an unmeasured card (basis "
                       "'assumed'); the median is 93-108 ms at every C, a fixed part per request")
    return head + ("at C = 4 a ~1000-token prefill is short and the client's per-request cost (Python client, chat "
                   "template, tokenization, HTTP streaming; median 12-19 ms above the replay's p50) and a slow first "
                   "request (p99 0.1-0.7 s) weigh most; at C = 8-16 the queueing the replay models dominates and "
                   "the rows meet the goal")


def _gpustack_ttft(c: EngineCase) -> str:
    assert c.ttft_s is not None
    return (f"TTFT {_ms(c.ttft_s)} against {_ms(c.predicted_ttft_s)} (28-64 ms against ~7-16 ms across the engines): "
            "per-request front-end cost (chat template, tokenization, HTTP streaming) on a 233-token prompt")


_GPUSTACK_FP8 = ("FP8 Qwen3-8B on H100 at C = 4 measured 5.65 ms against 3.98 ms (the BF16 rows are within 7-13 %): "
                 "8.2 GB of FP8 weights in 5.65 ms is 1.45 TB/s, 43 % of the bandwidth the BF16 rows reach 69 % of; "
                 "at batch 4 the FP8 path's per-layer costs (activation quantisation, scaled GEMM launch) do not "
                 "halve with the weight bytes")

_DSR1_TPOT_WITHIN = {
    "ixdash dsr1 H200 SXM 141GB tp8 fp8 sglang c16 1024/8192 r0.8",
    "ixdash dsr1 H200 SXM 141GB tp8 fp8 sglang c32 1024/8192 r0.8",
    "ixdash dsr1 H200 SXM 141GB tp8 fp8 sglang c64 1024/8192 r0.8",
    "ixdash dsr1 H200 SXM 141GB tp8 fp8 trtllm c64 1024/8192 r0.8",
    "ixdash dsr1 B200 180GB tp8 fp8 sglang c64 1024/8192 r0.8",
    "ixdash dsr1 B200 180GB tp4 nvfp4 trtllm c64 1024/8192 r0.8",
}
"""DeepSeek-R1 NVIDIA rows within the TPOT goal: long outputs at C >= 16, where the passes are mostly decode."""
_AIMULTIPLE_TTFT_WITHIN = {f"aimultiple gpt-oss-20b {g} tp1 mxfp4 vllm c{n} 1000/1000"
                           for g in ("H100 PCIe 80GB", "H200 SXM 141GB") for n in (8, 16)}
_GPUSTACK_TPOT_WITHIN = {f"gpustack qwen3-8b H100 SXM5 80GB tp1 bf16 {e} c4 233/221 sharegpt"
                         for e in ("vllm", "sglang", "trtllm")}


def _third_batch_misses() -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for c in THIRD:
        if c.source == "ixdash":
            out[(c.case_id, "ttft")] = _ixdash_ttft(c)
            if "MI300X" in c.gpu:
                out[(c.case_id, "tpot")] = _mi300x_tpot(c)
            elif c.case_id not in _DSR1_TPOT_WITHIN:
                out[(c.case_id, "tpot")] = _dsr1_tpot(c)
        elif c.source == "aimultiple":
            out[(c.case_id, "tpot")] = _aimultiple_tpot(c)
            if c.case_id not in _AIMULTIPLE_TTFT_WITHIN:
                out[(c.case_id, "ttft")] = _aimultiple_ttft(c)
        elif c.source == "gpustack":
            out[(c.case_id, "ttft")] = _gpustack_ttft(c)
            if c.case_id not in _GPUSTACK_TPOT_WITHIN:
                out[(c.case_id, "tpot")] = _GPUSTACK_FP8
        elif c.source == "ix1053":
            out[(c.case_id, "tpot")] = _mi300x_tpot(c)
    return out


KNOWN_MISSES.update(_third_batch_misses())


def _params(metric: str) -> list[object]:
    out: list[object] = []
    for c in CASES:
        if metric == "ttft" and c.ttft_s is None:
            continue
        reason = KNOWN_MISSES.get((c.case_id, metric))
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(c, id=c.case_id, marks=marks))
    return out


def test_predictions_were_frozen_and_every_row_is_sourced() -> None:
    assert set(FROZEN_AT) == {p.name for p in PREDICTIONS} and all(len(v) == 40 for v in FROZEN_AT.values())
    assert len(CASES) == len({c.case_id for c in CASES}) == 136 and len(THIRD) == 96
    assert all(c.prediction_model == "benchmark-replay" and c.steady_tpot_s is not None for c in THIRD)
    for c in CASES:
        assert c.source in SOURCES and SOURCES[c.source]["url"].startswith("https://")
        assert 1 <= c.concurrency <= 128 and c.engine in ("vllm", "sglang", "trtllm")
        assert c.tpot_basis in ("published", "implied", "median")


def test_every_known_miss_names_a_row() -> None:
    ids = {(c.case_id, m) for c in CASES for m in ("ttft", "tpot") if m == "tpot" or c.ttft_s is not None}
    assert set(KNOWN_MISSES) <= ids


@pytest.mark.parametrize("case", _params("tpot"))
def test_tpot_within_tolerance(case: EngineCase) -> None:
    assert abs(case.tpot_error) <= TPOT_TOLERANCE, f"{case.case_id}: TPOT {case.tpot_error:+.1%}"


@pytest.mark.parametrize("case", _params("ttft"))
def test_ttft_within_tolerance(case: EngineCase) -> None:
    assert case.ttft_s is not None
    assert abs(case.ttft_error) <= TTFT_TOLERANCE, f"{case.case_id}: TTFT {case.ttft_error:+.1%}"
