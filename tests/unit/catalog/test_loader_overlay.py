"""User overlay: $GPUMATCH_HOME/catalog/gpus adds or replaces SKUs, $GPUMATCH_HOME/catalog/prices adds
quotes, and every file is validated like the built-in ones.

Hostile and malformed files must each give ONE ``DataFileError`` whose single-line message names the
file and the offending field (or line), never a traceback or a silent skip. ``GPUMATCH_HOME`` is a
fresh temporary folder per test (autouse fixture in tests/conftest.py).
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from gpumatch.catalog import load_catalog
from gpumatch.errors import DataFileError
from gpumatch.settings import load_settings

SKU = """\
name = "{name}"
aliases = [{aliases}]
vendor = "nvidia"
segment = "workstation"
form_factor = "PCIe card"
architecture = "Testwell"
compute_capability = "9.9"
launch_year = 2026
sparsity_in_headline = false
ecc = true
mig_instances = 0
cooling = "active"

[sources.sheet]
url = "https://example.com/test-card.pdf"
title = "Test card datasheet"
retrieved = 2026-12-01

[memory]
type = "GDDR7"
capacity_bytes = {{ value = {memory}, source = "sheet", says = "64 GB" }}
bandwidth_bytes_per_s = {{ value = 2e12, source = "sheet", says = "2 TB/s" }}

[peak_flops_per_s]
bf16 = {{ value = 400e12, source = "sheet", says = "BF16 400 TFLOPS dense" }}

[tdp_w]
value = {tdp}
source = "{tdp_source}"
says = "450 W"

[interconnect]
scale_up = "none"
scale_up_bytes_per_s = {{ value = 0, source = "sheet", says = "no NVLink" }}
pcie_gen = 5
pcie_lanes = {lanes}
pcie_p2p = true
"""


def sku(
    name: str = "Test Card 9000",
    aliases: str = '"tc9000"',
    memory: str = "64e9",
    tdp: str = "450",
    tdp_source: str = "sheet",
    lanes: str = "16",
) -> str:
    return SKU.format(name=name, aliases=aliases, memory=memory, tdp=tdp, tdp_source=tdp_source, lanes=lanes)


PRICES = """\
[sources.quote]
url = "https://example.com/prices"
title = "Example cloud price list"
retrieved = 2026-12-01

