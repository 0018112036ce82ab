"""Plan entries carry the same intervals as ``gpumatch estimate`` gives their configuration (JSON)."""

from __future__ import annotations

from typing import Any

import pytest

from gpumatch.estimate import Request, estimate
from gpumatch.models import get_model
from gpumatch.plan import plan
from gpumatch.plan.request import with_options


@pytest.mark.parametrize("model, kw, key", [
    ("llama-3.1-8b", {"task": "serve", "concurrency": 8, "max_gpus": 2}, "tpot_s"),
    ("llama-3.2-1b", {"task": "train", "seq": 2048, "global_batch": 16, "max_gpus": 2}, "step_s"),
])
def test_entries_carry_the_estimates_intervals(model: str, kw: dict[str, Any], key: str) -> None:
    arch = get_model(model)
    d = plan(with_options(None, arch, **kw)).to_dict()
    entries = [e for es in d["shortlist"].values() for e in es]
    assert entries
    for e in entries[:4]:
        ivs, why = e["intervals"], e["interval_basis"]
        for name in (key, "total_bytes"):
            lo, hi = ivs[name]
            assert lo <= e["estimate"][name] <= hi and why[name]
        est = estimate(arch, e["gpu"], Request(**e["estimate_options"]), with_scaling=True).to_dict()
        assert why[key] == est["interval_basis"][key]
        assert why["total_bytes"] == est["interval_basis"]["total_bytes"]
        for a, b in zip(ivs[key], est["intervals"][key], strict=True):
            assert a == pytest.approx(b, rel=0.005)
