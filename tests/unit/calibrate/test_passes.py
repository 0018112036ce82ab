"""Logged passes against the model's cost of the same passes (gpumatch.calibrate.passes, estimate.pass_costs):
the pass cost is the replay's own, and the comparison reads the server's iteration log as it is written."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpumatch.calibrate.passes import compare, level_iterations, summarize
from gpumatch.errors import InputError
from gpumatch.estimate import PassShape, Request, pass_costs
from gpumatch.estimate.api import model_arch, resolve_gpu
from gpumatch.estimate.calibration import DEFAULT_CALIBRATION
from gpumatch.estimate.case import model_nums
from gpumatch.estimate.engine_profiles import engine_profile
from gpumatch.estimate.options import build_case
from gpumatch.estimate.roofline import decode_step

REQ = Request(task="serve", engine="gpumatch", prompt=768, gen=384)


def test_a_decode_pass_costs_the_decode_step_and_the_engines_host_time() -> None:
    """No chunks: the decode step of B rows at the context (roofline.decode_step, as the replay's table holds it
    at a table point) plus the profile's host_pass_s + host_seq_s * B."""
    (cost,) = pass_costs("llama-3.1-8b", "h100-sxm", REQ, [PassShape(16, 1.0)])
    arch = model_arch("llama-3.1-8b")
    case, _ = build_case(arch, resolve_gpu("h100-sxm"), REQ)
    c16 = replace(case, seqs_per_replica=16.0)
    step = float(decode_step(model_nums(arch), c16, 1.0, DEFAULT_CALIBRATION)["time_s"])
    prof = engine_profile("gpumatch")
    assert cost.decode_s == pytest.approx(step, rel=1e-9)
    assert cost.host_s == pytest.approx(prof.host_pass_s + 16 * prof.host_seq_s)
    assert cost.linear_s == cost.attention_s == 0.0


def test_prompt_chunks_add_their_linear_work_and_attention() -> None:
    """A chunk adds L(B + T) - L(B) and its own attention, A(s + t) - A(s): a prompt's two halves cost the
    attention of the whole prompt in one chunk; a pass of prompts only still reads the weights."""
    plain, first, later, whole, alone = pass_costs("llama-3.1-8b", "h100-sxm", REQ, [
        PassShape(8, 900.0), PassShape(8, 900.0, ((0.0, 512.0),)), PassShape(8, 900.0, ((512.0, 512.0),)),
        PassShape(8, 900.0, ((0.0, 1024.0),)), PassShape(0, 0.0, ((0.0, 512.0),))])
    assert first.linear_s > 0 and first.attention_s > 0 and first.decode_s == plain.decode_s
    assert later.linear_s == first.linear_s and whole.linear_s > first.linear_s
    assert first.attention_s + later.attention_s == pytest.approx(whole.attention_s, rel=1e-6)
    assert first.total_s > plain.total_s and alone.decode_s > 0
    with pytest.raises(InputError):
        static = Request(task="serve", engine="static", prompt=768, gen=384)
        pass_costs("llama-3.1-8b", "h100-sxm", static, [PassShape(1, 10.0)])


def _it(index: int, start: float, seconds: float, rows: int, span: int, context: int, attended: int,
        chunks: tuple[tuple[int, int], ...] = ()) -> dict[str, Any]:
    kind = "mixed" if rows and chunks else ("decode" if rows else "prefill")
    return {"kind": kind, "decode_rows": rows, "prefill_tokens": sum(t for _, t in chunks), "chunks": len(chunks),
            "seconds": seconds, "index": index, "start_s": start, "schedule_s": 1e-4, "span": span,
            "context": context, "graph": not chunks, "attended": attended, "chunk_spans": [list(c) for c in chunks]}


def test_compare_gives_gaps_padding_and_ratios_per_class() -> None:
    log = [_it(7, 10.000, 0.010, 12, 16, 1024, 12 * 900),
           _it(8, 10.012, 0.011, 12, 16, 1024, 12 * 901),
           _it(9, 10.024, 0.050, 12, 16, 1024, 12 * 902, ((0, 768),)),
           _it(11, 10.080, 0.010, 13, 16, 1024, 12 * 903 + 769)]  # pass 10 missing: no gap after pass 9
    rows = compare(log, "llama-3.1-8b", "h100-sxm", REQ)
    assert [r.gap_s for r in rows] == [pytest.approx(0.002), pytest.approx(0.001), None, None]
    assert all(r.as_run_s > r.modelled_s for r in rows)  # 16 rows reading 1024 keys each cost more than 12 at ~900
    assert rows[2].modelled_prefill_s > 0 and rows[0].modelled_prefill_s == 0
    table = summarize(rows)
    by = {(t["kind"], t["span"]): t for t in table}
    assert by[("decode", 16)]["passes"] == 3 and by[("mixed", 16)]["passes"] == 1 and by[("all", 0)]["passes"] == 4
    d = by[("decode", 16)]
    assert d["measured_over_modelled"] == pytest.approx(d["measured_s"] / d["modelled_s"])
    assert d["measured_s"] == pytest.approx((0.010 + 0.011 + 0.010) / 3)


def test_level_iterations_drop_the_warm_up_and_refuse_an_empty_log() -> None:
    doc = {"iterations": [_it(i, 5.0 + 0.01 * i, 0.009, 1, 1, 16, 10) for i in range(100)]}
    assert len(level_iterations(doc, warmup_s=0.5)) == 50
    assert len(level_iterations(doc)) == 100
    with pytest.raises(InputError):
        level_iterations({"iterations": []})


@pytest.mark.parametrize(("level", "decode_ratio"), [(1, 1.11), (24, 1.15), (56, 1.16)])
def test_the_committed_h100_pass_logs_give_the_documented_decode_ratios(level: int, decode_ratio: float) -> None:
    """docs/serve.md, "where a pass's time goes": the H100 run of 2026-12-07 (768/384; files under
    tests/data/measurements/serve) read back through the comparison gives the decode passes' measured / as-run
    ratio the page states, to its two decimals (1.11 / 1.15 / 1.16 with the engine kernel counts of
    estimate/kernels.py; 1.15 / 1.19 / 1.18 with 10 kernels a layer before)."""
    import json
    from pathlib import Path

    base = Path(__file__).resolve().parents[2] / "data" / "measurements" / "serve"
    stem = f"2026-12-07-h100-serve-passes-768-384-c{level}"
    doc = json.loads((base / f"{stem}-passes.json").read_text())
    warmup_s = float(json.loads((base / f"{stem}.json").read_text())["levels"][-1]["warmup_s"])
    rows = summarize(compare(level_iterations(doc, warmup_s), "llama-3.1-8b", "h100-sxm", REQ))
    decode = [r for r in rows if r["kind"] == "decode"]
    assert len(decode) == 1 and decode[0]["measured_over_as_run"] == pytest.approx(decode_ratio, abs=0.005)
