"""The request vocabulary: tasks, precisions, optimizers, recompute modes and serving engines, defined once.

Every layer that names one of these (the workload schema, the estimator, the planner, the CLI's help and
checks) imports it from here, so a new precision or task is added in one place. Each vocabulary is a
``Literal`` type (for mypy and pydantic) and a tuple of the same names in a stable order (for messages,
``--help`` and loops); a test checks that the two agree.
"""

from __future__ import annotations

from typing import Literal

Task = Literal["infer", "serve", "dev", "train", "finetune", "lora", "qlora"]
#: Every task a workload file or a flag may name. ``dev`` (a development box) is planned and estimated as
#: single-stream ``infer``.
TASKS: tuple[Task, ...] = ("infer", "serve", "dev", "train", "finetune", "lora", "qlora")
#: Tasks that generate tokens (they read prompt/gen/concurrency/KV precision).
INFERENCE_TASKS: tuple[Task, ...] = ("infer", "serve", "dev")
#: Tasks that train (they read sequence length/global and micro-batch/optimizer/recompute).
TRAINING_TASKS: tuple[Task, ...] = ("train", "finetune", "lora", "qlora")
#: Training tasks that update every weight (gradients and optimizer state for all of them).
FULL_TRAINING_TASKS: tuple[Task, ...] = ("train", "finetune")
#: Training tasks that train low-rank adapters on a frozen base.
ADAPTER_TASKS: tuple[Task, ...] = ("lora", "qlora")
#: The tasks the estimator models: all but ``dev`` (estimated as ``infer``), in the order of :data:`TASKS`.
ESTIMATOR_TASKS: tuple[Task, ...] = tuple(t for t in TASKS if t != "dev")

Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "nf4", "fp4", "mxfp4", "nvfp4"]
#: Stored weight formats (and training precisions). int4 = group-wise GPTQ/AWQ; nf4 = QLoRA's NormalFloat4;
#: fp4 = MXFP4 (kept as the short name); mxfp4 = OCP MXFP4 (E2M1 values, one E8M0 scale per 32);
#: nvfp4 = NVIDIA NVFP4 (E2M1 values, one FP8 E4M3 scale per 16, plus one FP32 scale per tensor).
WEIGHT_PRECISIONS: tuple[Precision, ...] = (
    "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "nf4", "fp4", "mxfp4", "nvfp4",
)
KvPrecision = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
#: KV-cache formats.
KV_PRECISIONS: tuple[KvPrecision, ...] = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
#: 4-bit weight formats (a QLoRA base is one of these).
FOUR_BIT: frozenset[str] = frozenset({"int4", "nf4", "fp4", "mxfp4", "nvfp4"})

Optimizer = Literal["adamw", "adamw-8bit", "sgd"]
#: Optimizers the estimator models (names as ``--optimizer`` takes them).
OPTIMIZERS: tuple[Optimizer, ...] = ("adamw", "adamw-8bit", "sgd")
WorkloadOptimizer = Literal["adamw", "adamw8bit", "sgd", "adafactor"]
#: Optimizers a workload file's ``training.optimizer`` may name.
WORKLOAD_OPTIMIZERS: tuple[WorkloadOptimizer, ...] = ("adamw", "adamw8bit", "sgd", "adafactor")
#: A workload file's optimizer name -> the estimator's (adafactor is not modelled: absent).
OPTIMIZER_OF_WORKLOAD: dict[str, Optimizer] = {"adamw": "adamw", "adamw8bit": "adamw-8bit", "sgd": "sgd"}

MasterWeights = Literal["fp32", "amp", "none"]
#: The mixed-precision training recipe (bytes per parameter with AdamW in gpumatch.estimate.options):
#: ``fp32``: 16-bit parameters and an FP32 master copy inside the optimizer state (Megatron-LM, DeepSpeed; 18 B);
#: ``amp``: PyTorch AMP, FP32 parameters (they are the master) under ``torch.autocast`` (16 B, plus 16-bit
#: casts of the matmul weights while forward and backward run); ``none``: all in the training precision (8 B).
MASTER_WEIGHTS: tuple[MasterWeights, ...] = ("fp32", "amp", "none")

Recompute = Literal["none", "selective", "full"]
#: Activation recomputation: none, selective (attention only; Korthikanti et al. 2022) or full.
RECOMPUTE_MODES: tuple[Recompute, ...] = ("none", "selective", "full")

Engine = Literal["vllm", "sglang", "trtllm", "gpumatch", "static"]
#: Serving engines by name (``gpumatch`` = ``gpumatch serve``, this package's own server; ``static`` = a plain
#: static-batching loop); profiles in estimate/data/engines.toml.
ENGINES: tuple[Engine, ...] = ("vllm", "sglang", "trtllm", "gpumatch", "static")


def is_training(task: str) -> bool:
    """True for the tasks of :data:`TRAINING_TASKS`."""
    return task in TRAINING_TASKS


def estimator_task(task: str) -> str:
    """The task the estimator runs for ``task``: ``dev`` is single-stream ``infer``; the others are themselves."""
    return "infer" if task == "dev" else task
