"""Rules a request must keep whichever way it arrives: workload file, ``estimate`` flags, ``plan`` flags.

- Which options belong to which kind of task (:func:`misplaced_options`): an option that does not apply
  to the task is an error, never silently ignored. Names are those of
  :class:`gpumatch.estimate.request.Request`; each caller names them its own way (``--kv-precision``,
  ``precision.kv_cache``).
- How long a context the model takes (:func:`context_problem`, :func:`check_context`).
- The largest magnitudes a real request can have (:data:`MAX_BATCH` ...), so that a typo such as
  ``--count 10000000`` or ``--run-tokens 1e40`` is refused instead of computed.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpumatch.errors import InputError
from gpumatch.models import ModelArch
from gpumatch.vocab import is_training as is_training

#: Options that mean something only when training (full, LoRA or QLoRA).
TRAINING_ONLY: tuple[str, ...] = (
    "optimizer", "master_weights", "grad_bytes", "recompute", "micro_batches", "zero", "offload_optimizer",
)  # fmt: skip
#: Options that mean something only when generating (infer, serve, dev).
INFERENCE_ONLY: tuple[str, ...] = ("prompt", "gen", "kv_precision")

#: Upper bounds, far above any real job (the largest clusters have ~10^5 GPUs, the largest training runs
#: ~10^14 tokens; serving batches are thousands of sequences), so only a typo can exceed them. They match
#: the limits of workload files (schema.py: batch_size and concurrency <= 1e7, max_gpus <= 1e6, tokens per
#: sequence <= 1e8).
MAX_BATCH = 10_000_000
MAX_GPUS = 1_000_000
MAX_TOKENS_PER_SEQUENCE = 100_000_000
MAX_RUN_TOKENS = 1e18
MAX_MICRO_BATCHES = 1_000_000


def misplaced_options(task: str, given: Iterable[str]) -> list[tuple[str, str]]:
    """``(option, "training" | "inference")`` for each option in ``given`` that does not apply to ``task``.

    ``given`` must hold only the options the user set (not defaults). Unknown names are ignored.
    """
    wrong = INFERENCE_ONLY if is_training(task) else TRAINING_ONLY
    kind = "inference" if is_training(task) else "training"
    return [(name, kind) for name in given if name in wrong]


def context_problem(model: ModelArch, context_tokens: int) -> tuple[str, str] | None:
    """(message, hint) when ``context_tokens`` exceeds the model's position range, else None."""
    limit = model.max_position_embeddings
    if limit and context_tokens > limit:
        return f"a {context_tokens}-token context exceeds {model.name}'s {limit} positions", f"keep it <= {limit}"
    return None


def check_context(model: ModelArch, context_tokens: int, what: str = "context") -> None:
    """Raise :class:`InputError` when ``context_tokens`` (``what``: e.g. "--prompt + --gen") exceeds the model's
    maximum positions. Training: the sequence length; inference: prompt + generated tokens."""
    problem = context_problem(model, context_tokens)
    if problem:
        message, hint = problem
        raise InputError(f"{what}: {message}", hint)


def check_size(name: str, value: float | None, maximum: float) -> None:
    """Raise :class:`InputError` unless ``1 <= value <= maximum`` (a count, batch or length; None = not given)."""
    if value is not None and value < 1:
        raise InputError(f"{name} must be at least 1, got {value}")
    check_bound(name, value, maximum)


def check_bound(name: str, value: float | None, maximum: float) -> None:
    """Raise :class:`InputError` when ``value`` exceeds ``maximum`` (``name`` as the user wrote it)."""
    if value is not None and value > maximum:
        raise InputError(f"{name} {value:g} is beyond any real workload (at most {maximum:g})",
                         "check the number for a typo")
