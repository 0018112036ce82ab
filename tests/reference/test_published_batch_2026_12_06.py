"""The fourth batch of published serving rows (collected 2026-12-06) is well formed, before any prediction is frozen.

Data: tests/data/published/engine-rows-2026-12-06.toml (settings only) and engine-measured-2026-12-06.toml (the
measured values, sources and provenance). These tests read the settings file fully but the measured file only for its
structure (ids, column names, source entries): no measured number is compared with anything here, so the batch stays
blind until benchmarks/freeze_engine_predictions.py has frozen its predictions.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from gpumatch.calibrate.published import TPOT_BASES, _measured_fields
from gpumatch.catalog import get_gpu
from gpumatch.estimate import Request, estimate
from gpumatch.models import get_model

DATA = Path(__file__).resolve().parents[1] / "data" / "published"
ROWS_FILE = DATA / "engine-rows-2026-12-06.toml"
MEASURED_FILE = DATA / "engine-measured-2026-12-06.toml"
FREEZE_COLUMNS = ["id", "model", "gpu", "tp", "precision", "engine", "concurrency", "prompt", "gen", "num_prompts",
                  "length_low"]
"""The columns (and order) of engine-rows-2026-12-04c.toml that benchmarks/freeze_engine_predictions.py reads."""
USED_SOURCES = {"inferencex-870", "tt340", "mr4090", "ix828", "achatbot183", "recipes431", "ixdash", "aimultiple",
                "gpustack", "ix1053"}


def _load(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        return tomllib.load(f)


SPEC = _load(ROWS_FILE)
ROWS = [dict(zip(SPEC["columns"], raw, strict=True)) for raw in SPEC["rows"]]
MEASURED = _load(MEASURED_FILE)


def _measured_ids() -> list[str]:
    return [raw[0] for group in MEASURED["group"] for raw in group["rows"]]


def test_settings_keep_the_freeze_columns_and_every_row_has_one_measured_entry() -> None:
    assert SPEC["columns"][: len(FREEZE_COLUMNS)] == FREEZE_COLUMNS
    ids = [r["id"] for r in ROWS]
    assert len(ids) == len(set(ids)) >= 60
    measured = _measured_ids()
    assert len(measured) == len(set(measured))
    assert set(measured) == set(ids)


def test_measured_groups_use_only_columns_the_loader_reads() -> None:
    for group in MEASURED["group"]:
        basis = str(group.get("tpot_basis", "published"))
        assert basis in TPOT_BASES
        assert group["columns"][:3] == ["id", "ttft_ms", "tpot_ms"]
        for raw in group["rows"]:
            fields = _measured_fields(dict(zip(group["columns"], raw, strict=True)), basis)
            assert fields["ttft_s"] is not None and fields["tpot_s"] > 0


def test_every_row_names_a_new_sourced_source() -> None:
    sources = MEASURED["sources"]
    assert not set(sources) & USED_SOURCES
    for group in MEASURED["group"]:
        src = sources[group["source"]]
        assert src["url"].startswith("https://") and src["says"] and src["notes"] and src["engine"]
        assert all(raw[0].startswith(group["source"] + " ") for raw in group["rows"])
    assert len({s["url"].split("/blob/")[0].split("/issues/")[0] for s in sources.values()}) >= 4


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_row_resolves_in_the_catalog_and_fits(row: dict[str, Any]) -> None:
    assert get_model(row["model"]).name == row["model"]
    assert get_gpu(row["gpu"]).name == row["gpu"]
    assert row["engine"] in ("vllm", "sglang", "trtllm")
    assert row["loop"] in ("closed", "open-burst") and row["request_rate"] == "inf"
    assert row["ignore_eos"] in ("true", "false", "not stated") and row["ep"] == 1
    if row["loop"] == "open-burst":
        assert row["concurrency"] == row["num_prompts"]
    assert 0 < row["length_low"] <= 1 and row["prompt"] > 0 and row["gen"] > 0 and row["num_prompts"] >= 0
    est = estimate(row["model"], row["gpu"], Request(tp=row["tp"], task="serve", concurrency=1, prompt=row["prompt"],
                                                     gen=row["gen"], precision=row["precision"],
                                                     kv_precision=row["kv_precision"], engine="static"),
                   with_scaling=False)
    assert est.fits, f"{row['id']}: does not fit in gpumatch's memory model"


def test_the_batch_page_is_generated_from_the_frozen_files() -> None:
    # docs/published-batch-2026-12-06.md is what benchmarks/published_batch.py makes of the three committed files
    # (the frozen predictions are read, never recomputed); only its generation date may differ
    import re
    import sys

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        from published_batch import render
    finally:
        sys.path.remove(str(root / "benchmarks"))
    data = root / "tests" / "data" / "published"
    page = render(data / "engine-rows-2026-12-06.toml", data / "engine-measured-2026-12-06.toml",
                  data / "engine-predictions-2026-12-06.json")
    committed = (root / "docs" / "published-batch-2026-12-06.md").read_text()
    date = re.compile(r"\(\d{4}-\d\d-\d\d\); do not edit")
    assert date.sub("", page) == date.sub("", committed)
