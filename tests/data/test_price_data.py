"""Data tests over the built-in price quotes (catalog/data/prices/*.toml).

Per file: it validates; it uses the current kind spellings; every quote names a source in the file, quotes
its words and, when uncertain, says why. The figure must be readable in the quoted words (within 0.5 %), or
the note must say how it was derived (per-GPU share of an instance, x 3600 of a per-second rate, midpoint of a
range, a rate taken from an announced date). Values sit in plausible ranges per kind. Finally the cards
without any on-demand quote are pinned, so a new card without one, or a card that gains one, is noticed.
"""

from __future__ import annotations

import functools
import re
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from gpumatch.catalog import load_catalog
from gpumatch.catalog.prices import select_price
from gpumatch.catalog.schema import HOURLY_KINDS, LEGACY_PRICE_KINDS, PriceFile

DATA_DIR = Path(str(resources.files("gpumatch.catalog") / "data" / "prices"))
FILES = sorted(DATA_DIR.glob("*.toml"))
IDS = [p.stem for p in FILES]
_NUMBER = re.compile(r"[0-9][0-9,]*(?:\.[0-9]+)?")
DERIVED = ("midpoint", "x 3600", "/ 8", "/ gpus", "taken as", "per-gpu", "/ 8 gpus")

NO_ON_DEMAND_QUOTE = {
    # Searched for (2026-12): no public on-demand rate per GPU-hour found in a stored source.
    "A100 PCIe 40GB", "Gaudi 2", "Gaudi 3", "H20 96GB", "H200 NVL 141GB", "Instinct MI250X", "L20",
    "RTX 6000 Ada Generation", "RTX PRO 6000 Blackwell Workstation Edition",
}


@functools.cache
def raw(path: Path) -> dict[str, object]:
    return tomllib.loads(path.read_text(encoding="utf-8"))


@functools.cache
def load(path: Path) -> PriceFile:
    return PriceFile.model_validate(raw(path))


def test_price_files_exist() -> None:
    assert len(FILES) >= 20, f"expected the price files under {DATA_DIR}"


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_file_validates_with_current_kinds(path: Path) -> None:
    load(path)
    quotes = raw(path)["quotes"]
    assert isinstance(quotes, list)
    legacy = [q["kind"] for q in quotes if q["kind"] in LEGACY_PRICE_KINDS and q["kind"] != "street"]
    assert not legacy, f"{path.name}: built-in files use the current kind names, not {legacy}"


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_every_quote_is_sourced_and_explained(path: Path) -> None:
    f = load(path)
    for i, q in enumerate(f.quotes):
        assert q.source in f.sources, f"{path.name}: quotes[{i}] cites unknown source {q.source!r}"
        assert q.says.strip(), f"{path.name}: quotes[{i}] has no quote of the source's words"
        if q.uncertain:
            assert q.note.strip(), f"{path.name}: quotes[{i}] is uncertain but says not why (note)"


def _readable(amount: float, says: str) -> bool:
    numbers = [float(n.replace(",", "")) for n in _NUMBER.findall(says)]
    # "$5.5k", "$8–15K", "110,000 yuan" and the like: thousands written with k
    numbers += [n * 1000 for n in numbers]
    return any(abs(n - amount) <= 0.005 * amount for n in numbers)


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_figure_is_in_the_words_or_its_derivation_is_noted(path: Path) -> None:
    for i, q in enumerate(load(path).quotes):
        amount = q.usd_per_gpu_hour if q.usd_per_gpu_hour is not None else q.usd
        assert amount is not None
        if _readable(amount, q.says):
            continue
        assert any(word in q.note.lower() for word in DERIVED), (
            f"{path.name}: quotes[{i}] {amount} is not in its words {q.says!r} and the note does not say how it "
            "was derived")


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_values_in_plausible_ranges(path: Path) -> None:
    for i, q in enumerate(load(path).quotes):
        if q.kind in HOURLY_KINDS:
            assert q.usd_per_gpu_hour is not None and 0.03 <= q.usd_per_gpu_hour <= 20, \
                f"{path.name}: quotes[{i}] ${q.usd_per_gpu_hour}/GPU-h outside $0.03-20"
        else:
            assert q.usd is not None and 500 <= q.usd <= 100_000, f"{path.name}: quotes[{i}] ${q.usd} outside $500-100k"


def test_cards_without_an_on_demand_quote_are_the_known_ones() -> None:
    unpriced = {g.name for g in load_catalog().gpus if not select_price(g, "on-demand").priced}
    assert unpriced == NO_ON_DEMAND_QUOTE


def test_hyperscaler_and_neocloud_spread_is_visible_for_the_h100() -> None:
    """The H100 SXM has quotes from hyperscalers and neoclouds: the median is inside the spread and the spread
    spans the factor of ~3 that the sources report (RunPod $3.99 vs Azure $12.29, 2026-11-09)."""
    choice = select_price(load_catalog().get("H100 SXM"), "on-demand")
    assert choice.providers >= 5
    assert choice.low is not None and choice.high is not None and choice.value is not None
    assert choice.low < choice.value < choice.high
    assert choice.high / choice.low > 3
