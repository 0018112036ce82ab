"""gpumatch.files: the one bounded reader and parse layer (limits exact to the byte, kinds of file, parsers)."""

from __future__ import annotations

import os
import socket
from importlib import resources
from pathlib import Path

import pytest

from gpumatch.errors import DataFileError
from gpumatch.files import (
    MAX_NESTING,
    check_nesting,
    limit_text,
    open_text,
    parse_json,
    parse_toml,
    read_bytes,
    read_text,
)


def test_limit_is_exact_to_the_byte(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"x" * 100)
    assert read_bytes(p, "f", 100) == b"x" * 100
    with pytest.raises(DataFileError, match="f: file is over the 99 bytes limit"):
        read_bytes(p, "f", 99)


def test_stream_stops_at_the_limit_not_at_the_reported_size(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("a,b\n" * 10_000, encoding="utf-8")
    with open_text(p, "t.csv", 1000) as f, pytest.raises(DataFileError, match="1 kB limit"):
        for _ in f:
            pass
    if Path("/dev/zero").exists():  # a device reports size 0 and never ends: refused before any read
        with pytest.raises(DataFileError, match="character device"):
            read_bytes("/dev/zero", "zero", 10)


def test_kinds_of_file(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="d: not a regular file but a directory"):
        read_text(tmp_path, "d")
    with pytest.raises(DataFileError, match="gone: cannot read"):
        read_text(tmp_path / "missing", "gone")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")
        (tmp_path / "link").symlink_to(tmp_path / "fifo")
        with pytest.raises(DataFileError, match="link: not a regular file but a FIFO"):
            read_text(tmp_path / "link", "link")
    if hasattr(socket, "AF_UNIX"):
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(tmp_path / "sock"))
            with pytest.raises(DataFileError, match="not a regular file but a socket"):
                read_text(tmp_path / "sock", "sock")


def test_text_and_bom(tmp_path: Path) -> None:
    p = tmp_path / "a.toml"
    p.write_bytes(b"\xef\xbb\xbfa = 1\n")
    assert parse_toml(read_text(p, "a"), "a") == {"a": 1}
    p.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(DataFileError, match="not UTF-8"):
        read_text(p, "a")


def test_builtin_resource_is_read_the_same_way() -> None:
    entry = next(e for e in (resources.files("gpumatch.catalog") / "data" / "gpus").iterdir()
                 if e.name.endswith(".toml"))
    assert "memory" in parse_toml(read_text(entry, entry.name, 1_000_000), entry.name)


@pytest.mark.parametrize(("text", "says"), [
    ("[" * 3000 + "]" * 3000, "nested too deeply"),
    ("1" * 5000, "more than 4300 digits"),
    ("[NaN]", "NaN"),
    ("[-Infinity]", "Infinity"),
    ("[1e400]", "float range"),
    ('{"a": }', "not valid JSON"),
])
def test_json_bombs(text: str, says: str) -> None:
    with pytest.raises(DataFileError, match=says) as info:
        parse_json(text, "x.json")
    assert str(info.value).startswith("x.json: ") and "\n" not in str(info.value)


def test_nesting_limit_is_exact() -> None:
    ok: object = 1
    for _ in range(MAX_NESTING):
        ok = [ok]
    check_nesting(ok, "f", "JSON")
    with pytest.raises(DataFileError, match=f"more than {MAX_NESTING} levels"):
        check_nesting([ok], "f", "JSON")


def test_limit_text() -> None:
    assert [limit_text(n) for n in (1_000_000, 256_000_000, 10_000, 1_500)] == ["1 MB", "256 MB", "10 kB", "1500 bytes"]
