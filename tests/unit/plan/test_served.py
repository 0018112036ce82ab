"""The serving roles at an engine's steady state (issue 12 item 1, planner part; ``gpumatch.plan.served``)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from gpumatch.estimate import Request, estimate
from gpumatch.plan import from_workload, plan
from gpumatch.plan.planner import THROUGHPUT_NOTE
from gpumatch.plan.served import ENGINE_LOOKS
from gpumatch.workload import load_workload

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CHAT = EXAMPLES / "chat-70b-serving.toml"


def test_serving_picks_meet_the_targets_at_vllms_steady_state() -> None:
    req = from_workload(load_workload(CHAT))
    assert req.serving_engine == "vllm"  # the schema's default engine
    p = plan(req)
    assert p.notes[0].startswith("ranked at vllm's steady state (32 in flight)")
    entries = [e for v in p.shortlist.values() for e in v]
    assert entries
    for e in entries:
        est, opts = e["estimate"], e["estimate_options"]
        assert opts["engine"] == "vllm"
        assert est["ttft_p50_s"] <= 0.5 and est["tpot_s"] <= 0.040  # the engine's means against the p50 targets
        assert "vllm steady state" in e["why"]
    # what the engine rejected says so, with its numbers; the rest of the static-feasible set was not evaluated
    tpot = [r for r in p.rejected if r["rule"] == "tpot"]
    assert tpot and all("(vllm steady state)" in r["reason"] for r in tpot)
    assert p.not_evaluated > 0
    assert sum(r["configurations"] for r in p.rejected) + p.feasible + p.not_evaluated == p.candidates_evaluated


def test_the_static_engine_keeps_the_static_batch_plan() -> None:
    req = replace(from_workload(load_workload(CHAT)), engine="static")
    p = plan(req)
    assert p.not_evaluated == 0 and THROUGHPUT_NOTE[False] in p.notes
    assert all(e["estimate_options"]["engine"] == "static" for v in p.shortlist.values() for e in v)
    # the static model checks p99 on the whole batch's prefill (a burst), the engine does not
    for e in (e for v in p.shortlist.values() for e in v):
        assert e["estimate"]["prefill_s"] <= 2.0


def test_the_workloads_engine_ranks_and_reaches_estimate_options(tmp_path: Path) -> None:
    text = CHAT.read_text() + '\n[serving]\nengine = "sglang"\nprefix_hit_ratio = 0.25\n'
    path = tmp_path / "chat-sglang.toml"
    path.write_text(text)
    req = from_workload(load_workload(path))
    assert req.serving_engine == "sglang" and req.prefix_hit_ratio == 0.25
    p = plan(req, roles=["latency-serving"])
    assert p.notes[0].startswith("ranked at sglang's steady state")
    for e in p.shortlist["latency-serving"]:
        assert e["estimate_options"]["engine"] == "sglang"
        assert e["estimate_options"]["prefix_hit_ratio"] == 0.25


def test_the_engine_pass_is_bounded() -> None:
    """Per role and GPU model at most ENGINE_LOOKS configurations, plus per role the as-requested walk (at most
    ENGINE_LOOKS), are evaluated at the engine; the note says how many."""
    p = plan(from_workload(load_workload(CHAT)))
    found = re.search(r": ([0-9,]+) of ([0-9,]+) passing the static checks evaluated", p.notes[0])
    assert found
    evaluated, static = (int(x.replace(",", "")) for x in found.groups())
    gpus = len({r["gpu"] for r in p.rejected} | {e["gpu"] for v in p.shortlist.values() for e in v})
    assert 0 < evaluated <= len(p.roles) * (gpus + 1) * ENGINE_LOOKS
    assert static - evaluated == p.not_evaluated


def test_shown_entries_carry_their_goodput_as_estimate_gives_it() -> None:
    """Goodput: the highest Poisson rate whose mean TTFT and TPOT at the engine meet the targets; the entry's
    estimate_options carry the targets, so 'gpumatch estimate' with them reports the same rate."""
    req = from_workload(load_workload(CHAT))
    p = plan(req, roles=["latency-serving"])
    e = p.shortlist["latency-serving"][0]
    opts = dict(e["estimate_options"])
    assert opts["slo_ttft_s"] == 0.5 and opts["slo_tpot_s"] == 0.040
    good = e["estimate"]["goodput_requests_per_s"]
    assert good > 0 and e["estimate"]["goodput_tokens_per_s"] == good * req.gen
    count = opts.pop("count")
    result = estimate(req.model, e["gpu"], Request(count=count, **opts), site=req.site)
    assert result.serving is not None and result.serving["goodput_requests_per_s"] == good
