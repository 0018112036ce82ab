"""``gpumatch bench``: the tiny quick suite end to end into a real SQLite store, failed cases (MemoryError, a
killed child, a timeout) recorded while the suite goes on, Ctrl-C, show/export/compare, and bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from gpumatch.cli.app import main
from gpumatch.lab.run import BenchRequest, run_bench
from gpumatch.lab.suites import Case
from gpumatch.store import open_store

SRC = str(Path(__file__).resolve().parents[3] / "src")


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """The tiny quick suite plus three cases that fail on purpose and one regular case after them."""
    store = tmp_path_factory.mktemp("bench") / "results.sqlite"
    extras = (Case("fault-memory", "fault", {"mode": "memory"}, 60.0),
              Case("fault-kill", "fault", {"mode": "kill"}, 60.0),
              Case("fault-hang", "fault", {"mode": "hang"}, 3.0),
              Case("launch-after", "launch", {}, 60.0))
    calls: list[tuple[Any, ...]] = []
    run = run_bench(BenchRequest(suite="quick", tiny=True, store=store, extra_cases=extras),
                    progress=lambda *a: calls.append(a))
    return store, (run, calls)


def test_tiny_quick_suite_end_to_end(suite_run: tuple[Path, Any]) -> None:
    store, (run, calls) = suite_run
    assert run.status == "completed" and run.run_id == 1
    status = {c.case_id: c.status for c in run.cases}
    for case in ("gemm-bf16", "gemm-fp32", "copy", "launch", "decode-b1", "decode-b16", "prefill", "train"):
        assert status[case] == "ok", case
    for case in ("gemm-fp8", "gemm-tf32", "pinned"):  # GPU-only: skipped with a reason
        assert status[case] == "skipped", case
    assert [c[0] for c in calls][:2] == ["probe", "case"] and calls[-1][0] == "done"
    with open_store(store, mode="read") as st:
        rec = st.run(1)
        metrics = {r.metric for r in st.results(1)}
        events = [e for e in st.events(1) if e.kind == "case"]
    assert rec.status == "completed" and rec.kind == "bench"
    assert rec.manifest["suite.tiny"] is True and rec.manifest_sha256 == run.manifest_sha256
    assert {"gemm_flops_per_s", "copy_bytes_per_s", "decode_step_s", "prefill_s", "train_step_s",
            "decode_mbu"} <= metrics
    assert len(events) == len(run.cases)


def test_failed_cases_are_recorded_and_the_suite_goes_on(suite_run: tuple[Path, Any]) -> None:
    store, (run, _) = suite_run
    by_id = {c.case_id: c for c in run.cases}
    assert by_id["fault-memory"].error_class == "oom"
    assert by_id["fault-kill"].error_class == "crash" and "SIGKILL" in by_id["fault-kill"].message
    assert by_id["fault-hang"].error_class == "timeout"
    assert by_id["launch-after"].status == "ok"  # the suite went on after them
    with open_store(store, mode="read") as st:
        failures = {(f.config or {}).get("case"): f for f in st.failures(1)}
    assert failures["fault-memory"].error_class == "oom"
    assert "fault case: memory" in failures["fault-memory"].log_excerpt
    assert failures["pinned"].error_class == "skipped" and "CUDA" in failures["pinned"].message


def test_show_and_export_formats(suite_run: tuple[Path, Any], capsys: pytest.CaptureFixture[str],
                                 tmp_path: Path) -> None:
    store = str(suite_run[0])
    code, out, _ = _cli(capsys, "bench", "show", "1", "--store", store)
    assert code == 0 and "decode_step_s" in out and "fault-kill" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    code, out, _ = _cli(capsys, "bench", "show", "1", "--store", store, "--format", "json")
    data = json.loads(out)
    row = next(r for r in data["results"] if r["metric"] == "decode_step_s")
    assert row["n"] == 100 and "p99_s" in row and "predicted" in row and "ratio" in row
    gemm = next(r for r in data["results"] if r["metric"] == "gemm_flops_per_s")
    assert gemm["n"] == 30 and "p99_s" not in gemm  # fewer than 100 samples: no p99
    code, out, _ = _cli(capsys, "bench", "show", "1", "--store", store, "--format", "csv")
    assert code == 0 and out.splitlines()[0].startswith("case,metric,measured,unit,predicted")
    target = tmp_path / "run1.json"
    code, _, err = _cli(capsys, "bench", "export", "1", "--out", str(target), "--store", store)
    assert code == 0 and json.loads(target.read_text())["manifest"]["suite.name"] == "quick"
    code, _, err = _cli(capsys, "bench", "export", "1", "--out", str(target), "--store", store)
    assert code == 2 and err.count("\n") == 1 and "exists" in err
    code, out, _ = _cli(capsys, "bench", "list", "--store", store, "--format", "json")
    assert json.loads(out)[0]["run_id"] == 1


def test_compare_and_refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "cmp.sqlite"
    for precisions in (("bf16", "fp32"), ("bf16", "fp32"), ("bf16",)):
        run_bench(BenchRequest(suite="quick", tiny=True, store=store, precisions=precisions, only=("launch",)))
    code, out, _ = _cli(capsys, "bench", "compare", "1", "2", "--store", str(store), "--format", "json")
    cmp = json.loads(out)
    assert code == 0 and cmp["differing_fields"] == []
    assert cmp["rows"][0]["metric"] == "launch_eager_s" and cmp["rows"][0]["b_over_a"] > 0
    code, _, err = _cli(capsys, "bench", "compare", "1", "3", "--store", str(store))
    assert code == 2 and err.count("\n") == 1 and "run.precisions" in err
    code, out, err = _cli(capsys, "bench", "compare", "1", "3", "--store", str(store), "--force")
    assert code == 0 and "run.precisions" in err and "B/A" in out


@pytest.mark.parametrize("args", [
    ["bench", "run", "--suite", "nope"],
    ["bench", "run", "--precision", "fp7"],
    ["bench", "show", "99"],
])
def test_bad_input_is_one_line_exit_2(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    with open_store(store, mode="write"):
        pass
    code, _, err = _cli(capsys, *args, "--store", str(store))
    assert code == 2 and err.count("\n") == 1 and err.startswith("gpumatch: error:")


def test_ctrl_c_keeps_finished_cases(tmp_path: Path) -> None:
    store = tmp_path / "int.sqlite"
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen([sys.executable, "-m", "gpumatch", "bench", "run", "--tiny", "--store", str(store)],
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    lines = []
    deadline = time.monotonic() + 120
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("gpumatch: [3/") or time.monotonic() > deadline:  # two cases finished
            break
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=60)
    assert proc.returncode == 130, [*lines, rest]
    assert rest.strip().splitlines()[-1] == "gpumatch: interrupted"
    with open_store(store, mode="read") as st:
        run = st.runs(kind="bench")[0]
        cases = {e.data["case_id"] for e in st.events(run.run_id) if e.kind == "case"}
        assert run.status == "interrupted"
        assert {"gemm-bf16", "gemm-fp16"} <= cases
        assert any(r.metric == "gemm_flops_per_s" for r in st.results(run.run_id))


def test_telemetry_is_joined_to_each_case(tmp_path: Path) -> None:
    """With a telemetry backend (a fake one replaying an idle GPU for 3 s, then a GEMM), samples go to the store,
    the settled idle power of the idle window before the first case is a result, each case's event carries its
    window's summary and verdict, and each decode row has its energy per token gross and idle-subtracted."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "telemetry"))
    from synth_traces import H200_INFO, SYSTEM, build, make_samples

    from gpumatch.telemetry.fake import FakeBackend

    trace = build(make_samples("idle", seconds=2.9) + make_samples("gemm", seconds=600.0, t0=3.0))
    assert trace.devices[0] == H200_INFO and trace.system == SYSTEM
    store = tmp_path / "tele.sqlite"
    run_bench(BenchRequest(tiny=True, store=store, only=("launch", "decode-b1")),
              telemetry=lambda: FakeBackend(trace))
    with open_store(store, mode="read") as st:
        samples = st.samples(1)
        event = next(e for e in st.events(1) if e.kind == "case")
        energy = [r for r in st.results(1) if r.metric == "decode_energy_j_per_token"]
        net = [r for r in st.results(1) if r.metric == "decode_energy_net_j_per_token"]
        idle = [r for r in st.results(1) if r.metric == "idle_power_w"]
    assert len(samples) > 3
    tele = event.data["telemetry"]
    assert tele["power_w_mean"] is not None and tele["n_samples"] > 3
    assert tele["power_cap_frac"] == 1.0 and tele["thermal_frac"] == 0.0  # the GEMM trace: SwPowerCap throughout
    assert len(energy) == 1 and energy[0].unit == "J/token" and energy[0].extra["basis"] == "gross"
    assert tele["verdict"] == "valid-power-capped" and tele["verdict_reasons"]
    assert len(idle) == 1 and idle[0].unit == "W" and idle[0].extra["n"] >= 10  # 2 s at 10 Hz once settled
    assert idle[0].value == pytest.approx(86.0)  # the idle profile's 1-s average power
    p_idle, p_row = idle[0].value, energy[0].extra["power_w_mean"]
    step = next(r for r in st_results(store) if r.metric == "decode_step_s").value
    assert len(net) == 1 and net[0].extra["basis"] == "idle-subtracted"
    assert net[0].value == pytest.approx((p_row - p_idle) * step / 1)
    per_step = {r.metric: r for r in st_results(store) if r.metric.endswith("_j_per_step")}
    assert per_step["decode_energy_j_per_step"].value == pytest.approx(p_row * step)  # one token per step at b1
    assert per_step["decode_energy_net_j_per_step"].value == pytest.approx((p_row - p_idle) * step)


