"""Turn a :class:`gpumatch.workload.Workload` into the options of :func:`gpumatch.estimate.estimate`.

Mapping: task ``dev`` is estimated as ``infer``; ``shape.concurrency`` is the serving batch; training uses
``micro_batch_size`` (else ``batch_size``) as the micro-batch and ``batch_size / micro_batch_size`` as the
number of micro-batches; ``targets.train_tokens`` becomes ``run_tokens``; ``optimizer = adamw8bit`` or
``precision.optimizer = int8`` selects 8-bit AdamW.
"""

from __future__ import annotations

from typing import Any

from gpumatch.errors import InputError
from gpumatch.vocab import OPTIMIZER_OF_WORKLOAD
from gpumatch.workload import Workload


def options_from_workload(wl: Workload) -> dict[str, Any]:
    """Request options (see :class:`gpumatch.estimate.setup.Request`) of a resolved workload."""
    task = "infer" if wl.task == "dev" else wl.task
    p, s = wl.precision, wl.shape
    opts: dict[str, Any] = {"task": task, "precision": p.weights, "gpus_per_node": wl.limits.gpus_per_node,
                            "price_basis": wl.money.price_basis}
    if p.kv_cache and not wl.is_training:
        opts["kv_precision"] = p.kv_cache
    if wl.is_training:
        micro = s.micro_batch_size or s.batch_size
        opts.update(batch=micro, micro_batches=max(1, s.batch_size // micro), seq=s.sequence_length)
        optimizer = OPTIMIZER_OF_WORKLOAD.get(wl.optimizer or "adamw")
        if optimizer is None:
            raise InputError(
                f"optimizer {wl.optimizer!r} is not modelled by the estimator", "use adamw, adamw8bit or sgd"
            )
        if p.optimizer == "int8":
            optimizer = "adamw-8bit"
        opts["optimizer"] = optimizer
        if p.master_weights is not None:
            opts["master_weights"] = p.master_weights
        if s.lora_rank:
            opts["lora_rank"] = s.lora_rank
        if wl.targets.train_tokens:
            opts["run_tokens"] = wl.targets.train_tokens
    else:
        batch = s.concurrency if task == "serve" else s.batch_size
        opts.update(batch=max(1, batch), prompt=s.prompt_tokens, gen=s.output_tokens)
    return opts
