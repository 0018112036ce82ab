"""GPU name lookup: canonical names, aliases, case/punctuation, ambiguity and typos.

Two layers are tested: ``gpumatch.names`` on small synthetic indexes (so each rule is pinned
independently of the data files), and ``load_catalog().get`` on the shipped catalog (so the names a
user will actually type resolve where they should).
"""

from __future__ import annotations

import pytest

from gpumatch.catalog import load_catalog
from gpumatch.errors import AmbiguousNameError, GpumatchError, UnknownNameError
from gpumatch.names import build_index, close_matches, normalize, resolve

# --- names.resolve on synthetic indexes -----------------------------------------------------------


def _index(*entries: tuple[str, list[str]]) -> dict[str, list[tuple[str, str]]]:
    return build_index((name, aliases, name) for name, aliases in entries)


SMALL = _index(
    ("A10", []),
    ("A100 SXM4 80GB", ["a100-sxm"]),
    ("A100 PCIe 80GB", ["a100-pcie"]),
    ("GeForce RTX 4090", ["rtx4090", "NVIDIA GeForce RTX 4090"]),
)


def test_normalize_drops_case_punctuation_and_vendor_words() -> None:
    assert normalize("NVIDIA H100-SXM5 80GB") == "h100sxm580gb"
    assert normalize("  AMD Instinct MI300X ") == "instinctmi300x"
    assert normalize("Intel Gaudi_3") == "gaudi3"
    assert normalize("NVIDIA_H100_80GB_HBM3") == "h10080gbhbm3"  # "_" separates words too
    # vendor words only as whole words: letters inside a longer word stay
    assert normalize("Xamd9") == "xamd9"
    assert normalize("INTELLECT-1") == "intellect1"


@pytest.mark.parametrize("query", ["GeForce RTX 4090", "geforce rtx 4090", "GEFORCE-RTX_4090", "rtx4090", "RTX 4090"])
def test_resolve_is_case_and_punctuation_insensitive(query: str) -> None:
    assert resolve(query, SMALL, "GPU", "list") == "GeForce RTX 4090"


def test_exact_name_beats_substring_match() -> None:
    # "a10" is contained in both A100 names, but it is A10's own name
    assert resolve("A10", SMALL, "GPU", "list") == "A10"


def test_unique_substring_resolves() -> None:
    assert resolve("pcie", SMALL, "GPU", "list") == "A100 PCIe 80GB"


def test_substring_of_several_is_ambiguous_and_lists_them() -> None:
    with pytest.raises(AmbiguousNameError) as info:
        resolve("a100", SMALL, "GPU", "gpumatch gpus list")
    assert "A100 PCIe 80GB" in info.value.message
    assert "A100 SXM4 80GB" in info.value.message
    assert "A10," not in info.value.message  # A10 does not contain "a100"
    assert "A100 PCIe 80GB" in info.value.hint


def test_alias_shared_by_two_entries_is_ambiguous() -> None:
    index = _index(("Card One", ["twin"]), ("Card Two", ["twin"]))
    with pytest.raises(AmbiguousNameError) as info:
        resolve("twin", index, "GPU", "list")
    assert "Card One" in info.value.message and "Card Two" in info.value.message


def test_unknown_name_suggests_close_matches() -> None:
    with pytest.raises(UnknownNameError) as info:
        resolve("rtx 4900", SMALL, "GPU", "gpumatch gpus list")
    assert not isinstance(info.value, AmbiguousNameError)
    assert "GeForce RTX 4090" in info.value.hint


def test_short_typo_still_finds_long_names() -> None:
    assert "A100 SXM4 80GB" in close_matches(normalize("a1OO"), SMALL)


def test_unknown_without_close_match_points_to_the_list_command() -> None:
    with pytest.raises(UnknownNameError) as info:
        resolve("zzzz", SMALL, "GPU", "gpumatch gpus list")
    assert "gpumatch gpus list" in info.value.hint or "known:" in info.value.hint


@pytest.mark.parametrize("query", ["", "   ", "NVIDIA", "--", "amd intel"])
def test_empty_or_vendor_only_query_is_an_error(query: str) -> None:
    with pytest.raises(UnknownNameError, match="empty GPU name"):
        resolve(query, SMALL, "GPU", "list")


