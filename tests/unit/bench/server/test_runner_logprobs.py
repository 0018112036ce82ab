"""Log-probs from the serve runner on a CPU, against a full causal pass of the plain model over the whole sequence:
each output token's log-prob and top-k, the prompt's (row p scores token p + 1), with the prompt prefilled in
chunks beside other requests' decode rows; and stop ids / min_tokens in the scheduler."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from gpumatch.bench.llama import build_model, rope_tables  # noqa: E402
from gpumatch.bench.server.runner import Runner  # noqa: E402
from gpumatch.bench.server.scheduler import Scheduler, Seq  # noqa: E402
from gpumatch.bench.shapes import tiny_shape  # noqa: E402


def _full_logprobs(model: torch.nn.Module, toks: list[int]) -> torch.Tensor:
    """log-softmax (fp32) at every position of ``toks`` (row p: the distribution of token p + 1)."""
    t = torch.tensor([toks])
    with torch.no_grad():
        h = model.hidden_states(t, rope_tables(model.s, len(toks), t.device, torch.float32))
        return torch.log_softmax(model.head(h)[0].float(), dim=-1)


def test_output_and_prompt_logprobs_match_a_full_causal_pass() -> None:
    torch.manual_seed(0)
    model = build_model(tiny_shape(), torch.device("cpu"), torch.float32)
    sched, runner = Scheduler(3, 64, 5), Runner(model, 3, 64, use_graphs=False)
    other = Seq(0, [5, 6, 7], 12)
    asked = Seq(1, [11, 12, 13, 14, 15, 16, 17, 18], 6, logprobs=3, prompt_logprobs=2)
    plain = Seq(2, [9, 8], 4)
    for s in (other, asked, plain):
        sched.add(s)
    out_lp, prompt_lp, kinds = [], [], set()
    while sched.running or sched.waiting:
        plan = sched.schedule()
        kinds.add(plan.kind)
        got = runner.sample(plan)
        assert set(got.logprobs) <= {1} and set(got.prompt_logprobs) <= {1}
        prompt_lp += got.prompt_logprobs.get(1, [])
        if 1 in got.logprobs:
            out_lp.append(got.logprobs[1])
        sched.apply(plan, got.ids)
    assert "mixed" in kinds and len(out_lp) == 6 and len(prompt_lp) == len(asked.prompt) - 1
    ref = _full_logprobs(model, asked.prompt + asked.out)
    n = len(asked.prompt)
    for p, lp in enumerate(prompt_lp):  # prompt token p + 1, scored at row p
        assert lp.token == asked.prompt[p + 1] and lp.logprob == pytest.approx(float(ref[p, lp.token]), abs=1e-4)
        assert len(lp.top) == 2 and [i for i, _ in lp.top] == ref[p].topk(2).indices.tolist()
    for j, lp in enumerate(out_lp):
        row = ref[n - 1 + j]
        assert lp.token == asked.out[j] == int(row.argmax())  # greedy: the sampled token is the most likely
        assert lp.logprob == pytest.approx(float(row.max()), abs=1e-4) == lp.top[0][1]
        assert [i for i, _ in lp.top] == row.topk(3).indices.tolist()
        assert sum(math.exp(v) for _, v in lp.top) <= 1.0 + 1e-6


def _finish(seq: Seq, tokens: list[int]) -> tuple[list[int], str | None]:
    s = Scheduler(1, 64, 16)
    s.add(seq)
    for tok in tokens:
        plan = s.schedule()
        s.apply(plan, {seq.rid: tok})
        if seq.finish_reason:
            break
    return seq.out, seq.finish_reason


def test_stop_ids_end_with_stop_but_not_before_min_tokens() -> None:
    assert _finish(Seq(0, [1], 10, stop_ids=frozenset({7})), [3, 7, 4]) == ([3, 7], "stop")
    assert _finish(Seq(0, [1], 10, stop_ids=frozenset({7}), min_tokens=3), [7, 7, 7, 4]) == ([7, 7, 7], "stop")
    assert _finish(Seq(0, [1], 2, stop_ids=frozenset({7})), [3, 7]) == ([3, 7], "length")  # length first
    seq = Seq(0, [1], 10, ignore_eos=False, eos=2, stop_ids=frozenset({7}))
    assert _finish(seq, [3, 7]) == ([3, 7], "stop") and seq.stop_reason == 7
    eos = Seq(0, [1], 10, ignore_eos=False, eos=2)
    assert _finish(eos, [3, 2]) == ([3, 2], "stop") and eos.stop_reason is None
