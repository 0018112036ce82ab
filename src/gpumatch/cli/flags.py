"""Commands with many flags: the flags are declared once as data, the command function stays small.

A command decorated with :func:`takes` receives every flag as a keyword argument (``**given``); Typer reads the
parameters from the :class:`Flag` table, in its order, as if they were written in the signature. The command then
turns ``given`` into its typed request object (e.g. :class:`gpumatch.estimate.query.EstimateQuery`), makes one
library call and renders the result.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from gpumatch.vocab import ENGINES, KV_PRECISIONS, TASKS, WEIGHT_PRECISIONS

CommandFn = Callable[..., None]


@dataclass(frozen=True)
class Flag:
    """One parameter of a command: its Python type and its ``typer.Option``/``typer.Argument``."""

    type: Any
    info: Any


def takes(flags: dict[str, Flag]) -> Callable[[CommandFn], CommandFn]:
    """Give ``fn(**given)`` the signature the ``flags`` table describes (Typer builds the options from it)."""

    def wrap(fn: CommandFn) -> CommandFn:
        params = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=f.info, annotation=f.type)
                  for name, f in flags.items()]
        fn.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        return fn

    return wrap


def choices(names: Iterable[str]) -> str:
    """``a | b | c`` for a flag's help (the names of :mod:`gpumatch.vocab`)."""
    return " | ".join(names)


TASK_HELP = choices(TASKS) + "."
PRECISION_HELP = "Weights: " + choices(WEIGHT_PRECISIONS) + "."
KV_PRECISION_HELP = "KV cache: " + choices(KV_PRECISIONS) + "."
ENGINE_HELP = ("Task serve: the serving engine, " + choices(ENGINES) + " (default vllm: continuous batching at "
               "steady state; static = the static-batch model, as for --task infer).")
CONCURRENCY_HELP = "Sequences in flight over all replicas (inference: infer, serve, dev)."
GLOBAL_BATCH_HELP = "Sequences per optimizer step over all data-parallel ranks (training)."
MASTER_WEIGHTS_HELP = ("Training's mixed-precision recipe: fp32 (default: 16-bit parameters, fp32 master copy in "
                       "the optimizer, Megatron-LM/DeepSpeed, 18 B/param with AdamW) | amp (PyTorch AMP: fp32 "
                       "parameters under autocast, 16 B/param + 16-bit weight casts during the step) | none (all "
                       "in the training precision).")
MICRO_BATCH_HELP = "Sequences per data-parallel rank per forward/backward pass (training)."


def say(notes: Iterable[str]) -> None:
    """Each note as one ``gpumatch: note:`` line on stderr (deprecated flags and what replaces them)."""
    for note in notes:
        sys.stderr.write(f"gpumatch: note: {note}\n")
