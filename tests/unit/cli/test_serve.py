"""``gpumatch serve`` from the command line: bad input exits 2 with one line; a real process serves, answers
``/health``, and Ctrl-C ends it with 130 and one line; the command modules import no torch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumatch.cli.app import app, main

SRC = str(Path(__file__).parents[3] / "src")


def test_bad_options_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--tiny", "--max-model-len", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["gpumatch: error: --max-model-len must be at least 1, not 0"]
    assert main(["serve", "--model", "no-such-model-xyz"]) == 2


def test_help_has_examples() -> None:
    r = CliRunner(env={"COLUMNS": "80"}).invoke(app, ["serve", "--help"])
    assert r.exit_code == 0 and "gpumatch serve --tiny --port 8000" in r.output and "--enforce-eager" in r.output


def test_command_modules_import_no_torch() -> None:
    code = ("import sys, gpumatch.cli.app, gpumatch.cli.serve, gpumatch.usecases.serve, gpumatch.report.serve;"
            "gpumatch.cli.app._register(); print(sorted(m for m in ('torch', 'aiohttp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": SRC})
    assert out.stdout.strip() == "[]"


def test_serves_then_ctrl_c_exits_130() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("aiohttp")
    proc = subprocess.Popen([sys.executable, "-m", "gpumatch", "serve", "--tiny", "--port", "0",
                             "--max-num-seqs", "2", "--max-model-len", "64"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": SRC})
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("gpumatch serve: listening on http://127.0.0.1:"), first
        url = first.split()[-1]
        for line in [proc.stdout.readline() for _ in range(4)]:
            assert len(line.rstrip("\n")) <= 80
        with urllib.request.urlopen(url + "/health", timeout=10) as r:
            assert json.load(r) == {"status": "ok"}
        req = urllib.request.Request(url + "/v1/completions", data=json.dumps({"prompt": "a b", "max_tokens": 3})
                                     .encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert json.load(r)["usage"]["completion_tokens"] == 3
        time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert err.strip().splitlines()[-1] == "gpumatch: interrupted"
