"""What the planner plans for: a :class:`PlanRequest`, built from a workload file or from CLI flags.

The planner needs more than one estimate's options: the global batch (training) or the requests in flight
(serving), the targets, the limits on GPUs, power and money, the role weights and the GPU allow/deny lists.
:func:`from_workload` maps a resolved :class:`gpumatch.workload.Workload`, its shared fields (task, shape,
precisions, optimizer) by :func:`gpumatch.workload.request.file_fields`, the one mapping ``estimate --workload``
uses too (a serving file's sequences in flight are ``max(batch_size, concurrency)`` for both);
:func:`from_request` puts the flags on top (:func:`gpumatch.workload.request.resolve_request`).

Plan-only choices (and why):
- task ``dev`` is planned as single-stream inference (the estimator has no "dev" task; a development box
  must above all load and run the model);
- the batch concepts keep their names: ``PlanRequest.global_batch`` (training, ``--global-batch``,
  ``shape.batch_size``) and ``PlanRequest.concurrency`` (inference, ``--concurrency``), each split over the
  candidates' DP ranks or replicas by the estimator's request rules (:mod:`gpumatch.estimate.request`);
- a training ``micro_batch_size`` in the file fixes the micro-batch; absent, the planner tries 1, 2, 4, 8.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from gpumatch.catalog.prices import check_basis
from gpumatch.errors import InputError
from gpumatch.estimate import Site
from gpumatch.estimate.serving import DEFAULT_ENGINE
from gpumatch.models.arch import ModelArch
from gpumatch.vocab import (
    ENGINES,
    FULL_TRAINING_TASKS,
    KV_PRECISIONS,
    TASKS,
    WEIGHT_PRECISIONS,
    estimator_task,
    is_training,
)
from gpumatch.workload import Workload, quantities, rules
from gpumatch.workload.request import WorkRequest, file_fields
from gpumatch.workload.schema import FOUR_BIT, MoneySection, PowerSection, TargetsSection

DEFAULT_MAX_GPUS = 64


@dataclass(frozen=True)
class PlanRequest:
    """One planning question, SI units. ``concurrency``: sequences in flight over all replicas (inference);
    ``global_batch``: sequences per optimizer step (training); ``micro_batch``: fixed micro-batch per DP rank
    (training), None = let the planner choose. The field of the other kind of task is not read.
    Targets are None when not set; ``usd_per_gpu_hour`` (``purchase_usd_per_gpu``) replaces the catalog's hourly
    (purchase) figure by canonical GPU name.
    ``tp``/``pp`` pin the tensor/pipeline degree (None = the planner tries them all).
    """

    task: str
    model: ModelArch
    name: str = "plan"
    precision: str = "bf16"
    kv_precision: str | None = None
    concurrency: int = 1
    global_batch: int = 1
    micro_batch: int | None = None
    seq: int = 4096
    prompt: int = 1024
    gen: int = 256
    lora_rank: int = 16
    optimizer: str = "adamw"
    master_weights: str = "fp32"
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_p99_s: float | None = None
    tokens_per_s: float | None = None
    train_tokens: float | None = None
    deadline_s: float | None = None
    max_gpus: int = DEFAULT_MAX_GPUS
    gpus_per_node: int = 8
    w_per_node: float | None = None
    psu_w: float | None = None
    cooling: str = "air"
    budget_usd: float | None = None
    usd_per_gpu_hour: dict[str, float] = field(default_factory=dict)
    price_basis: str = "on-demand"
    """Which quotes price every candidate (:mod:`gpumatch.catalog.prices`); the budget is checked against
    purchase prices whatever the basis."""
    purchase_usd_per_gpu: dict[str, float] = field(default_factory=dict)
    utilization: float = 0.6
    site: Site = field(default_factory=Site)
    role_weights: dict[str, dict[str, float]] = field(default_factory=dict)
    gpus_allow: tuple[str, ...] = ()
    gpus_deny: tuple[str, ...] = ()
    dev: bool = False
    tp: int | None = None
    pp: int | None = None
    engine: str | None = None
    """Task ``serve``: the engine whose steady state ranks the serving roles (``[serving] engine``; None = vllm;
    ``static`` = the static-batch model)."""
    prefix_hit_ratio: float = 0.0
    """Task ``serve``: share of each prompt the engine's prefix cache holds (``[serving] prefix_hit_ratio``)."""
    gpus_from_flags: tuple[str, ...] = ()
    """Which of ``gpus_allow``/``gpus_deny`` came from ``--gpu``/``--exclude`` ("allow", "deny"), not the file:
    rejection reasons name what the user actually wrote."""

    def exclusion(self, gpu: str) -> str:
        """Why ``gpu`` is left out, naming the flag or the file field that did it (empty when it is not)."""
        if self.gpus_allow and gpu not in self.gpus_allow:
            src = (" ".join(f"--gpu {n}" for n in self.gpus_allow) if "allow" in self.gpus_from_flags
                   else "the workload's gpus.allow")
            return f"not selected ({src})"
        if gpu in self.gpus_deny:
            src = f"--exclude {gpu}" if "deny" in self.gpus_from_flags else "the workload's gpus.deny"
            return f"excluded ({src})"
        return ""

    @property
    def training(self) -> bool:
        return is_training(self.task)

    @property
    def full_training(self) -> bool:
        return self.task in FULL_TRAINING_TASKS

    @property
    def required_tokens_per_s(self) -> float | None:
        """Throughput the targets imply: ``tokens_per_s``, or ``train_tokens / deadline_s`` (the larger)."""
        need = [v for v in (self.tokens_per_s,) if v]
        if self.train_tokens and self.deadline_s:
            need.append(self.train_tokens / self.deadline_s)
        return max(need) if need else None

    @property
    def desk_side(self) -> bool:
        """A desk-side box: a PSU rating is given and at most 4 GPUs share a node (assumed signal)."""
        return self.psu_w is not None and self.gpus_per_node <= 4

    @property
    def serving_engine(self) -> str:
        """The engine the plan's figures model: ``engine`` (vllm by default) for task ``serve``, else ``static``."""
        if self.task != "serve" or self.dev:
            return "static"
        return self.engine or DEFAULT_ENGINE

    @property
    def always_on(self) -> bool:
        """A 24x7 service: serving at 70 % or more utilization (the seed's "7x24小时高负载")."""
        return self.task == "serve" and self.utilization >= 0.7


