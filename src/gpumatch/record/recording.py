"""The recording spine: one run of a measuring command, written to the results store as it goes.

Every measuring command (``gpumatch monitor``; ``bench run``, ``bench serve`` and ``bench scale`` as they
land) records through :class:`Recording`; the CLI never writes to the store itself::

    from gpumatch.record import Recording

    with Recording("bench", "gemm-bf16", manifest, {"m": 8192}) as rec:    # opens the store, begins the run
        rec.add_samples(samples)                          # telemetry.types.Sample objects or sample mappings
        rec.add_result("gemm_flops_per_s", 6.1e14, "flop/s", config={"m": 8192})
        rec.add_failure({"batch": 64}, "OutOfMemoryError", "CUDA out of memory", log_tail)
        rec.add_event(12.5, "xid", {"xid": 79}, gpu_index=0)
    outcome = rec.outcome        # run_id, saved, the store error and the fallback files, if any

Leaving the block closes the run ``completed``; an exception closes it ``failed`` (``interrupted`` for
KeyboardInterrupt) with the reason in its summary, and propagates. ``close(status, summary)`` closes it
explicitly (once; later calls return the same outcome).

**A store problem never stops the measurement.** The first :class:`~gpumatch.errors.GpumatchError` from the
store (cannot open, damaged, locked, disk full) is kept in ``error`` and reported once to ``on_store_error``;
the run begun in the store is closed ``interrupted`` with what it took, and from then on everything is kept in
memory. At close, what the store did not take goes to a fallback file created exclusively
(:mod:`gpumatch.record.fallback`): the ``trace`` handed to :meth:`Recording.close` when there is one (its
telemetry recomputes the run: ``gpumatch monitor --replay``), else a JSON run record of the unstored samples,
results, failures and events. Files that already hold the run (``kept``: an ``--output`` trace, a replayed
file) are reported instead of writing another.

Samples are validated and committed in batches (:class:`~gpumatch.store.buffer.SampleBuffer`): every
``flush_interval_s`` (0: at every :meth:`Recording.add_samples` call) or 1000 rows, and at close; one call's
samples are committed in one transaction. Results, failures and events are committed one by one, at once.
Torch-free and NVML-free: a caller brings its own samples (a sampler, a load generator, a replay).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from gpumatch.errors import GpumatchError
from gpumatch.record.fallback import write_record_fallback, write_trace_fallback
from gpumatch.store import SampleBuffer, Store, open_store
from gpumatch.store.samples import row_to_sample
from gpumatch.telemetry.trace import Trace
from gpumatch.telemetry.types import Sample

StoreErrorHook = Callable[[GpumatchError], None]


@dataclass(frozen=True)
class RecordingOutcome:
    """How a recording ended.

    ``run_id``: the run in the store (None when none was begun); ``store_path``: the store file; ``status``:
    ``completed`` / ``failed`` / ``interrupted`` as closed; ``saved``: the whole run is in the store with that
    status; ``error``: the first store error (None when saved or when the store was not used); ``fallback``:
    the files that hold what the store did not take (empty when saved, or when nothing could be written)."""

    run_id: int | None
    store_path: Path | str | None
    status: str
    saved: bool
    error: GpumatchError | None = None
    fallback: tuple[Path, ...] = ()


class Recording:
    """One run being recorded (see the module docstring). Not shared across ``fork()``; one thread at a time,
    except :meth:`add_samples`, which a sampler thread may call while another thread adds results."""

    def __init__(self, kind: str, name: str, manifest: Mapping[str, Any], config: Mapping[str, Any], *,
                 use_store: bool = True, store_path: Path | str | None = None,
                 on_store_error: StoreErrorHook | None = None, keep_samples: bool = True,
                 flush_interval_s: float = 1.0) -> None:
        """Open the store for writing (``store_path``, default ``$GPUMATCH_STORE`` or the home store) and
        begin the run. ``use_store=False`` records nothing and writes no fallback (``--no-store``).
        ``keep_samples=False``: samples the store did not take are not kept in memory, because the caller
        holds them in the trace it hands to :meth:`close`."""
        self.kind, self.name = kind, name
        self.manifest, self.config = dict(manifest), dict(config)
        self.use_store = use_store
        self.error: GpumatchError | None = None
        self.run_id: int | None = None
        self.store_path: Path | str | None = None
        self.outcome: RecordingOutcome | None = None
        self._store: Store | None = None
        self._buffer: SampleBuffer | None = None
        self._on_store_error = on_store_error
        self._keep_samples = keep_samples
        self._unstored: dict[str, list[Any]] = {"samples": [], "results": [], "failures": [], "events": []}
        if use_store:
            self._open(store_path, flush_interval_s)

    def _open(self, store_path: Path | str | None, flush_interval_s: float) -> None:
        try:
            self._store = open_store(store_path, mode="write")
            self.store_path = self._store.path
            self.run_id = self._store.begin_run(self.kind, self.name, self.manifest, self.config)
            self._buffer = self._store.sample_buffer(self.run_id, flush_interval_s)
        except GpumatchError as e:
            self._fail(e)

    @property
    def storing(self) -> bool:
        """The store is taking this run (no store error so far)."""
        return self._store is not None and self._buffer is not None

    # ---- what a run records ------------------------------------------------------------------------
    def add_samples(self, samples: Iterable[Sample | Mapping[str, Any]]) -> None:
        """Telemetry samples (keys: :data:`~gpumatch.telemetry.types.SAMPLE_FIELDS`, SI units, ``t_s`` in
        seconds required); queued and committed in one transaction when due (see the module docstring)."""
        rows = [s.to_dict() if isinstance(s, Sample) else dict(s) for s in samples]
        if self._buffer is None:
            self._keep("samples", rows)
            return
        before = self._buffer.pending + self._buffer.rows_written
        try:
            self._buffer.extend(rows)
        except GpumatchError as e:
            if self._buffer.pending + self._buffer.rows_written == before:  # refused before being queued
                self._keep("samples", rows)
            self._fail(e)

    def add_result(self, metric: str, value: float, unit: str, *, config: Mapping[str, Any] | None = None,
                   extra: Mapping[str, Any] | None = None) -> None:
        """One measured value: ``value`` finite, in the SI ``unit`` (``"W"``, ``"J"``, ``"s"``, ``"flop/s"``...)."""
        cfg, ext = None if config is None else dict(config), None if extra is None else dict(extra)
        self._write("results", {"metric": metric, "value": value, "unit": unit, "config": cfg, "extra": ext},
                    lambda st, run_id: st.add_result(run_id, metric, value, unit, config=cfg, extra=ext))

    def add_failure(self, config: Mapping[str, Any], error_class: str, message: str, log_excerpt: str = "") -> None:
        """A configuration that failed (OOM, a crash...), with its error class, message and the log's tail."""
        cfg = dict(config)
        row = {"config": cfg, "error_class": error_class, "message": message, "log_excerpt": log_excerpt}
        self._write("failures", row, lambda st, run_id: st.add_failure(run_id, cfg, error_class, message, log_excerpt))

    def add_event(self, t_s: float, kind: str, data: Mapping[str, Any], gpu_index: int | None = None) -> None:
        """Something that happened at ``t_s`` (seconds, the samples' clock): an Xid, a window-edge counter read."""
        d = dict(data)
        row = {"t_s": t_s, "kind": kind, "data": d, "gpu_index": gpu_index}
        self._write("events", row, lambda st, run_id: st.add_event(run_id, t_s, kind, d, gpu_index=gpu_index))

    # ---- closing -----------------------------------------------------------------------------------
    def close(self, status: str = "completed", summary: Mapping[str, Any] | None = None, *,
              trace: Trace | None = None, kept: Sequence[Path] = ()) -> RecordingOutcome:
        """End the run ``completed`` / ``failed`` / ``interrupted`` with ``summary``; once (later calls return
        the first outcome). When the store did not take the run: the files in ``kept``, else ``trace`` as a
        fallback trace, else a fallback run record of what it did not take (only if there is any)."""
        if self.outcome is not None:
            return self.outcome
        self._flush()
        if self._store is not None and self.run_id is not None:
            try:
                self._store.end_run(self.run_id, status, summary=None if summary is None else dict(summary))
                self._store.close()
                self._store = None
            except GpumatchError as e:
                self._fail(e)
        saved = self.use_store and self.error is None
        fallback = () if saved or not self.use_store else tuple(kept) or self._write_fallback(status, summary, trace)
        self.outcome = RecordingOutcome(self.run_id, self.store_path, status, saved, self.error, fallback)
        return self.outcome

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if et is None:
            self.close("completed")
        elif issubclass(et, KeyboardInterrupt):
            self.close("interrupted", {"reason": et.__name__})
        else:
            self.close("failed", {"reason": f"{et.__name__}: {ev}"})

    # ---- the store's failure -----------------------------------------------------------------------
    def _write(self, table: str, row: dict[str, Any], call: Callable[[Store, int], object]) -> None:
        if self._store is None or self.run_id is None:
            self._keep(table, [row])
            return
        try:
            call(self._store, self.run_id)
        except GpumatchError as e:
            self._keep(table, [row])
            self._fail(e)

    def _flush(self) -> None:
        if self._buffer is not None:
            try:
                self._buffer.flush()
            except GpumatchError as e:
                self._fail(e)

    def _keep(self, table: str, rows: list[Any]) -> None:
        if self.use_store and (table != "samples" or self._keep_samples):
            self._unstored[table].extend(rows)

    def _fail(self, e: GpumatchError) -> None:
        """Give up on the store: report once, keep the queued samples, close the run there as interrupted."""
        first = self.error is None
        self.error = self.error or e
        if self._buffer is not None:
            self._keep("samples", [row_to_sample(r[1:]) for r in self._buffer.take_pending()])
            self._buffer = None
        if self._store is not None:
            with contextlib.suppress(GpumatchError):
                self._store.close(reason=f"store error: {e}"[:500])  # ends the begun run, if the file takes it
            self._store = None
        if first and self._on_store_error is not None:
            self._on_store_error(e)

    def _write_fallback(self, status: str, summary: Mapping[str, Any] | None, trace: Trace | None) -> tuple[Path, ...]:
        if trace is not None:
            return tuple(write_trace_fallback(self.kind, trace))
        if not any(self._unstored.values()):
            return ()
        record = {"kind": self.kind, "name": self.name, "status": status, "summary": summary,
                  "manifest": self.manifest, "config": self.config, "store_run_id": self.run_id,
                  "store_error": str(self.error), **self._unstored}
        return tuple(write_record_fallback(self.kind, record))

