"""Log-probabilities of ``gpumatch serve``'s runner: which passes need them, and the top-k out of a log-softmax.

A pass in which a request asked for log-probs runs eagerly (:meth:`gpumatch.bench.server.runner.Runner.sample`);
the fp32 log-softmax of the rows wanted gives each token's own log-prob (``gather``) and the ``k`` most likely ids
(``topk``), clamped at :data:`LOGPROB_FLOOR`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from gpumatch.bench.server.scheduler import Plan, Seq, TokenLogprob

LOGPROB_FLOOR = -9999.0
"""Log-probs are clamped here so that JSON never carries -inf (vLLM's value)."""


@dataclass
class Sampled:
    """What one pass gives back, by request id: the sampled token; its log-prob (requests that asked); the
    log-probs of the prompt tokens scored in this pass (requests that asked for prompt log-probs)."""

    ids: dict[int, int]
    logprobs: dict[int, TokenLogprob] = field(default_factory=dict)
    prompt_logprobs: dict[int, list[TokenLogprob]] = field(default_factory=dict)


def wants_logprobs(plan: Plan) -> bool:
    """Whether a request in ``plan`` asked for log-probs of a token this pass samples or scores."""
    return (any(s.logprobs is not None for s in plan.decode)
            or any((c.completes and c.seq.logprobs is not None) or c.seq.prompt_logprobs is not None
                   for c in plan.chunks))


def score(out: Sampled, logp: torch.Tensor, want: list[tuple[Seq, int, int | None]]) -> None:
    """Fill ``out`` from ``logp`` (one fp32 log-softmax row per entry of ``want``: the sequence, its flat row, and
    the prompt token scored, or None for the sampled one)."""
    k = max(max((s.prompt_logprobs if t is not None else s.logprobs) or 0 for s, _, t in want), 0)
    targets = [out.ids[s.rid] if t is None else t for s, _, t in want]
    own = logp.gather(1, torch.tensor(targets, device=logp.device)[:, None]).squeeze(1).tolist()
    values, indices = logp.topk(k, dim=-1) if k else (logp[:, :0], logp[:, :0].long())
    top_v, top_i = values.tolist(), indices.tolist()
    for j, (s, _, t) in enumerate(want):
        n = (s.prompt_logprobs if t is not None else s.logprobs) or 0
        top = tuple((int(i), max(float(v), LOGPROB_FLOOR)) for i, v in zip(top_i[j][:n], top_v[j][:n], strict=True))
        lp = TokenLogprob(targets[j], max(float(own[j]), LOGPROB_FLOOR), top)
        if t is None:
            out.logprobs[s.rid] = lp
        else:
            out.prompt_logprobs.setdefault(s.rid, []).append(lp)