def _site(wl: Workload) -> Site:
    m = wl.money
    return Site(pue=m.pue, electricity_usd_per_kwh=m.electricity_usd_per_kwh, lifetime_years=m.lifetime_years,
                duty_fraction=m.utilization)


def from_workload(wl: Workload) -> PlanRequest:
    """The planning question a resolved workload asks: its shared fields by
    :func:`gpumatch.workload.request.file_fields` (the mapping ``estimate --workload`` uses too; module docstring
    of :mod:`gpumatch.workload.request`), the targets, limits, power, money, roles and GPU lists as written."""
    f = file_fields(wl)
    return PlanRequest(
        task=estimator_task(wl.task),
        model=wl.model,
        name=wl.name,
        precision=f["precision"],  # a QLoRA base is 4-bit (nf4 unless the file says int4/fp4): shown as such
        kv_precision=f.get("kv_precision"),
        **({"global_batch": f["global_batch"]} if wl.is_training else {"concurrency": f["concurrency"]}),
        micro_batch=f.get("micro_batch"),
        seq=wl.shape.sequence_length,  # inference: prompt + output (not read)
        prompt=f["prompt"],
        gen=f["gen"],
        lora_rank=f.get("lora_rank") or 16,
        optimizer=f.get("optimizer", "adamw"),
        master_weights=f.get("master_weights") or "fp32",
        ttft_p50_s=wl.targets.ttft_p50_s,
        ttft_p99_s=wl.targets.ttft_p99_s,
        tpot_p50_s=wl.targets.tpot_p50_s,
        tpot_p99_s=wl.targets.tpot_p99_s,
        tokens_per_s=wl.targets.tokens_per_s,
        train_tokens=wl.targets.train_tokens,
        deadline_s=wl.targets.deadline_s,
        max_gpus=wl.limits.max_gpus_effective or DEFAULT_MAX_GPUS,
        gpus_per_node=wl.limits.gpus_per_node,
        w_per_node=wl.power.w_per_node,
        psu_w=wl.power.psu_w,
        cooling=wl.power.cooling,
        budget_usd=wl.money.purchase_budget_usd,
        usd_per_gpu_hour=dict(wl.money.usd_per_gpu_hour),
        price_basis=wl.money.price_basis,
        purchase_usd_per_gpu=dict(wl.money.purchase_usd_per_gpu),
        utilization=wl.money.utilization,
        site=_site(wl),
        role_weights={k: dict(v) for k, v in wl.role_weights.items()},
        gpus_allow=wl.gpus_allow,
        gpus_deny=wl.gpus_deny,
        dev=wl.task == "dev",
        engine=wl.serving.engine if wl.serving is not None else None,
        prefix_hit_ratio=(wl.serving.prefix_hit_ratio or 0.0) if wl.serving is not None else 0.0,
    )