def st_results(store: Path) -> list[Any]:
    with open_store(store, mode="read") as st:
        return list(st.results(1))


def test_too_large_a_batch_fails_and_the_suite_goes_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "big.sqlite")
    code, out, _ = _cli(capsys, "bench", "run", "--tiny", "--decode-batch", "1000000000", "--case",
                        "decode-b1000000000-extra", "--case", "launch", "--store", store)
    assert code == 0 and "oom: " in out
    code, out, _ = _cli(capsys, "bench", "show", "1", "--store", store, "--format", "json")
    data = json.loads(out)
    assert [f["error_class"] for f in data["failures"]] == ["oom"]
    assert [c["status"] for c in data["cases"]] == ["ok", "failed"]


def test_tiny_soak_reports_warmup_apart(tmp_path: Path) -> None:
    store = tmp_path / "soak.sqlite"
    run = run_bench(BenchRequest(suite="soak", tiny=True, store=store, duration_s=1.0))
    assert [c.status for c in run.cases] == ["ok"]
    with open_store(store, mode="read") as st:
        rows = {r.metric: r for r in st.results(1)}
    assert rows["soak_warmup_s"].value >= 1.0 and rows["soak_flops_per_s"].value > 0
    assert rows["soak_flops_per_s"].extra["n"] >= 1 and "warmup_flops_per_s" in rows["soak_warmup_s"].extra


def test_progress_on_a_terminal_and_in_a_pipe() -> None:
    import io

    from gpumatch.report.bench import BenchProgress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        with BenchProgress(stream) as p:
            p("probe", 0, 0, "environment", 0.0)
            p("case", 0, 2, "gemm-bf16", 30.0)
            p("case", 1, 2, "copy", 20.0)
            p("done", 2, 2, "", 0.0)
    assert "\x1b[" in tty.getvalue()
    assert pipe.getvalue().splitlines()[1:] == ["gpumatch: [1/2] gemm-bf16 (about 30 s left)",
                                                 "gpumatch: [2/2] copy (about 20 s left)"]
