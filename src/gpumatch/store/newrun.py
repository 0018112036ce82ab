"""A run assembled in memory and written whole, in one transaction (``gpumatch bench import``).

:class:`NewRun` takes the same calls as a live run (``add_result``, ``add_failure``, ``add_event``) with the same
checks as :class:`~gpumatch.store.store.Store`, but writes nothing until :meth:`Store.add_whole_run
<gpumatch.store.store.Store.add_whole_run>` inserts it as one :class:`~gpumatch.store.bundle.RunBundle`: the run
appears closed with all its rows, or not at all (a process killed half-way leaves nothing behind). Its global
id ``run_uuid`` is given by the caller; a deterministic one (:func:`import_uuid`) makes a second write of the
same run a no-op through the schema's UNIQUE ``runs(run_uuid)`` index (migration ``0004_run_uuid``), also when
several processes write it at once.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from gpumatch.errors import StoreError
from gpumatch.store.bundle import RunBundle
from gpumatch.store.codec import canonical_json, dumps_optional, manifest_sha256
from gpumatch.store.records import END_STATUSES
from gpumatch.store.writer import current_writer

IMPORT_NAMESPACE = uuid.UUID("0c6b9a53-2f0e-5d7c-8a41-6770756d696d")
"""Namespace of the UUIDv5 ids of runs imported by ``gpumatch bench import`` (RFC 9562 section 5.5)."""

MAX_LOG_EXCERPT_CHARS = 64_000
"""Longer log excerpts keep their last this-many characters (the end of a log holds the error)."""


def import_uuid(kind: str, manifest: Mapping[str, Any], started_at: str) -> str:
    """The global id of an imported ``kind`` run: UUIDv5 of its kind, manifest SHA-256 and original start
    time, the identity ``bench import`` has always used for "already imported"."""
    return str(uuid.uuid5(IMPORT_NAMESPACE, f"{kind}|{manifest_sha256(manifest)}|{started_at}"))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise StoreError(f"{what} must be a non-empty string, got {value!r}", hint=f"pass a {what}")
    return value


def _excerpt(log: str) -> str:
    if len(log) <= MAX_LOG_EXCERPT_CHARS:
        return log
    cut = len(log) - MAX_LOG_EXCERPT_CHARS
    return f"[... first {cut} characters cut ...]\n" + log[cut:]


class NewRun:
    """Rows of one run, checked as they are added, written by ``Store.add_whole_run`` (module docstring)."""

    def __init__(self, kind: str, name: str, manifest: Mapping[str, Any], config: Mapping[str, Any], *,
                 run_uuid: str) -> None:
        if not isinstance(manifest, Mapping) or not isinstance(config, Mapping):
            raise StoreError("manifest and config must be dicts", hint="pass them as dicts")
        self.run_uuid = run_uuid
        self._sha = manifest_sha256(manifest)
        self._manifest = (self._sha, canonical_json(manifest, "manifest"), _now())
        now, started_s = _now(), time.time()
        self._run = {"kind": _text(kind, "run kind"), "name": _text(name, "run name"), "manifest_sha256": self._sha,
                     "config_json": canonical_json(config, "config"), "started_at": now,
                     "started_unix_s": started_s, "writer_json": canonical_json(current_writer(), "writer"),
                     "run_uuid": run_uuid}
        self.results: list[tuple[Any, ...]] = []
        self.failures: list[tuple[Any, ...]] = []
        self.events: list[tuple[Any, ...]] = []

    @property
    def kind(self) -> str:
        return str(self._run["kind"])

    @property
    def manifest_sha256(self) -> str:
        return self._sha

    def add_result(self, metric: str, value: float, unit: str, *, config: dict[str, Any] | None = None,
                   extra: dict[str, Any] | None = None) -> None:
        """One measured value; ``value`` finite (as :meth:`Store.add_result`)."""
        metric, unit = _text(metric, "metric name"), _text(unit, "unit")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise StoreError(f"result {metric!r}: value must be a finite number, got {value!r}",
                             hint="record a failed measurement with add_failure instead")
        self.results.append((metric, float(value), unit, dumps_optional(config, "config"),
                             dumps_optional(extra, "extra"), _now()))

    def add_failure(self, config: Mapping[str, Any], error_class: str, message: str, log_excerpt: str = "") -> None:
        """A failed configuration, in the run's environment (its manifest)."""
        if not isinstance(config, Mapping):
            raise StoreError(f"config must be a dict, got {type(config).__name__}", hint="pass config as a dict")
        self.failures.append((canonical_json(config, "config"), _text(error_class, "error class"), str(message),
                              _excerpt(str(log_excerpt)), self._sha, _now()))

    def add_event(self, t_s: float, kind: str, data: Mapping[str, Any], gpu_index: int | None = None) -> None:
        """A discrete event at ``t_s`` seconds."""
        self.events.append((float(t_s), gpu_index, _text(kind, "event kind"), canonical_json(data, "event data"),
                            _now()))

    def add_events(self, events: Iterable[tuple[float, str, Mapping[str, Any]]]) -> None:
        """Many events ``(t_s, kind, data)``."""
        for t_s, kind, data in events:
            self.add_event(t_s, kind, data)

    def bundle(self, status: str, summary: Mapping[str, Any] | None) -> RunBundle:
        """The rows to write, the run closed as ``status`` now with ``summary``."""
        if status not in END_STATUSES:
            raise StoreError(f"run status {status!r} is not one of {', '.join(END_STATUSES)}",
                             hint="end a run as completed, failed or interrupted")
        end = (status, _now(), dumps_optional(summary, "summary"))
        return RunBundle(self.run_uuid, dict(self._run), end, [self._manifest], list(self.results), [],
                         list(self.failures), list(self.events))
