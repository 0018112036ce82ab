"""The unvalidated reading of the built-in presets (for the bench) gives the numbers the registry validates."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumatch.errors import DataFileError
from gpumatch.models import load_models
from gpumatch.models.builtin import builtin_arch
from gpumatch.settings import load_settings


def test_builtin_tables_agree_with_the_registry(tmp_path: Path) -> None:
    models = load_models(load_settings({"GPUMATCH_HOME": str(tmp_path)}))
    for arch in models.models:
        table = builtin_arch(arch.name)
        assert {k: getattr(arch, k) for k in table} == table, arch.name


def test_unknown_builtin_is_a_data_file_error() -> None:
    with pytest.raises(DataFileError, match="does not exist"):
        builtin_arch("llama-9")
