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
CASES, SOURCES, FROZEN_AT = load_engine_cases(DATA / "engine-serving.toml", DATA / "engine-predictions.json")
TPOT_TOLERANCE = 0.15
TTFT_TOLERANCE = 0.25

_TTFT_GAP = ("published mean TTFT 330-427 ms (p99 about 2 s) against a predicted 39-48 ms: more than one 922-token "
             "prefill (35 ms) and more than the first burst can add (the prefill of all C prompts, 0.14-1.05 s, over "
             "10 % of the requests); not explained by the steady-state model")
_MOE_DECODE = "DeepSeek-R1 TP8 decode step under-predicted by about 20 % (MoE/MLA kernels at TP8, not the scheduler)"
KNOWN_MISSES: dict[tuple[str, str], str] = {
    **{(c.case_id, "ttft"): _TTFT_GAP for c in CASES if c.source == "inferencex-870"},
    **{(c.case_id, "tpot"): _MOE_DECODE for c in CASES if c.source == "inferencex-870"},
}


def _params(metric: str) -> list[object]:
    out: list[object] = []
    for c in CASES:
        reason = KNOWN_MISSES.get((c.case_id, metric))
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(c, id=c.case_id, marks=marks))
    return out


def test_predictions_were_frozen_and_every_row_is_sourced() -> None:
    assert len(FROZEN_AT) == 40 and CASES
    for c in CASES:
        assert c.source in SOURCES and SOURCES[c.source]["url"].startswith("https://")
        assert 4 <= c.concurrency <= 128 and c.engine in ("vllm", "sglang", "trtllm")


@pytest.mark.parametrize("case", _params("tpot"))
def test_tpot_within_tolerance(case: EngineCase) -> None:
    assert abs(case.tpot_error) <= TPOT_TOLERANCE, f"{case.case_id}: TPOT {case.tpot_error:+.1%}"


@pytest.mark.parametrize("case", _params("ttft"))
def test_ttft_within_tolerance(case: EngineCase) -> None:
    assert abs(case.ttft_error) <= TTFT_TOLERANCE, f"{case.case_id}: TTFT {case.ttft_error:+.1%}"
