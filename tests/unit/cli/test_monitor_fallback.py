"""The fallback trace file (the store cannot be written) is created exclusively, never through a planted link."""

from __future__ import annotations

import datetime as dt
import os
import sys
import tempfile
from pathlib import Path

import pytest
from test_nvml_backend import _fake_pynvml

from gpumatch.cli.app import main
from gpumatch.telemetry.trace import read_trace


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())


@pytest.fixture
def garbage_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bad = tmp_path / "garbage.sqlite"
    bad.write_bytes(b"not a database\n" * 200)
    monkeypatch.setenv("GPUMATCH_STORE", str(bad))
    return bad


def _plant_links(folder: Path, victim: Path, seconds: int = 30) -> list[Path]:
    """Under every name the fallback could pick in the next ``seconds``: the .csv a dangling link (to a file
    an attacker wants created, ``victim`` + ".new"), the .json a link to ``victim``."""
    now = dt.datetime.now(dt.UTC)
    links = []
    for k in range(-1, seconds):
        stamp = (now + dt.timedelta(seconds=k)).strftime("%Y%m%dT%H%M%SZ")
        for suffix in (".csv", ".json"):
            link = folder / f"gpumatch-monitor-{stamp}{suffix}"
            link.symlink_to(victim.with_name(victim.name + ".new") if suffix == ".csv" else victim)
            links.append(link)
    return links


def _kept(err: str) -> Path:
    last = err.strip().splitlines()[-1]
    assert "results store not updated" in last and "the trace is in " in last
    return Path(last.split("the trace is in ", 1)[1].split(",")[0])


def test_a_link_planted_in_the_working_folder_is_not_followed(
    fake_gpu: None, garbage_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    links = _plant_links(work, victim)
    code = main(["monitor", "-i", "0.02", "--", sys.executable, "-c", "import time; time.sleep(0.2)"])
    kept = _kept(capsys.readouterr().err)
    assert code == 2 and victim.read_text() == "precious\n" and not victim.with_name("victim.txt.new").exists()
    assert all(link.is_symlink() for link in links)  # left as they were
    assert kept.parent == work and kept.name.endswith("-2.csv") and not kept.is_symlink()
    assert not kept.with_suffix(".json").is_symlink() and len(read_trace(kept).samples) >= 3


def test_in_the_temp_folder_too(
    fake_gpu: None, garbage_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    os.rmdir(gone)  # no working folder to write in: the fallback goes to the temp folder
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    _plant_links(shared, victim)
    code = main(["monitor", "-i", "0.02", "--", sys.executable, "-c", "pass"])
    kept = _kept(capsys.readouterr().err)
    assert code == 2 and victim.read_text() == "precious\n" and not victim.with_name("victim.txt.new").exists()
    assert kept.parent == shared and not kept.is_symlink() and kept.stat().st_size > 0
    assert not [p for p in shared.iterdir() if p.is_dir()]  # the private staging folder is gone
