"""Hostile input through the real command line: every case ends in one line and a documented exit code.

FIFOs, devices (``/dev/zero`` behind a symlink, ``/dev/urandom``), folders, huge files, nesting thousands
deep, integers of thousands of digits, NaN and absurd calibrations, replays of billions of samples, an
ASCII-only stdout, Ctrl-C and SIGTERM. Cases that could hang or need a real signal or encoding run
``gpumatch`` as a subprocess with a timeout; the rest call ``gpumatch.cli.app.main`` in-process.
Exit codes (README "Exit codes"): 0 ok, 2 bad input, 3 command failed, 130 interrupted, 141 stdout
closed, 143 terminated.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpumatch.cli.app import main
from gpumatch.telemetry.types import SAMPLE_FIELDS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "chat-70b-serving.toml"
TRACE = ROOT / "tests" / "data" / "traces" / "h200-2026-12-02-gemm-bf16.csv"
ENTRY = "import sys; from gpumatch.cli.app import main; sys.exit(main())"
EST = ["estimate", "--model", "llama-3.1-8b", "--gpu", "H100 SXM"]
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")
needs_dev = pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero and /dev/urandom")


def gpumatch(args: list[str], timeout: float = 60, env: dict[str, str] | None = None,
             **kw: object) -> subprocess.CompletedProcess[str]:
    """Run the console entry point in a fresh interpreter (as the installed ``gpumatch`` script does)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", ENTRY, *args], capture_output=True, text=True, timeout=timeout,
                          env=full_env, cwd=ROOT, check=False, **kw)  # type: ignore[call-overload]


def assert_one_line(err: str, *words: str) -> None:
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith("gpumatch: ") and "Traceback" not in err, err
    for w in words:
        assert w in err, f"{w!r} not in {err!r}"


# --- where a file is read: (id, argv for a given path) -----------------------------------------------

def _trace_with(side: Path) -> Path:
    """A small valid trace next to ``side`` (the sidecar path), so the sidecar is what is hostile."""
    csv = side.with_suffix(".csv")
    csv.write_text(TRACE.read_text(encoding="utf-8"), encoding="utf-8")
    return csv


READERS: list[tuple[str, str, Callable[[Path], list[str]]]] = [
    ("workload", "w.toml", lambda p: ["workload", "check", str(p)]),
    ("workload-yaml", "w.yaml", lambda p: ["workload", "check", str(p)]),
    ("plan", "w.toml", lambda p: ["plan", str(p)]),
    ("estimate-workload", "w.toml", lambda p: ["estimate", "--workload", str(p), "--gpu", "H100 SXM"]),
    ("calibration", "cal.json", lambda p: [*EST, "--calibration", str(p)]),
    ("hf-config", "config.json", lambda p: ["models", "show", "--hf-config", str(p)]),
    ("trace", "t.csv", lambda p: ["monitor", "--replay", str(p), "--no-store"]),
    ("sidecar", "t.json", lambda p: ["monitor", "--replay", str(_trace_with(p)), "--no-store"]),
]
OVERLAYS = [("gpu-overlay", "catalog/gpus"), ("price-overlay", "catalog/prices"), ("model-overlay", "models")]


@needs_fifo
@pytest.mark.parametrize(("ident", "name", "argv"), [(i, n, a) for i, n, a in READERS], ids=[r[0] for r in READERS])
def test_fifo_is_refused_without_hanging(tmp_path: Path, ident: str, name: str,
                                         argv: Callable[[Path], list[str]]) -> None:
    path = tmp_path / name
    args = argv(path)  # may write a trace beside it first
    os.mkfifo(path)
    r = gpumatch(args, timeout=60, env={"GPUMATCH_HOME": str(tmp_path / "home")})
    assert r.returncode == 2, r.stderr
    assert_one_line(r.stderr, "FIFO", name)


@needs_fifo
@pytest.mark.parametrize(("ident", "folder"), OVERLAYS, ids=[o[0] for o in OVERLAYS])
def test_fifo_in_an_overlay_folder_is_refused_without_hanging(tmp_path: Path, ident: str, folder: str) -> None:
    home = tmp_path / "home"
    (home / folder).mkdir(parents=True)
    os.mkfifo(home / folder / "evil.toml")
    args = ["models", "list"] if folder == "models" else ["gpus", "list"]
    r = gpumatch(args, timeout=60, env={"GPUMATCH_HOME": str(home)})
    assert r.returncode == 2, r.stderr
    assert_one_line(r.stderr, "FIFO", "evil.toml")


