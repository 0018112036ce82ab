"""Model architectures: presets from published configs and import of a local Hugging Face config.json.

Public API:

- :class:`ModelArch` — frozen architecture with parameter accounting (``params_total``,
  ``params_active``, ``params_active_nonembedding``, ``kv_bytes_per_token``, ``to_dict``).
- :func:`get_model` (name or alias -> ModelArch), :func:`load_models` (all presets, built-in plus the
  ``$GPUMATCH_HOME/models`` overlay), :func:`resolve_model` (a preset name or a path to a config.json).
- :func:`import_hf_config` (local Hugging Face config.json -> ModelArch), :data:`SUPPORTED_MODEL_TYPES`.
"""

from gpumatch.models.arch import ModelArch
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
