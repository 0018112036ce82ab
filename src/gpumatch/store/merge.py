"""Copying runs between stores: ``gpumatch runs push --to URL``, ``runs pull --from URL``, ``runs merge``.

Runs are matched by their global id (``run_uuid``, migration 0004), never by their per-store number, so a
copy is idempotent: a run already in the target is skipped, nothing is duplicated. Each run is copied in one
write transaction of the target (:mod:`gpumatch.store.bundle`), oldest first; a copy that is killed keeps
every run it finished, none half-copied, and running it again copies the rest. Only finished runs travel: a
run still ``running`` in the source (its writer alive, or on another host where that cannot be told) is
left for a later copy; one whose writer is provably gone is copied closed as ``interrupted``, as readers
show it. A run whose stored manifest no longer hashes to its key (a damaged source) is not copied, and
named. Calibrations and failures recorded without a run stay in their store.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpumatch.errors import StoreError
from gpumatch.store.bundle import RunBundle, read_bundle, write_bundle
from gpumatch.store.readers import UUID_MIGRATION
from gpumatch.store.reading import StoreReading
from gpumatch.store.store import Store, is_pg_url, open_store

_STALE = '{"reason":"writer process ended without end_run"}'


@dataclass(frozen=True)
class CopyReport:
    """What one copy did: ``copied`` runs (their global ids), how many were ``already_there``, the runs left
    ``running`` in the source, and those not copied because their manifest no longer matches its hash."""

    source: str
    target: str
    copied: tuple[str, ...]
    already_there: int
    still_running: tuple[str, ...]
    damaged: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def copy_runs(source: StoreReading, target: Store, progress: Callable[[int, int], None] | None = None) -> CopyReport:
    """Copy every finished run of ``source`` that ``target`` lacks; see the module docstring. ``progress``
    is called with (runs done, runs to do) after each run."""
    if UUID_MIGRATION not in source.schema:
        raise StoreError(f"results store {source.path} predates global run ids (schema {source.schema[-1]})",
                         hint=f"upgrade it first: gpumatch runs migrate --store {source.path}")
    have = set(target._db.read("listing run ids", lambda c: [str(r[0]) for r in c.execute(
        "SELECT run_uuid FROM runs").fetchall()]))
    runs = sorted(source.runs(limit=2**62), key=lambda r: r.run_id)
    finished = [r for r in runs if r.status != "running" and r.manifest_ok]
    todo = [r for r in finished if r.run_uuid not in have]
    copied: list[str] = []
    for i, run in enumerate(todo):
        if _copy_one(source, target, run.run_id, run.run_uuid):
            copied.append(run.run_uuid)
        if progress is not None:
            progress(i + 1, len(todo))
    return CopyReport(str(source.path), str(target.path), tuple(copied), len(finished) - len(copied),
                      tuple(r.run_uuid for r in runs if r.status == "running"),
                      tuple(r.run_uuid for r in runs if not r.manifest_ok))


def _copy_one(source: StoreReading, target: Store, run_id: int, run_uuid: str) -> bool:
    """Copy one run in one target transaction; False when it got there meanwhile (another copy)."""
    def read(c: Any) -> RunBundle:
        return read_bundle(c, run_id, _row_end(c, run_id))

    bundle = source._db.read(f"reading run {run_id}", read)
    return target._db.write(f"copying run {run_uuid}", lambda c: write_bundle(c, bundle)) is not None


def _row_end(c: Any, run_id: int) -> tuple[str, str | None, str | None]:
    """How the copy is closed: as stored (read in the same snapshot as the rows), or ``interrupted`` now for a
    run still stored ``running`` whose writer is provably gone (only those reach here)."""
    row = c.execute("SELECT status, ended_at, summary_json FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row[0] != "running":
        return str(row[0]), row[1], row[2]
    return "interrupted", datetime.now(UTC).isoformat(timespec="microseconds"), _STALE


def copy_store(source: str | None, target: str | None,
               progress: Callable[[int, int], None] | None = None) -> CopyReport:
    """Open ``source`` read-only and ``target`` for writing (each a path or URL; None: the default store) and
    copy the runs ``target`` lacks (push, pull and merge are this, with the two ends named differently)."""
    with open_store(source, mode="read") as src, open_store(target, mode="write") as dst:
        if str(src.path) == str(dst.path):
            raise StoreError(f"source and target are the same store ({src.path})", hint="name two different stores")
        return copy_runs(src, dst, progress)


def merge_stores(sources: Sequence[str], into: str,
                 progress: Callable[[int, int], None] | None = None) -> list[CopyReport]:
    """``gpumatch runs merge``: copy each source's runs into ``into``; one :class:`CopyReport` per source.

    Into a SQLite file that does not exist yet, the whole merge is built in a temporary file beside it
    (``.NAME.merging-PID``) and published by an atomic link when every source is in: the file appears complete
    or not at all (a merge killed half-way leaves no ``into``; its temporary is removed by the next merge).
    Into an existing store or a PostgreSQL database, each run is copied in its own transaction (whole runs
    only; rerunning copies the rest)."""
    path = None if is_pg_url(into) else Path(into[len("sqlite:///"):] if into.startswith("sqlite:///") else into)
    if path is None or path.exists():
        return [copy_store(s, into, progress) for s in sources]
    path = path.expanduser()
    if path.parent.is_dir():
        _remove_stale_temporaries(path)
    tmp = path.with_name(f".{path.name}.merging-{os.getpid()}")
    _remove(tmp)
    try:
        reports = [replace(copy_store(s, str(tmp), progress), target=str(path)) for s in sources]
        _publish(tmp, path)
    finally:
        _remove(tmp)
    return reports


def _publish(tmp: Path, path: Path) -> None:
    """Make the closed store ``tmp`` appear as ``path`` in one step (a hard link: it never replaces a file
    that appeared meanwhile), durably (the file and the folder are fsynced)."""
    for side in ("-wal", "-journal"):
        if Path(f"{tmp}{side}").exists():  # the store was closed: SQLite folded its WAL in and removed it
            raise StoreError(f"merged store {tmp} still has a {side} file", hint="rerun the merge")
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError as e:
        raise StoreError(f"{path} was created by another process during the merge; nothing was written to it",
                         hint="rerun the merge: it then copies into the existing store, run by run") from e
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _remove(tmp: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{tmp}{suffix}")


def _remove_stale_temporaries(path: Path) -> None:
    """Remove the temporaries of merges into ``path`` whose process is gone (a merge that was killed)."""
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.merging-(\d+)$")
    for p in path.parent.iterdir():
        m = pattern.match(p.name)
        if m is None:
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            _remove(p)
        except PermissionError:  # another user's live process
            continue
