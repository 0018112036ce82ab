"""Issue 25 (Reliability), "Clear errors": each case used to exit 0 doing the wrong thing, or exit 1 with
"internal error, please report"; now it is one line and the documented exit code (README "Exit codes").

- a store URL of a scheme gpumatch cannot open (``mysql://``, ``http://``, ``s3://``) was read as a relative path
  and created as folders, exit 0;
- a missing optional extra (torch, matplotlib, aiohttp, ...) was an internal error; ``bench compare`` of two
  stored runs imported torch although it measures nothing;
- a run id above SQLite's 64-bit INTEGER was an OverflowError (exit 1);
- stdout on a full device (``> /dev/full``) was an internal error (now exit 74);
- ``monitor -o FILE`` overwrote an existing trace.

Missing modules are simulated the way a real absence looks: a meta-path finder that raises
``ModuleNotFoundError(name=...)`` for the module, in a fresh interpreter (``sys.modules[name] = None`` confuses
libraries that probe ``sys.modules``, such as scipy's array-API layer).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpumatch.cli.app import EXIT_IO, main
from gpumatch.errors import OPTIONAL_MODULES, MissingExtraError, missing_extra

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "traces" / "h200-2026-12-02-gemm-bf16.csv"
BLOCKED = """
import sys
class Absent:
    def __init__(self, names): self.names = set(names)
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Absent(sys.argv[1].split(",")))
from gpumatch.cli.app import main
sys.exit(main(sys.argv[2:]))
"""


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("gpumatch: ") and "Traceback" not in err, err
    return err


def without(modules: str, args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``gpumatch ARGS`` in a fresh interpreter where ``modules`` (comma-separated) are not installed."""
    return subprocess.run([sys.executable, "-c", BLOCKED, modules, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=False)


# --- 1. store URLs of other schemes ---------------------------------------------------------------------------

SCHEME_CASES = [
    ("push-mysql", ["runs", "push", "--to", "mysql://me@db/gpumatch"], "mysql://"),
    ("push-http", ["runs", "push", "--to", "http://127.0.0.1:9/store"], "http://"),
    ("merge-into-s3", ["runs", "merge", "a.sqlite", "--into", "s3://bucket/pool.sqlite"], "s3://"),
    ("merge-source-s3", ["runs", "merge", "a.sqlite", "s3://bucket/x", "--into", "pool.sqlite"], "s3://"),
    ("pull-two-slashes", ["runs", "pull", "--from", "sqlite://x.sqlite"], "sqlite://"),
    ("list", ["runs", "list", "--store", "ftp://host/x.sqlite"], "ftp://"),
    ("show", ["runs", "show", "1", "--store", "mysql://x/y"], "mysql://"),
    ("bench-list", ["bench", "list", "--store", "redis://127.0.0.1/0"], "redis://"),
]


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.mark.parametrize(("ident", "args", "scheme"), SCHEME_CASES, ids=[c[0] for c in SCHEME_CASES])
def test_unknown_store_scheme_is_refused_creating_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch, ident: str,
                                                         args: list[str], scheme: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["monitor", "--replay", str(TRACE)]) == 0  # a default store (in $GPUMATCH_HOME) to push from
    capsys.readouterr()
    before = _tree(work)
    assert main(args) == 2
    err = one_line(capsys.readouterr().err)
    assert f"unknown scheme '{scheme}'" in err and "postgresql://" in err and "sqlite:///" in err
    assert _tree(work) == before  # no 'mysql:' / 's3:' folders, no new store


