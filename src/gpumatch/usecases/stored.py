"""Open one stored run of an expected kind: the one place the readers of bench, scale and serving runs share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpumatch.errors import InputError


def read_run(store: Path | str | None, run_id: int, noun: str, hint: str,
             accept: Callable[[dict[str, Any], list[dict[str, Any]]], bool]) -> dict[str, Any]:
    """The store's export of run ``run_id`` (``run``, ``results``, ``events``, ...), or a one-line InputError
    ``run N is a KIND run, not a NOUN`` with ``hint`` when ``accept(run, results)`` refuses it."""
    from gpumatch.store import open_existing_store

    with open_existing_store(store) as st:
        data: dict[str, Any] = st.export_run(run_id)
    run = data["run"]
    if not accept(run, data["results"]):
        raise InputError(f"run {run_id} is a {run.get('kind')} run, not a {noun}", hint)
    return data


def of_kind(kind: str) -> Callable[[dict[str, Any], list[dict[str, Any]]], bool]:
    """``accept`` for :func:`read_run`: the run's stored kind is ``kind``."""
    return lambda run, _results: run.get("kind") == kind
