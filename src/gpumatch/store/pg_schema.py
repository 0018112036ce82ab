"""The PostgreSQL schema of the results store: the same tables, names and rules as :mod:`migrations`
(SQLite), in PostgreSQL's dialect.

The migration names are those of :data:`gpumatch.store.migrations.MIGRATIONS`, so the version check reads
the same on both (a name this code does not know: written by a newer gpumatch, refused). Differences:

- ids are ``BIGINT GENERATED ALWAYS AS IDENTITY`` (SQLite: ``INTEGER PRIMARY KEY AUTOINCREMENT``); both never
  reuse an id; numbers are ``DOUBLE PRECISION`` (SQLite ``REAL``, 8-byte IEEE 754 on both);
- the append-only rules are PL/pgSQL trigger functions raising ``gpumatch store is append-only: ...``
  (https://www.postgresql.org/docs/15/plpgsql-trigger.html); the "only into a running run" check reads the
  run's status ``FOR SHARE``, so an insert racing ``end_run`` waits for it and then sees the run closed;
- there is no ``PRAGMA user_version``: ``schema_migrations`` alone records the version.
"""

from __future__ import annotations

from gpumatch.store.migrations import MIGRATIONS

_ID = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"

_CORE = f"""
CREATE TABLE manifests (
    manifest_sha256 TEXT PRIMARY KEY CHECK (length(manifest_sha256) = 64),
    manifest_json   TEXT NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE TABLE runs (
    run_id          {_ID},
    kind            TEXT NOT NULL,
    name            TEXT NOT NULL,
    manifest_sha256 TEXT NOT NULL REFERENCES manifests(manifest_sha256),
    config_json     TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'running'
                    CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
    started_at      TEXT NOT NULL,
    started_unix_s  DOUBLE PRECISION NOT NULL,
    ended_at        TEXT,
    summary_json    TEXT,
    writer_json     TEXT NOT NULL
);
CREATE INDEX runs_kind ON runs(kind, run_id);
CREATE TABLE results (
    result_id   {_ID},
    run_id      BIGINT NOT NULL REFERENCES runs(run_id),
    metric      TEXT NOT NULL,
    value       DOUBLE PRECISION NOT NULL,
    unit        TEXT NOT NULL,
    config_json TEXT,
    extra_json  TEXT,
    created_at  TEXT NOT NULL
);
CREATE INDEX results_run ON results(run_id, result_id);
CREATE INDEX results_metric ON results(metric);
CREATE TABLE samples (
    sample_id           {_ID},
    run_id              BIGINT NOT NULL REFERENCES runs(run_id),
    t_s                 DOUBLE PRECISION NOT NULL,
    gpu_index           BIGINT NOT NULL,
    power_instant_w     DOUBLE PRECISION,
    power_avg_w         DOUBLE PRECISION,
    sm_clock_mhz        DOUBLE PRECISION,
    mem_clock_mhz       DOUBLE PRECISION,
    clock_event_reasons BIGINT,
    gpu_temp_c          DOUBLE PRECISION,
    mem_temp_c          DOUBLE PRECISION,
    memory_used_bytes   BIGINT,
    util_gpu_pct        DOUBLE PRECISION,
    util_mem_pct        DOUBLE PRECISION,
    gpm_sm_active       DOUBLE PRECISION,
    gpm_tensor_active   DOUBLE PRECISION,
    gpm_dram_bw_util    DOUBLE PRECISION,
    extra_json          TEXT
);
CREATE INDEX samples_run ON samples(run_id, sample_id);
"""

