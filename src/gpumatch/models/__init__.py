"""Model architectures: presets from published configs and import of a local Hugging Face config.json.

Public API:

- :class:`ModelArch` — frozen architecture with parameter accounting (``params_total``,
  ``params_active``, ``params_active_nonembedding``, ``kv_bytes_per_token``, ``to_dict``).
- :func:`get_model` (name or alias -> ModelArch), :func:`load_models` (all presets, built-in plus the
  ``$GPUMATCH_HOME/models`` overlay), :func:`resolve_model` (a preset name or a path to a config.json).
- :func:`import_hf_config` (local Hugging Face config.json -> ModelArch), :data:`SUPPORTED_MODEL_TYPES`.

Everything but :class:`ModelArch` loads on first use: the validating modules need pydantic, which the GPU
machine running :mod:`gpumatch.bench` lacks (it reads presets through :mod:`gpumatch.models.builtin` only).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from gpumatch.models.arch import ModelArch

if TYPE_CHECKING:
    from gpumatch.models.hf import SUPPORTED_MODEL_TYPES, import_hf_config
    from gpumatch.models.registry import ModelRegistry, get_model, load_model_file, load_models, resolve_model

__all__ = [
    "SUPPORTED_MODEL_TYPES",
    "ModelArch",
    "ModelRegistry",
    "get_model",
    "import_hf_config",
    "load_model_file",
    "load_models",
    "resolve_model",
]
_LAZY = {"SUPPORTED_MODEL_TYPES": "hf", "import_hf_config": "hf", "ModelRegistry": "registry",
         "get_model": "registry", "load_model_file": "registry", "load_models": "registry",
         "resolve_model": "registry"}


def __getattr__(name: str) -> object:
    """The names of :data:`__all__` that need pydantic, imported on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'gpumatch.models' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"gpumatch.models.{_LAZY[name]}"), name)
    globals()[name] = value
    return value