@needs_dev
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
@pytest.mark.parametrize(("ident", "name", "argv"), [(i, n, a) for i, n, a in READERS], ids=[r[0] for r in READERS])
def test_endless_device_behind_a_symlink_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, device: str,
                                                    ident: str, name: str, argv: Callable[[Path], list[str]]) -> None:
    path = tmp_path / name
    args = argv(path)
    path.symlink_to(device)
    assert main(args) == 2
    assert_one_line(capsys.readouterr().err, "character device", name)


@needs_dev
@pytest.mark.parametrize(("ident", "folder"), OVERLAYS, ids=[o[0] for o in OVERLAYS])
def test_dev_zero_in_an_overlay_folder_is_refused(capsys: pytest.CaptureFixture[str], _isolated_home: Path,
                                                  ident: str, folder: str) -> None:
    (_isolated_home / folder).mkdir(parents=True)
    (_isolated_home / folder / "zero.toml").symlink_to("/dev/zero")
    assert main(["models", "list"] if folder == "models" else ["gpus", "list"]) == 2
    assert_one_line(capsys.readouterr().err, "character device", "zero.toml")


@needs_dev
def test_dev_urandom_named_directly(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workload", "check", "/dev/urandom"]) == 2
    assert_one_line(capsys.readouterr().err, "/dev/urandom", "character device")


@pytest.mark.parametrize(("ident", "name", "argv"), [(i, n, a) for i, n, a in READERS], ids=[r[0] for r in READERS])
def test_directory_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, ident: str, name: str,
                              argv: Callable[[Path], list[str]]) -> None:
    path = tmp_path / name
    args = argv(path)
    path.mkdir()
    assert main(args) == 2
    assert_one_line(capsys.readouterr().err, "directory", name)


@pytest.mark.parametrize(("ident", "name", "argv", "size"), [
    ("workload", "w.toml", READERS[0][2], 1_000_001),
    ("calibration", "cal.json", READERS[4][2], 1_000_001),
    ("hf-config", "config.json", READERS[5][2], 2_000_001),
    ("sidecar", "t.json", READERS[7][2], 16_000_001),
], ids=["workload", "calibration", "hf-config", "sidecar"])
def test_file_over_its_limit_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, ident: str, name: str,
                                        argv: Callable[[Path], list[str]], size: int) -> None:
    path = tmp_path / name
    args = argv(path)
    path.write_bytes(b" " * size)  # whitespace: valid text, so only the size can be the problem
    assert main(args) == 2
    assert_one_line(capsys.readouterr().err, "limit", name)


def test_proc_file_reporting_size_0_is_still_bounded(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """/proc files report st_size 0: the bytes read are bounded, not the size stat() gives."""
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc")
    assert main(["workload", "check", "/proc/self/status"]) == 2  # read (it is small), then not TOML
    assert_one_line(capsys.readouterr().err, "/proc/self/status", "TOML")


# --- parser bombs: nesting thousands deep and integers of thousands of digits --------------------------

DEEP_JSON = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"
BIG_INT = "9" * 5000
PARSER_CASES = [
    ("toml-deep", "w.toml", "x = " + "[" * 5000 + "]" * 5000 + "\n", READERS[0][2], "nested too deeply"),
    ("toml-deep-tables", "w.toml", "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n", READERS[0][2], "nested"),
    ("yaml-deep", "w.yaml", "x: " + "[" * 5000 + "]" * 5000 + "\n", READERS[1][2], "nested too deeply"),
    ("toml-big-int", "w.toml", f'task = "serve"\nmodel = "llama-3.1-8b"\n[money]\npue = {BIG_INT}\n', READERS[0][2],
     "more than 4300 digits"),
    ("yaml-big-int", "w.yaml", f"task: serve\nmodel: llama-3.1-8b\nmoney:\n  pue: {BIG_INT}\n", READERS[1][2],
     "more than 4300 digits"),
    ("calibration-deep", "cal.json", DEEP_JSON, READERS[4][2], "nested too deeply"),
    ("calibration-big-int", "cal.json", f'{{"gemm_efficiency_max": {BIG_INT}}}', READERS[4][2], "4300 digits"),
    ("hf-config-deep", "config.json", DEEP_JSON, READERS[5][2], "nested too deeply"),
    ("hf-config-big-int", "config.json", f'{{"model_type": "llama", "hidden_size": {BIG_INT}}}', READERS[5][2],
     "4300 digits"),
    ("sidecar-deep", "t.json", DEEP_JSON, READERS[7][2], "nested too deeply"),
    ("sidecar-big-int", "t.json", f'{{"interval_s": {BIG_INT}}}', READERS[7][2], "4300 digits"),
    ("trace-big-int", "t.csv", "t_s,gpu_index,power_avg_w\n0,0," + BIG_INT + "\n", READERS[6][2], "finite"),
]


@pytest.mark.parametrize(("ident", "name", "text", "argv", "says"), PARSER_CASES, ids=[c[0] for c in PARSER_CASES])
def test_parser_bombs_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, ident: str, name: str,
                                   text: str, argv: Callable[[Path], list[str]], says: str) -> None:
    if "yaml" in ident:
        pytest.importorskip("yaml")
    path = tmp_path / name
    args = argv(path)
    path.write_text(text, encoding="utf-8")
    assert main(args) == 2
    assert_one_line(capsys.readouterr().err, says)


