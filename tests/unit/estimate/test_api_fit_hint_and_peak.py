"""What an estimate says when it does not fit (no speed or cost, the change that would fit) and why its memory
items need not add up to the total (the peak rule)."""

from __future__ import annotations

import pytest

from gpumatch.estimate import Request, estimate
from gpumatch.estimate.results import RUN_KEYS

ITEMS = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "kv_cache_bytes",
         "overhead_bytes")


def _items_sum(d: dict) -> float:  # type: ignore[type-arg]
    return sum(d["memory"][k] for k in ITEMS)


def test_single_gpu_training_peak_rule_explains_the_gap() -> None:
    one = estimate("llama-3.2-1b", "H100 SXM", Request(task="train", seq=2048, micro_batch=1)).to_dict()
    gap = _items_sum(one) - one["memory"]["total_bytes"]
    assert gap > 0 and one["memory"]["detail"]["not_at_peak_bytes"] == pytest.approx(gap)
    assert "do not peak together" in one["memory"]["peak_rule"]
    accum = estimate(
        "llama-3.1-8b", "H100 SXM", Request(task="train", seq=2048, micro_batches=2, micro_batch=1)
    ).to_dict()
    assert _items_sum(accum) == pytest.approx(accum["memory"]["total_bytes"])  # persistent gradients: all resident
    assert accum["memory"]["peak_rule"] is None


def test_a_tied_embedding_second_gradient_is_not_at_the_accumulation_peak() -> None:
    """Llama-3.2-1B ties its embedding: with persistent gradients everything else is resident at the peak."""
    accum = estimate(
        "llama-3.2-1b", "H100 SXM", Request(task="train", seq=2048, micro_batches=2, micro_batch=1)
    ).to_dict()
    tied = accum["memory"]["detail"]["tied_embedding_grad_bytes"]
    assert tied > 0 and _items_sum(accum) - accum["memory"]["total_bytes"] == pytest.approx(tied)
    assert "tied embedding's second gradient" in accum["memory"]["peak_rule"]


def test_not_fitting_has_no_speed_or_cost_and_names_a_change_that_fits() -> None:
    kw = {"task": "lora", "micro_batch": 4, "seq": 2048}
    d = estimate("llama-3.1-8b", "RTX 4090", Request(**kw)).to_dict()  # type: ignore[arg-type]
    assert d["fits"] is False
    for k in ("step_s", "tokens_per_s", "mfu", "bound", "breakdown", "usd_per_million_tokens", "power_w"):
        assert d[k] is None, k
    assert all(d[k] is None for k in RUN_KEYS if k in d and k not in ("power_idle_w", "power_peak_w", "run_tokens"))
    hint = d["fit_hint"]
    assert hint and hint.startswith("fits with --") and hint in d["warnings"][-1]


@pytest.mark.parametrize(
    ("model", "gpu", "kw"),
    [
        ("llama-3.1-8b", "RTX 4090", {"task": "lora", "micro_batch": 4, "seq": 2048}),
        ("llama-3.1-8b", "RTX 4090", {"task": "lora", "micro_batch": 8, "seq": 4096}),
        ("llama-3.1-70b", "A100 SXM4 80GB", {"task": "lora", "micro_batch": 4, "seq": 2048}),
        ("llama-3.1-70b", "RTX 4090", {"task": "qlora", "micro_batch": 4, "seq": 4096, "precision": "nf4"}),
        ("llama-3.2-1b", "RTX 4090", {"task": "train", "micro_batch": 2, "seq": 2048}),
        ("llama-3.1-70b", "H100 SXM", {"task": "serve", "concurrency": 64}),
    ],
)
def test_the_named_change_really_fits(model: str, gpu: str, kw: dict) -> None:  # type: ignore[type-arg]
    """Apply the hint's flags to the request: the result fits (the hint is evaluated, not guessed)."""
    d = estimate(model, gpu, Request(**kw))
    assert not d.fits
    assert d.fit_hint, "a mitigation should fit here"
    flags = d.fit_hint.removeprefix("fits with ").split(":")[0].split()
    changed = dict(kw)
    count = None
    i = 0
    while i < len(flags):
        name = flags[i].removeprefix("--").replace("-", "_")
        if name == "offload_optimizer":
            changed[name] = True
            i += 1
            continue
        value: object = flags[i + 1]
        value = int(value) if str(value).isdigit() else value
        if name == "count":
            count = value
        else:
            changed[name] = value
        i += 2
    again = estimate(model, gpu, Request(count=count, **changed))  # type: ignore[arg-type]
    assert again.fits, (d.fit_hint, again.memory.total_bytes, again.memory.capacity_bytes)


def test_inference_throughputs_say_what_they_count() -> None:
    d = estimate(
        "llama-3.1-8b", "H100 SXM", Request(task="serve", dp=2, count=2, engine="static", concurrency=16)
    ).to_dict()
    # generated tokens over prefill + decode, both replicas; the decode-only rate has no prefill in it
    assert d["tokens_per_s"] == pytest.approx(16 * d["layout"]["gen"] / d["e2e_s"])
    assert d["tokens_per_s_per_replica"] == pytest.approx(d["tokens_per_s"] / 2)
    assert d["decode_tokens_per_s"] == pytest.approx(16 / d["tpot_s"])
    assert d["decode_tokens_per_s"] > d["tokens_per_s"]
    one = estimate("llama-3.1-8b", "H100 SXM", Request(task="serve", engine="static", concurrency=8)).to_dict()
    assert d["tpot_s"] == pytest.approx(one["tpot_s"])  # replicas do not communicate
    assert d["memory"]["total_bytes"] == pytest.approx(one["memory"]["total_bytes"])


def test_scaling_efficiency_never_exceeds_one() -> None:
    d = estimate(
        "llama-3.1-70b",
        "MI325X",
        Request(task="finetune", seq=4096, count=64, dp=64, zero=3, recompute="full", micro_batch=1),
    )
    assert 0 < d.metrics["scaling_efficiency"] <= 1.0
