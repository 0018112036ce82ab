"""The width-aware table renderer (gpumatch.report.render) and human units (gpumatch.report.human)."""

from __future__ import annotations

import csv
import io
import random

import pytest

from gpumatch.report import human
from gpumatch.report.render import (
    Column,
    key_values,
    output_width,
    text_width,
    to_csv,
    to_table,
    wrap_block,
    wrap_text,
)


def _widest(text: str) -> int:
    return max(text_width(line) for line in text.splitlines())


def test_output_width_is_columns_else_80_for_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "132")
    assert output_width() == 132
    monkeypatch.setenv("COLUMNS", "10")
    assert output_width() == 40  # the floor
    for bad in ("", "abc", "0", "-5"):
        monkeypatch.setenv("COLUMNS", bad)
        assert output_width() == 80  # captured stdout is not a terminal: the stable default


def test_a_table_that_fits_is_unchanged_by_the_width() -> None:
    rows = [{"a": "x", "b": 1}, {"a": "yy", "b": 22}]
    assert to_table(rows, ["a", "b"], width=80) == "a   b\n--  --\nx   1\nyy  22"


def test_secondary_columns_go_in_their_declared_order_and_are_named() -> None:
    rows = [{"k": "key", "x": "x" * 30, "y": "y" * 30, "z": "z" * 30}]
    cols = [Column("k"), Column("x", drop=2, wrap=False), Column("y", drop=1, wrap=False), Column("z", wrap=False)]
    out = to_table(rows, cols, width=70)
    assert "x" * 30 in out and "y" * 30 not in out and "z" * 30 in out
    assert "left out to fit 70 columns: y" in out and _widest(out) <= 70
    out = to_table(rows, cols, width=40)
    assert "x" * 30 not in out and "z" * 30 in out and "left out to fit 40 columns: y, x" in out


def test_prose_wraps_at_spaces_and_numbers_stay_whole() -> None:
    text = "does not fit: needs 71.0 GiB per GPU, has 74.5 GiB (70.8 GiB after a 5% margin): short by 0.2 GiB"
    rows = [{"gpu": "A100 PCIe 80GB ×4", "n": 12345, "reason": text}]
    out = to_table(rows, [Column("gpu", wrap=False), Column("n", align="right"), Column("reason")], width=60)
    assert _widest(out) <= 60 and "…" not in out
    body = [line[len("A100 PCIe 80GB ×4  12345  "):] for line in out.splitlines()[2:]]
    assert " ".join(x.strip() for x in body) == text  # every word kept, in order
    assert "12345" in out.splitlines()[2]


def test_a_one_line_column_is_cut_with_an_ellipsis_only_as_needed() -> None:
    rows = [{"name": "python3 -c import torch; x = torch.zeros(1); print(x)", "status": "completed"}]
    cols = [Column("name", wrap=False), Column("status", wrap=False)]
    assert "…" not in to_table(rows, cols, width=80)
    out = to_table(rows, cols, width=40)
    assert _widest(out) <= 40 and "…" in out and len(out.splitlines()) == 3


def test_detail_lines_go_under_their_row() -> None:
    rows = [{"a": "1", "why": "first reason"}, {"a": "2", "why": ""}, {"a": "3", "why": "third"}]
    out = to_table(rows, [Column("a")], width=40, detail_key="why", detail_indent=3)
    assert out.splitlines()[2:] == ["1", "   first reason", "2", "3", "   third"]


def test_random_tables_never_exceed_the_width() -> None:
    rng = random.Random(7)
    words = ["GiB", "H100 SXM5 80GB", "short", "by", "x" * 37, "tokens/s", "—", "é", "界", "…", "a/b/c/d/e/f/g"]
    for _ in range(200):
        ncols, width = rng.randint(1, 9), rng.choice([40, 57, 80, 120])
        cols = [Column(f"c{i}", drop=rng.choice([0, 0, 1, 2, 3]), wrap=rng.random() < 0.6,
                       max_lines=rng.choice([0, 0, 2])) for i in range(ncols)]
        rows = [{f"c{i}": " ".join(rng.choice(words) for _ in range(rng.randint(0, 12))) for i in range(ncols)}
                for _ in range(rng.randint(0, 4))]
        out = to_table(rows, cols if rng.random() < 0.7 else [c.key for c in cols], title="t", width=width)
        assert _widest(out) <= width, (width, out)


def test_wide_characters_count_two_columns() -> None:
    assert text_width("开发验证卡") == 10 and text_width("×") == 1
    assert all(text_width(line) <= 9 for line in wrap_text("开发验证卡 单机训练卡", 9))


def test_wrap_block_keeps_indentation_and_hangs_list_items() -> None:
    out = wrap_block("  - " + "word " * 30, 40)
    lines = out.splitlines()
    assert lines[0].startswith("  - word") and all(x.startswith("    word") for x in lines[1:])
    assert max(map(len, lines)) <= 40


def test_key_values_show_quantities_in_human_units_and_csv_keeps_si() -> None:
    data = {"total_bytes": 85899345920, "tpot_s": 0.00742, "power_w": 445.0, "usd_per_gpu_hour": 2.5,
            "tokens_per_s": 3172.5, "name": "x", "started_unix_s": 1.7e9}
    out = key_values(data, width=80)
    for text in ("80.0 GiB", "7.42 ms", "445 W", "$2.50/GPU-h", "3,172/s"):
        assert text in out
    assert "started_unix_s    1700000000" in out  # a timestamp is not a duration
    rows = [{"total_bytes": 85899345920, "tpot_s": 0.00742}]
    parsed = next(csv.DictReader(io.StringIO(to_csv(rows, [Column("total_bytes"), Column("tpot_s")]))))
    assert parsed == {"total_bytes": "85899345920", "tpot_s": "0.00742"}


@pytest.mark.parametrize(
    ("fn", "value", "text"),
    [
        (human.gib, 38 * 2**20, "38 MiB"), (human.gib, 600 * 2**10, "0.6 MiB"), (human.gib, 79.65 * 2**30, "79.7 GiB"),
        (human.bytes_per_s, 3.35e12, "3.35 TB/s"), (human.seconds, 0.684, "684 ms"), (human.seconds, 604800, "168 h"),
        (human.seconds, 1.17, "1.17 s"), (human.watts, 10200, "10.2 kW"), (human.usd, 0.0523, "$0.0523"),
        (human.usd, 27500, "$27,500"), (human.percent, 0.029, "2.9%"), (human.big_count, 2e9, "2B"),
        (human.seconds, None, "-"), (human.seconds, float("nan"), "-"),
    ],
)
def test_human_units(fn: object, value: float | None, text: str) -> None:
    assert fn(value) == text  # type: ignore[operator]


def test_too_many_columns_for_the_width_become_records_not_shreds() -> None:
    rows = [{f"c{i}": f"{12345 + i:,}" for i in range(8)} | {"why": "the reason"}]
    cols = [Column(f"c{i}", f"column {i}", wrap=False) for i in range(8)]
    out = to_table(rows, cols, width=40, detail_key="why")
    assert out.splitlines() == ["column 0: 12,345", *[f"  column {i}: {12345 + i:,}" for i in range(1, 8)],
                                "  the reason"]
    assert "column 0" in to_table(rows, cols, width=120).splitlines()[0]  # wide enough: a table again
