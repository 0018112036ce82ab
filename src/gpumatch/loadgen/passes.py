"""The server's own record of every pass it ran during a load level, kept beside the level's figures.

``gpumatch serve`` logs each pass (``GET /gpumatch/iterations``: its number and start, kind, decode rows, prompt
tokens, the batch and context buckets it ran, the seconds of scheduling and of the pass; the last
:data:`gpumatch.bench.server.engine.LOG_LENGTH` of them). The load generator reads the log's last pass number
before a level (warm-up included) and the log again after it, and keeps the passes in between
(:func:`level_doc`), so each pass can be held against the estimator's cost of the same pass
(:mod:`gpumatch.calibrate.passes`, ``benchmarks/serve_passes.py``). Any other server (vLLM, SGLang, ...) has no such
endpoint and the level simply has no passes.
"""

from __future__ import annotations

from typing import Any

from gpumatch.loadgen.server_info import get_json

SCHEMA = "gpumatch.serve-passes/1"


def fetch(base_url: str, api_key: str | None = None) -> list[dict[str, Any]] | None:
    """The server's pass log (oldest first), or None when it keeps none (no endpoint, an error, no answer)."""
    doc = get_json(f"{base_url}/gpumatch/iterations", api_key)
    its = doc.get("iterations") if isinstance(doc, dict) else None
    return its if isinstance(its, list) else None


def mark(base_url: str, api_key: str | None = None) -> int | None:
    """The number of the server's last pass before a level, or None when it keeps no pass log."""
    log = fetch(base_url, api_key)
    return None if log is None else last_index(log)


def collect(base_url: str, api_key: str | None, before: int | None, about: dict[str, Any]) -> dict[str, Any]:
    """The level's passes (:func:`level_doc`) after :func:`mark` gave ``before``; empty when there is no log."""
    log = None if before is None else fetch(base_url, api_key)
    return {} if before is None or log is None else level_doc(before, log, about)


def last_index(log: list[dict[str, Any]]) -> int:
    """The number of the last pass in ``log`` (-1 for an empty log: the next pass is number 0)."""
    return int(log[-1]["index"]) if log else -1


def level_doc(before: int, log: list[dict[str, Any]], about: dict[str, Any]) -> dict[str, Any]:
    """The passes numbered after ``before`` (the level's, warm-up first) with ``about`` (what the level was);
    ``complete`` is False when the log had already dropped some of them (a level longer than the log)."""
    its = [i for i in log if int(i["index"]) > before]
    complete = not its or int(its[0]["index"]) == before + 1
    return {"schema": SCHEMA, **about, "first_index": before + 1, "complete": complete, "iterations": its}