# --- the shipped catalog ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "canonical"),
    [
        ("H100 SXM", "H100 SXM5 80GB"),
        ("h100-sxm5-80gb", "H100 SXM5 80GB"),
        ("  h100_SXM5  80gb ", "H100 SXM5 80GB"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM5 80GB"),
        ("NVIDIA_H100_80GB_HBM3", "H100 SXM5 80GB"),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
        ("rtx4090", "GeForce RTX 4090"),
        ("RTX-4090", "GeForce RTX 4090"),
        ("4090", "GeForce RTX 4090"),
        ("NVIDIA GeForce RTX 3090", "GeForce RTX 3090"),
        ("rtx 5090", "GeForce RTX 5090"),
        ("A6000", "RTX A6000"),
        ("NVIDIA RTX A6000", "RTX A6000"),
        ("RTX 6000 Ada", "RTX 6000 Ada Generation"),
        ("rtx-pro-6000-server", "RTX PRO 6000 Blackwell Server Edition"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell Server Edition"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell Workstation Edition"),
        ("rtx-pro-6000-ws", "RTX PRO 6000 Blackwell Workstation Edition"),
        ("mi300x", "Instinct MI300X"),
        ("AMD Instinct MI300X", "Instinct MI300X"),
        ("MI325X", "Instinct MI325X"),
        ("mi250x", "Instinct MI250X"),
        ("gaudi3", "Gaudi 3"),
        ("Intel Gaudi 2", "Gaudi 2"),
    ],
)
def test_catalog_resolves_common_spellings(query: str, canonical: str) -> None:
    assert load_catalog().get(query).name == canonical


@pytest.mark.parametrize(
    ("query", "must_list", "must_not_list"),
    [
        ("h100", ["H100 SXM5 80GB", "H100 PCIe 80GB"], ["H200"]),
        ("a100", ["A100 SXM4 80GB", "A100 PCIe 40GB"], ["A10,", "H100"]),
        ("gaudi", ["Gaudi 2", "Gaudi 3"], []),
        ("rtx pro 6000", ["RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell Workstation Edition"], []),
        ("mi3", ["Instinct MI300X", "Instinct MI325X"], ["MI250X"]),
    ],
)
def test_catalog_family_names_are_ambiguous(query: str, must_list: list[str], must_not_list: list[str]) -> None:
    with pytest.raises(AmbiguousNameError) as info:
        load_catalog().get(query)
    for name in must_list:
        assert name in info.value.message
    for name in must_not_list:
        assert name not in info.value.message
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("query", "suggested"), [("H1OO SXM", "H100 SXM5 80GB"), ("rtx 4900", "GeForce RTX 4090")])
def test_catalog_typo_is_unknown_with_close_matches(query: str, suggested: str) -> None:
    with pytest.raises(UnknownNameError) as info:
        load_catalog().get(query)
    assert not isinstance(info.value, AmbiguousNameError)
    assert suggested in info.value.hint
    assert query in info.value.message


def test_catalog_unknown_name_is_a_gpumatch_error_with_exit_code_2() -> None:
    with pytest.raises(GpumatchError) as info:
        load_catalog().get("Voodoo5 6000")
    assert info.value.exit_code == 2


def test_every_builtin_name_and_alias_resolves_to_its_own_sku() -> None:
    catalog = load_catalog()
    for gpu in catalog.gpus:
        for spelling in (gpu.name, *gpu.aliases):
            assert catalog.get(spelling).name == gpu.name, f"{spelling!r} does not resolve to {gpu.name!r}"


def test_no_alias_is_shared_between_two_skus() -> None:
    owner: dict[str, str] = {}
    for gpu in load_catalog().gpus:
        for spelling in {normalize(s) for s in (gpu.name, *gpu.aliases)}:
            assert owner.setdefault(spelling, gpu.name) == gpu.name, f"{spelling!r}: {owner[spelling]} and {gpu.name}"


def test_the_two_rtx_pro_6000_editions_do_not_share_a_name() -> None:
    catalog = load_catalog()
    ws = catalog.get("RTX PRO 6000 Blackwell Workstation Edition")
    server = catalog.get("RTX PRO 6000 Blackwell Server Edition")
    ws_names = {normalize(s) for s in (ws.name, *ws.aliases)}
    server_names = {normalize(s) for s in (server.name, *server.aliases)}
    assert not ws_names & server_names


def test_overlong_name_is_refused_at_once_and_not_echoed_in_full() -> None:
    query = "x" * 1_000_000
    with pytest.raises(UnknownNameError) as info:
        load_catalog().get(query)
    assert "1000000 characters" in info.value.message
    assert len(str(info.value)) < 300


def test_control_characters_are_escaped_in_messages() -> None:
    with pytest.raises(UnknownNameError) as info:
        load_catalog().get("rtx\x1b[31m\u202e9999")
    assert "\x1b" not in str(info.value) and "\u202e" not in str(info.value)


# --- catalog_name: a device's reported name -> the catalog card (or None) ----------------------------


def test_catalog_name_resolves_what_a_device_reports_and_never_raises() -> None:
    from gpumatch.catalog import catalog_name

    assert catalog_name("NVIDIA H100 80GB HBM3") == "H100 SXM5 80GB"  # nvidia-smi / torch name
    assert catalog_name("h100-sxm5-80gb") == "H100 SXM5 80GB"
    assert catalog_name(None) is None and catalog_name("") is None
    assert catalog_name("NVIDIA Imaginary 9000") is None  # unknown card: no prediction, no error
    assert catalog_name("H100") is None  # ambiguous between SKUs: no guess