# --- --calibration values -----------------------------------------------------------------------------

CALIBRATIONS = [
    ('{"gemm_efficiency_max": NaN}', "NaN"),
    ('{"memory_efficiency_max": Infinity}', "Infinity"),
    ('{"nvlink_efficiency": 1e999}', "float range"),
    ('{"gemm_efficiency_max": 1.5}', "'gemm_efficiency_max' = 1.5 is out of range"),
    ('{"gemm_efficiency_max": 0}', "'gemm_efficiency_max' = 0 is out of range"),
    ('{"pcie_efficiency": -0.5}', "'pcie_efficiency' = -0.5 is out of range"),
    ('{"kernel_overhead_s": 3600}', "'kernel_overhead_s' = 3600 is out of range"),
    ('{"internode_bytes_per_s": 0}', "'internode_bytes_per_s' = 0 is out of range"),
    ('{"gemm_efficiency_max": 0.9, "low_precision_gemm_efficiency_ratio": 1.5}', "over 1"),
    ('{"gemm_efficency_max": 0.5}', "did you mean 'gemm_efficiency_max'"),
    ('{"gemm_efficiency_max": "0.5"}', "'gemm_efficiency_max' must be a number"),
    ('{"gemm_efficiency_max": true}', "'gemm_efficiency_max' must be a number"),
    ('{"basis": "guessed"}', "'basis' must be 'assumed' or 'calibrated'"),
    ('{"fitted_on": "H200"}', "'fitted_on' must be a list"),
    ('{"calibration": {"gemm_efficiency_max": 0.5}, "extra": 1}', "'extra'"),
    ("[0.5]", "not an object"),
]


@pytest.mark.parametrize(("text", "says"), CALIBRATIONS, ids=[c[1][:30] for c in CALIBRATIONS])
def test_bad_calibration_is_refused_naming_the_field(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str,
                                                      says: str) -> None:
    path = tmp_path / "cal.json"
    path.write_text(text, encoding="utf-8")
    assert main([*EST, "--calibration", str(path)]) == 2
    assert_one_line(capsys.readouterr().err, says, str(path))


