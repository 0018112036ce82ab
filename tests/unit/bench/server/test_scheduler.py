"""The serve scheduler on its own: slots, FCFS admission, chunked prefill under the token budget, finishing."""

from __future__ import annotations

import pytest

from gpumatch.bench.server import tokens
from gpumatch.bench.server.scheduler import Scheduler, Seq, check_fits


def _run_pass(s: Scheduler, token: int = 7) -> tuple[str, list[Seq]]:
    plan = s.schedule()
    sampled = {q.rid: token for q in plan.decode} | {c.seq.rid: token for c in plan.chunks if c.completes}
    return plan.kind, s.apply(plan, sampled)


def test_admission_waits_for_a_free_slot_and_takes_the_lowest() -> None:
    s = Scheduler(max_num_seqs=2, max_model_len=32, max_num_batched_tokens=64)
    for i in range(3):
        s.add(Seq(i, [1, 2, 3], max_tokens=2 + i))
    plan = s.schedule()
    assert [c.seq.rid for c in plan.chunks] == [0, 1] and len(s.waiting) == 1
    assert sorted(q.slot for q in s.running) == [0, 1]
    s.apply(plan, {0: 5, 1: 5})
    _run_pass(s)  # request 0 reaches max_tokens 2 and frees slot 0
    assert [q.rid for q in s.running] == [1] and len(s.waiting) == 1
    plan = s.schedule()
    assert plan.kind == "mixed" and plan.chunks[0].seq.rid == 2 and plan.chunks[0].seq.slot == 0


def test_chunked_prefill_respects_the_budget_left_by_decodes() -> None:
    s = Scheduler(max_num_seqs=4, max_model_len=64, max_num_batched_tokens=8)
    s.add(Seq(0, [1] * 3, max_tokens=20))
    _run_pass(s)
    late = Seq(1, [2] * 20, max_tokens=1)
    s.add(late)
    seen = []
    while late.prefilling:
        plan = s.schedule()
        assert len(plan.decode) + plan.prefill_tokens <= 8
        seen.append((plan.kind, plan.prefill_tokens))
        s.apply(plan, {q.rid: 3 for q in plan.decode} | {c.seq.rid: 3 for c in plan.chunks if c.completes})
    assert seen == [("mixed", 7), ("mixed", 7), ("mixed", 6)]


def test_max_tokens_exact_and_eos_only_without_ignore_eos() -> None:
    s = Scheduler(4, 32, 32)
    a, b, c = Seq(0, [1], 5, ignore_eos=True, eos=7), Seq(1, [1], 5, ignore_eos=False, eos=7), Seq(2, [1], 3)
    for q in (a, b, c):
        s.add(q)
    while s.running or s.waiting:
        _run_pass(s, token=7)
    assert (len(a.out), a.finish_reason) == (5, "length")
    assert (len(b.out), b.finish_reason) == (1, "stop")
    assert (len(c.out), c.finish_reason) == (3, "length")


def test_abort_frees_the_slot_and_the_queue() -> None:
    s = Scheduler(1, 16, 16)
    s.add(Seq(0, [1, 2], 10))
    s.add(Seq(1, [1, 2], 10))
    _run_pass(s)
    assert s.abort(0) is not None and s.running == []
    assert s.abort(1) is not None and not s.waiting
    assert s.abort(99) is None


def test_requests_that_can_never_fit_are_refused() -> None:
    assert check_fits(10, 7, 16) is not None and check_fits(10, 6, 16) is None
    assert check_fits(0, 1, 16) is not None and check_fits(1, 0, 16) is not None
    with pytest.raises(ValueError, match="maximum context length"):
        Scheduler(2, 16, 8).add(Seq(0, [1] * 10, 7))


def test_kv_usage_counts_tokens_held() -> None:
    s = Scheduler(2, 10, 16)
    s.add(Seq(0, [1, 2, 3, 4], 3))
    _run_pass(s)
    _run_pass(s)
    assert s.kv_tokens_used == 5 and s.kv_usage == pytest.approx(5 / 20)


def test_prompt_words_map_to_ids_deterministically() -> None:
    ids = tokens.encode("the  quick\nbrown the", 1000)
    assert len(ids) == 4 and ids[0] == ids[3] and all(0 <= i < 1000 for i in ids)
    assert tokens.encode("the quick brown the", 1000) == ids
    assert tokens.check_ids([0, 999], 1000) == [0, 999]
    for bad in ([1000], [-1], [True], ["3"]):
        with pytest.raises(ValueError):
            tokens.check_ids(bad, 1000)
    assert tokens.decode_one(42).split() == ["t42"]
