"""``gpumatch doctor`` and ``gpumatch monitor`` as a new user meets them, without a GPU."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import pytest
from test_nvml_backend import _fake_pynvml

from gpumatch.cli.app import main
from gpumatch.store import open_store
from gpumatch.telemetry.trace import read_trace, write_trace

TELEMETRY_TESTS = Path(__file__).resolve().parents[1] / "telemetry"  # test_nvml_backend.py: the stand-in pynvml


@pytest.fixture
def no_nvml(monkeypatch):
    """This machine without a driver, whatever machine runs the tests."""
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(init_error=True))


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())


def test_doctor_without_gpu_works_and_exits_0(no_nvml, capsys) -> None:
    assert main(["doctor", "--no-pcie-load"]) == 0
    out = capsys.readouterr().out
    assert "none found" in out and "NVML could not start" in out
    assert "Preflight checks: overall SKIP (no GPU checked)" in out


def test_doctor_csv_keeps_the_manifest(no_nvml, capsys) -> None:
    assert main(["doctor", "--no-torch", "--no-pcie-load", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    by_check = {r["check"]: r for r in rows}
    assert by_check["gpu"]["verdict"] == "skip"
    assert (
        len(by_check["manifest.machine_sha256"]["detail"]) == 64
        and by_check["manifest.machine_sha256"]["verdict"] == "info"
    )
    assert "NVML" in by_check["manifest.note"]["detail"]
    assert any(k.startswith("manifest.host.") for k in by_check)


def test_doctor_json(no_nvml, capsys) -> None:
    assert main(["doctor", "--no-torch", "--psu-w", "1.6kW", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["gpu_found"] is False and d["overall"] == "skip"
    assert len(d["machine_sha256"]) == 64 and d["manifest"]["schema"] == "gpumatch.manifest/2"


def test_doctor_on_a_gpu_checks_it(fake_gpu, capsys) -> None:
    code = main(["doctor", "--no-torch", "--psu-w", "1600", "--format", "csv"])
    rows = capsys.readouterr().out.splitlines()
    assert rows[0] == "check,gpu,verdict,detail,hint"
    verdicts = {r.split(",")[0]: r.split(",")[2] for r in rows[1:]}
    assert verdicts["power-limit"] == "pass" and verdicts["psu"] == "pass"
    assert verdicts["foreign-processes"] == "fail"  # pid 4242 holds the (fake) GPU
    assert code == 3  # the command failed (1 is reserved for internal errors)


def test_doctor_bad_psu(no_nvml, capsys) -> None:
    assert main(["doctor", "--psu-w", "lots"]) == 2
    assert "power" in capsys.readouterr().err


def test_monitor_without_gpu_exits_2_with_a_hint(no_nvml, capsys) -> None:
    assert main(["monitor", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--replay" in err


@pytest.fixture
def gemm_csv(tmp_path: Path, make_trace) -> Path:
    p = tmp_path / "gemm.csv"
    write_trace(make_trace("gemm", 10.0), p)
    return p


def test_monitor_replay_prints_verdict_and_stores_the_run(gemm_csv: Path, capsys) -> None:
    assert main(["monitor", "--replay", str(gemm_csv)]) == 0
    cap = capsys.readouterr()
    assert "compute-bound" in cap.out and "valid-power-capped" in cap.out
    assert "SW power cap for 97%" in cap.out
    assert "saved as run" in cap.err
    with open_store() as st:
        (run,) = st.runs()
        assert (run.kind, run.status, run.n_samples) == ("monitor-replay", "completed", 101)
        assert run.summary["gpus"][0]["verdict"] == "valid-power-capped"
        metrics = {r.metric: r for r in st.results(run.run_id)}
        assert metrics["energy_j"].value == pytest.approx(6850.0, rel=1e-3)
        assert metrics["power_cap_duty"].unit == "1"


def test_monitor_replay_json_and_parquet_output(gemm_csv: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "again.parquet"
    assert main(["monitor", "--replay", str(gemm_csv), "--no-store", "-o", str(out), "-f", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["gpus"][0]["workload"] == "compute-bound"
    assert len(read_trace(out).samples) == d["n_samples"] == 101
    assert out.with_suffix(".json").exists()


def test_monitor_bad_arguments(gemm_csv: Path, capsys) -> None:
    assert main(["monitor", "--replay", str(gemm_csv), "--", "true"]) == 2
    assert main(["monitor", "--replay", str(gemm_csv), "-o", "x.txt"]) == 2
    assert main(["monitor", "--replay", "missing.csv"]) == 2
    assert main(["monitor", "--interval", "0", "--replay", str(gemm_csv)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4 and all(e.startswith("gpumatch: error:") for e in err)


def test_monitor_runs_a_command_and_exits_with_its_code(fake_gpu, tmp_path: Path, capsys) -> None:
    trace = tmp_path / "t.csv"
    code = main(
        [
            "monitor",
            "-i",
            "0.02",
            "-o",
            str(trace),
            "--",
            sys.executable,
            "-c",
            "import time; time.sleep(0.3); raise SystemExit(7)",
        ]
    )
    assert code == 7
    cap = capsys.readouterr()
    assert "command exit code: 7" in cap.out
    assert len(read_trace(trace).samples) >= 5
    with open_store() as st:
        (run,) = st.runs()
        assert run.kind == "monitor" and run.status == "failed" and run.n_samples >= 5
        assert run.manifest["gpu.name"] == "NVIDIA H200" and run.manifest["gpu.devices"][0]["uuid"]


@pytest.fixture
def garbage_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bad = tmp_path / "garbage.sqlite"
    bad.write_bytes(b"not a database\n" * 200)
    monkeypatch.setenv("GPUMATCH_STORE", str(bad))
    monkeypatch.chdir(tmp_path)
    return bad


def test_monitor_with_an_unwritable_store_keeps_the_trace_in_a_file_and_exits_2(
    fake_gpu, garbage_store: Path, tmp_path: Path, capsys
) -> None:
    before = garbage_store.read_bytes()
    code = main(["monitor", "-i", "0.02", "--", sys.executable, "-c", "import time; time.sleep(0.3)"])
    cap = capsys.readouterr()
    assert code == 2 and "GPU 0" in cap.out  # the measurement is still printed
    last = cap.err.strip().splitlines()[-1]
    assert last.startswith("gpumatch: error: results store not updated") and "gpumatch-monitor-" in last
    (kept,) = tmp_path.glob("gpumatch-monitor-*.csv")
    assert str(kept) in last and kept.with_suffix(".json").exists()
    assert len(read_trace(kept).samples) >= 5
    assert garbage_store.read_bytes() == before


def test_monitor_with_a_failing_command_and_a_bad_store_keeps_the_commands_exit_code(
    fake_gpu, garbage_store: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "mine.csv"
    code = main(["monitor", "-i", "0.02", "-o", str(out), "--", sys.executable, "-c", "raise SystemExit(7)"])
    err = capsys.readouterr().err
    assert code == 7 and f"the trace is in {out}" in err  # --output is the kept copy: no extra file
    assert not list(tmp_path.glob("gpumatch-monitor-*"))


def test_replay_with_a_bad_store_exits_2_and_names_the_replayed_file(
    gemm_csv: Path, garbage_store: Path, capsys
) -> None:
    assert main(["monitor", "--replay", str(gemm_csv)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "results store not updated" in err[0] and f"the trace is in {gemm_csv}" in err[0]


def test_monitor_output_in_a_missing_folder_is_refused_before_measuring(fake_gpu, tmp_path: Path, capsys) -> None:
    out = tmp_path / "nonexistdir" / "t.csv"
    assert main(["monitor", "-o", str(out), "--", sys.executable, "-c", "pass"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and "folder" in cap.err and "does not exist" in cap.err
    assert not (tmp_path / "gpumatch-home" / "results.sqlite").exists()


def test_replay_is_stored_as_kind_monitor_replay(gemm_csv: Path, capsys) -> None:
    assert main(["monitor", "--replay", str(gemm_csv)]) == 0
    assert "kind monitor-replay" in capsys.readouterr().err
    with open_store() as st:
        assert [r.kind for r in st.runs()] == ["monitor-replay"]
        assert st.runs("monitor") == []


_CHILD = """
import sys
sys.path.insert(0, {tests!r})
from test_nvml_backend import _fake_pynvml
sys.modules["pynvml"] = _fake_pynvml()
from gpumatch.cli.app import main
sys.exit(main(["monitor", "-i", "0.02", "--", sys.executable, "-c",
                "import os, time; open({pid!r}, 'w').write(str(os.getpid())); time.sleep(60)"]))
