"""Writers run in spawned processes by test_backend.py (no pytest import: children start fast)."""

from __future__ import annotations

import time
from typing import Any

from gpumatch.store import open_store

RUNS_PER_WRITER = 3
SAMPLES_PER_RUN = 40


def writer(url: str, who: int, start: Any, out: Any, slow: bool) -> None:
    """Writes RUNS_PER_WRITER runs, each: begin, samples one by one, a result, end. ``slow`` pauses between
    samples (the one the parent kills mid-run). Reports each run it closed, after the close committed."""
    try:
        start.wait(timeout=60)
        with open_store(url) as s:
            for k in range(RUNS_PER_WRITER):
                rid = s.begin_run("bench", f"w{who}-{k}", {"writer": who}, {"k": k})
                for i in range(SAMPLES_PER_RUN):
                    s.add_samples(rid, [{"t_s": float(i), "gpu_index": who}])
                    if slow:
                        time.sleep(0.05)
                s.add_result(rid, "i", float(k), "1")
                s.end_run(rid, "completed")
                out.put((who, s.run(rid).run_uuid, None))
    except BaseException as e:
        out.put((who, None, f"{type(e).__name__}: {e}"))
