"""Worker run in spawned processes by the concurrency test (kept free of pytest so children start fast)."""

from __future__ import annotations

import time
from typing import Any

from gpumatch.store import open_store

N_SAMPLES = 100


def concurrent_writer(path: str, who: int, start: Any, out: Any) -> None:
    """One of two processes: opens the (maybe not yet created) store at the same moment as the other, then
    writes many small transactions, pausing 1 ms between them as a telemetry sampler would."""
    try:
        start.wait(timeout=30)
        with open_store(path) as s:
            start.wait(timeout=30)
            t0 = time.time()
            run_id = s.begin_run("bench", f"writer-{who}", {"writer": who % 2}, {"who": who})
            for i in range(N_SAMPLES):
                s.add_samples(run_id, [{"t_s": float(i), "gpu_index": who}])
                time.sleep(0.001)
                if i % 10 == 0:
                    s.add_result(run_id, "i", float(i), "1", config={"who": who})
            s.add_failure(run_id, {"who": who}, "TestError", "recorded concurrently")
            s.add_calibration(f"cal-{who}", {"v": who}, {"by": who}, run_ids=[run_id])
            s.end_run(run_id, "completed", {"who": who})
            out.put((who, run_id, t0, time.time(), None))
    except BaseException as e:  # report any error (e.g. 'database is locked') to the parent
        out.put((who, -1, 0.0, 0.0, f"{type(e).__name__}: {e}"))