def from_request(work: WorkRequest, **options: Any) -> PlanRequest:
    """The planning question of a :class:`~gpumatch.workload.request.WorkRequest` (a workload file and the shared
    flags, merged by :func:`~gpumatch.workload.request.resolve_request`) with the plan's own options on top
    (``options``: PlanRequest field names, as :func:`with_options` takes them)."""
    base = None if work.workload is None else from_workload(work.workload)
    flagged = {k: v for k, v in work.given().items() if k in work.from_flags}
    shared = dict(flagged)
    if "task" in work.from_flags:
        shared["task"] = work.task
    model = work.model if base is None or "model" in work.from_flags else None
    names: dict[str, str] = {k: work.flag(k) for k in ("concurrency", "global_batch") if k in flagged}
    return with_options(base, model, names=names, **shared, **options)


_TASKS = TASKS
_PRECISIONS = WEIGHT_PRECISIONS
_POSITIVE = ("concurrency", "global_batch", "micro_batch", "seq", "prompt", "gen", "max_gpus", "gpus_per_node", "tp",
             "pp", "lora_rank")
#: Numeric options checked by the workload file's own rules (schema section, field), with the flag and an example.
_SCHEMA_CHECKED: dict[str, tuple[type[BaseModel], str, str, str]] = {
    "budget_usd": (MoneySection, "purchase_budget_usd", "--budget-usd", "--budget-usd '$20k'"),
    "w_per_node": (PowerSection, "w_per_node", "--power-w-per-node", "--power-w-per-node 10.2kW"),
    "psu_w": (PowerSection, "psu_w", "--psu-w", "--psu-w 1.6kW"),
    "ttft_p50_s": (TargetsSection, "ttft_p50_s", "--ttft-s", "--ttft-s 500ms"),
    "tpot_p50_s": (TargetsSection, "tpot_p50_s", "--tpot-s", "--tpot-s 50ms"),
    "tokens_per_s": (TargetsSection, "tokens_per_s", "--tokens-per-s", "--tokens-per-s 2k"),
}
#: Options only one kind of task reads: the shared rule (:func:`gpumatch.workload.rules.misplaced_options`) plus
#: the plan's own (its micro-batch and sequence length, its latency targets).
_INFERENCE_ONLY = ("ttft_p50_s", "tpot_p50_s")
_TRAINING_ONLY = ("micro_batch", "seq")
_FLAGS = {"kv_precision": "--kv-precision", "prompt": "--prompt", "gen": "--gen", "ttft_p50_s": "--ttft-s",
          "tpot_p50_s": "--tpot-s", "micro_batch": "--micro-batch", "seq": "--seq"}
