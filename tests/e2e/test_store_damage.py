"""Damaged stores (issue 10, items 14 and 16): flipped bytes, an edited manifest, truncation, a full disk.

Writers run ``PRAGMA quick_check`` and never append to a damaged file; readers serve what SQLite can read
and refuse, in one line with the way to recover, what it finds damaged; a run's manifest hash is checked
when the run is read.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sqlite3
from pathlib import Path

import pytest

from gpumatch.cli.app import main
from gpumatch.errors import StoreError
from gpumatch.store import connection as connection_mod
from gpumatch.store import open_store
from gpumatch.telemetry.trace import read_trace

TRACE = Path(__file__).parents[1] / "data" / "traces" / "h200-2026-12-02-gemm-bf16.csv"
N_SAMPLES = 3000


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def filled(store_path: Path) -> int:
    with open_store(store_path, mode="write") as s:
        run = s.begin_run("monitor", "python train.py", {"gpu": "H200", "driver": "570.124.06"}, {})
        s.add_samples(run, [{"t_s": float(i), "power_instant_w": 300.0 + i % 7} for i in range(N_SAMPLES)])
        s.add_result(run, "energy_j", 5000.0, "J")
        s.end_run(run, "completed")
    return run  # closed: the WAL is folded into the file, so byte edits below hit the real pages


def _break_a_samples_leaf(path: Path) -> None:
    """Overwrite the cell count of the last leaf page of the samples table (SQLite file format, section 1.6:
    an interior table page has type 0x05 and its right-most child pointer at offset 8; a leaf has type 0x0D
    and its cell count at offsets 3-4) - what a few flipped bits in the wrong place do."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
        root = c.execute("SELECT rootpage FROM sqlite_master WHERE name = 'samples'").fetchone()[0]
        page = c.execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(path.read_bytes())
    at = (root - 1) * page
    assert data[at] == 0x05, "the samples table should be two levels deep"
    leaf = int.from_bytes(data[at + 8 : at + 12], "big")
    at = (leaf - 1) * page
    assert data[at] == 0x0D
    data[at + 3 : at + 5] = b"\xff\xff"
    path.write_bytes(bytes(data))


