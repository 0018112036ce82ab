"""The built-in preset files (``gpumatch/models/data/*.toml``) as parsed TOML, without validation.

Standard library only (no pydantic): the GPU machine that runs :mod:`gpumatch.bench` has torch and nothing
else, and the bench builds its model shapes from these presets (:mod:`gpumatch.bench.shapes`).
:mod:`gpumatch.models.registry` validates the same files into :class:`~gpumatch.models.arch.ModelArch` values;
the tests check that both readings give the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from gpumatch.errors import DataFileError
from gpumatch.files import parse_toml, read_text


def builtin_files() -> Iterator[tuple[str, Traversable]]:
    """(label, file) of every built-in preset, by file name."""
    folder = resources.files("gpumatch.models") / "data"
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".toml"):
            yield f"built-in model file {entry.name}", entry


def builtin_arch(name: str) -> dict[str, Any]:
    """The ``[arch]`` table (ModelArch field names: ``layers``, ``hidden_size``, ...) of the built-in preset
    whose file is ``NAME.toml`` (its canonical name, e.g. ``llama-3.2-1b``), unvalidated."""
    entry = resources.files("gpumatch.models") / "data" / f"{name}.toml"
    label = f"built-in model file {name}.toml"
    if not entry.is_file():
        raise DataFileError(f"{label} does not exist", "give the canonical name of a built-in preset")
    arch = parse_toml(read_text(entry, label), label).get("arch")
    if not isinstance(arch, dict):
        raise DataFileError(f"{label} has no [arch] table")
    return arch