def test_valid_calibration_changes_the_basis(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    path.write_text('{"gemm_efficiency_max": 0.3, "memory_efficiency_max": 0.5}', encoding="utf-8")
    assert main([*EST, "--format", "json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert main([*EST, "--calibration", str(path), "--format", "json"]) == 0
    given = json.loads(capsys.readouterr().out)
    assert default["basis"] == "assumed"
    assert given["basis"] == f"calibrated from file {path}"
    assert "gemm_efficiency_max, memory_efficiency_max" in given["provenance"]
    assert given["tpot_s"] > default["tpot_s"]  # a lower memory efficiency slows decode down


# --- traces that would run away ------------------------------------------------------------------------

HEADER = ",".join(SAMPLE_FIELDS)


def _row(t: float) -> str:
    return f"{t},0,300,300" + "," * (len(SAMPLE_FIELDS) - 4)


def test_replay_of_billions_of_samples_is_refused_up_front(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    path = tmp_path / "years.csv"
    path.write_text(f"{HEADER}\n{_row(0)}\n{_row(1e9)}\n", encoding="utf-8")  # 31 years...
    (tmp_path / "years.json").write_text('{"interval_s": 0.05}', encoding="utf-8")  # ...at 20 Hz
    t0 = time.process_time()
    assert main(["monitor", "--replay", str(path), "--no-store"]) == 2
    assert_one_line(capsys.readouterr().err, "2e+10 samples", "--interval")
    assert time.process_time() - t0 < 30  # refused before building them (a loose bound: not a timing test)


def test_sidecar_listing_100k_devices_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    side = tmp_path / "t.json"
    trace = _trace_with(side)
    side.write_text(json.dumps({"devices": [{"index": i, "name": "x"} for i in range(100_000)]}), encoding="utf-8")
    assert main(["monitor", "--replay", str(trace), "--no-store"]) == 2
    assert_one_line(capsys.readouterr().err, "100,000 entries", "1,024")


def test_trace_over_the_row_limit_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from gpumatch.telemetry import trace

    monkeypatch.setattr(trace, "MAX_TRACE_ROWS", 100)  # the real limit (2 million) is too slow to write here
    path = tmp_path / "long.csv"
    path.write_text(HEADER + "\n" + "\n".join(_row(i * 0.1) for i in range(101)) + "\n", encoding="utf-8")
    assert main(["monitor", "--replay", str(path), "--no-store"]) == 2
    assert_one_line(capsys.readouterr().err, "more than 100 samples")


def test_trace_over_the_byte_limit_is_refused_while_streaming(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from gpumatch.telemetry import trace

    monkeypatch.setattr(trace, "MAX_TRACE_BYTES", 10_000)
    path = tmp_path / "big.csv"
    path.write_text(HEADER + "\n" + "\n".join(_row(i * 0.1) for i in range(1000)) + "\n", encoding="utf-8")
    assert main(["monitor", "--replay", str(path), "--no-store"]) == 2
    assert_one_line(capsys.readouterr().err, "10 kB limit")


# --- ASCII-only stdout ---------------------------------------------------------------------------------

TABLE_COMMANDS = [
    ["gpus", "list"], ["gpus", "show", "H100 SXM"], ["models", "list"], ["models", "show", "llama-3.1-8b"],
    ["workload", "check", str(EXAMPLE)], [*EST, "--curve"], ["plan", str(EXAMPLE)], ["doctor", "--no-torch"],
    ["monitor", "--replay", str(TRACE), "--no-store"], ["runs", "list"], ["--help"], ["plan", "--help"],
]
ASCII_SCRIPT = """
import sys
from gpumatch.cli.app import main
for argv in {commands!r}:
    sys.stdout.write("=== " + " ".join(argv) + "\\n")
    sys.stdout.flush()
    sys.stderr.write("CODE %d %s\\n" % (main(argv), " ".join(argv)))
"""


def _run_all(home: Path, encoding: str) -> tuple[bytes, list[str]]:
    script = ASCII_SCRIPT.format(commands=TABLE_COMMANDS)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300, cwd=ROOT, check=False,
                       env={**os.environ, "PYTHONIOENCODING": encoding, "GPUMATCH_HOME": str(home),
                            "COLUMNS": "100"})
    codes = [line for line in r.stderr.decode(encoding, "replace").splitlines() if line.startswith("CODE ")]
    assert len(codes) == len(TABLE_COMMANDS), r.stderr.decode(encoding, "replace")[-2000:]
    return r.stdout, codes


def test_every_table_degrades_on_an_ascii_or_latin1_stdout(tmp_path: Path) -> None:
    """One interpreter per encoding runs every command; each exits 0 (before: UnicodeEncodeError, exit 1), prints
    only what the encoding has, and as many lines as under UTF-8 (characters are replaced, nothing dropped)."""
    utf8, codes = _run_all(tmp_path, "utf-8")
    assert all(c.startswith("CODE 0 ") for c in codes), codes
    assert not utf8.isascii()  # there is something to degrade: "×", "≥", box drawing in --help...
    for encoding in ("ascii", "latin-1"):
        out, codes = _run_all(tmp_path, encoding)
        assert all(c.startswith("CODE 0 ") for c in codes), (encoding, codes)
        text = out.decode(encoding)  # strict: every byte is in the encoding
        assert text.count("\n") == utf8.decode("utf-8").count("\n"), encoding


def test_degrade_table() -> None:
    from gpumatch.cli.console import ascii_equivalent

    assert [ascii_equivalent(c) for c in "×≥≤µ±→…–—\u00a0²é─│┼"] == \
        ["x", ">=", "<=", "u", "+/-", "->", "...", "-", "-", " ", "^2", "e", "-", "|", "+"]
    assert ascii_equivalent("卡") == "?"


# --- exit codes: Ctrl-C, SIGTERM, typer.Exit, closed stdout ------------------------------------------

LONG_PLAN = ["plan", "--model", "llama-3.1-70b", "--task", "train", "--batch", "512", "--seq", "4096",
             "--max-gpus", "800"]  # ~3 s of search (the planner refuses more than ~824 here)


@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGINT, 130, "interrupted"),
                                                   (signal.SIGTERM, 143, "terminated")], ids=["sigint", "sigterm"])
def test_signal_during_a_plan_exits_with_one_line(tmp_path: Path, sig: int, code: int, word: str) -> None:
    """Before: Ctrl-C during a plan exited 0 and printed nothing."""
    p = subprocess.Popen([sys.executable, "-c", ENTRY, *LONG_PLAN], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=ROOT, env={**os.environ, "GPUMATCH_HOME": str(tmp_path)})
    _wait_until_running(p, cpu_s=1.0)  # past start-up (~0.4 s): the search is under way
    if p.poll() is not None:
        pytest.skip(f"the plan finished in under the wait (exit {p.returncode}): nothing left to interrupt")
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    assert err == f"gpumatch: {word}\n"


def _wait_until_running(p: subprocess.Popen[str], cpu_s: float) -> None:
    """Until the child used ``cpu_s`` of CPU (from /proc; else that long on the wall clock)."""
    stat = Path(f"/proc/{p.pid}/stat")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        if not stat.exists():
            time.sleep(cpu_s)
            return
        fields = stat.read_text().rsplit(")", 1)[1].split()
        if (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") >= cpu_s:
            return
        time.sleep(0.05)


def test_ctrl_c_while_the_commands_import_is_one_line() -> None:
    """The signal lands while gpumatch.cli.app imports its command modules (before main() runs)."""
    script = (
        "import builtins, os, signal, sys, time\n"
        "real = builtins.__import__\n"
        "def hook(name, globals=None, locals=None, fromlist=(), level=0):\n"
        "    if name == 'gpumatch.cli' and fromlist and 'plan' in fromlist:\n"
        "        os.kill(os.getpid(), signal.SIGINT); time.sleep(1)\n"
        "    return real(name, globals, locals, fromlist, level)\n"
        "builtins.__import__ = hook\n"
        "from gpumatch.cli.app import main\n"
        "sys.exit(main(['gpus', 'list']))\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT,
                       check=False)
    assert r.returncode == 130 and r.stderr == "gpumatch: interrupted\n" and r.stdout == "", r


def test_ctrl_c_while_rendering_is_one_line(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(text: str) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(sys.stdout, "write", interrupted)  # the first line of the table
    assert main(["gpus", "list"]) == 130
    monkeypatch.undo()
    assert capsys.readouterr().err == "gpumatch: interrupted\n"


def test_typer_exit_code_is_kept(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``raise typer.Exit(3)`` inside a command used to be returned by typer and dropped by main() (exit 0)."""
    import typer

    def fail(text: str) -> int:
        raise typer.Exit(3)

    monkeypatch.setattr(sys.stdout, "write", fail)
    assert main(["gpus", "list"]) == 3


def test_closed_stdout_exits_141_quietly(tmp_path: Path) -> None:
    p = subprocess.Popen([sys.executable, "-c", ENTRY, "gpus", "list", "--format", "json"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT, env={**os.environ, "GPUMATCH_HOME": str(tmp_path)})
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # the reader goes away before gpumatch writes (as `| head -0` would)
    err = p.stderr.read()
    assert p.wait(timeout=60) == 141 and err == b"", err


def test_exit_codes_are_documented() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    for code in ("| 0 |", "| 1 |", "| 2 |", "| 3 |", "| 74 |", "| 130 |", "| 141 |", "| 143 |"):
        assert code in section
    r = gpumatch(["--help"], env={"COLUMNS": "200"})
    assert r.returncode == 0 and "Exit codes: 0 ok, 1 internal error, 2 bad input" in r.stdout
