"""The published serving batches collected with their client settings (2026-12-06 onward) are well formed, and each
batch's page is what ``benchmarks/published_batch.py`` makes of its committed files.

Data: ``tests/data/published/engine-rows-DATE.toml`` (settings only), ``engine-measured-DATE.toml`` (the measured
values, sources and provenance), ``engine-predictions-DATE.json`` (frozen before the measured file was read) and,
where the estimator changed after reading a batch, ``engine-refit-DATE.json`` (its rows predicted again: a fit).
The structure tests read the measured file only for its ids, columns and sources, so a new batch can be checked
here before its predictions are frozen. A new batch is one more entry of :data:`BATCHES`.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from gpumatch.calibrate.published import TPOT_BASES, _measured_fields
from gpumatch.catalog import get_gpu
from gpumatch.estimate import Request, estimate
from gpumatch.models import get_model

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "published"
BATCHES = ("2026-12-06", "2026-12-07", "2026-12-07b", "2026-12-07c", "2026-12-07d", "2026-12-07e", "2026-12-07f",
           "2026-12-07g", "2026-12-07h", "2026-12-07i", "2026-12-07j",
           "2026-12-07k", "2026-12-07l",
           "2026-12-07m", "2026-12-07n", "2026-12-07o", "2026-12-08b")
"""Batches in the order they were collected; each must bring back no row id or source of an earlier one."""
MIN_ROWS = {"2026-12-07d": 4, "2026-12-07f": 52, "2026-12-07g": 53, "2026-12-07h": 31, "2026-12-07i": 2,
            "2026-12-07j": 61, "2026-12-07k": 8, "2026-12-07l": 15,
            "2026-12-07m": 12, "2026-12-07n": 25, "2026-12-07o": 2, "2026-12-08b": 1}
"""Rows a batch holds at least: 60, except the second half of the seventh batch (two PR threads, 4 rows) and the
tenth (two sources, 52 rows)."""
OLDER = (("engine-rows-2026-12-04.toml", "engine-rows-2026-12-04b.toml", "engine-rows-2026-12-04c.toml"),
         ("engine-serving.toml", "trtllm-serving.toml", "engine-measured-2026-12-04c.toml"))
"""(settings, measured) files of the batches before the client settings were recorded."""
COLUMNS = ["id", "model", "gpu", "tp", "precision", "engine", "concurrency", "prompt", "gen", "num_prompts",
           "length_low", "kv_precision", "ep", "loop", "request_rate", "dataset", "ignore_eos", "engine_version",
           "flags"]
"""The columns (and order) of the settings files; the first 12 are what freeze_engine_predictions.py reads
(``kv_precision`` from batch 2026-12-07g on), with ``request_rate``."""


def _load(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        return tomllib.load(f)


def _spec(date: str) -> dict[str, Any]:
    return _load(DATA / f"engine-rows-{date}.toml")


def _rows(date: str) -> list[dict[str, Any]]:
    spec = _spec(date)
    return [dict(zip(spec["columns"], raw, strict=True)) for raw in spec["rows"]]


def _measured(date: str) -> dict[str, Any]:
    return _load(DATA / f"engine-measured-{date}.toml")


@pytest.mark.parametrize("date", BATCHES)
def test_settings_keep_the_columns_and_every_row_has_one_measured_entry(date: str) -> None:
    assert _spec(date)["columns"] == COLUMNS
    ids = [r["id"] for r in _rows(date)]
    assert len(ids) == len(set(ids)) >= MIN_ROWS.get(date, 60)
    measured = [raw[0] for group in _measured(date)["group"] for raw in group["rows"]]
    assert len(measured) == len(set(measured))
    assert set(measured) == set(ids)


@pytest.mark.parametrize("date", BATCHES)
def test_prefix_cache_hit_ratios_name_rows_and_reach_the_frozen_predictions(date: str) -> None:
    """The optional ``[prefix_cache.hit_ratio]`` table (2026-12-07e onward) names rows of its batch with a ratio in
    [0, 1), and the frozen prediction of each row carries the ratio it was predicted with."""
    hits: dict[str, float] = _spec(date).get("prefix_cache", {}).get("hit_ratio", {})
    ids = {r["id"] for r in _rows(date)}
    assert set(hits) <= ids
    assert all(0.0 <= h < 1.0 for h in hits.values())
    frozen = json.loads((DATA / f"engine-predictions-{date}.json").read_text())["rows"]
    for row in frozen:
        assert row.get("prefix_hit_ratio", 0.0) == hits.get(row["id"], 0.0)


@pytest.mark.parametrize("date", BATCHES[BATCHES.index("2026-12-07g"):])
def test_frozen_predictions_ran_the_kv_dtype_the_rows_state(date: str) -> None:
    """From 2026-12-07g on, freeze_engine_predictions.py passes each row's ``kv_precision`` (the KV-cache dtype the
    source ran) as ``--kv-precision``, and the frozen prediction records it."""
    stated = {r["id"]: r["kv_precision"] for r in _rows(date)}
    frozen = json.loads((DATA / f"engine-predictions-{date}.json").read_text())["rows"]
    assert {row["id"]: row["kv_precision"] for row in frozen} == stated


@pytest.mark.parametrize("date", BATCHES)
def test_no_row_id_or_source_of_an_earlier_batch_comes_back(date: str) -> None:
    before = BATCHES[: BATCHES.index(date)]
    rows_files = [*OLDER[0], *(f"engine-rows-{d}.toml" for d in before)]
    measured_files = [*OLDER[1], *(f"engine-measured-{d}.toml" for d in before)]
    earlier_ids = {raw[0] for name in rows_files for raw in _load(DATA / name)["rows"]}
    assert not earlier_ids & {r["id"] for r in _rows(date)}
    earlier_sources = {s for name in measured_files for s in _load(DATA / name).get("sources", {})}
    assert not earlier_sources & set(_measured(date)["sources"])


@pytest.mark.parametrize("date", BATCHES)
def test_measured_groups_use_only_columns_the_loader_reads(date: str) -> None:
    for group in _measured(date)["group"]:
        basis = str(group.get("tpot_basis", "published"))
        assert basis in TPOT_BASES
        assert group["columns"][:1] == ["id"] and "tpot_ms" in group["columns"]
        assert {"ttft_ms", "ttft_median_ms"} & set(group["columns"]), "every row needs a TTFT statistic"
        for raw in group["rows"]:
            fields = _measured_fields(dict(zip(group["columns"], raw, strict=True)), basis)
            assert fields["tpot_s"] > 0
            assert (fields["ttft_s"] or fields.get("ttft_median_s") or 0) > 0


@pytest.mark.parametrize("date", BATCHES)
def test_every_row_names_its_source_and_every_source_its_provenance(date: str) -> None:
    measured = _measured(date)
    sources = measured["sources"]
    for group in measured["group"]:
        src = sources[group["source"]]
        assert src["url"].startswith("https://") and src["engine"]
        assert all(raw[0].startswith(group["source"] + " ") for raw in group["rows"])
    assert len({s["url"] for s in sources.values()}) == len(sources)


ALL_ROWS = [(d, r) for d in BATCHES for r in _rows(d)]


@pytest.mark.parametrize(("date", "row"), ALL_ROWS, ids=[r["id"] for _, r in ALL_ROWS])
def test_row_resolves_in_the_catalog_and_fits(date: str, row: dict[str, Any]) -> None:
    assert get_model(row["model"]).name == row["model"]
    assert get_gpu(row["gpu"]).name == row["gpu"]
    assert row["engine"] in ("vllm", "sglang", "trtllm")
    # ep: expert parallelism as the source ran it (8 for some 2026-12-07j rows); recorded, not passed to the estimate
    assert row["loop"] in ("closed", "open-burst", "open-poisson") and row["ep"] in (1, row["tp"])
    assert row["ignore_eos"] in ("true", "false", "not stated")
    if row["loop"] == "open-poisson":
        assert float(row["request_rate"]) > 0 and row["concurrency"] == row["num_prompts"]
    else:
        assert row["request_rate"] == "inf"
    if row["loop"] == "open-burst":
        assert row["concurrency"] == row["num_prompts"]
    assert 0 < row["length_low"] <= 1 and row["prompt"] > 0 and row["gen"] > 0 and row["num_prompts"] >= 0
    est = estimate(row["model"], row["gpu"], Request(tp=row["tp"], task="serve", concurrency=1, prompt=row["prompt"],
                                                     gen=row["gen"], precision=row["precision"],
                                                     kv_precision=row["kv_precision"], engine="static"),
                   with_scaling=False)
    assert est.fits, f"{row['id']}: does not fit in gpumatch's memory model"


@pytest.mark.parametrize("date", BATCHES)
def test_the_batch_page_is_generated_from_the_frozen_files(date: str) -> None:
    # docs/published-batch-DATE.md is what benchmarks/published_batch.py makes of the committed files (the frozen
    # predictions are read, never recomputed; a refit file, where there is one, is its own section); only its
    # generation date may differ
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from published_batch import render
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    refit = DATA / f"engine-refit-{date}.json"
    page = render(DATA / f"engine-rows-{date}.toml", DATA / f"engine-measured-{date}.toml",
                  DATA / f"engine-predictions-{date}.json", refit if refit.exists() else None)
    committed = (ROOT / "docs" / f"published-batch-{date}.md").read_text()
    stamp = re.compile(r"\(\d{4}-\d\d-\d\d\); do not edit")
    assert stamp.sub("", page) == stamp.sub("", committed)
