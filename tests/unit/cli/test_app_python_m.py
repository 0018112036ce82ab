"""``python -m gpumatch`` runs the same command line as the console script (exit codes included)."""

from __future__ import annotations

import subprocess
import sys


def test_python_m_gpumatch_runs_a_command_and_keeps_the_exit_codes() -> None:
    ok = subprocess.run([sys.executable, "-m", "gpumatch", "gpus", "show", "H200 SXM", "--format", "json"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and '"name": "H200 SXM 141GB"' in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "gpumatch", "gpus", "show", "no-such-card"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("gpumatch: ")
