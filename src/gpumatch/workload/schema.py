"""Validated shape of a workload file (TOML, or YAML with the same keys). Unknown keys are errors.

Every quantity is SI once validated: seconds, watts, US dollars, tokens. Where a unit makes sense
the file may also write a string ("200ms", "72h", "1.2kW", "$2.5/h", "$0.12/kWh", "$250k", "2B"
tokens). See ``README.md`` ("Workload files") for an annotated example.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpumatch.vocab import FOUR_BIT as FOUR_BIT
from gpumatch.vocab import TASKS as TASKS
from gpumatch.vocab import TRAINING_TASKS as TRAINING_TASKS
from gpumatch.vocab import WEIGHT_PRECISIONS, Engine, MasterWeights
from gpumatch.vocab import Precision as Dtype
from gpumatch.vocab import Task as Task
from gpumatch.vocab import WorkloadOptimizer as Optimizer
from gpumatch.workload.quantities import Seconds, Tokens, Usd, UsdPerHour, UsdPerKwh, Watts

# The vocabulary (tasks, precisions, optimizers) is gpumatch.vocab's; the names above are re-exported for
# the callers that read them from the schema.
PRECISIONS = WEIGHT_PRECISIONS

Cooling = Literal["air", "liquid"]

#: Roles the planner ranks candidates for (the seed's four, plus two serving roles).
ROLES: tuple[str, ...] = (
    "dev", "single-node-training", "low-power-inference", "cluster-training", "latency-serving",
    "throughput-serving",
)  # fmt: skip
#: Terms a role's score combines; a workload may override any role's weight for any term.
SCORE_TERMS: tuple[str, ...] = (
    "throughput", "latency", "cost", "energy", "memory_headroom", "scaling", "reliability", "ecosystem",
)  # fmt: skip


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class PrecisionSection(_Strict):
    """Number formats. Absent ones are derived from the task and ``weights`` (see spec.resolve_precision)."""

    weights: Dtype | None = None
    compute: Dtype | None = None
    kv_cache: Dtype | None = None
    gradients: Dtype | None = None
    optimizer: Literal["fp32", "bf16", "int8"] | None = None
    master_weights: MasterWeights | None = None


class ShapeSection(_Strict):
    """Sizes of the work. Inference: prompt and output tokens per request, concurrency (requests in
    flight), batch_size (sequences per forward). Training: batch_size is the global batch in sequences
    per optimizer step, sequence_length tokens each, micro_batch_size per GPU per step (optional)."""

    batch_size: int = Field(default=1, ge=1, le=10_000_000)
    micro_batch_size: int | None = Field(default=None, ge=1, le=1_000_000)
    sequence_length: int | None = Field(default=None, ge=1, le=100_000_000)
    prompt_tokens: int | None = Field(default=None, ge=0, le=100_000_000)
    output_tokens: int | None = Field(default=None, ge=0, le=100_000_000)
    concurrency: int = Field(default=1, ge=1, le=10_000_000)
    lora_rank: int | None = Field(default=None, ge=1, le=65_536)

    @model_validator(mode="after")
    def _micro_le_batch(self) -> ShapeSection:
        if self.micro_batch_size is not None and self.micro_batch_size > self.batch_size:
            raise ValueError("micro_batch_size cannot exceed batch_size (the global batch)")
        return self


class TargetsSection(_Strict):
    """What "good enough" means. Latencies in seconds (TTFT: time to first token; TPOT: time per output
    token after the first, decode only); tokens_per_s is aggregate generated (inference) or processed
    (training) tokens per second; train_tokens + deadline give the time-to-train target."""

    ttft_p50_s: Seconds | None = Field(default=None, gt=0)
    ttft_p99_s: Seconds | None = Field(default=None, gt=0)
    tpot_p50_s: Seconds | None = Field(default=None, gt=0)
    tpot_p99_s: Seconds | None = Field(default=None, gt=0)
    tokens_per_s: float | None = Field(default=None, gt=0)
    train_tokens: Tokens | None = Field(default=None, gt=0)
    deadline: Seconds | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _percentiles_ordered(self) -> TargetsSection:
        for metric in ("ttft", "tpot"):
            p50, p99 = getattr(self, f"{metric}_p50_s"), getattr(self, f"{metric}_p99_s")
            if p50 is not None and p99 is not None and p99 < p50:
                raise ValueError(f"{metric}_p99_s ({p99}) is below {metric}_p50_s ({p50}); p99 must be >= p50")
        return self


class LimitsSection(_Strict):
    max_gpus: int | None = Field(default=None, ge=1, le=1_000_000)
    gpus_per_node: int = Field(default=8, ge=1, le=1024)
    max_nodes: int | None = Field(default=None, ge=1, le=100_000)


class PowerSection(_Strict):
    """Facility limits: watts available per node (GPUs + host), the PSU rating, and cooling."""

    w_per_node: Watts | None = Field(default=None, gt=0, le=1e6)
    psu_w: Watts | None = Field(default=None, gt=0, le=1e6)
    cooling: Cooling = "air"


PriceBasis = Literal["on-demand", "reserved", "spot", "purchase"]
#: The most any price field may say (only a typo exceeds them): a GPU-hour, a card, a whole purchase.
MAX_USD_PER_GPU_HOUR = 10_000.0
MAX_USD_PER_GPU = 10_000_000.0
MAX_BUDGET_USD = 1e12
GpuHourPrice = Annotated[UsdPerHour, Field(gt=0, le=MAX_USD_PER_GPU_HOUR)]
CardPrice = Annotated[Usd, Field(gt=0, le=MAX_USD_PER_GPU)]


class MoneySection(_Strict):
    """Money: the price basis every candidate is priced on, the budget, your own prices, the site's costs.

    ``price_basis``: which quotes price the cards (on-demand, reserved, spot, purchase; README "Price basis").
    ``purchase_budget_usd``: the most all GPUs of a candidate may cost to buy; it is checked against purchase
    prices whatever the basis. ``usd_per_gpu_hour`` / ``purchase_usd_per_gpu``: your own prices by GPU name,
    replacing the catalog's figure on an hourly basis / for the purchase price. Every price, electricity price
    and budget must be a finite number above 0.
    """

    price_basis: PriceBasis = "on-demand"
    purchase_budget_usd: Usd | None = Field(default=None, gt=0, le=MAX_BUDGET_USD)
    usd_per_gpu_hour: dict[str, GpuHourPrice] = Field(default_factory=dict, max_length=500)
    purchase_usd_per_gpu: dict[str, CardPrice] = Field(default_factory=dict, max_length=500)
    electricity_usd_per_kwh: UsdPerKwh = Field(default=0.12, gt=0, le=100)
    pue: float = Field(default=1.3, ge=1.0, le=5.0)
    lifetime_years: float = Field(default=4.0, gt=0, le=30)
    utilization: float = Field(default=0.6, gt=0, le=1.0)


class GpusSection(_Strict):
    allow: list[str] = Field(default_factory=list, max_length=500)
    deny: list[str] = Field(default_factory=list, max_length=500)


class TrainingSection(_Strict):
    """Training-only choices that are the user's, not the planner's (the optimizer's state size)."""

    optimizer: Optimizer = "adamw"


class ServingSection(_Strict):
    """Task ``serve``: the engine that serves (its steady state: docs/estimators.md), an open-loop request rate
    (Poisson arrivals, requests/s; absent = closed loop at ``shape.concurrency``) and the share of each prompt the
    engine's prefix cache already holds."""

    engine: Engine = "vllm"
    request_rate: float | None = Field(default=None, gt=0, le=1e9)
    prefix_hit_ratio: float = Field(default=0.0, ge=0.0, lt=1.0)


class WorkloadFile(_Strict):
    """The whole file."""

    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str = Field(default="", max_length=5000)
    task: Task
    model: str = Field(min_length=1, max_length=1000, description="preset name/alias, or a path to config.json")
    precision: PrecisionSection = PrecisionSection()
    shape: ShapeSection = ShapeSection()
    targets: TargetsSection = TargetsSection()
    limits: LimitsSection = LimitsSection()
    power: PowerSection = PowerSection()
    money: MoneySection = MoneySection()
    role_weights: dict[str, dict[str, float]] = Field(default_factory=dict)
    gpus: GpusSection = GpusSection()
    training: TrainingSection = TrainingSection()
    serving: ServingSection = ServingSection()
