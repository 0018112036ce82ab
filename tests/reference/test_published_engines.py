"""gpumatch's serving-engine steady state against published measurements at a fixed concurrency.

Data: tests/data/published/engine-serving.toml (sources named there); predictions: engine-predictions.json, frozen
(committed) before the measurements were transcribed and read here as they are -- the error is the error as
predicted. Comparison and discussion: docs/published-serving.md ("Serving engines at a fixed concurrency").

Tolerances are the goal of the engine model: TPOT within 15 %, TTFT within 25 % of the published mean. The rows that
miss are strict xfails with the reason, so a change that fixes one shows up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumatch.calibrate.published import EngineCase, load_engine_cases

DATA = Path(__file__).resolve().parents[1] / "data" / "published"
PREDICTIONS = (DATA / "engine-predictions.json", DATA / "engine-predictions-2026-12-04.json",
               DATA / "engine-predictions-2026-12-04b.json")
CASES, SOURCES, FROZEN_AT = load_engine_cases(DATA / "engine-serving.toml", PREDICTIONS)
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
    assert len(CASES) == len({c.case_id for c in CASES}) == 40
    for c in CASES:
        assert c.source in SOURCES and SOURCES[c.source]["url"].startswith("https://")
        assert 1 <= c.concurrency <= 128 and c.engine in ("vllm", "sglang", "trtllm")
        assert c.tpot_basis in ("published", "implied")


def test_every_known_miss_names_a_row() -> None:
    ids = {(c.case_id, m) for c in CASES for m in ("ttft", "tpot")}
    assert set(KNOWN_MISSES) <= ids


@pytest.mark.parametrize("case", _params("tpot"))
def test_tpot_within_tolerance(case: EngineCase) -> None:
    assert abs(case.tpot_error) <= TPOT_TOLERANCE, f"{case.case_id}: TPOT {case.tpot_error:+.1%}"


@pytest.mark.parametrize("case", _params("ttft"))
def test_ttft_within_tolerance(case: EngineCase) -> None:
    assert case.ttft_s is not None
    assert abs(case.ttft_error) <= TTFT_TOLERANCE, f"{case.case_id}: TTFT {case.ttft_error:+.1%}"
