"""The serve runner on a CPU: mixed passes (decode rows + prompt chunks in one forward) give the same greedy tokens
as full causal passes of the plain model, and the bucket tables."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

from gpumatch.bench.llama import build_model, rope_tables  # noqa: E402
from gpumatch.bench.server import runner as runner_mod  # noqa: E402
from gpumatch.bench.server.runner import Runner, buckets, context_buckets  # noqa: E402
from gpumatch.bench.server.scheduler import Scheduler, Seq  # noqa: E402
from gpumatch.bench.shapes import tiny_shape  # noqa: E402


def _reference(model: torch.nn.Module, prompt: list[int], n: int) -> list[int]:
    """Greedy tokens from a full causal pass over the whole sequence at every step (no cache)."""
    toks = list(prompt)
    for _ in range(n):
        t = torch.tensor([toks])
        with torch.no_grad():
            toks.append(int(model.prefill_logits(t, rope_tables(model.s, len(toks), t.device, torch.float32))
                            .argmax(-1)))
    return toks[len(prompt):]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_mixed_passes_match_full_causal_passes(compiled: bool) -> None:
    """Also with the layers through torch.compile (inductor on the CPU): the same greedy tokens."""
    torch.manual_seed(0)
    model = build_model(tiny_shape(), torch.device("cpu"), torch.float32)
    sched, runner = Scheduler(4, 64, 7), Runner(model, 4, 64, use_graphs=True, compile=compiled)  # no CPU graphs
    assert runner.graphs == {} and runner.compile_error is None
    assert (runner._pre is not runner_mod._pre_attention) == compiled
    rng = random.Random(1)
    seqs = [Seq(i, [rng.randrange(512) for _ in range(rng.randint(3, 15))], rng.randint(1, 12)) for i in range(7)]
    pending, kinds, it = list(seqs[3:]), [], 0
    for s in seqs[:3]:
        sched.add(s)
    while sched.running or sched.waiting or pending:
        if pending and it % 2:
            sched.add(pending.pop(0))
        plan = sched.schedule()
        if plan.decode or plan.chunks:
            kinds.append(plan.kind)
            sched.apply(plan, runner.step(plan))
        it += 1
    assert {"prefill", "mixed", "decode"} <= set(kinds)
    for s in seqs:
        assert s.out == _reference(model, s.prompt, s.max_tokens), s.rid


def test_a_compile_failure_leaves_the_runner_eager_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(fn: object, **kw: object) -> object:
        def call(*a: object, **k: object) -> object:
            raise RuntimeError("inductor: no C compiler")
        return call

    monkeypatch.setattr(torch, "compile", broken)
    model = build_model(tiny_shape(), torch.device("cpu"), torch.float32)
    runner = Runner(model, 2, 32, use_graphs=False, compile=True)
    assert runner.compile_error == "RuntimeError: inductor: no C compiler"
    assert runner._pre is runner_mod._pre_attention and runner._post is runner_mod._post_attention


def test_bucket_tables() -> None:
    assert buckets(256) == [1, 2, 4, 8, 16, 32, 64, 128, 256] and buckets(6) == [1, 2, 4, 6]
    assert context_buckets(2048) == [16, 32, 64, 128, 256, 512, 1024, 1536, 2048]
    assert context_buckets(600)[-2:] == [512, 600] and context_buckets(8) == [8]
    for n in (100, 4096, 10000):
        b = context_buckets(n)
        assert b == sorted(set(b)) and b[-1] == n and len(b) <= 16


class _EagerGraph:
    """Stands in for a captured CUDA graph on a CPU: replay runs the captured function on the static buffers."""

    def __init__(self, runner: Runner, span: int, context: int) -> None:
        self.runner, self.batch = runner, runner.static_batch(span, context)
        self.out = torch.zeros(span, dtype=torch.long)

    def replay(self) -> None:
        self.out.copy_(self.runner._forward(self.batch))


def test_graph_replay_path_gives_the_eager_tokens() -> None:
    """The decode-only passes through the graph path (static input buffers, span-wide sampling, the slot -> row
    mapping) give the same tokens as the eager path (the CUDA graph itself: tests/gpu/test_server_gpu.py)."""

    def run(graphs: bool) -> tuple[list[list[int]], int]:
        torch.manual_seed(0)
        model = build_model(tiny_shape(), torch.device("cpu"), torch.float32)
        runner = Runner(model, 6, 80, use_graphs=False)
        if graphs:
            runner.make_static()
            for span in runner.batch_buckets:
                for ctx in runner.context_buckets:
                    g = _EagerGraph(runner, span, ctx)
                    runner.graphs[(span, ctx)] = (g, g.out)
        sched = Scheduler(6, 80, 16)
        rng = random.Random(5)
        seqs = [Seq(i, [rng.randrange(512) for _ in range(rng.randint(2, 20))], rng.randint(1, 40)) for i in range(9)]
        for s in seqs:
            sched.add(s)
        decode_passes = 0
        while sched.running or sched.waiting:
            plan = sched.schedule()
            decode_passes += plan.kind == "decode"
            sched.apply(plan, runner.step(plan))
        return [s.out for s in seqs], decode_passes

    eager, n = run(False)
    replayed, _ = run(True)
    assert n > 10 and replayed == eager


def test_the_estimators_padded_shape_is_the_runners() -> None:
    """estimate.passes.batch_bucket / context_bucket (the `gpumatch` profile's padded_decode) give the buckets the
    runner picks, for every batch up to the slot count and every context up to --max-model-len 2048 and 4096
    (steps of 512; a longer max_len steps by max_len / 8, which the estimator does not know)."""
    from gpumatch.estimate.passes import batch_bucket, context_bucket

    for slots in (64, 217, 256):
        table = buckets(slots)
        assert all(batch_bucket(b, slots) == next(x for x in table if x >= b) for b in range(1, slots + 1))
    for max_len in (2048, 4096):
        table = context_buckets(max_len)
        assert all(context_bucket(n) == next(x for x in table if x >= n) for n in range(1, max_len + 1))
