"""Fixtures for the results-store tests: a fresh store file per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpumatch.store import Store, open_store


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "results.sqlite"


@pytest.fixture
def store(store_path: Path) -> Iterator[Store]:
    with open_store(store_path) as s:
        yield s


@pytest.fixture
def manifest() -> dict[str, object]:
    """A small environment manifest in the shape of benchmark-method.md section 4."""
    return {
        "kit_commit": "0e38e36",
        "gpus": [{"index": 0, "name": "NVIDIA H200", "driver": "570.124.06", "power": {"enforced_w": 700.0}}],
        "software": {"torch": "2.11.0"},
    }
