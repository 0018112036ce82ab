"""The recording spine: how every measuring command writes a run (see docs/store.md, "Recording a run").

- :mod:`gpumatch.record.recording` — :class:`Recording`: open a run with its manifest, stream samples, add
  results, failed configurations and events, close it completed / failed / interrupted; a fallback file
  when the store cannot be written. ``gpumatch monitor`` uses it; ``bench run``, ``bench serve`` and
  ``bench scale`` are to use it unchanged.
- :mod:`gpumatch.record.fallback` — the fallback files, created exclusively (never through a planted link).
- :mod:`gpumatch.record.monitor` — :func:`run_monitor`, the one library call behind ``gpumatch monitor``.

Layer: above ``store`` and ``telemetry`` (it joins them), below ``bench`` (which will record through it).
Imports neither torch nor pynvml (NVML only through ``telemetry.nvml``, when a live monitor opens it).
"""

from gpumatch.record.recording import Recording, RecordingOutcome

__all__ = ["Recording", "RecordingOutcome"]
