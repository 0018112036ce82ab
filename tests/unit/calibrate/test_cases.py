"""How measured training rows become estimator cases, LoRA and QLoRA included (calibrate.cases)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

from gpumatch.bench.shapes import LLAMA_3_8B
from gpumatch.calibrate.cases import load_cases, train_setup
from gpumatch.calibrate.compare import predict


def _row(**kw: object) -> dict[str, object]:
    return {"kind": "train", "model": "llama-3-8b", "batch": 4, "seq": 2048, "recompute": "full", "master": "none",
            "status": "ok", "timing": {"median_s": 0.9}, "max_memory_reserved_bytes": 40 * 2**30,
            "max_memory_allocated_bytes": 38 * 2**30, **kw}


def test_a_full_training_row_keeps_its_name_and_options() -> None:
    name, opts = train_setup(_row())
    assert name == "llama-3-8b b4 s2048 rc=full master=none"
    assert opts == {"task": "train", "micro_batch": 4, "seq": 2048, "recompute": "full", "master_weights": "none"}
    assert train_setup(_row(variant="full")) == (name, opts)


def test_adapter_rows_become_lora_and_qlora_cases(tmp_path: Path) -> None:
    plan = {"train": [], "adapters": [[LLAMA_3_8B, 4, 2048, "full", "lora", 16]]}
    doc = {"plan": plan, "cases": [_row(variant="lora", lora_rank=16),
                                   _row(variant="qlora", lora_rank=64, recompute="none", status="oom")]}
    (tmp_path / "2026-12-05-h200-heldout6-train.json").write_text(json.dumps(doc))
    cases = {c.case_id: c for c in load_cases(tmp_path)}
    assert set(cases) == {"train llama-3-8b b4 s2048 rc=full lora r=16", "memory llama-3-8b b4 s2048 rc=full lora r=16",
                          "train llama-3-8b b4 s2048 rc=none qlora r=64"}
    time = cases["train llama-3-8b b4 s2048 rc=full lora r=16"]
    assert time.options["task"] == "lora" and time.options["lora_rank"] == 16 and not time.fit
    assert (time.kind, time.measured) == ("train-time", 0.9)
    oom = cases["train llama-3-8b b4 s2048 rc=none qlora r=64"]
    assert (oom.kind, oom.options["task"], oom.options["lora_rank"]) == ("train-fit", "qlora", 64)
    memory = cases["memory llama-3-8b b4 s2048 rc=full lora r=16"]
    step = predict(time)
    assert 0.1 < step < 10.0 and not math.isnan(predict(memory))
    # a frozen base saves at least full bf16 training's 4 bytes of AdamW moments per parameter (8.03e9; its
    # gradients, freed by zero_grad, share the single-GPU peak with the activations)
    full = predict(replace(memory, options=train_setup(_row())[1]))
    assert full - predict(memory) > 4.0 * 8.03e9
