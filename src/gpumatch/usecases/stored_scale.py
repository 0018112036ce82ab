"""A stored ``bench scale`` run read back into the shape :class:`gpumatch.lab.scale.ScaleOutcome` has.

The ladder rows come from the job-level ``ladder_*`` results (their predictions from ``extra``), the collective
rows from ``ladder_collective_time_s`` / ``ladder_algbw_bytes_per_s`` / ``ladder_busbw_bytes_per_s``; the
per-rank rows stay as stored (``ranks``, with their raw timings when ``raw``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_LADDER = {"ladder_tokens_per_s": "tokens_per_s", "ladder_step_s": "step_s",
           "ladder_per_added_gpu_tokens_per_s": "per_added_gpu_tokens_per_s",
           "ladder_scaling_efficiency": "scaling_efficiency", "ladder_delivers_gpus": "delivers_gpus",
           "ladder_exposed_comm_s": "exposed_comm_s"}
_COLL = {"ladder_collective_time_s": "time_s", "ladder_algbw_bytes_per_s": "algbw_bytes_per_s",
         "ladder_busbw_bytes_per_s": "busbw_bytes_per_s"}


def _ladder_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows: dict[int, dict[str, Any]] = {}
    for r in results:
        key = _LADDER.get(r["metric"])
        if key is None:
            continue
        n = int(r["config"]["n_gpus"])
        row = rows.setdefault(n, {"n_gpus": n, **{k: None for k in _LADDER.values()}, "predicted_step_s": None,
                                  "step_ratio": None, "predicted_tokens_per_s": None, "ratio": None})
        row[key] = r["value"]
        extra = r.get("extra") or {}
        if key == "tokens_per_s":
            row["predicted_tokens_per_s"], row["ratio"] = extra.get("predicted"), extra.get("ratio")
        elif key == "step_s":
            row["predicted_step_s"], row["step_ratio"] = extra.get("predicted"), extra.get("ratio")
    return [rows[n] for n in sorted(rows)]


def _collective_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows: dict[tuple[int, str, int], dict[str, Any]] = {}
    for r in results:
        key = _COLL.get(r["metric"])
        if key is None:
            continue
        c, extra = r["config"], r.get("extra") or {}
        row = rows.setdefault((int(c["n_gpus"]), str(c["op"]), int(c["size_bytes"])),
                              {"op": c["op"], "size_bytes": c["size_bytes"], "dtype": c.get("dtype"),
                               "n_gpus": c["n_gpus"], "predicted": None, "ratio": None})
        row[key] = r["value"]
        if key == "time_s":
            row.update({k: extra.get(k) for k in ("predicted", "ratio", "predicted_by", "prediction_note")})
        if key == "busbw_bytes_per_s":
            row["busbw_factor"] = extra.get("busbw_factor")
    return [rows[k] for k in sorted(rows)]


def load_scale_run(store: Path | str | None, run_id: int, raw: bool = False) -> dict[str, Any]:
    """One stored scale run: ``run``, ``manifest``, ``ladder``, ``collectives``, ``failures``, ``notes`` and
    ``ranks`` (the per-rank rows; their ``extra`` with the raw timings only when ``raw``)."""
    from gpumatch.usecases.stored import of_kind, read_run

    data = read_run(store, run_id, "scale run", "'gpumatch runs list' lists the runs and their kinds",
                    of_kind("scale"))
    run = data["run"]
    manifest = run.get("manifest") or {}
    results = [{"metric": r["metric"], "value": r["value"], "unit": r["unit"], "config": r.get("config") or {},
                "extra": r.get("extra") or {}} for r in data["results"]]
    ranks = [{"metric": r["metric"], "value": r["value"], "unit": r["unit"], **r["config"],
              **({"extra": r["extra"]} if raw else {})}
             for r in results if r["config"].get("scope") != "job"]
    config = run.get("config") or {}
    notes = list(manifest.get("run.notes") or [])
    return {"run": {k: v for k, v in run.items() if k != "manifest"}, "run_id": run_id,
            "status": run.get("status"), "workload": config.get("workload"), "device": config.get("device"),
            "card": (run.get("summary") or {}).get("card"), "manifest": manifest if raw else
            {k: manifest.get(k) for k in ("gpu.name", "scale.nnodes", "scale.nproc_per_node", "scale.backend",
                                          "scale.nvls_off", "scale.topology")},
            "ladder": _ladder_rows(results), "collectives": _collective_rows(results),
            "failures": [{**(f.get("config") or {}), "error_class": f["error_class"], "message": f["message"]}
                         for f in data["failures"]], "notes": notes, "ranks": ranks}
