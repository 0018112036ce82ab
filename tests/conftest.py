"""Shared fixtures: an isolated GPUMATCH_HOME for every test, so no test reads the user's files."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "gpumatch-home"
    monkeypatch.setenv("GPUMATCH_HOME", str(home))
    monkeypatch.delenv("GPUMATCH_STORE", raising=False)
    return home
