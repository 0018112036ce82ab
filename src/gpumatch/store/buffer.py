"""Batching telemetry samples into few transactions while bounding what a crash can lose.

A sampler at 10-20 Hz that committed every sample would pay one fsync per sample (about 4 ms each on the
development VM, see benchmarks/bench_store.py). :class:`SampleBuffer` commits when ``max_rows`` samples
are waiting or ``flush_interval_s`` has passed since the last commit, whichever comes first, so a killed
process loses at most that window. Thread-safe: a sampler thread may ``add`` while another ``flush``es.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING

from gpumatch.store.samples import SampleRow, sample_row

if TYPE_CHECKING:
    from gpumatch.store.store import Store

Sample = Mapping[str, float | int | None]


class SampleBuffer:
    """Collects samples for one run and commits them in batches (``with`` flushes on exit)."""

    def __init__(self, store: Store, run_id: int, flush_interval_s: float = 1.0, max_rows: int = 1000) -> None:
        self._store = store
        self._run_id = run_id
        self._interval_s = flush_interval_s
        self._max_rows = max_rows
        self._pending: list[SampleRow] = []
        self._lock = threading.Lock()
        self._last_flush = time.monotonic()
        self.rows_written = 0

    def add(self, sample: Sample) -> None:
        """Validate (StoreError at once for a bad sample) and queue one sample; commits the batch when due."""
        row = sample_row(self._run_id, sample, self.rows_written + len(self._pending))
        with self._lock:
            self._pending.append(row)
            due = len(self._pending) >= self._max_rows or time.monotonic() - self._last_flush >= self._interval_s
        if due:
            self.flush()

    def flush(self) -> int:
        """Commit what is waiting now; returns how many rows were written."""
        with self._lock:
            batch, self._pending = self._pending, []
            self._last_flush = time.monotonic()
            if not batch:
                return 0
            self._store._write_sample_rows(batch)
            self.rows_written += len(batch)
            return len(batch)

    def __enter__(self) -> SampleBuffer:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.flush()
