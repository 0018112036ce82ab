"""Stored serve runs read back (``gpumatch bench show`` of a ``serve`` run), read-only.

A level comes back from its ``level`` event (its summary with vLLM names, prediction, self-test, verdict) and
its raw requests from the ``request`` events, so every figure can be recomputed from the records
(:func:`gpumatch.lab.loadgen.metrics.summarize`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpumatch.errors import InputError


def load_serve_run(store: Path | str | None, run_id: int, raw: bool = False) -> dict[str, Any]:
    """``{"run", "manifest", "config", "levels", "failures"}``; each level with ``requests`` when ``raw``."""
    from gpumatch.store import open_existing_store

    with open_existing_store(store) as st:
        data = st.export_run(run_id)
    run = data["run"]
    if run.get("kind") != "serve":
        raise InputError(f"run {run_id} is a {run.get('kind')} run, not a serve run",
                         "'gpumatch bench list' lists the runs")
    levels = [dict(e["data"]) for e in data["events"] if e["kind"] == "level"]
    if raw:
        by_level: dict[int, list[dict[str, Any]]] = {}
        for e in data["events"]:
            if e["kind"] == "request":
                by_level.setdefault(int(e["data"]["level"]), []).append(e["data"])
        for lv in levels:
            lv["requests"] = by_level.get(int(lv["level"]), [])
    summary = run.get("summary") or {}
    return {"run": {k: v for k, v in run.items() if k != "manifest"}, "manifest": run.get("manifest") or {},
            "config": run.get("config") or {}, "levels": levels,
            "max_rate_meeting_slo": summary.get("max_rate_meeting_slo"),
            "server_gone": summary.get("server_gone"), "search_note": summary.get("search_note"),
            "warnings": summary.get("warnings") or [],
            "failures": [{"error_class": f["error_class"], "message": f["message"], "config": f.get("config")}
                         for f in data["failures"]]}
