"""The planner's search is bounded before it starts, pruned, and reports progress (issue 10 item 7); plan flags
read the units workload files do, and the precisions estimate does (item 18)."""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumatch.cli.app import main
from gpumatch.errors import InputError
from gpumatch.models import get_model
from gpumatch.plan import PlanRequest, plan, search
from gpumatch.plan.enumeration import candidate_count, dp_limit, enumerate_candidates, useful_max_gpus
from gpumatch.plan.request import with_options
from gpumatch.plan.rules import _apart
from gpumatch.report.progress import StatusLine


def _req(model: str = "llama-3.1-70b", **kw: Any) -> PlanRequest:
    return with_options(None, get_model(model), **kw)


FINETUNE = {"task": "finetune", "global_batch": 512, "seq": 4096}


def test_a_search_too_large_is_refused_up_front_with_the_largest_that_works() -> None:
    req = _req(**FINETUNE, max_gpus=1_000_000)
    with pytest.raises(InputError) as e:
        plan(req)
    text = str(e.value)
    largest = int(text.split("can search is ")[1].split()[0].replace(",", ""))
    assert f"--max-gpus {largest}" in e.value.hint
    allowed = [True] * 31
    assert search.check_size(replace(req, max_gpus=largest), allowed) <= search.MAX_CANDIDATES
    _, counts, _ = candidate_count(replace(req, max_gpus=largest), allowed)
    bigger = int(counts[-1]) + req.gpus_per_node  # the next count to try
    assert candidate_count(replace(req, max_gpus=bigger), allowed)[0] > search.MAX_CANDIDATES


def test_counts_no_layout_can_use_are_pruned(capsys: pytest.CaptureFixture[str]) -> None:
    """32 sequences in flight use at most 32 replicas of the largest TP × PP group: a million GPUs costs nothing."""
    req = _req(task="serve", concurrency=32, max_gpus=1_000_000)
    assert useful_max_gpus(req) == 8 * 16 * 32
    cs = enumerate_candidates(req, 2)
    assert int(cs.count.max()) <= useful_max_gpus(req) and int(cs.dp.max()) <= dp_limit(req)
    assert main(["plan", "--model", "llama-3.1-8b", "--task", "serve", "--batch", "4", "--max-gpus", "1000000",
                 "--gpu", "L4", "--format", "json"]) == 0
    assert "were not searched" in capsys.readouterr().out


def test_training_data_parallel_ranks_each_get_a_micro_batch() -> None:
    cs = enumerate_candidates(_req(task="finetune", global_batch=6, seq=2048, max_gpus=64), 1)
    assert int(cs.dp.max()) <= 6 and np.all(cs.seqs_per_replica * cs.dp <= 6)


@settings(max_examples=25, deadline=None)
@given(task=st.sampled_from(["serve", "infer", "finetune", "lora"]), batch=st.integers(1, 300),
       max_gpus=st.integers(1, 200), gpn=st.sampled_from([1, 2, 4, 8]),
       allowed=st.lists(st.booleans(), min_size=1, max_size=4))
def test_the_count_before_enumerating_is_exact(task: str, batch: int, max_gpus: int, gpn: int,
                                               allowed: list[bool]) -> None:
    size = {"global_batch" if task in ("finetune", "lora") else "concurrency": batch}
    req = _req("llama-3.1-8b", task=task, max_gpus=max_gpus, gpus_per_node=gpn, **size)
    total, _, _ = candidate_count(req, allowed)
    assert total == len(enumerate_candidates(req, len(allowed), allowed))


def test_progress_reaches_every_pass_and_the_status_line_stays_off_pipes() -> None:
    calls: list[tuple[str, int, int]] = []
    plan(_req("llama-3.1-8b", task="serve", concurrency=8, max_gpus=4), progress=lambda *a: calls.append(a))
    last = {phase: (done, total) for phase, done, total in calls}
    assert set(last) == {"memory", "speed and cost"} and all(d == t > 0 for d, t in last.values())

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    pipe, tty = io.StringIO(), Tty()
    for stream in (pipe, tty):
        with StatusLine("planning", stream, delay_s=0.0, interval_s=0.0) as status:
            status("memory", 5, 10)
    assert pipe.getvalue() == ""
    assert "memory, 5 of 10 candidates  50%" in tty.getvalue() and tty.getvalue().endswith("\r\x1b[K")


def test_plan_quantity_flags_take_units() -> None:
    a = _req("llama-3.1-8b", task="serve", psu_w="1.6kW", w_per_node="10.2kW", ttft_p50_s="500ms",
             tpot_p50_s="50ms", tokens_per_s="2k", budget_usd="$20k")
    assert (a.psu_w, a.w_per_node, a.ttft_p50_s, a.tpot_p50_s, a.tokens_per_s, a.budget_usd) == (
        1600.0, 10200.0, 0.5, 0.05, 2000.0, 20000.0)
    for bad in ({"psu_w": "1.6kX"}, {"psu_w": "-5"}, {"ttft_p50_s": "fast"}, {"tokens_per_s": "lots"}):
        with pytest.raises(InputError):
            _req("llama-3.1-8b", task="serve", **bad)


def test_plan_takes_the_precisions_estimate_takes() -> None:
    p = plan(_req("llama-3.1-8b", task="serve", precision="fp4", concurrency=4, max_gpus=1))
    assert any(p.shortlist.values()), "fp4 plans on the cards that have an FP4 path"
    assert any(r["rule"] == "precision" for r in p.rejected)  # and is refused, with a reason, elsewhere


def test_qlora_plans_say_nf4_not_bf16() -> None:
    req = _req(task="qlora", global_batch=4, seq=2048, max_gpus=1)
    assert req.precision == "nf4"
    assert plan(req).request["precision"] == "nf4"
    with pytest.raises(InputError, match="4 bits"):
        _req(task="qlora", precision="bf16")
    with pytest.raises(InputError, match="not a training recipe"):
        _req(task="lora", precision="int4")


def test_deadline_numbers_never_print_equal_when_they_differ() -> None:
    assert _apart(168.4, 168.0) == ("168.4", "168")
    assert _apart(200.0, 168.0) == ("200", "168")
    took, limit = _apart(168.04, 168.0)
    assert took != limit
