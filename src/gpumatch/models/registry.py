"""Model presets: built-in data files plus the user's overlay, with lookup by name or alias.

Built-in presets live in ``gpumatch/models/data/*.toml``. The overlay directory
(``$GPUMATCH_HOME/models``, :attr:`Settings.model_overlay_dir`) adds presets or replaces one with the
same canonical name; it takes ``*.toml`` preset files and Hugging Face ``*.json`` config files (the
file stem becomes the name). Every file is validated the same way.

Lookup (:func:`get_model`) is case- and punctuation-insensitive through :mod:`gpumatch.names`:
"Llama-3.1-8B", "llama3.1-8b" and "meta-llama/Llama-3.1-8B" all resolve to ``llama-3.1-8b``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpumatch.errors import DataFileError, UnknownNameError
from gpumatch.files import parse_toml, read_text
from gpumatch.models.arch import ModelArch
from gpumatch.models.builtin import builtin_files
from gpumatch.models.files import field_names, first_error
from gpumatch.models.hf import import_hf_config
from gpumatch.models.schema import ModelFile
from gpumatch.names import build_index, normalize, resolve
from gpumatch.settings import Settings, load_settings

LIST_COMMAND = "gpumatch models list"


@dataclass(frozen=True)
class ModelRegistry:
    """All presets known here, with name lookup."""

    models: tuple[ModelArch, ...]

    def get(self, name: str) -> ModelArch:
        """Resolve a canonical name or alias; raises UnknownNameError/AmbiguousNameError."""
        index = build_index((m.name, (*m.aliases, m.hf_id), m) for m in self.models)
        return resolve(name, index, "model", LIST_COMMAND)

    def names(self) -> list[str]:
        return [m.name for m in self.models]


def load_model_file(path: Path | Any, label: str) -> ModelArch:
    """Validate one preset TOML file into a ModelArch."""
    data = parse_toml(read_text(path, label), label)
    try:
        return ModelFile.model_validate(data).to_arch()
    except ValidationError as e:
        raise first_error(label, e, field_names(ModelFile)) from e


def _overlay_models(folder: Path) -> list[ModelArch]:
    if not folder.is_dir():
        return []
    out = []
    for p in sorted(folder.iterdir()):
        if p.suffix == ".toml":
            out.append(load_model_file(p, str(p)))
        elif p.suffix == ".json":
            out.append(import_hf_config(p, name=p.stem.lower()))
    return out


def _merge(base: list[ModelArch], overlay: list[ModelArch]) -> list[ModelArch]:
    by_key = {normalize(m.name): m for m in base}
    for m in overlay:
        by_key[normalize(m.name)] = m
    return sorted(by_key.values(), key=lambda m: m.name)


_CACHE: dict[tuple[str, float], ModelRegistry] = {}


def _overlay_stamp(folder: Path) -> float:
    """Newest mtime in the overlay (links not followed, so a dangling one cannot break the lookup)."""
    try:
        if not folder.is_dir():
            return 0.0
        return max([folder.stat().st_mtime, *(p.lstat().st_mtime for p in folder.iterdir())])
    except OSError as e:
        raise DataFileError(f"{folder}: cannot read the model overlay ({e.strerror or e})", "check permissions") from e


def load_models(settings: Settings | None = None) -> ModelRegistry:
    """Built-in presets plus the user's overlay (cached until an overlay file changes)."""
    s = settings or load_settings()
    key = (str(s.model_overlay_dir), _overlay_stamp(s.model_overlay_dir))
    if key not in _CACHE:
        builtin = [load_model_file(p, label) for label, p in builtin_files()]
        _CACHE[key] = ModelRegistry(tuple(_merge(builtin, _overlay_models(s.model_overlay_dir))))
    return _CACHE[key]


def get_model(name: str, settings: Settings | None = None) -> ModelArch:
    """A preset by name or alias (``load_models().get(name)``)."""
    return load_models(settings).get(name)


def resolve_model(spec: str, base_dir: Path | None = None, settings: Settings | None = None) -> ModelArch:
    """A preset name, or a path to a config.json (or to a folder holding one, or to a preset TOML).

    Relative paths are taken from ``base_dir`` (e.g. the folder of a workload file). A string that
    looks like a path (has a slash and exists, or ends in .json/.toml) is read as a file; anything
    else is looked up as a preset name.
    """
    candidate = Path(spec).expanduser()
    if not candidate.is_absolute() and base_dir is not None:
        candidate = base_dir / candidate
    if candidate.is_dir() and (candidate / "config.json").is_file():
        candidate = candidate / "config.json"
    if candidate.suffix in (".json", ".toml") or candidate.is_file():
        if not candidate.exists():
            raise DataFileError(
                f"model file {str(candidate)!r} does not exist", "check the path, or give a preset name"
            )
        if candidate.suffix == ".toml":
            return load_model_file(candidate, str(candidate))
        return import_hf_config(candidate)
    try:
        return get_model(spec, settings)
    except UnknownNameError as e:
        raise type(e)(e.message, f"{e.hint}; or give a path to a Hugging Face config.json") from e