#: Upper bounds shared with ``estimate`` and workload files (only a typo exceeds them).
_BOUNDS = {"concurrency": rules.MAX_BATCH, "global_batch": rules.MAX_BATCH, "micro_batch": rules.MAX_BATCH,
           "max_gpus": rules.MAX_GPUS, "gpus_per_node": 1024, "seq": rules.MAX_TOKENS_PER_SEQUENCE,
           "prompt": rules.MAX_TOKENS_PER_SEQUENCE, "gen": rules.MAX_TOKENS_PER_SEQUENCE}


def check_quantities(opts: dict[str, Any]) -> None:
    """Parse and check the quantities in ``opts`` (in place) by the workload file's rule for the same field: the
    same unit strings ("1.6kW", "$20k", "500ms", "2k"), finite, in range (budget, power, targets > 0)."""
    for name, (section, fld, flag, example) in _SCHEMA_CHECKED.items():
        if name not in opts:
            continue
        value = _plain_number(opts[name])
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{flag} must be a finite number, got {value}", f"give a number, e.g. {example}")
        if name == "tokens_per_s" and isinstance(value, str):
            value = _rate(value, flag, example)
        try:
            opts[name] = getattr(section.model_validate({fld: value}), fld)
        except ValidationError as e:
            msg = str(e.errors()[0]["msg"]).removeprefix("Value error, ")
            shown = f"{value:g}" if isinstance(value, float | int) else repr(value)
            raise InputError(f"{flag} {shown}: {msg[:1].lower()}{msg[1:]}",
                             f"e.g. {example}, or leave {flag} out") from e


def _plain_number(value: Any) -> Any:
    """A flag's text that is a bare number ("1600", "-5", "nan") as a float, so it meets the same checks as a
    number from a file; text with a unit ("1.6kW") is left to the field's parser."""
    if isinstance(value, str):
        try:
            return float(value.replace("_", ""))
        except ValueError:
            return value
    return value


def _rate(text: str, flag: str, example: str) -> float:
    """'2000', '2k', '2k tokens/s' -> tokens per second (the counts of :func:`quantities.token_count`)."""
    core = text.strip()
    for unit in ("tokens/s", "token/s", "tok/s", "/s"):
        core = core.removesuffix(unit).strip()
    try:
        return float(quantities.token_count(core))
    except ValueError as e:
        raise InputError(f"{flag}: {e}", f"e.g. {example}") from None


def check_task_options(req: PlanRequest, given: set[str]) -> None:
    """Reject options given on the command line that the request's task would ignore."""
    own = _INFERENCE_ONLY if req.training else _TRAINING_ONLY
    wrong = [n for n, _ in rules.misplaced_options(req.task, given) if n in _FLAGS] + [n for n in own if n in given]
    if wrong:
        flag = _FLAGS[sorted(wrong, key=list(_FLAGS).index)[0]]
        if req.training:
            raise InputError(f"{flag} is for inference, not task {req.task!r}", f"remove {flag}")
        task = "dev" if req.dev else req.task
        raise InputError(f"{flag} is for training; task {task!r} reads --prompt and --gen",
                         f"remove {flag}" + ("; the context is --prompt + --gen" if flag == "--seq" else ""))
    flags = ("--seq",) if req.training else ("--prompt", "--gen")
    problem = rules.context_problem(req.model, req.seq if req.training else req.prompt + req.gen)
    if problem:
        said = " + ".join(flags) if set(given) & {"seq", "prompt", "gen"} else "the default " + " + ".join(flags)
        raise InputError(f"{said}: {problem[0]}", f"keep {' + '.join(flags)} <= {req.model.max_position_embeddings}")
    both = sorted(set(req.gpus_allow) & set(req.gpus_deny))
    if both:
        raise InputError(f"{', '.join(both)} is both allowed and denied (--gpu / gpus.allow and --exclude / "
                         "gpus.deny)", "keep it in one list")


