"""Fixtures of the recording-spine tests: the synthetic traces of the telemetry tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "telemetry"))

from synth_traces import make_trace

__all__ = ["make_trace"]
