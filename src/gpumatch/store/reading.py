"""The read half of :class:`~gpumatch.store.store.Store`: every query, for a store opened in either mode.

A store opened with ``mode="read"`` has only these; its writer methods refuse with a StoreError. Reads
re-check what they can cheaply: a run's manifest must still hash to its key (``run()`` refuses a mismatch,
``runs()`` marks it in ``RunRecord.manifest_ok``). The whole-file check is :meth:`integrity_check`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gpumatch.errors import StoreError
from gpumatch.store import readers
from gpumatch.store.backend import Backend
from gpumatch.store.connection import Mode
from gpumatch.store.db import recover_hint
from gpumatch.store.records import (
    CalibrationRecord,
    EventRecord,
    FailureRecord,
    MigrationRecord,
    ResultRecord,
    RunRecord,
)
from gpumatch.store.samples import SELECT_SQL, row_to_sample


def manifest_mismatch(path: Path | str, what: str, sha256: str) -> StoreError:
    hint = recover_hint(path) if isinstance(path, Path) else "the row was changed by another SQL client"
    return StoreError(f"{what}: manifest hash mismatch in {path} (the stored manifest no longer hashes to "
                      f"{sha256[:12]}...: the file was changed or damaged)", hint=hint)


class StoreReading:
    """Queries over one connection; built by :func:`~gpumatch.store.store.open_store`."""

    def __init__(self, db: Backend, schema: tuple[str, ...], journal_mode: str, mode: Mode,
                 path: Path | str) -> None:
        self._db = db
        self.journal_mode = journal_mode
        self.mode: Mode = mode
        self.schema = schema
        """Names of the migrations applied in the file (a reader may see an older schema than this code's)."""
        self._run_sql = readers.run_sql(has_uuid=readers.UUID_MIGRATION in schema)
        self._closed = False
        self._pid = os.getpid()
        self._path = path

    @property
    def path(self) -> Path | str:
        """The SQLite file, or the PostgreSQL URL without its password."""
        return self._path

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._db.dialect

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"results store {self.path} is closed", hint="open it again with open_store()")
        if os.getpid() != self._pid:  # a SQLite connection must not be used across fork()
            raise StoreError(f"results store {self.path} was opened in another process (before a fork)",
                             hint="call open_store() in each process")

    def runs(self, kind: str | None = None, limit: int = 100) -> list[RunRecord]:
        """Newest first, at most ``limit``; only ``kind`` when given. A damaged manifest: ``manifest_ok`` False."""
        self._check_open()
        where, args = ("", ()) if kind is None else (" WHERE r.kind = ?", (kind,))
        sql = self._run_sql + where + " ORDER BY r.run_id DESC LIMIT ?"
        return self._db.read("listing runs", lambda c: [readers.run_record(r) for r in c.execute(sql, (*args, limit))])

    def run(self, run_id: int, *, verify: bool = True) -> RunRecord:
        """One run; StoreError "manifest hash mismatch" when its manifest was changed (unless ``verify=False``)."""
        self._check_open()
        rows = self._db.read("reading a run", lambda c: c.execute(self._run_sql + " WHERE r.run_id = ?",
                                                                  (run_id,)).fetchall())
        if not rows:
            raise StoreError(f"no run {run_id} in {self.path}", hint="list runs with: gpumatch runs list")
        record = readers.run_record(rows[0])
        if verify and not record.manifest_ok:
            raise manifest_mismatch(self.path, f"run {run_id}", record.manifest_sha256)
        return record

    def results(self, run_id: int) -> list[ResultRecord]:
        self._check_open()
        return self._db.read("reading results", lambda c: readers.results(c, run_id))

    def samples(self, run_id: int) -> list[dict[str, Any]]:
        """Samples in insertion order, as dicts with every SAMPLE_FIELDS key (None where unsupported)."""
        self._check_open()
        return self._db.read("reading samples", lambda c: [row_to_sample(r, f"run {run_id}: sample #{i + 1}")
                                                           for i, r in enumerate(c.execute(SELECT_SQL, (run_id,)))])

    def events(self, run_id: int) -> list[EventRecord]:
        self._check_open()
        return self._db.read("reading events", lambda c: readers.events(c, run_id))

    def failures(self, run_id: int | None = None) -> list[FailureRecord]:
        self._check_open()
        return self._db.read("reading failures", lambda c: readers.failures(c, run_id))

    def calibrations(self, name: str | None = None) -> list[CalibrationRecord]:
        """Newest first; only ``name`` when given."""
        self._check_open()
        return self._db.read("reading calibrations", lambda c: readers.calibrations(c, name))

    def latest_calibration(self, name: str) -> CalibrationRecord | None:
        """The newest calibration called ``name``, or None if there is none."""
        self._check_open()
        found = self._db.read("reading calibrations", lambda c: readers.calibrations(c, name, latest_only=True))
        return found[0] if found else None

    def export_run(self, run_id: int, samples: bool = False) -> dict[str, Any]:
        """One run as plain JSON-ready data: the run, its results, failures, events (and samples if asked)."""
        out: dict[str, Any] = {
            "run": self.run(run_id).to_dict(),
            "results": [r.to_dict() for r in self.results(run_id)],
            "failures": [f.to_dict() for f in self.failures(run_id)],
            "events": [e.to_dict() for e in self.events(run_id)],
        }
        if samples:
            out["samples"] = self.samples(run_id)
        return out

    def manifest(self, sha256: str) -> dict[str, Any]:
        """The manifest stored under ``sha256``; StoreError if there is none or it no longer hashes to it."""
        self._check_open()
        rows = self._db.read("reading a manifest", lambda c: c.execute(
            "SELECT manifest_json FROM manifests WHERE manifest_sha256 = ?", (sha256,)).fetchall())
        if not rows:
            raise StoreError(f"no manifest {sha256} in {self.path}", hint="use a manifest_sha256 from a run")
        if not readers.manifest_matches(sha256, rows[0][0]):
            raise manifest_mismatch(self.path, f"manifest {sha256[:12]}", sha256)
        return dict(json.loads(rows[0][0]))

    def migrations(self) -> list[MigrationRecord]:
        self._check_open()
        return [MigrationRecord(n, a) for n, a in self._db.read("reading migrations", self._db.applied)]

    def verify(self) -> dict[str, Any]:
        """The whole-file check (``PRAGMA integrity_check``, O(file size)), every manifest's hash and every stored
        JSON value: ``{"integrity": "ok" | problems, "manifests": n, "manifest_mismatches": [sha256, ...],
        "damaged_rows": ["run 3: results row 17 extra_json", ...] (at most 1000), "damaged_row_count": n}``."""
        self._check_open()
        rows = self._db.read("checking manifests", lambda c: c.execute(
            "SELECT manifest_sha256, manifest_json FROM manifests ORDER BY manifest_sha256").fetchall())
        bad = [str(sha) for sha, text in rows if not readers.manifest_matches(str(sha), str(text))]
        damaged, n_damaged = self._db.read("checking stored JSON", readers.damaged_json)
        return {"integrity": self.integrity_check(), "manifests": len(rows), "manifest_mismatches": bad,
                "damaged_rows": damaged, "damaged_row_count": n_damaged}

    def integrity_check(self) -> str:
        """The database's whole-store check: SQLite's ``PRAGMA integrity_check`` verdict (``"ok"`` or the
        problems found, one line); on PostgreSQL, whether every table can be read through."""
        self._check_open()
        return self._db.integrity_check()
