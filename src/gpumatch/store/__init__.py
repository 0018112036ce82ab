"""The results database (SQLite by default): migrations, runs, results, samples, failures, calibrations.

Use::

    from gpumatch.store import open_store

    with open_store(mode="write") as store:          # $GPUMATCH_STORE or $GPUMATCH_HOME/results.sqlite
        run_id = store.begin_run("monitor", "python train.py", manifest, config)
        store.add_samples(run_id, [{"t_s": 0.0, "gpu_index": 0, "power_instant_w": 412.0}])
        store.add_result(run_id, "gemm_flops_per_s", 6.1e14, "flop/s", config={"dtype": "bf16"})
        store.end_run(run_id, "completed", summary={"verdict": "valid-power-capped"})

    with open_store(mode="read") as store:           # changes nothing; refuses a file it cannot read as is
        print(store.runs())

See docs/store.md for the schema and the guarantees (append-only, killed writers, concurrent writers).
"""

from gpumatch.store.buffer import SampleBuffer
from gpumatch.store.codec import canonical_json, manifest_sha256
from gpumatch.store.connection import APPLICATION_ID, Mode
from gpumatch.store.locate import check_store, damage, list_runs, locate_store, migrate_store, open_existing_store
from gpumatch.store.migrations import MIGRATIONS
from gpumatch.store.records import (
    END_STATUSES,
    RUN_STATUSES,
    CalibrationRecord,
    EventRecord,
    FailureRecord,
    MigrationRecord,
    ResultRecord,
    RunRecord,
)
from gpumatch.store.store import MAX_LOG_EXCERPT_CHARS, Store, open_store
from gpumatch.telemetry.types import SAMPLE_FIELDS  # the sample columns, defined once by the telemetry layer

__all__ = [
    "APPLICATION_ID",
    "END_STATUSES",
    "MAX_LOG_EXCERPT_CHARS",
    "MIGRATIONS",
    "RUN_STATUSES",
    "SAMPLE_FIELDS",
    "CalibrationRecord",
    "EventRecord",
    "FailureRecord",
    "MigrationRecord",
    "Mode",
    "ResultRecord",
    "RunRecord",
    "SampleBuffer",
    "Store",
    "canonical_json",
    "check_store",
    "damage",
    "list_runs",
    "locate_store",
    "manifest_sha256",
    "migrate_store",
    "open_existing_store",
    "open_store",
]
