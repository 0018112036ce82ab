"""Trace files, the fake (replay) backend, and the sampler loop on virtual and real clocks."""

from __future__ import annotations

import builtins
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from synth_traces import build, edges, make_samples

from gpumatch.errors import DataFileError, InputError, MissingDependencyError
from gpumatch.telemetry.device import Backend, Device
from gpumatch.telemetry.fake import FakeBackend, VirtualClock
from gpumatch.telemetry.monitor import monitor_command, replay_trace
from gpumatch.telemetry.sampler import Sampler
from gpumatch.telemetry.trace import read_trace, write_trace
from gpumatch.telemetry.types import SAMPLE_FIELDS, XidEvent, reason_names


def test_reason_names() -> None:
    assert reason_names(0x4) == ["sw_power_cap"]
    assert reason_names(0x1 | 0x8) == ["gpu_idle", "hw_slowdown"]
    assert reason_names(0x1000) == ["0x1000"]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_trace_round_trip(tmp_path: Path, make_trace, suffix: str) -> None:
    tr = make_trace("gemm", 3.0)
    tr = replace(tr, xid_events=(XidEvent(1.0, 0, 79),))
    paths = write_trace(tr, tmp_path / f"t{suffix}")
    assert [p.suffix for p in paths] == [suffix, ".json"]
    back = read_trace(paths[0])
    assert back.samples == tr.samples
    assert back.devices == tr.devices
    assert back.edges == tr.edges
    assert back.xid_events == tr.xid_events
    assert back.system == tr.system


def test_csv_header_is_the_store_contract(tmp_path: Path, make_trace) -> None:
    write_trace(make_trace("idle", 1.0), tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text().splitlines()[0].split(",") == list(SAMPLE_FIELDS)


def test_csv_without_sidecar_still_reads(tmp_path: Path) -> None:
    p = tmp_path / "bare.csv"
    p.write_text("t_s,gpu_index,power_avg_w\n0,0,100\n0.1,0,101\n")
    tr = read_trace(p)
    assert len(tr.samples) == 2 and tr.samples[1].power_avg_w == 101.0
    assert tr.interval_s == pytest.approx(0.1)


def test_bad_trace_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        read_trace(tmp_path / "nope.csv")
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(InputError, match="unknown trace file type"):
        read_trace(tmp_path / "x.txt")
    (tmp_path / "h.csv").write_text("a,b\n1,2\n")
    with pytest.raises(DataFileError, match="lacks the column"):
        read_trace(tmp_path / "h.csv")
    (tmp_path / "v.csv").write_text("t_s,gpu_index,power_avg_w\n0,0,hot\n")
    with pytest.raises(DataFileError, match=r"row 2, column 'power_avg_w': 'hot' is not a number"):
        read_trace(tmp_path / "v.csv")


HEADER = ",".join(SAMPLE_FIELDS)
NONSENSE = [
    # (id, file body after the header, words the one-line message must contain)
    ("all-minus-1e308", ",".join(["-1e308"] * len(SAMPLE_FIELDS)), ["row 2", "column 'gpu_index'", "outside"]),
    ("negative-power", "0,0,-5" + "," * (len(SAMPLE_FIELDS) - 3), ["column 'power_instant_w'", "outside"]),
    ("util-over-100", "0,0" + "," * 9 + "150" + "," * 4, ["column 'util_gpu_pct'", "0..100"]),
    ("inf", "inf,0" + "," * (len(SAMPLE_FIELDS) - 2), ["column 't_s'", "not a finite number"]),
    ("nan-power", "0,0,nan" + "," * (len(SAMPLE_FIELDS) - 3), ["column 'power_instant_w'", "finite"]),
    ("ragged", "1,2", ["row 2 has 2 values", f"header has {len(SAMPLE_FIELDS)} columns"]),
    ("fractional-index", "0,0.5" + "," * (len(SAMPLE_FIELDS) - 2), ["column 'gpu_index'", "whole number"]),
    (
        "time-reversed",
        "\n".join(f"{t},0" + "," * (len(SAMPLE_FIELDS) - 2) for t in (2.0, 1.0)),
        ["row 3, column 't_s'", "earlier", "backwards"],
    ),
]


@pytest.mark.parametrize(("body", "words"), [n[1:] for n in NONSENSE], ids=[n[0] for n in NONSENSE])
def test_nonsense_trace_rows_are_rejected_naming_row_and_column(tmp_path: Path, body: str, words: list[str]) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + "\n" + body + "\n", encoding="utf-8")
    with pytest.raises(DataFileError) as info:
        read_trace(path)
    line = str(info.value)
    assert str(path) in line and "\n" not in line
    for word in words:
        assert word in line, f"{word!r} missing from: {line}"


def test_binary_and_directory_traces_say_what_they_are(tmp_path: Path) -> None:
    (tmp_path / "bin.csv").write_bytes(bytes(range(256)) * 4)
    with pytest.raises(DataFileError, match="not UTF-8 text"):
        read_trace(tmp_path / "bin.csv")
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(DataFileError, match="not a regular file but a directory"):
        read_trace(tmp_path / "dir.csv")
    (tmp_path / "nul.csv").write_bytes(b"t_s,gpu_index\n0,\x000\n")
    with pytest.raises(DataFileError):
        read_trace(tmp_path / "nul.csv")