def _training_precision(req: PlanRequest, given: set[str]) -> PlanRequest:
    """QLoRA plans a 4-bit base (nf4 unless int4/fp4 is named): a 16-bit precision given with it is an error, a
    16-bit one inherited (the default, a LoRA file's base) becomes nf4. Other training tasks refuse 4/8-bit
    integer weights (not a training recipe). The same rules as ``gpumatch estimate``."""
    if req.task == "qlora" and req.precision not in FOUR_BIT:
        if "precision" in given:
            raise InputError(f"task 'qlora' keeps the frozen base in 4 bits, but --precision is {req.precision!r}",
                             "use --precision nf4, or --task lora for a 16-bit base")
        return replace(req, precision="nf4")
    if req.training and req.task != "qlora" and req.precision in ("int8", *FOUR_BIT):
        raise InputError(f"{req.task} with {req.precision} weights is not a training recipe",
                         "use --task qlora for a 4-bit base, or bf16/fp8 for full training")
    return req


def with_options(base: PlanRequest | None, model: ModelArch | None, names: dict[str, str] | None = None,
                 **options: Any) -> PlanRequest:
    """A request from CLI-style options, on top of ``base`` (a workload's request) when given.

    Options are the :class:`PlanRequest` field names; None values are ignored. ``task`` may be ``dev``.
    ``names``: how the user wrote an option, where it is not ``--`` + its name (``global_batch``: ``--batch``).
    Raises :class:`InputError` (one line, what to do) for unknown tasks/precisions and non-positive sizes.
    """
    opts = {k: v for k, v in options.items() if v is not None}
    unknown = set(opts) - set(PlanRequest.__dataclass_fields__)
    if unknown:
        raise InputError(f"unknown plan option(s): {', '.join(sorted(unknown))}")
    task = opts.pop("task", None)
    if task is not None:
        if task not in _TASKS:
            raise InputError(f"unknown task {task!r}", f"use one of {', '.join(_TASKS)}")
        opts["dev"] = task == "dev"
        opts["task"] = "infer" if task == "dev" else task
    if "price_basis" in opts:
        check_basis(opts["price_basis"], "--price-basis")
    for name, allowed in (("precision", _PRECISIONS), ("kv_precision", KV_PRECISIONS), ("engine", ENGINES)):
        if name in opts and opts[name] not in allowed:
            raise InputError(f"unknown {name.replace('_', ' ')} {opts[name]!r}", f"use one of {', '.join(allowed)}")
    flag = {n: f"--{n.replace('_', '-')}" for n in _POSITIVE} | (names or {})
    for name in _POSITIVE:
        rules.check_size(flag[name], opts.get(name), _BOUNDS.get(name, math.inf))
    check_quantities(opts)
    given = set(opts)
    flagged = tuple(k for k in ("allow", "deny") if f"gpus_{k}" in opts)
    if flagged:
        kept = () if base is None else tuple(k for k in base.gpus_from_flags if k not in flagged)
        opts["gpus_from_flags"] = kept + flagged
    if base is None:
        if model is None:
            raise InputError("a model is needed: give a workload file or --model", "see 'gpumatch plan --help'")
        opts.setdefault("task", "infer")
        req = PlanRequest(model=model, **opts)
    else:
        req = replace(base, **opts) if model is None else replace(base, model=model, **opts)
    if req.training and req.dev:
        raise InputError("task 'dev' plans inference; it cannot be combined with training options")
    req = _training_precision(req, given)
    check_task_options(req, given)
    if req.micro_batch and req.micro_batch > req.global_batch and req.training:
        raise InputError(f"--micro-batch {req.micro_batch} exceeds the global batch {req.global_batch} "
                         f"({flag['global_batch'] if 'global_batch' in given else 'the file'})")
    return req
