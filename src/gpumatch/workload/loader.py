"""Read a workload file (TOML; YAML when PyYAML is installed) into a resolved :class:`Workload`.

Errors are :class:`DataFileError` (or :class:`MissingDependencyError` for YAML without PyYAML) whose
message names the file and the field and whose hint says what to do; an unknown field gets the
closest valid name ("did you mean 'tpot_p50_s'?").
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpumatch.errors import DataFileError, GpumatchError
from gpumatch.files import parse_toml, parse_yaml, read_text
from gpumatch.models import ModelArch, resolve_model
from gpumatch.models.files import field_names, first_error
from gpumatch.workload.schema import ROLES, SCORE_TERMS, TRAINING_TASKS, WorkloadFile
from gpumatch.workload.spec import (
    Money,
    PowerBudget,
    Serving,
    Workload,
    WorkloadRuleError,
    resolve_limits,
    resolve_precision,
    resolve_shape,
    resolve_targets,
)

MAX_WORKLOAD_BYTES = 1_000_000
YAML_SUFFIXES = (".yaml", ".yml")


def load_workload(path: str | Path, resolve_gpus: bool = True) -> Workload:
    """Validate ``path`` and resolve its model (preset or config.json relative to the file) and GPU names.

    ``resolve_gpus=False`` skips the catalog lookup of ``gpus.allow/deny`` and ``money.usd_per_gpu_hour``
    keys (names are kept as written).
    """
    p = Path(path).expanduser()
    label = str(p)
    data = read_workload_data(p, label)
    try:
        wf = WorkloadFile.model_validate(data)
    except ValidationError as e:
        raise first_error(label, e, field_names(WorkloadFile)) from e
    try:
        return build_workload(wf, label, p.resolve().parent, resolve_gpus, default_name=p.stem)
    except WorkloadRuleError as e:
        raise DataFileError(f"{label}: field '{e.field}': {e.message}", e.hint) from e


def read_workload_data(p: Path, label: str) -> dict[str, Any]:
    """Raw mapping from TOML or YAML (chosen by suffix)."""
    text = read_text(p, label, MAX_WORKLOAD_BYTES)
    if p.suffix.lower() not in YAML_SUFFIXES:
        return parse_toml(text, label)
    data = parse_yaml(text, label)
    if not isinstance(data, dict):
        raise DataFileError(f"{label}: top level must be a mapping of fields", "start with 'task: serve' etc.")
    return data


def build_workload(
    wf: WorkloadFile, label: str, base_dir: Path, resolve_gpus: bool = True, default_name: str = "workload"
) -> Workload:
    """Turn a validated file into the runtime value (model and names resolved, defaults filled)."""
    model = _model(wf.model, base_dir, label)
    allow, deny, prices = list(wf.gpus.allow), list(wf.gpus.deny), dict(wf.money.usd_per_gpu_hour)
    buy = dict(wf.money.purchase_usd_per_gpu)
    if resolve_gpus and (allow or deny or prices or buy):
        allow, deny, prices = _resolve_gpu_names(allow, deny, prices, label)
        buy = _canon_prices(buy, "money.purchase_usd_per_gpu", label)
    overlap = sorted(set(allow) & set(deny))
    if overlap:
        raise WorkloadRuleError("gpus.deny", f"{', '.join(overlap)} is both allowed and denied", "keep it in one list")
    m = wf.money
    return Workload(
        name=wf.name or default_name,
        task=wf.task,
        model=model,
        model_spec=wf.model,
        precision=resolve_precision(wf.task, wf.precision),
        shape=resolve_shape(wf, model),
        targets=resolve_targets(wf),
        limits=resolve_limits(wf),
        power=PowerBudget(wf.power.w_per_node, wf.power.psu_w, wf.power.cooling),
        money=Money(m.purchase_budget_usd, prices, m.electricity_usd_per_kwh, m.pue, m.lifetime_years, m.utilization,
                    price_basis=m.price_basis, purchase_usd_per_gpu=buy),
        optimizer=_optimizer(wf),
        description=wf.description,
        role_weights=_role_weights(wf.role_weights),
        gpus_allow=tuple(allow),
        gpus_deny=tuple(deny),
        source=label,
        serving=_serving(wf),
    )


def _serving(wf: WorkloadFile) -> Serving | None:
    if wf.task == "serve":
        sv = wf.serving
        return Serving(sv.engine, sv.request_rate, sv.prefix_hit_ratio)
    if "serving" in wf.model_fields_set:
        raise WorkloadRuleError("serving", f"a [serving] section is set but task {wf.task!r} is not 'serve'",
                                "remove it, or set task = 'serve'")
    return None


def _optimizer(wf: WorkloadFile) -> str | None:
    if wf.task in TRAINING_TASKS:
        return wf.training.optimizer
    if "training" in wf.model_fields_set:
        raise WorkloadRuleError(
            "training", f"a [training] section is set but task {wf.task!r} does not train", "remove it"
        )
    return None


def _model(spec: str, base_dir: Path, label: str) -> ModelArch:
    try:
        return resolve_model(spec, base_dir=base_dir)
    except GpumatchError as e:
        raise DataFileError(f"{label}: field 'model': {e.message}", e.hint) from e


def _resolve_gpu_names(
    allow: list[str], deny: list[str], prices: dict[str, float], label: str
) -> tuple[list[str], list[str], dict[str, float]]:
    from gpumatch.catalog import load_catalog

    catalog = load_catalog()

    def canon(name: str, where: str) -> str:
        try:
            return catalog.get(name).name
        except GpumatchError as e:
            raise DataFileError(f"{label}: field '{where}': {e.message}", e.hint) from e

    return (
        [canon(n, "gpus.allow") for n in allow],
        [canon(n, "gpus.deny") for n in deny],
        _canon_prices(prices, "money.usd_per_gpu_hour", label),
    )


def _canon_prices(prices: dict[str, float], where: str, label: str) -> dict[str, float]:
    """Price overrides keyed by canonical GPU name; two keys naming the same GPU are an error (which one wins?)."""
    from gpumatch.catalog import load_catalog

    catalog = load_catalog()
    out: dict[str, float] = {}
    written: dict[str, str] = {}
    for key, value in prices.items():
        try:
            name = catalog.get(key).name
        except GpumatchError as e:
            raise DataFileError(f"{label}: field '{where}.{key}': {e.message}", e.hint) from e
        if name in out:
            raise DataFileError(f"{label}: field '{where}': {written[name]!r} and {key!r} both name {name}",
                                "keep one price per GPU")
        out[name], written[name] = value, key
    return out


def _role_weights(raw: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Check role and term names (with a close-match hint) and that weights are finite and >= 0."""
    for role, terms in raw.items():
        if role not in ROLES:
            raise WorkloadRuleError(f"role_weights.{role}", f"unknown role {role!r}", _suggest(role, ROLES))
        for term, w in terms.items():
            where = f"role_weights.{role}.{term}"
            if term not in SCORE_TERMS:
                raise WorkloadRuleError(where, f"unknown score term {term!r}", _suggest(term, SCORE_TERMS))
            if not math.isfinite(w) or w < 0:
                raise WorkloadRuleError(where, f"weight {w!r} must be a finite number >= 0", "use e.g. 1.0 or 2.5")
    return {role: dict(terms) for role, terms in raw.items()}


def _suggest(word: str, valid: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, valid, n=1, cutoff=0.5)
    return f"did you mean {close[0]!r}?" if close else f"valid: {', '.join(valid)}"
