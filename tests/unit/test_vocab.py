"""The request vocabulary is defined once (gpumatch.vocab) and every layer reads it from there."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import gpumatch
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


# --- no second copy of a vocabulary under src/ --------------------------------------------------------

SRC = Path(gpumatch.__file__).parent
#: Tables keyed by every name of a vocabulary: data per name, not a list of names (their keys are checked
#: against the vocabulary above). (module path under src/gpumatch, assigned name).
PER_NAME_TABLES = {("estimate/precision.py", "BYTES_PER_ELEMENT"), ("estimate/precision.py", "_COMPUTE_PATH")}


def _vocabularies() -> dict[str, frozenset[str]]:
    """Every name list of gpumatch.vocab with 3 names or more (2-name lists such as ``("lora", "qlora")`` would
    match ordinary code)."""
    return {k: frozenset(v) for k, v in vars(vocab).items() if k.isupper() and isinstance(v, tuple | frozenset)
            and len(v) >= 3 and all(isinstance(x, str) for x in v)}


def _names_in(node: ast.AST) -> set[str] | None:
    """The string constants a tuple/list/set literal lists, or a dict literal's keys; None for other nodes."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        elts = node.elts
    elif isinstance(node, ast.Dict):
        elts = [k for k in node.keys if k is not None]
    else:
        return None
    return {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}


def _targets(tree: ast.AST) -> dict[int, str]:
    """id(node) -> the name a module- or class-level assignment gives the value holding it."""
    out: dict[int, str] = {}
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.Assign):
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if isinstance(target, ast.Name):
            out.update((id(n), target.id) for n in ast.walk(value))
    return out


def vocabulary_copies(source: str, where: str) -> list[tuple[str, str, int, str]]:
    """(where, assigned name or "", line, vocabulary) of each literal in ``source`` that lists a whole vocabulary."""
    tree = ast.parse(source)
    named = _targets(tree)
    vocabs = _vocabularies()
    found = []
    for node in ast.walk(tree):
        names = _names_in(node)
        if names is None:
            continue
        for vocab_name, members in vocabs.items():
            if members <= names:
                found.append((where, named.get(id(node), ""), getattr(node, "lineno", 0), vocab_name))
    return found


def test_the_copy_check_catches_a_copy() -> None:
    code = 'ENGINES = ("vllm", "sglang", "trtllm", "gpumatch", "static")\nx = {"bf16": 2, "fp16": 2}\n'
    assert vocabulary_copies(code, "m.py") == [("m.py", "ENGINES", 1, "ENGINES")]
    code = "def f(t):\n    return t in ['train', 'finetune', 'lora', 'qlora', 'other']\n"
    assert [c[3] for c in vocabulary_copies(code, "m.py")] == ["TRAINING_TASKS"]


def test_vocabulary_literals_are_defined_only_in_vocab() -> None:
    """A literal listing every name of a vocabulary (tasks, precisions, engines, ...) outside vocab.py is a
    second copy that drifts: import the tuple from gpumatch.vocab (or derive a named subset from it)."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel != "vocab.py":
            found += vocabulary_copies(path.read_text(encoding="utf-8"), rel)
    tables = {(where, name) for where, name, _, _ in found}
    assert [c for c in found if (c[0], c[1]) not in PER_NAME_TABLES] == []
    assert tables >= PER_NAME_TABLES, "a per-name table left; drop it from PER_NAME_TABLES"