def test_broken_sidecar_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("t_s,gpu_index\n0,0\n", encoding="utf-8")
    (tmp_path / "t.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(DataFileError, match="sidecar"):
        read_trace(tmp_path / "t.csv")
    (tmp_path / "t.json").write_text('{"devices": [{"nope": 1}]}', encoding="utf-8")
    with pytest.raises(DataFileError, match="sidecar"):
        read_trace(tmp_path / "t.csv")


def test_parquet_without_pyarrow_says_what_to_install(tmp_path: Path, make_trace, monkeypatch) -> None:
    real_import = builtins.__import__

    def no_pyarrow(name, *a, **k):
        if name.startswith("pyarrow"):
            raise ImportError("no pyarrow")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(MissingDependencyError) as e:
        write_trace(make_trace("idle", 1.0), tmp_path / "t.parquet")
    assert "gpumatch[parquet]" in e.value.hint


def test_fake_backend_satisfies_the_protocols(make_trace) -> None:
    b = FakeBackend(make_trace("idle", 1.0))
    assert isinstance(b.devices()[0], Device)
    assert isinstance(b, Backend)


def test_replay_reproduces_the_recorded_samples(make_trace) -> None:
    tr = make_trace("gemm", 10.0)
    backend = FakeBackend(tr)
    clock = VirtualClock()
    out = Sampler(backend, 0.1, clock=clock.now, sleep=clock.sleep).run_for(backend.duration_s)
    assert len(out.samples) == len(tr.samples)
    keep = [k for k in SAMPLE_FIELDS if not k.startswith("gpm_") and k != "t_s"]
    for a, b in zip(out.samples, tr.samples, strict=True):
        assert a.t_s == pytest.approx(b.t_s, abs=1e-6)
        assert all(getattr(a, k) == getattr(b, k) for k in keep)
    gpm = [s for s in out.samples if s.gpm_sm_active is not None]
    assert 9 <= len(gpm) <= 11  # about 1 Hz
    assert gpm[0].gpm_sm_active == pytest.approx(96.5)
    e0, e1 = out.edges[0], out.edges[-1]
    assert (e0.label, e1.label) == ("start", "end")
    assert (e1.energy_mj - e0.energy_mj) / 1000 == pytest.approx(685.0 * 10.0, rel=1e-3)


def test_replay_polls_recorded_xids(make_trace) -> None:
    tr = replace(make_trace("gemm", 5.0), xid_events=(XidEvent(2.5, 0, 48),))
    backend = FakeBackend(tr)
    clock = VirtualClock()
    out = Sampler(backend, 0.1, clock=clock.now, sleep=clock.sleep).run_for(backend.duration_s)
    assert [(x.xid, x.t_s) for x in out.xid_events] == [(48, 2.5)]


def test_replay_trace_from_file(tmp_path: Path, make_trace) -> None:
    write_trace(make_trace("copy", 5.0), tmp_path / "copy.csv")
    r = replay_trace(tmp_path / "copy.csv")
    assert r.exit_code is None
    assert r.verdicts[0].workload.label == "memory-bound"
    assert r.trace.meta["replayed_from"].endswith("copy.csv")


def test_sampler_rejects_silly_intervals(make_trace) -> None:
    with pytest.raises(InputError, match="out of range"):
        Sampler(FakeBackend(make_trace("idle", 1.0)), 0.0)


def test_real_thread_samples_at_about_the_interval(make_trace) -> None:
    s = Sampler(FakeBackend(make_trace("idle", 60.0)), 0.02).start()
    time.sleep(0.5)
    tr = s.stop()
    assert 15 <= len(tr.samples) <= 30
    assert tr.stats.ticks == len(tr.samples)
    assert tr.stats.mean_tick_s < 0.01
    assert [e.label for e in tr.edges] == ["start", "end"]


def test_mark_reads_a_window_edge(make_trace) -> None:
    clock = VirtualClock()
    s = Sampler(FakeBackend(make_trace("gemm", 5.0)), 0.1, clock=clock.now, sleep=clock.sleep)
    s._open()
    clock.sleep(2.0)
    s.mark("window-1")
    assert [e.label for e in s._edges] == ["start", "window-1"]


def test_monitor_command_returns_exit_code_and_flushes(make_trace) -> None:
    got: list[int] = []
    r = monitor_command(
        FakeBackend(make_trace("idle", 60.0)),
        [sys.executable, "-c", "import time; time.sleep(0.4); raise SystemExit(3)"],
        0.02,
        on_samples=lambda new: got.append(len(new)),
        flush_every_s=0.1,
    )
    assert r.exit_code == 3 and not r.interrupted
    assert sum(got) == len(r.trace.samples) > 5
    assert len(got) >= 2  # flushed while running, then at the end


def test_monitor_command_not_found(make_trace) -> None:
    with pytest.raises(InputError, match="command not found"):
        monitor_command(FakeBackend(make_trace("idle", 5.0)), ["no-such-command-gpumatch"], 0.05)


def test_edges_interpolate_between_recorded_readings(make_trace) -> None:
    tr = build(make_samples("gemm", 10.0), edges(0.0, 10.0, energy_j=1000.0, power_viol_s=10.0))
    d = FakeBackend(tr).devices()[0]
    mid = d.edge_counters(5.0)
    assert mid.energy_mj == 1_000_000_000 + 500_000
    assert mid.violation_ns["power"] == 5_000_000_000 + 5_000_000_000
