"""The serving front end's cost per request, read off published rows where the engine's passes weigh little.

An engine's TTFT as a client sees it is the engine's passes (the pass in flight, the prompt's chunks, queueing:
:mod:`gpumatch.estimate.serving`) plus what happens outside them for each request: HTTP parsing, the chat template,
tokenization, the hand-over to the engine loop, the first token's detokenization and streaming. At one to four
clients and short prompts the passes are a few milliseconds, so published TTFT minus the frozen prediction of the
passes is mostly that front-end cost. Over the published batches named, per engine, this takes the rows with at most
``max_clients`` clients and prompts of at most ``max_prompt_tokens`` tokens that publish a TTFT (mean, else median)
and returns the median difference with its quartiles: the basis of ``frontend_s`` in ``estimate/data/engines.toml``
(a fit on those rows; ``benchmarks/frontend_cost.py`` prints it).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpumatch.calibrate.published import EngineCase, batch_settings, load_engine_cases

MAX_CLIENTS = 4
"""Clients at most: beyond a few, queueing behind other prompts is no longer small."""
MAX_PROMPT_TOKENS = 1100
"""Prompt tokens at most: a 1k-token prompt's prefill is a few ms on a datacenter card."""


@dataclass(frozen=True)
class FrontEnd:
    """The front-end cost per request of one engine: ``n`` rows, median and quartiles of TTFT - predicted (s)."""

    engine: str
    n: int
    median_s: float
    q25_s: float
    q75_s: float


def _difference_s(c: EngineCase) -> float | None:
    """Published TTFT minus the frozen prediction of the same statistic (mean, else median); None without both."""
    measured: float | None = c.ttft_s
    predicted: float | None = c.predicted_ttft_s  # None where the frozen estimate had no TTFT
    if measured is None:
        measured, predicted = c.ttft_median_s, c.predicted_ttft_p50_s or c.predicted_ttft_s
    return None if measured is None or predicted is None else measured - predicted


def front_end_costs(directory: Path, dates: Sequence[str], max_clients: int = MAX_CLIENTS,
                    max_prompt_tokens: float = MAX_PROMPT_TOKENS) -> list[FrontEnd]:
    """Per engine, the front-end cost per request over the published batches ``dates`` in ``directory`` (module
    docstring), engines in name order."""
    cases, _, _ = load_engine_cases([directory / f"engine-measured-{d}.toml" for d in dates],
                                    [directory / f"engine-predictions-{d}.json" for d in dates])
    prompts = {i: float(r["prompt"]) for i, r in batch_settings(directory, dates).items()}
    by_engine: dict[str, list[float]] = {}
    for c in cases:
        diff = _difference_s(c)
        if diff is not None and c.concurrency <= max_clients and prompts[c.case_id] <= max_prompt_tokens:
            by_engine.setdefault(c.engine, []).append(diff)
    out = []
    for engine, diffs in sorted(by_engine.items()):
        q = statistics.quantiles(diffs, n=4) if len(diffs) > 1 else [diffs[0]] * 3
        out.append(FrontEnd(engine, len(diffs), statistics.median(diffs), q[0], q[2]))
    return out
