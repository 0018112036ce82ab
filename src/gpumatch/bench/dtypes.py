"""Precision names -> torch dtypes, defined once for the bench layer.

Torch-free to import: the names are read by torch-free code (``bench.dist.spec``'s checks, ``lab.serve``'s
``--dtype`` check); torch is imported only when a dtype is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

STORAGE_PRECISIONS: tuple[str, ...] = ("bf16", "fp16", "fp32")
"""Precisions a model's weights and activations are held in (``gpumatch serve --dtype``, ``bench scale``)."""


def torch_dtype(precision: str) -> torch.dtype:
    """The element dtype of a tensor at ``precision`` (bf16, fp16, fp32 or tf32; tf32 is fp32 storage, the caller
    enables TF32 matmuls). KeyError for any other name (fp8 has its own scaled path in each measurement)."""
    import torch

    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}
    return dtypes[precision]


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The dtype ``torch.autocast`` runs a training precision's matmuls in: bf16 and fp16 themselves; fp8 under
    bf16 autocast (its linears are swapped for ``_scaled_mm`` ones); None (no autocast) for anything else."""
    if precision not in ("bf16", "fp16", "fp8"):
        return None
    return torch_dtype("bf16" if precision == "fp8" else precision)
