"""Batching telemetry samples into few transactions while bounding what a crash can lose.

A sampler at 10-20 Hz that committed every sample would pay one fsync per sample (about 4 ms each on the
development VM, see benchmarks/bench_store.py). :class:`SampleBuffer` commits when ``max_rows`` samples
are waiting or ``flush_interval_s`` has passed since the last commit, whichever comes first, so a killed
process loses at most that window. Thread-safe: a sampler thread may ``add`` while another ``flush``es.

The buffer knows nothing of the store: it validates samples into rows and hands each batch to a ``write``
callable (``Store.sample_buffer`` passes its own row writer; the recording spine passes one that keeps what
the store refused). A batch whose ``write`` raises stays queued, ahead of later samples.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType

from gpumatch.store.samples import SampleRow, sample_row

Sample = Mapping[str, float | int | None]
WriteRows = Callable[[Sequence[SampleRow]], None]
"""Commits one batch of validated rows in one transaction (all or none), or raises."""


class SampleBuffer:
    """Collects samples for one run and commits them in batches through ``write`` (``with`` flushes on exit)."""

    def __init__(self, write: WriteRows, run_id: int, flush_interval_s: float = 1.0, max_rows: int = 1000) -> None:
        self._write = write
        self._run_id = run_id
        self._interval_s = flush_interval_s
        self._max_rows = max_rows
        self._pending: list[SampleRow] = []
        self._lock = threading.Lock()
        self._last_flush = time.monotonic()
        self.rows_written = 0

    @property
    def pending(self) -> int:
        """Samples validated and waiting for the next commit."""
        return len(self._pending)

    def add(self, sample: Sample) -> None:
        """Validate (StoreError at once for a bad sample) and queue one sample; commits the batch when due."""
        self.extend([sample])

    def extend(self, samples: Iterable[Sample]) -> None:
        """Validate every sample first (a bad one: StoreError and none of them queued), queue them, and commit
        everything waiting in one transaction when due (``max_rows`` waiting or ``flush_interval_s`` passed)."""
        start = self.rows_written + len(self._pending)
        rows = [sample_row(self._run_id, s, start + i) for i, s in enumerate(samples)]
        with self._lock:
            self._pending.extend(rows)
            due = len(self._pending) >= self._max_rows or time.monotonic() - self._last_flush >= self._interval_s
        if due:
            self.flush()

    def flush(self) -> int:
        """Commit what is waiting now; returns how many rows were written (a failed write raises, rows kept)."""
        with self._lock:
            batch, self._pending = self._pending, []
            self._last_flush = time.monotonic()
            if not batch:
                return 0
            try:
                self._write(batch)
            except BaseException:
                self._pending = batch + self._pending
                raise
            self.rows_written += len(batch)
            return len(batch)

    def take_pending(self) -> list[SampleRow]:
        """Remove and return the rows not committed (a caller giving up on the store keeps them elsewhere)."""
        with self._lock:
            batch, self._pending = self._pending, []
            return batch

    def __enter__(self) -> SampleBuffer:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.flush()