def test_a_damaged_store_is_never_appended_to(
    filled: int, store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    _break_a_samples_leaf(store_path)
    before = _sha(store_path)
    with pytest.raises(StoreError, match="is damaged") as exc:
        open_store(store_path, mode="write")
    assert "\n" not in str(exc.value) and "quick_check" in str(exc.value) and "gpumatch runs recover" in exc.value.hint
    monkeypatch.setenv("GPUMATCH_STORE", str(store_path))
    monkeypatch.chdir(tmp_path)
    code, _, err = _cli(capsys, "monitor", "--replay", str(TRACE))
    assert code == 2 and err.count("\n") == 1 and "is damaged" in err and f"the trace is in {TRACE}" in err
    assert _sha(store_path) == before  # not one byte appended


def test_readers_serve_what_is_readable_and_refuse_what_is_damaged_in_one_line(
    filled: int, store_path: Path, capsys
) -> None:
    _break_a_samples_leaf(store_path)
    before = _sha(store_path)
    code, out, _ = _cli(capsys, "runs", "list", "--store", str(store_path))
    assert code == 0 and "python train.py" in out  # the runs table and the samples index are whole
    code, out, err = _cli(capsys, "runs", "show", str(filled), "--samples", "-f", "csv", "--store", str(store_path))
    assert code == 2 and out == "" and err.count("\n") == 1 and "is damaged" in err
    assert "gpumatch runs recover --store" in err
    code, _, err = _cli(capsys, "runs", "check", "--store", str(store_path))
    assert code == 2 and "is damaged" in err.splitlines()[-1]
    assert _sha(store_path) == before


def test_the_recovery_the_message_names_works(filled: int, store_path: Path, capsys) -> None:
    _break_a_samples_leaf(store_path)
    before = _sha(store_path)
    with pytest.raises(StoreError) as exc:
        open_store(store_path, mode="write")
    command = exc.value.hint.split("recover what is readable: ", 1)[1].split(", then", 1)[0]
    words = shlex.split(command)
    assert words[:3] == ["gpumatch", "runs", "recover"]
    code, out, err = _cli(capsys, *words[1:], "-f", "json")
    assert code == 0, err
    by_table = {t["table"]: t for t in json.loads(out)}
    assert by_table["runs"]["copied"] == 1 and by_table["results"]["copied"] == 1
    assert 0 < by_table["samples"]["copied"] < N_SAMPLES  # the broken page's rows are lost, the rest kept
    assert by_table["samples"]["copied"] + by_table["samples"]["unreadable_ids"] >= N_SAMPLES
    assert _sha(store_path) == before  # the damaged file was only read
    new = store_path.with_name("results-recovered.sqlite")
    with open_store(new, mode="write") as s:  # a whole store again: it passes quick_check and takes runs
        run = s.run(filled)
        assert run.status == "completed" and run.n_samples == by_table["samples"]["copied"]
        s.end_run(s.begin_run("monitor", "after recovery", {}, {}), "completed")
    code, _, err = _cli(capsys, *words[1:])
    assert code == 2 and "already exists" in err  # never over a file


def test_an_edited_manifest_is_a_hash_mismatch_not_served_silently(filled: int, store_path: Path, capsys) -> None:
    data = store_path.read_bytes()
    assert data.count(b'"driver":"570.124.06"') == 1
    store_path.write_bytes(data.replace(b'"driver":"570.124.06"', b'"driver":"570.124.07"'))  # same length
    code, out, err = _cli(capsys, "runs", "show", str(filled), "--store", str(store_path))
    assert code == 2 and out == "" and "manifest hash mismatch" in err and err.count("\n") == 1
    code, out, err = _cli(capsys, "runs", "list", "--store", str(store_path))
    assert code == 0 and "python train.py" in out and f"run {filled}: manifest hash mismatch" in err
    code, _, err = _cli(capsys, "runs", "check", "--store", str(store_path), "-f", "json")
    assert code == 2 and "1 manifest hash mismatch" in err


@pytest.mark.parametrize("keep", [0.5, 0.9, 50])
def test_a_truncated_store_is_refused_in_one_line(filled: int, store_path: Path, keep: float, capsys) -> None:
    data = store_path.read_bytes()
    store_path.write_bytes(data[: int(len(data) * keep) if keep < 1 else int(keep)])
    before = _sha(store_path)
    code, out, err = _cli(capsys, "runs", "list", "--store", str(store_path))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert ("is damaged" in err) if keep < 1 else ("not an SQLite database" in err)
    with pytest.raises(StoreError, match=r"damaged|not an SQLite database"):
        open_store(store_path, mode="write")
    assert _sha(store_path) == before


def test_a_full_disk_is_one_line_exit_2_and_loses_nothing_committed(
    filled: int, store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """SQLITE_FULL without a full disk: ``PRAGMA max_page_count`` caps the file a few pages above its size
    (https://www.sqlite.org/pragma.html#pragma_max_page_count); a replay needs ~40 more."""
    real = connection_mod._wal

    def capped(conn: sqlite3.Connection, busy_timeout_s: float) -> str:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 3}")
        return real(conn, busy_timeout_s)

    monkeypatch.setattr(connection_mod, "_wal", capped)
    monkeypatch.setenv("GPUMATCH_STORE", str(store_path))
    monkeypatch.chdir(tmp_path)
    code, _, err = _cli(capsys, "monitor", "--replay", str(TRACE))
    assert code == 2 and err.count("\n") == 1 and "disk full" in err and "free disk space" in err
    monkeypatch.setattr(connection_mod, "_wal", real)
    with open_store(store_path, mode="write") as s:
        assert s.integrity_check() == "ok"
        first = s.run(filled)
        assert (first.status, first.n_samples, first.n_results) == ("completed", N_SAMPLES, 1)
        n_trace = len(read_trace(TRACE).samples)
        (replay,) = [r for r in s.runs() if r.run_id != filled]
        assert replay.n_samples in (0, n_trace) and replay.stored_status == "interrupted"  # all or none; closed
        s.end_run(s.begin_run("monitor", "after the disk was freed", {}, {}), "completed")
