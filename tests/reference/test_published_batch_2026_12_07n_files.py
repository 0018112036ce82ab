"""The eighteenth published batch ("2026-12-07n", MoE rows) is well formed before its predictions are frozen.

Reads ``tests/data/published/engine-rows-2026-12-07n.toml`` (settings only) and, for its ids, columns and sources only,
``engine-measured-2026-12-07n.toml``: no assertion message here shows a measured value, so the batch can be checked
without unblinding it. Once its predictions are frozen and its page is generated, the batch joins ``BATCHES`` in
``test_published_batches.py`` and this file can go.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from gpumatch.calibrate.published import TPOT_BASES, _measured_fields
from gpumatch.catalog import get_gpu
from gpumatch.estimate import Request, estimate
from gpumatch.models import get_model

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "published"
DATE = "2026-12-07n"
EARLIER = ("2026-12-06", "2026-12-07", "2026-12-07b", "2026-12-07c", "2026-12-07d", "2026-12-07e", "2026-12-07f",
           "2026-12-07g", "2026-12-07h", "2026-12-07i", "2026-12-07j", "2026-12-07k", "2026-12-07l",
           "2026-12-07m")
OLDER_ROWS = ("engine-rows-2026-12-04.toml", "engine-rows-2026-12-04b.toml", "engine-rows-2026-12-04c.toml")
OLDER_MEASURED = ("engine-serving.toml", "trtllm-serving.toml", "engine-measured-2026-12-04c.toml")
COLUMNS = ["id", "model", "gpu", "tp", "precision", "engine", "concurrency", "prompt", "gen", "num_prompts",
           "length_low", "kv_precision", "ep", "loop", "request_rate", "dataset", "ignore_eos", "engine_version",
           "flags"]
SETTING_KEYS = {"client", "lengths", "engine", "kv_cache", "gpu", "statistic", "warmups", "caveat", "not_taken"}
ID_SHAPE = re.compile(r"^(?P<source>\S+) (?P<engine>\S+) (?P<model>\S+) (?P<gpu>.+) tp(?P<tp>\d+) (?P<precision>\S+) "
                      r"(?P=engine) (?:c(?P<c>\d+)|burst(?P<burst>\d+)) n(?P<n>\d+) "
                      r"random (?P<prompt>\d+)/(?P<gen>\d+) (?P<tail>ep\d+|baseline)$")


def _load(name: str) -> dict[str, Any]:
    with (DATA / name).open("rb") as f:
        return tomllib.load(f)


def _repo(url: str) -> str:
    """The source part of a GitHub address: ``https://github.com/owner/name`` for files, the thread itself for an
    issue or pull request (``.../pull/N``: one thread of a large repository is one source), the address otherwise."""
    if not url.startswith("https://github.com/"):
        return url
    parts = url.split("/")
    return "/".join(parts[:7]) if len(parts) > 6 and parts[5] in ("pull", "issues") else "/".join(parts[:5])


SPEC = _load(f"engine-rows-{DATE}.toml")
MEASURED = _load(f"engine-measured-{DATE}.toml")
ROWS = [dict(zip(SPEC["columns"], raw, strict=True)) for raw in SPEC["rows"]]


def test_settings_keep_the_columns_and_each_source_states_its_client_settings() -> None:
    assert SPEC["columns"] == COLUMNS
    sources = {r["id"].split(" ", 1)[0] for r in ROWS}
    assert sources == set(SPEC["settings"]) == set(MEASURED["sources"])
    for name, table in SPEC["settings"].items():
        missing = SETTING_KEYS - set(table)
        assert not missing, f"[settings.{name}] lacks {sorted(missing)}"


def test_every_row_has_exactly_one_measured_entry() -> None:
    ids = [r["id"] for r in ROWS]
    assert len(ids) == len(set(ids)) >= 8
    measured = [raw[0] for group in MEASURED["group"] for raw in group["rows"]]
    assert len(measured) == len(set(measured)), "a row is measured twice"
    assert set(measured) == set(ids), "settings and measured ids differ"


def test_measured_groups_use_only_columns_the_loader_reads() -> None:
    for group in MEASURED["group"]:
        basis = str(group.get("tpot_basis", "published"))
        assert basis in TPOT_BASES
        assert group["columns"][:1] == ["id"] and "tpot_ms" in group["columns"]
        assert {"ttft_ms", "ttft_median_ms"} & set(group["columns"]), "every row needs a TTFT statistic"
        assert all(raw[0].startswith(group["source"] + " ") for raw in group["rows"])
        for raw in group["rows"]:
            fields = _measured_fields(dict(zip(group["columns"], raw, strict=True)), basis)
            assert fields["tpot_s"] > 0, raw[0]
            assert (fields["ttft_s"] or fields.get("ttft_median_s") or 0) > 0, raw[0]


def test_every_source_names_its_provenance() -> None:
    for name, src in MEASURED["sources"].items():
        assert src["url"].startswith("https://github.com/"), name
        assert src["commit"] and src["engine"] and len(src["says"]) > 200 and src["notes"], name
    assert len({s["url"] for s in MEASURED["sources"].values()}) == len(MEASURED["sources"])


def test_no_row_id_or_source_of_an_earlier_batch_comes_back() -> None:
    rows_files = [*OLDER_ROWS, *(f"engine-rows-{d}.toml" for d in EARLIER)]
    measured_files = [*OLDER_MEASURED, *(f"engine-measured-{d}.toml" for d in EARLIER)]
    earlier_ids = {raw[0] for name in rows_files for raw in _load(name)["rows"]}
    assert not earlier_ids & {r["id"] for r in ROWS}
    earlier = [_load(name).get("sources", {}) for name in measured_files]
    earlier_names = {s for sources in earlier for s in sources}
    earlier_urls = {_repo(str(src.get("url", ""))) for sources in earlier for src in sources.values()}
    assert not earlier_names & set(MEASURED["sources"])
    ours = {_repo(src["url"]) for src in MEASURED["sources"].values()}
    assert not earlier_urls & ours, "a repository of an earlier batch comes back"


def test_prefix_cache_hits_name_rows_of_the_batch_with_a_share_below_one() -> None:
    hits = SPEC.get("prefix_cache", {}).get("hit_ratio", {})
    assert set(hits) <= {r["id"] for r in ROWS}
    assert all(0 < h < 1 for h in hits.values())


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_row_resolves_in_the_catalog_and_fits(row: dict[str, Any]) -> None:
    assert get_model(row["model"]).name == row["model"]
    assert get_gpu(row["gpu"]).name == row["gpu"]
    assert row["engine"] in ("vllm", "sglang", "trtllm")
    assert row["loop"] in ("closed", "open-burst", "open-poisson") and row["ep"] in (1, row["tp"])
    if row["loop"] == "open-poisson":
        assert float(row["request_rate"]) > 0 and row["concurrency"] == row["num_prompts"]
    else:
        assert row["request_rate"] == "inf"
    assert row["ignore_eos"] in ("true", "false", "not stated")
    assert row["kv_precision"] in ("bf16", "fp8")
    assert 0 < row["length_low"] <= 1 and row["prompt"] > 0 and row["gen"] > 0 and row["num_prompts"] >= 0
    assert row["num_prompts"] == 0 or row["num_prompts"] >= row["concurrency"]
    est = estimate(row["model"], row["gpu"], Request(tp=row["tp"], task="serve", concurrency=1, prompt=row["prompt"],
                                                     gen=row["gen"], precision=row["precision"],
                                                     kv_precision=row["kv_precision"], engine="static"),
                   with_scaling=False)
    assert est.fits, f"{row['id']}: does not fit in gpumatch's memory model"


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_rows_are_mixture_of_experts_rows_whose_id_spells_their_settings(row: dict[str, Any]) -> None:
    """This batch's domain: MoE presets. The id spells source, engine, model, card, TP, precision, the client's
    concurrency (``c<C>``) or burst size (``burst<N>``), prompts, nominal lengths and the expert-parallel degree (or
    ``baseline``), so a row whose columns drift from its id is caught here."""
    assert get_model(row["model"]).is_moe, row["id"]
    shape = ID_SHAPE.match(row["id"])
    assert shape is not None, row["id"]
    assert (shape["source"], shape["engine"], shape["model"], shape["gpu"], shape["precision"]) == (
        row["id"].split(" ", 1)[0], row["engine"], row["model"], row["gpu"], row["precision"])
    assert (int(shape["tp"]), int(shape["n"]), int(shape["prompt"]), int(shape["gen"])) == (
        row["tp"], row["num_prompts"], row["prompt"], row["gen"])
    if shape["burst"] is not None:
        assert row["loop"] == "open-burst" and row["concurrency"] == row["num_prompts"] == int(shape["burst"])
    else:
        assert row["loop"] == "closed" and row["concurrency"] == int(shape["c"]) < row["num_prompts"], row["id"]
    assert row["ep"] == (int(shape["tail"][2:]) if shape["tail"] != "baseline" else 1), row["id"]


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_length_spread_matches_the_client(row: dict[str, Any]) -> None:
    """vLLM's random range ratio 0.0 gives fixed lengths (length_low 1); SGLang's gives lengths uniform in [1, L],
    entered as length_low = 1 / L of the prompt, so both ends reach one token."""
    if row["engine"] == "sglang" and row["id"].startswith("moebench "):
        assert row["length_low"] == pytest.approx(1 / row["prompt"], rel=1e-3), row["id"]
    else:
        assert row["length_low"] == 1.0, row["id"]
