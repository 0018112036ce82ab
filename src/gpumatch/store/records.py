"""Frozen records returned by the store's readers. Times are ISO 8601 UTC strings (``*_at``) or seconds."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

RUN_STATUSES = ("running", "completed", "failed", "interrupted")
"""Stored run states. ``running`` is the only open state; ``end_run`` moves a run to one of the others."""

END_STATUSES = ("completed", "failed", "interrupted")

@dataclass(frozen=True)
class _Record:
    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (for JSON/CSV rendering)."""
        return asdict(self)


@dataclass(frozen=True, eq=True)
class RunRecord(_Record):
    """One run. ``status`` is the effective state: a ``running`` run whose writer process is gone (same
    host) reads as ``interrupted``; ``stored_status`` is what the database says. ``manifest_ok`` is False
    when the stored manifest no longer hashes to ``manifest_sha256`` (the file was changed or damaged)."""

    run_id: int
    kind: str
    name: str
    status: str
    stored_status: str
    started_at: str
    started_unix_s: float
    ended_at: str | None
    duration_s: float | None
    manifest_sha256: str
    manifest: dict[str, Any]
    config: dict[str, Any]
    summary: dict[str, Any] | None
    writer: dict[str, Any]
    n_results: int
    n_samples: int
    n_failures: int
    manifest_ok: bool = True
    run_uuid: str = ""
    """The run's global id (a UUID), the same in every store it is copied to; "" in a store read at a schema
    before migration 0004."""


@dataclass(frozen=True, eq=True)
class ResultRecord(_Record):
    """One measured value (SI unit in ``unit``), with the configuration it was measured under."""

    result_id: int
    run_id: int
    metric: str
    value: float
    unit: str
    config: dict[str, Any] | None
    extra: dict[str, Any] | None
    created_at: str


@dataclass(frozen=True, eq=True)
class FailureRecord(_Record):
    """A configuration that failed (OOM, unsupported dtype, timeout...), kept as a first-class row."""

    failure_id: int
    run_id: int | None
    config: dict[str, Any]
    error_class: str
    message: str
    log_excerpt: str
    manifest_sha256: str | None
    manifest: dict[str, Any] | None
    created_at: str


@dataclass(frozen=True, eq=True)
class CalibrationRecord(_Record):
    """Fitted values with their provenance and the runs they were fitted from."""

    calibration_id: int
    name: str
    values: dict[str, Any]
    provenance: dict[str, Any]
    run_ids: tuple[int, ...]
    created_at: str


@dataclass(frozen=True, eq=True)
class EventRecord(_Record):
    """A discrete telemetry event (an Xid, a window-edge counter read) at ``t_s`` on the run's clock."""

    event_id: int
    run_id: int
    t_s: float
    gpu_index: int | None
    kind: str
    data: dict[str, Any]
    created_at: str


@dataclass(frozen=True, eq=True)
class MigrationRecord(_Record):
    name: str
    applied_at: str