[[quotes]]
gpu = "{gpu}"
kind = "{kind}"
{amount}
date = {date}
source = "{source}"
says = "{gpu} at the listed rate"
provider = "ExampleCloud"
"""


def prices(
    gpu: str = "rtx4090",
    kind: str = "on-demand",
    amount: str = "usd_per_gpu_hour = 0.42",
    date: str = "2030-01-01",
    source: str = "quote",
) -> str:
    return PRICES.format(gpu=gpu, kind=kind, amount=amount, date=date, source=source)


@pytest.fixture
def gpu_dir() -> Path:
    folder = load_settings().gpu_overlay_dir
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def price_dir() -> Path:
    folder = load_settings().price_overlay_dir
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def builtin_count() -> int:
    return len(load_catalog().gpus)


# --- adding and overriding ------------------------------------------------------------------------


def test_no_overlay_folder_is_fine() -> None:
    assert not load_settings().gpu_overlay_dir.exists()
    assert builtin_count() > 0


def test_overlay_adds_a_sku(gpu_dir: Path) -> None:
    before = builtin_count()
    (gpu_dir / "test-card.toml").write_text(sku(), encoding="utf-8")
    catalog = load_catalog()
    assert len(catalog.gpus) == before + 1
    card = catalog.get("tc9000")
    assert card.name == "Test Card 9000"
    assert card.origin == "overlay"
    assert card.memory_bytes == 64_000_000_000
    assert card.peak("bf16") == 400e12
    assert card.peak("fp8") is None


def test_overlay_overrides_a_builtin_by_canonical_name(gpu_dir: Path) -> None:
    original = load_catalog().get("H100 SXM5 80GB")
    before = builtin_count()
    # same canonical name in another spelling; the override replaces the whole entry, aliases included
    (gpu_dir / "my-h100.toml").write_text(sku(name="h100 sxm5-80GB", aliases='"my-h100"', memory="81e9"), "utf-8")
    catalog = load_catalog()
    assert len(catalog.gpus) == before
    mine = catalog.get("my-h100")
    assert mine.origin == "overlay"
    assert mine.memory_bytes == 81_000_000_000 != original.memory_bytes
    assert catalog.get("h100 sxm5 80gb") is mine
    assert [g.name for g in catalog.gpus].count(mine.name) == 1


def test_catalog_sees_an_overlay_file_added_after_first_load(gpu_dir: Path) -> None:
    assert not any(g.origin == "overlay" for g in load_catalog().gpus)
    (gpu_dir / "late.toml").write_text(sku(), encoding="utf-8")
    assert load_catalog().get("tc9000").origin == "overlay"


def test_file_with_utf8_bom_loads(gpu_dir: Path) -> None:
    (gpu_dir / "bom.toml").write_bytes(b"\xef\xbb\xbf" + sku().encode("utf-8"))
    assert load_catalog().get("Test Card 9000").origin == "overlay"


def test_non_toml_files_are_ignored(gpu_dir: Path) -> None:
    (gpu_dir / "README.md").write_text("not a SKU", encoding="utf-8")
    (gpu_dir / "notes.toml.bak").write_bytes(b"\x00\xff")
    assert builtin_count() == len(load_catalog().gpus)


# --- price overlay --------------------------------------------------------------------------------


def test_price_overlay_appends_a_quote(price_dir: Path) -> None:
    builtin_quotes = load_catalog().get("rtx4090").prices
    (price_dir / "mine.toml").write_text(prices(), encoding="utf-8")
    card = load_catalog().get("GeForce RTX 4090")
    assert card.prices[: len(builtin_quotes)] == builtin_quotes
    assert len(card.prices) == len(builtin_quotes) + 1
    added = card.prices[-1]
    assert added.usd_per_gpu_hour == 0.42
    assert added.provider == "ExampleCloud"
    assert added.source_url == "https://example.com/prices"
    assert added.date == dt.date(2030, 1, 1)
    assert card.latest_price("on-demand") == added


@pytest.mark.parametrize(("old", "new"), [("cloud_on_demand", "on-demand"), ("launch_list", "list"),
                                          ("street", "street")])
def test_price_overlay_reads_the_old_kind_spellings(price_dir: Path, old: str, new: str) -> None:
    amount = "usd_per_gpu_hour = 0.42" if new == "on-demand" else "usd = 1500"
    (price_dir / "old.toml").write_text(prices(kind=old, amount=amount), encoding="utf-8")
    assert load_catalog().get("rtx4090").prices[-1].kind == new


def test_old_cloud_reserved_spelling_needs_a_term(price_dir: Path) -> None:
    (price_dir / "old.toml").write_text(prices(kind="cloud_reserved"), encoding="utf-8")
    with pytest.raises(DataFileError, match="term_months"):
        load_catalog()
    (price_dir / "old.toml").write_text(prices(kind="cloud_reserved") + "term_months = 12\n", encoding="utf-8")
    added = load_catalog().get("rtx4090").prices[-1]
    assert (added.kind, added.term_months) == ("reserved", 12)


def test_price_overlay_can_price_an_overlay_sku(gpu_dir: Path, price_dir: Path) -> None:
    (gpu_dir / "test-card.toml").write_text(sku(), encoding="utf-8")
    (price_dir / "tc.toml").write_text(prices(gpu="Test Card 9000", kind="street", amount="usd = 2500"), "utf-8")
    card = load_catalog().get("tc9000")
    assert [(p.kind, p.usd) for p in card.prices] == [("street", 2500)]


# --- malformed and hostile GPU files ---------------------------------------------------------------

MALFORMED = [
    # (id, file text or bytes, words the one-line message must contain)
    ("invalid-toml", 'name = "unterminated\n', ["invalid TOML", "line 1"]),
    ("unknown-field", "turbo_mode = true\n" + sku(), ["field 'turbo_mode'", "Extra inputs"]),
    ("unknown-field-in-table", sku() + "turbo = true\n", ["field 'interconnect.turbo'"]),
    ("unknown-nested-field", sku().replace("[memory]\n", "[memory]\nspeed = 1\n"), ["field 'memory.speed'"]),
    ("negative-value", sku(tdp="-5"), ["field 'tdp_w.value'", "greater than or equal to 0"]),
    ("infinite-value", sku(memory="inf"), ["field 'memory.capacity_bytes.value'", "finite"]),
    ("nan-value", sku(memory="nan"), ["field 'memory.capacity_bytes.value'"]),
    ("missing-source-key", sku().replace('source = "sheet"\nsays = "450 W"', 'says = "450 W"'), ["'tdp_w.source'"]),
    ("unresolved-source", sku(tdp_source="nope"), ["tdp_w", "'nope'", "[sources]"]),
    ("wrong-type-int", sku(lanes='"sixteen"'), ["field 'interconnect.pcie_lanes'"]),
    ("wrong-type-table", sku().replace('type = "GDDR7"', 'type = ["GDDR7"]'), ["field 'memory.type'"]),
    ("wrong-enum", sku().replace('vendor = "nvidia"', 'vendor = "nvidea"'), ["field 'vendor'"]),
    ("missing-required", sku().replace('cooling = "active"\n', ""), ["field 'cooling'", "required"]),
    ("nvidia-without-cc", sku().replace('compute_capability = "9.9"\n', ""), ["compute_capability"]),
    ("binary-garbage", bytes(range(256)) * 8, ["not UTF-8"]),
    ("nul-bytes", b"name = \x00\x00\x00\n", ["invalid TOML"]),
    ("two-megabytes", sku() + "# " + "x" * 2_000_000 + "\n", ["1 MB"]),
    ("empty-file", "", ["field 'name'", "required"]),
    ("wrong-schema-version", "schema_version = 2\n" + sku(), ["field 'schema_version'"]),
]


@pytest.mark.parametrize(("text", "words"), [(t, w) for _, t, w in MALFORMED], ids=[i for i, _, _ in MALFORMED])
def test_malformed_gpu_file_gives_one_line_naming_file_and_field(
    gpu_dir: Path, text: str | bytes, words: list[str]
) -> None:
    path = gpu_dir / "broken.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(DataFileError) as info:
        load_catalog()
    line = str(info.value)
    assert "\n" not in line
    assert str(path) in line
    for word in words:
        assert word in line, f"{word!r} missing from: {line}"
    assert info.value.hint  # says what to do


def test_error_reports_how_many_more_problems(gpu_dir: Path) -> None:
    (gpu_dir / "two.toml").write_text(sku(tdp="-1", lanes="99"), encoding="utf-8")
    with pytest.raises(DataFileError, match=r"and 1 more problem\)"):
        load_catalog()


def test_directory_named_toml_is_an_error(gpu_dir: Path) -> None:
    (gpu_dir / "folder.toml").mkdir()
    with pytest.raises(DataFileError, match=r"folder\.toml: not a regular file"):
        load_catalog()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")
def test_fifo_is_rejected_without_blocking(gpu_dir: Path) -> None:
    os.mkfifo(gpu_dir / "pipe.toml")
    with pytest.raises(DataFileError, match=r"pipe\.toml: not a regular file"):
        load_catalog()


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_symlink_to_endless_device_is_rejected(gpu_dir: Path) -> None:
    (gpu_dir / "zero.toml").symlink_to("/dev/zero")
    with pytest.raises(DataFileError, match=r"zero\.toml: not a regular file"):
        load_catalog()


def test_dangling_symlink_is_an_error_not_a_crash(gpu_dir: Path) -> None:
    (gpu_dir / "gone.toml").symlink_to(gpu_dir / "does-not-exist.toml")
    with pytest.raises(DataFileError, match=r"gone\.toml: cannot read"):
        load_catalog()


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can read anything")
def test_unreadable_file_is_an_error(gpu_dir: Path) -> None:
    path = gpu_dir / "secret.toml"
    path.write_text(sku(), encoding="utf-8")
    path.chmod(0)
    try:
        with pytest.raises(DataFileError, match=r"secret\.toml: cannot read"):
            load_catalog()
    finally:
        path.chmod(0o600)


def test_two_overlay_files_with_the_same_name_are_an_error(gpu_dir: Path) -> None:
    (gpu_dir / "a.toml").write_text(sku(), encoding="utf-8")
    (gpu_dir / "b.toml").write_text(sku(name="TEST card-9000", aliases='"other"'), encoding="utf-8")
    with pytest.raises(DataFileError) as info:
        load_catalog()
    assert "b.toml" in info.value.message and "a.toml" in info.value.message


def test_a_broken_file_is_not_skipped_after_a_good_load(gpu_dir: Path) -> None:
    (gpu_dir / "good.toml").write_text(sku(), encoding="utf-8")
    load_catalog()
    (gpu_dir / "bad.toml").write_text("[[[", encoding="utf-8")
    with pytest.raises(DataFileError, match=r"bad\.toml"):
        load_catalog()


# --- malformed price files ------------------------------------------------------------------------

BAD_PRICES = [
    ("unknown-gpu", prices(gpu="Voodoo5 6000"), ["quotes[0].gpu", "Voodoo5 6000"]),
    ("ambiguous-gpu", prices(gpu="h100"), ["quotes[0].gpu", "ambiguous"]),
    ("unresolved-source", prices(source="elsewhere"), ["quotes[0].source", "'elsewhere'"]),
    ("cloud-without-hourly", prices(amount="usd = 100"), ["field 'quotes.0'", "usd_per_gpu_hour"]),
    ("purchase-without-usd", prices(kind="list"), ["field 'quotes.0'", "usd (per card)"]),
    ("hourly-with-usd", prices(amount="usd_per_gpu_hour = 1.0\nusd = 9000"), ["field 'quotes.0'", "not usd"]),
    ("term-on-spot", prices(kind="spot") + "term_months = 12\n", ["field 'quotes.0'", "term_months"]),
    ("absurd-hourly", prices(amount="usd_per_gpu_hour = 1e9"), ["field 'quotes.0.usd_per_gpu_hour'"]),
    ("negative-price", prices(amount="usd_per_gpu_hour = -1.0"), ["field 'quotes.0.usd_per_gpu_hour'"]),
    ("infinite-price", prices(amount="usd_per_gpu_hour = inf"), ["quotes.0.usd_per_gpu_hour", "finite"]),
    ("bad-kind", prices(kind="black_market"), ["field 'quotes.0.kind'", "'on-demand'", "'street'"]),
    ("bad-date", prices(date='"yesterday"'), ["field 'quotes.0.date'"]),
    ("unknown-field", prices() + "discount = 0.5\n", ["field 'quotes.0.discount'"]),
    ("no-sources", prices().split("[[quotes]]")[1].join(["[[quotes]]", ""]), ["field 'sources'", "required"]),
]


@pytest.mark.parametrize(("text", "words"), [(t, w) for _, t, w in BAD_PRICES], ids=[i for i, _, _ in BAD_PRICES])
def test_malformed_price_file_gives_one_line_naming_file_and_field(
    price_dir: Path, text: str, words: list[str]
) -> None:
    path = price_dir / "prices.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataFileError) as info:
        load_catalog()
    line = str(info.value)
    assert "\n" not in line
    assert str(path) in line
    for word in words:
        assert word in line, f"{word!r} missing from: {line}"


# --- physically impossible figures and alias collisions (QA 2026-12-03) ----------------------------

PHYSICAL = [
    ("zero-memory", sku(memory="0"), "field 'memory.capacity_bytes.value'", "greater than 0"),
    ("zero-tdp", sku(tdp="0"), "field 'tdp_w.value'", "greater than 0"),
    (
        "zero-bandwidth",
        sku().replace("value = 2e12", "value = 0"),
        "field 'memory.bandwidth_bytes_per_s.value'",
        "greater than 0",
    ),
    (
        "absurd-bf16",
        sku().replace("value = 400e12", "value = 1e30"),
        "field 'peak_flops_per_s.bf16.value'",
        "implausibly",
    ),
    ("absurd-memory", sku(memory="1e20"), "field 'memory.capacity_bytes.value'", "implausibly"),
    ("absurd-tdp", sku(tdp="1e9"), "field 'tdp_w.value'", "implausibly"),
]


@pytest.mark.parametrize(("text", "field", "why"), [p[1:] for p in PHYSICAL], ids=[p[0] for p in PHYSICAL])
def test_physically_impossible_figures_are_rejected(gpu_dir: Path, text: str, field: str, why: str) -> None:
    path = gpu_dir / "mygpu.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataFileError) as info:
        load_catalog()
    line = str(info.value)
    assert str(path) in line and field in line and why in line and "\n" not in line


def test_zero_memory_overlay_gives_exit_2_in_the_cli(gpu_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpumatch.cli.app import main

    (gpu_dir / "mygpu.toml").write_text(sku(name="MyGPU", aliases="", memory="0"), encoding="utf-8")
    assert main(["gpus", "show", "MyGPU"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert "mygpu.toml" in err and "memory.capacity_bytes" in err


@pytest.mark.parametrize("alias", ['"H100 SXM"', '"h100-sxm5-80gb"', '"tc9000", "rtx4090"'])
def test_alias_colliding_with_a_builtin_is_rejected(gpu_dir: Path, alias: str) -> None:
    path = gpu_dir / "clash.toml"
    path.write_text(sku(aliases=alias), encoding="utf-8")
    with pytest.raises(DataFileError, match=r"already used by GPU") as info:
        load_catalog()
    assert str(path) in str(info.value)


def test_overlay_name_equal_to_a_builtin_alias_is_rejected(gpu_dir: Path) -> None:
    (gpu_dir / "clash.toml").write_text(sku(name="H100 SXM", aliases=""), encoding="utf-8")
    with pytest.raises(DataFileError, match=r"'H100 SXM' is already used by GPU"):
        load_catalog()


def test_override_by_name_may_keep_the_builtin_aliases(gpu_dir: Path) -> None:
    original = load_catalog().get("H100 SXM5 80GB")
    aliases = ", ".join(f'"{a}"' for a in original.aliases)
    (gpu_dir / "mine.toml").write_text(sku(name=original.name, aliases=aliases, memory="81e9"), "utf-8")
    assert load_catalog().get("H100 SXM").memory_bytes == 81_000_000_000


def test_two_overlay_files_sharing_an_alias_are_rejected(gpu_dir: Path) -> None:
    (gpu_dir / "a.toml").write_text(sku(name="Card A", aliases='"same"'), encoding="utf-8")
    (gpu_dir / "b.toml").write_text(sku(name="Card B", aliases='"same"'), encoding="utf-8")
    with pytest.raises(DataFileError, match=r"'same' is already used by GPU"):
        load_catalog()