def test_unknown_scheme_in_gpumatch_store_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUMATCH_STORE", "mysql://me@db/gpumatch")
    assert main(["runs", "list"]) == 2
    assert "GPUMATCH_STORE 'mysql://me@db/gpumatch': unknown scheme" in one_line(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


def test_the_schemes_that_work_still_open(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A plain path, ``sqlite:///`` and a Windows-style drive letter are paths, not URLs."""
    assert main(["monitor", "--replay", str(TRACE)]) == 0  # the default store, created
    capsys.readouterr()
    home_store = Path(os.environ["GPUMATCH_HOME"]) / "results.sqlite"
    for name in (str(home_store), f"sqlite:///{home_store}"):
        assert main(["runs", "list", "--store", name, "--format", "json"]) == 0
        assert len(json.loads(capsys.readouterr().out)) == 1
    assert main(["runs", "list", "--store", "C:/no/such.sqlite"]) == 2
    assert "no results store" in capsys.readouterr().err


# --- 2. a missing optional extra ------------------------------------------------------------------------------

def test_missing_extra_maps_only_optional_modules() -> None:
    for module, extra in OPTIONAL_MODULES.items():
        err = missing_extra(ModuleNotFoundError(f"No module named {module!r}", name=f"{module}.sub"))
        assert isinstance(err, MissingExtraError) and err.extra == extra and err.exit_code == 2
        assert f"pip install 'gpumatch[{extra}]'" in str(err)
    assert missing_extra(ModuleNotFoundError("No module named 'numpy'", name="numpy")) is None
    assert missing_extra(ImportError("cannot import name 'x' from partially initialized module")) is None


@pytest.mark.parametrize(("module", "args", "extra"), [
    ("matplotlib", ["report", "examples/dev-box.toml", "--html", "{tmp}/r.html"], "report"),
    ("aiohttp", ["bench", "serve", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "-n", "1", "-c", "1",
                 "--store", "{tmp}/s.sqlite"], "serve"),
    ("pyarrow", ["monitor", "--replay", str(TRACE), "--no-store", "-o", "{tmp}/t.parquet"], "parquet"),
], ids=["report-html", "bench-serve", "parquet"])
def test_missing_extra_is_one_line_naming_it(tmp_path: Path, module: str, args: list[str], extra: str) -> None:
    r = without(module, [a.replace("{tmp}", str(tmp_path)) for a in args], ROOT)
    assert r.returncode == 2, r.stderr
    assert f"pip install 'gpumatch[{extra}]'" in r.stderr.splitlines()[-1]
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr


def test_a_missing_required_module_is_still_a_bug(tmp_path: Path) -> None:
    """Only the optional extras are mapped: pydantic is required, so its absence stays an internal error."""
    r = without("pydantic", ["gpus", "list"], ROOT)
    assert r.returncode == 1 and "internal error" in one_line(r.stderr)


@pytest.fixture(scope="module")
def two_bench_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tiny stored bench runs (the launch case only) measured with torch, as a GPU box would store them."""
    pytest.importorskip("torch")
    from gpumatch.lab.run import BenchRequest, run_bench

    store = tmp_path_factory.mktemp("bench") / "runs.sqlite"
    for _ in range(2):
        run_bench(BenchRequest(suite="quick", tiny=True, store=store, only=("launch",)))
    return store


def test_bench_compare_of_stored_runs_needs_no_torch(two_bench_runs: Path, tmp_path: Path) -> None:
    """Before: ModuleNotFoundError torch (bench.manifest imported bench.env, which imports torch), exit 1."""
    r = without("torch", ["bench", "compare", "1", "2", "--store", str(two_bench_runs)], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "launch_eager_s" in r.stdout and "B/A" in r.stdout


# --- 3. run ids beyond SQLite's INTEGER; output to a full device ----------------------------------------------

HUGE = "99999999999999999999"


@pytest.mark.parametrize("args", [
    ["runs", "show", HUGE], ["runs", "export", HUGE, "-o", "x.csv"], ["runs", "list", "--limit", HUGE],
    ["bench", "show", HUGE], ["bench", "compare", "1", HUGE], ["bench", "export", HUGE, "--out", "x.json"],
    ["bench", "list", "--limit", HUGE], ["report", "--run", HUGE], ["calibrate", "--run", HUGE],
    ["runs", "show", "0"], ["runs", "show", "--", "-5"],
], ids=lambda a: "-".join(a[:2]) + ("-" + a[-1][:3] if a[-1] in ("0", "-5") else ""))
def test_run_id_out_of_range_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    err = one_line(capsys.readouterr().err)
    assert "OverflowError" not in err and ("9223372036854775807" in err or "greater than or equal to 1" in err)


def test_the_largest_run_id_is_looked_up(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["monitor", "--replay", str(TRACE)]) == 0
    capsys.readouterr()
    assert main(["runs", "show", str(2**63 - 1)]) == 2
    assert f"no run {2**63 - 1}" in one_line(capsys.readouterr().err)


needs_dev_full = pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")


@needs_dev_full
@pytest.mark.parametrize("args", [["gpus", "list"], ["gpus", "list", "--format", "json"], ["--version"],
                                  ["plan", "examples/dev-box.toml", "--format", "csv"]],
                         ids=["table", "json", "version", "plan-csv"])
def test_stdout_on_a_full_device_is_one_line_and_74(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "gpumatch", *args], stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=120, cwd=ROOT, check=False)
    assert r.returncode == EXIT_IO == 74
    assert "No space left on device" in one_line(r.stderr) and "internal error" not in r.stderr


@needs_dev_full
def test_a_file_written_to_a_full_device_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "examples/dev-box.toml", "--html", "/dev/full", "--force"]) == EXIT_IO
    assert "No space left on device" in one_line(capsys.readouterr().err)


# --- 5. monitor -o refuses to overwrite -----------------------------------------------------------------------

def _monitor_to(out: Path, *extra: str) -> list[str]:
    return ["monitor", "--replay", str(TRACE), "--no-store", "-o", str(out), *extra]


def test_monitor_output_is_not_overwritten_without_force(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    assert main(_monitor_to(out)) == 0
    first = out.read_bytes()
    out.write_bytes(b"mine\n")
    capsys.readouterr()
    assert main(_monitor_to(out)) == 2
    err = one_line(capsys.readouterr().err)
    assert "t.csv already exists" in err and "--force" in err
    assert out.read_bytes() == b"mine\n"  # nothing changed
    assert main(_monitor_to(out, "--force")) == 0
    assert out.read_bytes() == first


def test_monitor_output_refuses_an_existing_sidecar_or_link(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("{}")
    assert main(_monitor_to(tmp_path / "a.csv")) == 2
    assert "a.json already exists" in one_line(capsys.readouterr().err)
    assert not (tmp_path / "a.csv").exists() and (tmp_path / "a.json").read_text() == "{}"
    (tmp_path / "b.csv").symlink_to(tmp_path / "elsewhere.csv")  # dangling: writing would create its target
    assert main(_monitor_to(tmp_path / "b.csv")) == 2
    assert "b.csv already exists" in one_line(capsys.readouterr().err)
    assert not (tmp_path / "elsewhere.csv").exists()
    (tmp_path / "c.csv").mkdir()
    assert main(_monitor_to(tmp_path / "c.csv", "--force")) == 2
    assert "is a directory" in one_line(capsys.readouterr().err)


# --- 6. Ctrl-C in the touched commands is still one line and 130 ---------------------------------------------

@pytest.mark.parametrize(("target", "args"), [
    ("gpumatch.store.merge.copy_store", ["runs", "merge", "{tmp}/a.sqlite", "--into", "{tmp}/b.sqlite"]),
    ("gpumatch.telemetry.trace.write_trace", ["monitor", "--replay", str(TRACE), "--no-store", "-o", "{tmp}/t.csv",
                                              "--force"]),
    ("gpumatch.report.estimate.comparison_text", ["estimate", "--model", "llama-3.1-8b", "--gpu", "H100 SXM",
                                                          "--gpu", "A100 SXM4 80GB"]),
    ("gpumatch.report.plan.none_feasible", ["plan", "examples/chat-70b-serving.toml"]),
], ids=["runs-merge", "monitor-output", "estimate-two-gpus", "plan-empty-role"])
def test_ctrl_c_in_a_touched_command_is_one_line_and_130(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch, target: str,
                                                         args: list[str]) -> None:
    """Ctrl-C lands in the middle of the library call each command makes (where it spends its time). The
    target is patched where it is looked up, after every module that binds it at import is imported (else
    such a module, first imported during the patch, would keep the stand-in after the test)."""
    import importlib

    for bound in ("gpumatch.record.fallback", "gpumatch.report.estimate", "gpumatch.store.export"):
        importlib.import_module(bound)

    def interrupted(*a: object, **k: object) -> None:
        raise KeyboardInterrupt

    module, name = target.rsplit(".", 1)
    monkeypatch.setattr(importlib.import_module(module), name, interrupted)
    monkeypatch.chdir(ROOT)
    assert main([a.replace("{tmp}", str(tmp_path)) for a in args]) == 130
    assert capsys.readouterr().err == "gpumatch: interrupted\n"
