"""Fixtures of the telemetry tests (the synthetic traces live in synth_traces.py)."""

from synth_traces import make_trace

__all__ = ["make_trace"]
