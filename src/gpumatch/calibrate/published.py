"""Predicted against published serving measurements (TensorRT-LLM's own tables), case by case.

No torch here. The data file (``tests/data/published/trtllm-serving.toml``) transcribes the vendor's tables
with their source and scenario; nothing in it is fitted on (:mod:`gpumatch.calibrate.fit` uses only the
measured cases). Each case is predicted with :func:`gpumatch.estimate.estimate` (task ``serve``: fused kernels,
CUDA graphs, split-KV attention):

- ``static-batch``: the stated batch; output tokens/s = batch × osl / (prefill of the batch + osl × TPOT at
  the mean context), which is how gptSessionBenchmark counts it.
- ``max-throughput``: the engine picks its batch (in-flight batching, requests queued at once). gpumatch
  scans :data:`BATCH_LADDER` and keeps the batch of highest output tokens/s among those that fit (its own
  memory model decides); that static-batch figure stands for the steady state of in-flight batching.
- ``first-token``: batch 1, ``ttft_s``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpumatch.estimate import estimate
from gpumatch.files import parse_toml, read_text

BATCH_LADDER = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)
"""Concurrent sequences tried for ``max-throughput`` (TensorRT-LLM's default CUDA-graph batch sizes reach
8192; beyond 4096 no case of the data gains)."""


@dataclass(frozen=True)
class PublishedCase:
    """One published figure and what it was measured on."""

    source: str
    scenario: str
    metric: str
    model: str
    gpu: str
    tp: int
    precision: str
    kv_precision: str
    batch: int | None
    isl: int
    osl: int
    value: float
    """In SI units: tokens/s of the whole system, or seconds."""

    @property
    def case_id(self) -> str:
        b = f" b{self.batch}" if self.batch else ""
        return f"{self.scenario} {self.model} {self.gpu} tp{self.tp} {self.precision}{b} {self.isl}/{self.osl}"


def load(path: Path) -> tuple[list[PublishedCase], dict[str, dict[str, str]]]:
    """The cases of a published-data file and its ``[sources]`` table."""
    label = f"published data {path}"
    doc = parse_toml(read_text(path, label, 10_000_000), label)
    cases: list[PublishedCase] = []
    for grid in doc.get("grid", []):
        for s in grid["series"]:
            for (isl, osl), v in zip(grid["lengths"], s["values"], strict=True):
                cases.append(PublishedCase(grid["source"], grid["scenario"], grid["metric"], s["model"], s["gpu"],
                                           s["tp"], grid["precision"], grid["kv_precision"], None, isl, osl,
                                           float(v)))
    for group in doc.get("group", []):
        scale = 1e-3 if group.get("unit") == "ms" else 1.0
        for raw in group["rows"]:
            r = dict(zip(group["columns"], raw, strict=True))
            value = float(r["value"]) * scale * (r["tp"] if r.get("per_gpu") else 1)
            cases.append(PublishedCase(group["source"], group["scenario"], group["metric"], r["model"], r["gpu"],
                                       r["tp"], r["precision"], r["kv_precision"], r["batch"], r["isl"], r["osl"],
                                       value))
    return cases, doc.get("sources", {})


def _estimate(case: PublishedCase, batch: int, engine: str = "static") -> Any:
    return estimate(case.model, case.gpu, count=case.tp, tp=case.tp, task="serve", batch=batch, prompt=case.isl,
                    gen=case.osl, precision=case.precision, kv_precision=case.kv_precision, with_scaling=False,
                    engine=engine)


def predict(case: PublishedCase, engine: str = "static") -> tuple[float, int | None]:
    """gpumatch's value of ``case.metric`` (SI) and the batch it stands for (None: nothing fits).

    ``engine`` models the max-throughput scenario (static: the best static batch that fits; an engine: its steady
    state with the ladder's value as the requests in flight); static batches and first tokens are static."""
    if case.scenario == "max-throughput":
        best, best_b = math.nan, None
        for b in BATCH_LADDER:
            est = _estimate(case, b, engine)
            if not est.fits:
                break
            value = float(est.metrics[case.metric])
            if best_b is None or value > best:
                best, best_b = value, b
        return best, best_b
    batch = case.batch or 1
    return float(_estimate(case, batch, "static").metrics[case.metric]), batch


def rows(cases: Iterable[PublishedCase]) -> list[dict[str, Any]]:
    """One row per case: published, predicted, error = (predicted − published) / published, batch used."""
    out = []
    for c in cases:
        p, b = predict(c)
        out.append({"case": c.case_id, "source": c.source, "scenario": c.scenario, "metric": c.metric,
                    "gpu": c.gpu, "published": c.value, "gpumatch": p, "batch": b,
                    "error": (p - c.value) / c.value if b is not None else math.nan})
    return out


@dataclass(frozen=True)
class EngineCase:
    """One published engine measurement at a fixed concurrency and gpumatch's frozen prediction for it.

    ``ttft_s`` is None where the source publishes no TTFT; ``tpot_basis`` is ``"implied"`` where the source prints no
    TPOT but its own numbers fix one (its note says how), else ``"published"``."""

    case_id: str
    source: str
    engine: str
    gpu: str
    concurrency: int
    ttft_s: float | None
    tpot_s: float
    predicted_ttft_s: float
    predicted_tpot_s: float
    model: str = ""
    tpot_basis: str = "published"

    @property
    def ttft_error(self) -> float:
        """(predicted - published) / published; NaN where no TTFT is published."""
        if self.ttft_s is None:
            return math.nan
        return (self.predicted_ttft_s - self.ttft_s) / self.ttft_s

    @property
    def tpot_error(self) -> float:
        return (self.predicted_tpot_s - self.tpot_s) / self.tpot_s


def load_engine_cases(
    data: Path, predictions: Sequence[Path]
) -> tuple[list[EngineCase], dict[str, dict[str, str]], dict[str, str]]:
    """The published engine rows of ``data`` with the predictions frozen in ``predictions`` (JSON files written before
    the measurements were transcribed; never recomputed here), the sources, and the commit each file was frozen at
    (file name -> commit)."""
    label = f"published data {data}"
    doc = parse_toml(read_text(data, label, 10_000_000), label)
    by_id: dict[str, dict[str, Any]] = {}
    frozen_at: dict[str, str] = {}
    for path in predictions:
        frozen = json.loads(read_text(path, f"frozen predictions {path}", 10_000_000))
        frozen_at[path.name] = str(frozen["frozen_at_commit"])
        for r in frozen["rows"]:
            if r["id"] in by_id:
                raise ValueError(f"{path}: row {r['id']!r} frozen twice")
            by_id[r["id"]] = r
    out: list[EngineCase] = []
    for group in doc.get("group", []):
        for raw in group["rows"]:
            r = dict(zip(group["columns"], raw, strict=True))
            p = by_id[r["id"]]
            ttft = r.get("ttft_ms")
            out.append(EngineCase(r["id"], group["source"], p["engine"], p["gpu"], p["concurrency"],
                                  None if ttft is None else ttft / 1e3, r["tpot_ms"] / 1e3, p["ttft_s"], p["tpot_s"],
                                  p["model"], group.get("tpot_basis", "published")))
    return out, doc.get("sources", {}), frozen_at
