"""The request vocabulary is defined once (gpumatch.vocab) and every layer reads it from there."""

from __future__ import annotations

from typing import get_args

from gpumatch import vocab
from gpumatch.estimate import TASKS as ESTIMATE_TASKS
from gpumatch.estimate.precision import BYTES_PER_ELEMENT, KV_PRECISIONS, WEIGHT_PRECISIONS
from gpumatch.workload.schema import PRECISIONS, TASKS, TRAINING_TASKS, WorkloadFile


def test_each_literal_type_names_what_its_tuple_holds() -> None:
    for literal, names in ((vocab.Task, vocab.TASKS), (vocab.Precision, vocab.WEIGHT_PRECISIONS),
                           (vocab.KvPrecision, vocab.KV_PRECISIONS), (vocab.Optimizer, vocab.OPTIMIZERS),
                           (vocab.WorkloadOptimizer, vocab.WORKLOAD_OPTIMIZERS),
                           (vocab.MasterWeights, vocab.MASTER_WEIGHTS), (vocab.Recompute, vocab.RECOMPUTE_MODES),
                           (vocab.Engine, vocab.ENGINES)):
        assert get_args(literal) == names


def test_tasks_split_into_inference_and_training() -> None:
    assert set(vocab.INFERENCE_TASKS) | set(vocab.TRAINING_TASKS) == set(vocab.TASKS)
    assert not set(vocab.INFERENCE_TASKS) & set(vocab.TRAINING_TASKS)
    assert set(vocab.FULL_TRAINING_TASKS) | set(vocab.ADAPTER_TASKS) == set(vocab.TRAINING_TASKS)
    assert [vocab.is_training(t) for t in vocab.TASKS] == [t in vocab.TRAINING_TASKS for t in vocab.TASKS]
    assert vocab.estimator_task("dev") == "infer" and set(vocab.ESTIMATOR_TASKS) == set(vocab.TASKS) - {"dev"}


def test_the_other_layers_use_the_same_names() -> None:
    assert TASKS is vocab.TASKS and TRAINING_TASKS is vocab.TRAINING_TASKS and PRECISIONS is vocab.WEIGHT_PRECISIONS
    assert WEIGHT_PRECISIONS is vocab.WEIGHT_PRECISIONS and KV_PRECISIONS is vocab.KV_PRECISIONS
    assert ESTIMATE_TASKS == vocab.ESTIMATOR_TASKS
    assert set(BYTES_PER_ELEMENT) == set(vocab.WEIGHT_PRECISIONS)
    assert get_args(WorkloadFile.model_fields["task"].annotation) == vocab.TASKS


def test_every_workload_optimizer_the_estimator_models_maps_to_its_name() -> None:
    assert set(vocab.OPTIMIZER_OF_WORKLOAD) == set(vocab.WORKLOAD_OPTIMIZERS) - {"adafactor"}
    assert set(vocab.OPTIMIZER_OF_WORKLOAD.values()) == set(vocab.OPTIMIZERS)