_FAILURES_CALIBRATIONS_EVENTS = f"""
CREATE TABLE failures (
    failure_id      {_ID},
    run_id          BIGINT REFERENCES runs(run_id),
    config_json     TEXT NOT NULL,
    error_class     TEXT NOT NULL,
    message         TEXT NOT NULL,
    log_excerpt     TEXT NOT NULL DEFAULT '',
    manifest_sha256 TEXT REFERENCES manifests(manifest_sha256),
    created_at      TEXT NOT NULL
);
CREATE INDEX failures_run ON failures(run_id);
CREATE TABLE calibrations (
    calibration_id  {_ID},
    name            TEXT NOT NULL,
    values_json     TEXT NOT NULL,
    provenance_json TEXT NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE INDEX calibrations_name ON calibrations(name, calibration_id);
CREATE TABLE calibration_runs (
    calibration_id BIGINT NOT NULL REFERENCES calibrations(calibration_id),
    run_id         BIGINT NOT NULL REFERENCES runs(run_id),
    PRIMARY KEY (calibration_id, run_id)
);
CREATE TABLE events (
    event_id   {_ID},
    run_id     BIGINT NOT NULL REFERENCES runs(run_id),
    t_s        DOUBLE PRECISION NOT NULL,
    gpu_index  BIGINT,
    kind       TEXT NOT NULL,
    data_json  TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX events_run ON events(run_id, event_id);
"""

_IMMUTABLE_TABLES = ("manifests", "results", "samples", "failures", "calibrations", "calibration_runs", "events")
_FROZEN = ("run_id", "kind", "name", "manifest_sha256", "config_json", "started_at", "started_unix_s", "writer_json")


def _close_once(frozen: tuple[str, ...]) -> str:
    changed = " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in frozen)
    return f"""
CREATE OR REPLACE FUNCTION gpumatch_runs_close_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'gpumatch store is append-only: DELETE on runs is not allowed';
  END IF;
  IF OLD.status <> 'running' OR NEW.status = 'running' OR {changed} THEN
    RAISE EXCEPTION 'gpumatch store is append-only: a run can only be closed once (status, ended_at, summary)';
  END IF;
  RETURN NEW;
END $$;
"""


def _append_only() -> str:
    parts = ["""
CREATE FUNCTION gpumatch_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'gpumatch store is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME;
END $$;
""", """
CREATE FUNCTION gpumatch_only_open_runs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE st TEXT;
BEGIN
  SELECT status INTO st FROM runs WHERE run_id = NEW.run_id FOR SHARE;
  IF st IS NOT NULL AND st <> 'running' THEN
    RAISE EXCEPTION 'run is closed: cannot add % to a run that has ended', TG_TABLE_NAME;
  END IF;
  RETURN NEW;
END $$;
""", _close_once(_FROZEN)]
    for t in _IMMUTABLE_TABLES:
        parts.append(f"CREATE TRIGGER {t}_append_only BEFORE UPDATE OR DELETE ON {t} "
                     "FOR EACH ROW EXECUTE FUNCTION gpumatch_append_only();")
    parts.append("CREATE TRIGGER runs_close_once BEFORE UPDATE OR DELETE ON runs "
                 "FOR EACH ROW EXECUTE FUNCTION gpumatch_runs_close_once();")
    for t in ("samples", "results", "events"):
        parts.append(f"CREATE TRIGGER {t}_only_open_runs BEFORE INSERT ON {t} "
                     "FOR EACH ROW EXECUTE FUNCTION gpumatch_only_open_runs();")
    return "\n".join(parts)


_RUN_UUID = f"""
ALTER TABLE runs DISABLE TRIGGER runs_close_once;
ALTER TABLE runs ADD COLUMN run_uuid TEXT;
UPDATE runs SET run_uuid = gen_random_uuid()::text;
ALTER TABLE runs ALTER COLUMN run_uuid SET NOT NULL;
CREATE UNIQUE INDEX runs_uuid ON runs(run_uuid);
{_close_once((*_FROZEN, "run_uuid"))}
ALTER TABLE runs ENABLE TRIGGER runs_close_once;
"""

PG_MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("0001_core_tables", _CORE),
    ("0002_failures_calibrations_events", _FAILURES_CALIBRATIONS_EVENTS),
    ("0003_append_only_triggers", _append_only()),
    ("0004_run_uuid", _RUN_UUID),
)
"""Every PostgreSQL schema change, in order, under the SQLite migrations' names. Append only."""

assert [n for n, _ in PG_MIGRATIONS] == [n for n, _ in MIGRATIONS], "PostgreSQL and SQLite migrations must match"

BOOKKEEPING = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    seq        INTEGER PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    applied_at TEXT NOT NULL
)
"""
