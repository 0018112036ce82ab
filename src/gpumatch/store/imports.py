"""``gpumatch runs import FILE``: another tool's result file stored as a run (parsing: :mod:`.formats`).

The run is written as one bundle (:mod:`.bundle`) in one transaction: it appears whole, closed ``completed``,
with the source's start time; its global id comes from the file's SHA-256, so a second import of the same
file finds it there and writes nothing. Values no benchmark can have measured (negative, non-finite, far out of
range, a string where a number belongs) are refused, named in ``ImportOutcome.refused`` and in the run's
``manifest.source.refused`` (:mod:`.validate`); a file where every value is refused is an InputError (exit 2),
and nothing is stored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpumatch.errors import InputError
from gpumatch.store.bundle import RunBundle, write_bundle
from gpumatch.store.codec import canonical_json, manifest_sha256
from gpumatch.store.formats import ImportedRun, read_source, run_uuid_for
from gpumatch.store.store import open_store
from gpumatch.store.validate import Refused, describe, mistyped_metric_keys, refusal
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
    refused: list[dict[str, Any]] = field(default_factory=list)
    """The values not stored (:class:`~gpumatch.store.validate.Refused` as dicts); empty for a sound file."""
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
    run, refused = checked(run, path)
    run_uuid = run_uuid_for(sha)
    with open_store(store, mode="write") as st:
        rid = st._db.write(f"importing {path.name}", lambda c: write_bundle(c, bundle_for(run, run_uuid)))
        created = rid is not None
        if rid is None:
            rid = st._db.read("finding the imported run", lambda c: int(c.execute(
                "SELECT run_id FROM runs WHERE run_uuid = ?", (run_uuid,)).fetchone()[0]))
        return ImportOutcome(rid, run_uuid, created, str(run.manifest["source"]["format"]), run.name,
                             len(run.results), str(st.path), [r.to_dict() for r in refused], run.kind,
                             tuple(run.missing))


def checked(run: ImportedRun, path: Path) -> tuple[ImportedRun, list[Refused]]:
    """``run`` without the values :mod:`.validate` refuses (listed in ``manifest.source.refused``), and those
    values; InputError when nothing but counts (requests, tokens: unit ``1`` or ``token``) is left, since counts
    alone measure nothing."""
    refused = [Refused(str(r.extra.get("source_key") or ""), r.metric, r.value, why) for r in run.results
               if (why := refusal(r.metric, r.value, r.unit)) is not None]
    refused += _mistyped(run, path)
    if not refused:
        return run, []
    bad = {(r.metric, r.source_key) for r in refused}
    kept = [r for r in run.results if (r.metric, str(r.extra.get("source_key") or "")) not in bad]
    if not any(r.unit not in ("1", "token") for r in kept):
        raise InputError(f"{path}: no value in it can be stored: {describe(refused)}",
                         "the file is damaged or was edited; export it again from the tool that wrote it")
    source = {**run.manifest["source"], "refused": [r.to_dict() for r in refused]}
    return replace(run, results=kept, manifest={**run.manifest, "source": source}), refused


def _mistyped(run: ImportedRun, path: Path) -> list[Refused]:
    """vLLM's flat object: metric keys holding a string or another non-number (the reader skips them)."""
    if run.manifest["source"].get("format") != "vllm" or run.manifest["source"].get("appended_results"):
        return []
    from gpumatch.metric_names import si_name

    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return []
    return mistyped_metric_keys(data, lambda k: si_name(k) is not None)
