"""``gpumatch runs import FILE``: another tool's result file stored as a run (parsing: :mod:`.formats`).

The run is written as one bundle (:mod:`.bundle`) in one transaction: it appears whole, closed ``completed``,
with the source's start time; its global id comes from the file's SHA-256, so a second import of the same
file finds it there and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpumatch.store.bundle import RunBundle, write_bundle
from gpumatch.store.codec import canonical_json, manifest_sha256
from gpumatch.store.formats import ImportedRun, read_source, run_uuid_for
from gpumatch.store.store import open_store
from gpumatch.store.writer import current_writer


@dataclass(frozen=True)
class ImportOutcome:
    """``run_id`` in the store; ``created`` False when the file had been imported before (that run's id)."""

    run_id: int
    run_uuid: str
    created: bool
    format: str
    name: str
    results: int
    store: str
    kind: str = "bench"
    missing: tuple[str, ...] = ()
    """What the file does not say (the model, the load), stated in the summary line, never dropped silently."""

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "missing": list(self.missing)}


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="microseconds")


def bundle_for(run: ImportedRun, run_uuid: str) -> RunBundle:
    """The rows of an imported run (created_at: now; started/ended: the source's times)."""
    now = _iso(datetime.now(UTC))
    sha = manifest_sha256(run.manifest)
    row = {"kind": run.kind, "name": run.name, "manifest_sha256": sha, "config_json": canonical_json(run.config,
           "config"), "started_at": _iso(run.started_at), "started_unix_s": run.started_at.timestamp(),
           "writer_json": canonical_json(current_writer(), "writer"), "run_uuid": run_uuid}
    results = [(r.metric, r.value, r.unit, canonical_json(r.config, "config"), canonical_json(r.extra, "extra"), now)
               for r in run.results]
    events = [(0.0, None, kind, canonical_json(data, "event"), now) for kind, data in run.events]
    summary = canonical_json({"imported_from": run.manifest["source"]}, "summary")
    return RunBundle(run_uuid, row, ("completed", _iso(run.ended_at), summary),
                     [(sha, canonical_json(run.manifest, "manifest"), now)], results, [], [], events)


def import_file(path: Path, fmt: str | None = None, store: Path | str | None = None) -> ImportOutcome:
    """Parse ``path`` (``fmt``: ``vllm``, ``nccl-tests``, ``guidellm``, ``aiperf``; None: detected) and store it as
    one run in ``store`` (default: ``$GPUMATCH_STORE``); idempotent per file content."""
    run, sha = read_source(path, fmt)
    run_uuid = run_uuid_for(sha)
    with open_store(store, mode="write") as st:
        rid = st._db.write(f"importing {path.name}", lambda c: write_bundle(c, bundle_for(run, run_uuid)))
        created = rid is not None
        if rid is None:
            rid = st._db.read("finding the imported run", lambda c: int(c.execute(
                "SELECT run_id FROM runs WHERE run_uuid = ?", (run_uuid,)).fetchone()[0]))
        return ImportOutcome(rid, run_uuid, created, str(run.manifest["source"]["format"]), run.name,
                             len(run.results), str(st.path), run.kind, tuple(run.missing))
