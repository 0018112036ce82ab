"""The front end's cost per request from the published rows (gpumatch.calibrate.front_end) and the engine profiles
set from it (estimate/data/engines.toml ``frontend_s``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpumatch.calibrate.front_end import front_end_costs
from gpumatch.estimate.engine_profiles import engine_profiles

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "published"


def _fit_batches() -> tuple[str, ...]:
    """The batches ``benchmarks/frontend_cost.py`` fitted ``frontend_s`` on."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from frontend_cost import FIT_BATCHES
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return tuple(FIT_BATCHES)


FIT_BATCHES = _fit_batches()


def test_the_shipped_front_end_costs_are_the_medians_of_the_fit_rows() -> None:
    """vLLM's and TensorRT-LLM's ``frontend_s`` are their median over the batches fitted on, to the millisecond;
    SGLang, with one usable row, takes vLLM's (engines.toml says so)."""
    costs = {f.engine: f for f in front_end_costs(DATA, FIT_BATCHES)}
    profiles = engine_profiles()
    assert costs["vllm"].n == 40 and costs["trtllm"].n == 3
    for engine in ("vllm", "trtllm"):
        assert profiles[engine].frontend_s == pytest.approx(round(costs[engine].median_s, 3), abs=1e-9)
        assert costs[engine].q25_s <= costs[engine].median_s <= costs[engine].q75_s
    assert profiles["sglang"].frontend_s == profiles["vllm"].frontend_s
    assert profiles["gpumatch"].frontend_s == 0.0 and profiles["static"].frontend_s == 0.0


def test_only_few_clients_and_short_prompts_count() -> None:
    """Tighter limits keep a subset: one client counts fewer rows than four, and no prompt limit below the shortest
    published prompt leaves any row."""
    four = {f.engine: f.n for f in front_end_costs(DATA, FIT_BATCHES)}
    one = {f.engine: f.n for f in front_end_costs(DATA, FIT_BATCHES, max_clients=1)}
    assert all(one.get(e, 0) <= n for e, n in four.items()) and sum(one.values()) < sum(four.values())
    assert front_end_costs(DATA, FIT_BATCHES, max_prompt_tokens=1) == []