"""


def test_a_killed_monitor_leaves_a_readable_store(tmp_path: Path) -> None:
    import contextlib
    import os
    import signal
    import subprocess
    import time

    env = dict(os.environ, GPUMATCH_HOME=str(tmp_path / "home"))
    pid_file = tmp_path / "command.pid"
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD.format(tests=str(TELEMETRY_TESTS), pid=str(pid_file))],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        time.sleep(4.5)  # two flushes (every 2 s)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the monitor, no chance to clean up
        proc.wait()
        if pid_file.exists():  # the command has a process group of its own (batch mode): kill it too
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(pid_file.read_text()), signal.SIGKILL)
    with open_store(tmp_path / "home" / "results.sqlite") as st:
        (run,) = st.runs()
        assert run.kind == "monitor" and run.status == "interrupted"
        assert run.n_samples >= 50  # 0.02 s sampling, flushed at least once before the kill
        assert st.integrity_check() == "ok"


def test_a_monitor_run_exports_back_to_the_trace_it_recorded(gemm_csv: Path, tmp_path: Path, capsys) -> None:
    assert main(["monitor", "--replay", str(gemm_csv), "-o", str(tmp_path / "direct.csv")]) == 0
    with open_store() as st:
        (run,) = st.runs()
        assert [e.kind for e in st.events(run.run_id)] == ["edge", "edge"]  # window-edge counters are kept
    out = tmp_path / "exported.csv"
    assert main(["runs", "export", str(run.run_id), "--output", str(out)]) == 0
    assert f"run {run.run_id} written to" in capsys.readouterr().err
    assert out.read_text() == (tmp_path / "direct.csv").read_text()
    got, want = read_trace(out), read_trace(tmp_path / "direct.csv")
    assert got.edges == want.edges and got.devices == want.devices and got.system == want.system
    assert got.interval_s == want.interval_s and got.stats == want.stats
    assert got.meta["exported_from_run"]["run_id"] == run.run_id and "missing" not in got.meta
    assert got.meta["recorded_labels"] == [
        {"gpu_index": 0, "workload": "compute-bound", "verdict": "valid-power-capped"}
    ]
    capsys.readouterr()
    assert main(["monitor", "--replay", str(out), "--no-store", "-f", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["gpus"][0]["workload"], d["gpus"][0]["verdict"]) == ("compute-bound", "valid-power-capped")
    assert d["gpus"][0]["summary"]["energy_source"] == "counter"


def test_runs_export_errors_are_one_line(gemm_csv: Path, tmp_path: Path, capsys) -> None:
    with open_store() as st:
        empty = st.begin_run("bench", "no telemetry", {}, {})
        st.end_run(empty, "completed")
    assert main(["runs", "export", str(empty), "-o", str(tmp_path / "t.csv")]) == 2
    assert main(["runs", "export", "999", "-o", str(tmp_path / "t.csv")]) == 2
    assert main(["runs", "export", str(empty), "-o", str(tmp_path / "t.txt")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(e.startswith("gpumatch: error:") for e in err)
    assert "has no telemetry samples" in err[0] and "no run 999" in err[1] and ".csv or .parquet" in err[2]
    assert not (tmp_path / "t.csv").exists()


def test_runs_export_refuses_a_missing_folder_and_existing_files(gemm_csv: Path, tmp_path: Path, capsys) -> None:
    assert main(["monitor", "--replay", str(gemm_csv), "-f", "json"]) == 0
    with open_store() as st:
        (run,) = st.runs()
    capsys.readouterr()
    rid = str(run.run_id)
    assert main(["runs", "export", rid, "--output", str(tmp_path / "nonexistdir" / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write" in err and "folder" in err and "does not exist" in err
    out = tmp_path / "x.csv"
    assert main(["runs", "export", rid, "--output", str(out)]) == 0
    first = out.read_text()
    out.write_text("mine")  # a second export must not silently overwrite
    capsys.readouterr()
    assert main(["runs", "export", rid, "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "--force" in err and out.read_text() == "mine"
    out.unlink()  # only the sidecar is left: still refused
    assert main(["runs", "export", rid, "--output", str(out)]) == 2
    assert "x.json already exists" in capsys.readouterr().err and not out.exists()
    assert main(["runs", "export", rid, "--output", str(out), "--force"]) == 0
    assert out.read_text() == first


def test_an_old_run_without_edge_events_exports_with_a_note(tmp_path: Path) -> None:
    from gpumatch.telemetry.stored import trace_from_run

    with open_store() as st:
        rid = st.begin_run(
            "monitor", "python x.py", {"gpus": [{"index": 0, "name": "NVIDIA H200"}]}, {"interval_s": 0.05}
        )
        st.add_samples(rid, [{"t_s": 0.0, "util_gpu_pct": 3.0}, {"t_s": 0.05, "gpu_index": 0, "extra_key": 1.0}])
        st.end_run(rid, "completed")
        trace = trace_from_run(st.export_run(rid, samples=True))
    assert len(trace.samples) == 2 and trace.edges == () and trace.interval_s == 0.05
    assert trace.devices[0].name == "NVIDIA H200" and "edges" in trace.meta["missing"][0]
