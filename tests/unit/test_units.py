from __future__ import annotations

import pytest

from gpumatch.errors import InputError
from gpumatch.units import (
    format_bytes,
    format_si,
    parse_bandwidth,
    parse_bytes,
    parse_flops,
    parse_power,
    parse_usd_per_hour,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("80GiB", 80 * 2**30), ("141 GB", 141_000_000_000), ("24gib", 24 * 2**30), ("512", 512), ("1.5 TB", 1.5e12)],
)
def test_parse_bytes(text: str, expected: float) -> None:
    assert parse_bytes(text) == expected


def test_other_quantities() -> None:
    assert parse_bandwidth("3.35TB/s") == pytest.approx(3.35e12)
    assert parse_power("700W") == 700
    assert parse_power("1.2kW") == pytest.approx(1200)
    assert parse_flops("989 TFLOPS") == pytest.approx(9.89e14)
    assert parse_usd_per_hour("$2.5/h") == 2.5
    assert parse_usd_per_hour("3 USD/hr") == 3


@pytest.mark.parametrize("bad", ["", "lots", "80 parsecs", "-3GB", "nan GB", "3TB"])
def test_bad_input_is_one_clear_error(bad: str) -> None:
    parser = parse_bandwidth if bad == "3TB" else parse_bytes
    with pytest.raises(InputError) as e:
        parser(bad)
    assert "\n" not in str(e.value)


def test_formatting() -> None:
    assert format_bytes(80 * 2**30) == "80.0 GiB"
    assert format_si(9.895e14, "FLOP/s") == "990 TFLOP/s"
