"""The server's token counts (``usage``) checked against what each request asked for.

Prompt: a completed request's ``usage.prompt_tokens`` is compared with the tokens its prompt was built to hold
(``prompt_tokens_requested``: the ``--tokenizer``'s exact count, else one token per word). It *mismatches* when
``|server − requested| > tolerance + 5 % × requested``. The tolerance (``--prompt-tolerance``, tokens) covers what
the server adds of its own: 2 by default on ``/v1/completions`` (a BOS token), 48 on ``/v1/chat/completions`` (the
chat template's role and date tokens). A larger gap means the server's tokenizer is not the one the prompts were
built for, so the load is not the one asked for.

Output: ``usage.completion_tokens`` ≠ the length asked for (``RequestRecord.length_mismatch``; exact, since the
length is enforced with ``ignore_eos``/``min_tokens``).

Per level the summary gets ``prompt_len_mismatches``, ``mean_prompt_tokens_requested``,
``mean_prompt_tokens_server`` and ``mean_output_tokens_requested``; :func:`run_warnings` gives one warning per kind
for the whole run, with its numbers, from the first level where it happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpumatch.loadgen.metrics import RequestRecord

RELATIVE_TOLERANCE = 0.05
DEFAULT_TOLERANCE = {"completions": 2, "chat": 48}


def prompt_mismatch(r: RequestRecord, tolerance: int) -> bool:
    """The server counted another prompt length than was built, beyond the tolerance (module docstring)."""
    if not r.ok or r.prompt_tokens is None or r.output_tokens is None:
        return False
    want = r.prompt_tokens_requested
    return abs(r.prompt_tokens - want) > tolerance + RELATIVE_TOLERANCE * want


def usage_summary(records: Sequence[RequestRecord], tolerance: int) -> dict[str, Any]:
    """The level's usage figures (module docstring); means over completed requests with usage."""
    seen = [r for r in records if r.ok and r.output_tokens is not None and r.prompt_tokens is not None]

    def mean(values: list[float]) -> float | None:
        return sum(values) / len(values) if values else None

    return {"prompt_len_mismatches": sum(prompt_mismatch(r, tolerance) for r in records),
            "prompt_tolerance_tokens": tolerance,
            "mean_prompt_tokens_requested": mean([r.prompt_tokens_requested for r in seen]),
            "mean_prompt_tokens_server": mean([float(r.prompt_tokens or 0) for r in seen]),
            "mean_output_tokens_requested": mean([r.output_tokens_requested for r in seen]),
            "mean_output_tokens_server": mean([float(r.output_tokens or 0) for r in seen])}


def run_warnings(levels: Sequence[tuple[str, dict[str, Any]]], tokenizer: str | None,
                 enforce_length: bool) -> list[str]:
    """At most one prompt and one output warning for the run: ``levels`` are (label, summary) in run order."""
    out = []
    first = next(((lb, s) for lb, s in levels if s.get("prompt_len_mismatches")), None)
    if first is not None:
        label, s = first
        fix = f"the server's tokenizer differs from {tokenizer}" if tokenizer else \
            "the server's tokenizer differs; pass --tokenizer"
        out.append(f"{_n(s['mean_prompt_tokens_requested'])}-token prompts arrived as "
                   f"{_n(s['mean_prompt_tokens_server'])} tokens (means; {s['prompt_len_mismatches']} of "
                   f"{s['completed']} requests at {label} beyond ±{s['prompt_tolerance_tokens']} tokens + 5 %): {fix}")
    first = next(((lb, s) for lb, s in levels if s.get("output_len_mismatches")), None)
    if first is not None:
        label, s = first
        why = "the server may ignore ignore_eos/min_tokens" if enforce_length else \
            "--no-enforce-length lets the server stop early"
        out.append(f"{_n(s['mean_output_tokens_requested'])}-token outputs arrived as "
                   f"{_n(s['mean_output_tokens_server'])} tokens (means; {s['output_len_mismatches']} of "
                   f"{s['completed']} requests at {label}): {why}")
    return out


def _n(v: float | None) -> str:
    return "?" if v is None else f"{v:.0f}"
