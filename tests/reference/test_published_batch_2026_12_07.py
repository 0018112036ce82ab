"""The fifth batch of published serving rows (collected 2026-12-07) is well formed, before any prediction is frozen.

Data: tests/data/published/engine-rows-2026-12-07.toml (settings only) and engine-measured-2026-12-07.toml (the
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
ROWS_FILE = DATA / "engine-rows-2026-12-07.toml"
MEASURED_FILE = DATA / "engine-measured-2026-12-07.toml"
EARLIER_ROWS = ("engine-rows-2026-12-04.toml", "engine-rows-2026-12-04b.toml", "engine-rows-2026-12-04c.toml",
                "engine-rows-2026-12-06.toml")
EARLIER_MEASURED = ("engine-serving.toml", "trtllm-serving.toml", "engine-measured-2026-12-04c.toml",
                    "engine-measured-2026-12-06.toml")
COLUMNS_0612 = ["id", "model", "gpu", "tp", "precision", "engine", "concurrency", "prompt", "gen", "num_prompts",
                "length_low", "kv_precision", "ep", "loop", "request_rate", "dataset", "ignore_eos", "engine_version",
                "flags"]
"""The columns (and order) of engine-rows-2026-12-06.toml; the first 11 are what freeze_engine_predictions.py reads."""


def _load(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        return tomllib.load(f)


SPEC = _load(ROWS_FILE)
ROWS = [dict(zip(SPEC["columns"], raw, strict=True)) for raw in SPEC["rows"]]
MEASURED = _load(MEASURED_FILE)


def _measured_ids() -> list[str]:
    return [raw[0] for group in MEASURED["group"] for raw in group["rows"]]


def test_settings_keep_the_columns_of_the_previous_batch_and_every_row_has_one_measured_entry() -> None:
    assert SPEC["columns"] == COLUMNS_0612
    ids = [r["id"] for r in ROWS]
    assert len(ids) == len(set(ids)) >= 60
    measured = _measured_ids()
    assert len(measured) == len(set(measured))
    assert set(measured) == set(ids)


def test_no_row_id_or_source_of_an_earlier_batch_comes_back() -> None:
    earlier_ids = {raw[0] for name in EARLIER_ROWS for raw in _load(DATA / name)["rows"]}
    assert not earlier_ids & {r["id"] for r in ROWS}
    earlier_sources = {s for name in EARLIER_MEASURED for s in _load(DATA / name).get("sources", {})}
    assert not earlier_sources & set(MEASURED["sources"])


def test_measured_groups_use_only_columns_the_loader_reads() -> None:
    for group in MEASURED["group"]:
        basis = str(group.get("tpot_basis", "published"))
        assert basis in TPOT_BASES
        assert group["columns"][:1] == ["id"] and "tpot_ms" in group["columns"]
        assert {"ttft_ms", "ttft_median_ms"} & set(group["columns"]), "every row needs a TTFT statistic"
        for raw in group["rows"]:
            fields = _measured_fields(dict(zip(group["columns"], raw, strict=True)), basis)
            assert fields["tpot_s"] > 0
            assert (fields["ttft_s"] or fields.get("ttft_median_s") or 0) > 0


def test_every_row_names_its_source_and_every_source_its_provenance() -> None:
    sources = MEASURED["sources"]
    for group in MEASURED["group"]:
        src = sources[group["source"]]
        assert src["url"].startswith("https://") and src["says"] and src["notes"] and src["engine"]
        assert all(raw[0].startswith(group["source"] + " ") for raw in group["rows"])
        assert group["source"] in SPEC["settings"]
    assert len({s["url"] for s in sources.values()}) == len(sources)


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_row_resolves_in_the_catalog_and_fits(row: dict[str, Any]) -> None:
    assert get_model(row["model"]).name == row["model"]
    assert get_gpu(row["gpu"]).name == row["gpu"]
    assert row["engine"] in ("vllm", "sglang", "trtllm")
    assert row["loop"] in ("closed", "open-burst", "open-poisson") and row["ep"] == 1
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
