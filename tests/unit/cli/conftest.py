"""Fixtures of the command-line tests: the synthetic traces and the stand-in pynvml of the telemetry tests
(tests/unit/telemetry/synth_traces.py, test_nvml_backend.py), importable here as they are there."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "telemetry"))

from synth_traces import make_trace

__all__ = ["make_trace"]
