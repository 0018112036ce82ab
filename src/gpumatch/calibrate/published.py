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

from gpumatch.estimate import Request, estimate
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
    return estimate(case.model, case.gpu, Request(tp=case.tp, task="serve", concurrency=batch, prompt=case.isl,
                                                  gen=case.osl, precision=case.precision,
                                                  kv_precision=case.kv_precision, engine=engine), with_scaling=False)


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

    ``ttft_s`` is None where the source publishes no TTFT. ``tpot_basis`` says what ``tpot_s`` is: ``"published"`` a
    printed mean, ``"implied"`` a mean the source does not print but its own numbers fix (its note says how),
    ``"median"`` a printed median (compared with the replay's median, ``predicted_tpot_p50_s``). The medians, p99s and
    rates are stored where the measured file gives them (None elsewhere). The predictions come from the frozen file
    ``frozen_in``: ``prediction_model`` ``"steady-state"`` (Little's law) or ``"benchmark-replay"`` (the benchmark
    replayed pass by pass, whose steady state is kept beside it as ``steady_ttft_s`` / ``steady_tpot_s``; for a
    steady-state prediction these equal the predicted means)."""

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
    ttft_median_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_median_s: float | None = None
    tpot_p99_s: float | None = None
    itl_s: float | None = None
    requests_per_s: float | None = None
    output_tokens_per_s: float | None = None
    mean_output_tokens: float | None = None
    image: str = ""
    date: str = ""
    run: str = ""
    precision: str = ""
    tp: int = 0
    frozen_in: str = ""
    prediction_model: str = "steady-state"
    predicted_ttft_p50_s: float | None = None
    predicted_tpot_p50_s: float | None = None
    steady_ttft_s: float | None = None
    steady_tpot_s: float | None = None

    @property
    def compared_tpot_s(self) -> float:
        """The predicted TPOT of the same statistic as ``tpot_s``: the replay's median for a median, else the mean.
        A row predicted at the steady state (no replay: ``num_prompts`` 0, a time-window measurement) has one TPOT,
        which stands for its median too."""
        if self.tpot_basis == "median" and self.predicted_tpot_p50_s is not None:
            return self.predicted_tpot_p50_s
        return self.predicted_tpot_s

    @property
    def ttft_error(self) -> float:
        """(predicted - published) / published of the mean TTFT; NaN where no TTFT is published."""
        return _rel_error(self.predicted_ttft_s, self.ttft_s)

    @property
    def tpot_error(self) -> float:
        """(predicted - published) / published of the TPOT, the same statistic on both sides (``compared_tpot_s``)."""
        return (self.compared_tpot_s - self.tpot_s) / self.tpot_s

    @property
    def ttft_median_error(self) -> float:
        """The replay's median TTFT against the published median; NaN where either is missing."""
        return _rel_error(self.predicted_ttft_p50_s, self.ttft_median_s)

    @property
    def compared_ttft_median_s(self) -> float | None:
        """The predicted TTFT a published median is held against: the replay's median, else (no replay: a
        time-window or open-loop row) the steady state's one TTFT, which stands for its median too, as in
        :attr:`compared_tpot_s`."""
        return self.predicted_ttft_p50_s if self.predicted_ttft_p50_s is not None else self.predicted_ttft_s

    @property
    def compared_ttft_median_error(self) -> float:
        """:attr:`compared_ttft_median_s` against the published median; NaN where either is missing."""
        return _rel_error(self.compared_ttft_median_s, self.ttft_median_s)

    @property
    def steady_ttft_error(self) -> float:
        """The steady state's TTFT against the published mean; NaN where either is missing."""
        return _rel_error(self.steady_ttft_s, self.ttft_s)

    @property
    def steady_tpot_error(self) -> float:
        """The steady state's TPOT against the published one (the steady state has one TPOT: its mean stands for a
        median too); NaN where the frozen file kept no steady state."""
        return _rel_error(self.steady_tpot_s, self.tpot_s)


def _rel_error(predicted_s: float | None, published_s: float | None) -> float:
    if predicted_s is None or published_s is None:
        return math.nan
    return (predicted_s - published_s) / published_s


_MS_COLUMNS = {"ttft_ms": "ttft_s", "tpot_ms": "tpot_s", "ttft_median_ms": "ttft_median_s",
               "ttft_p99_ms": "ttft_p99_s", "tpot_median_ms": "tpot_median_s", "tpot_p99_ms": "tpot_p99_s",
               "itl_ms": "itl_s"}
"""Measured columns in milliseconds and the :class:`EngineCase` field (seconds) each one fills."""
_PLAIN_COLUMNS = {"requests_per_s": "requests_per_s", "output_tokens_per_s": "output_tokens_per_s",
                  "mean_output_tokens": "mean_output_tokens", "image": "image", "date": "date", "run": "run"}
_IGNORED_COLUMNS = {"id", "total_tokens_per_s"}
TPOT_BASES = ("published", "implied", "median")


def _measured_fields(row: dict[str, Any], tpot_basis: str) -> dict[str, Any]:
    """The :class:`EngineCase` fields of one measured row (ms -> s); an unknown column is an error."""
    unknown = set(row) - set(_MS_COLUMNS) - set(_PLAIN_COLUMNS) - _IGNORED_COLUMNS
    if unknown:
        raise ValueError(f"{row['id']!r}: unknown measured columns {sorted(unknown)}")
    out: dict[str, Any] = {"ttft_s": None}
    out.update({field: row[col] / 1e3 for col, field in _MS_COLUMNS.items() if row.get(col) is not None})
    out.update({field: row[col] for col, field in _PLAIN_COLUMNS.items() if row.get(col) is not None})
    if tpot_basis == "median":
        out["tpot_median_s"] = out["tpot_s"]
    return out


def _predicted_fields(frozen: dict[str, Any], frozen_in: str) -> dict[str, Any]:
    """The :class:`EngineCase` fields of one frozen prediction, read as written (never recomputed)."""
    serving = frozen.get("serving") or {}
    replay = serving.get("replay") or {}
    model = str(serving.get("model", "steady-state"))
    return {"engine": frozen["engine"], "gpu": frozen["gpu"], "concurrency": frozen["concurrency"],
            "model": frozen["model"], "precision": str(frozen.get("precision", "")), "tp": int(frozen.get("tp", 0)),
            "predicted_ttft_s": frozen["ttft_s"], "predicted_tpot_s": frozen["tpot_s"],
            "frozen_in": frozen_in, "prediction_model": model,
            "predicted_ttft_p50_s": replay.get("ttft_p50_s"), "predicted_tpot_p50_s": replay.get("tpot_p50_s"),
            "steady_ttft_s": serving.get("steady_state_ttft_s", frozen["ttft_s"]),
            "steady_tpot_s": serving.get("steady_state_tpot_s", frozen["tpot_s"])}


def batch_settings(directory: Path, dates: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Row id -> its settings (every column of ``engine-rows-DATE.toml``) over the published batches ``dates`` in
    ``directory``."""
    out: dict[str, dict[str, Any]] = {}
    for date in dates:
        path = directory / f"engine-rows-{date}.toml"
        label = f"published settings {path}"
        spec = parse_toml(read_text(path, label, 10_000_000), label)
        for raw in spec["rows"]:
            row = dict(zip(spec["columns"], raw, strict=True))
            out[row["id"]] = row
    return out


def _load_frozen(predictions: Sequence[Path]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Each frozen row by id (with the name of its file under ``"_file"``) and the commit each file was frozen at."""
    by_id: dict[str, dict[str, Any]] = {}
    frozen_at: dict[str, str] = {}
    for path in predictions:
        frozen = json.loads(read_text(path, f"frozen predictions {path}", 10_000_000))
        frozen_at[path.name] = str(frozen["frozen_at_commit"])
        for r in frozen["rows"]:
            if r["id"] in by_id:
                raise ValueError(f"{path}: row {r['id']!r} frozen twice")
            by_id[r["id"]] = {**r, "_file": path.name}
    return by_id, frozen_at


def load_engine_cases(
    data: Sequence[Path], predictions: Sequence[Path]
) -> tuple[list[EngineCase], dict[str, dict[str, str]], dict[str, str]]:
    """The published engine rows of the measured files ``data`` (in order) with the predictions frozen in
    ``predictions`` (JSON files written before the measurements were transcribed; never recomputed here), the
    sources of all files, and the commit each predictions file was frozen at (file name -> commit)."""
    by_id, frozen_at = _load_frozen(predictions)
    out: list[EngineCase] = []
    sources: dict[str, dict[str, str]] = {}
    for path in data:
        label = f"published data {path}"
        doc = parse_toml(read_text(path, label, 10_000_000), label)
        for name, source in doc.get("sources", {}).items():
            if name in sources:
                raise ValueError(f"{path}: source {name!r} defined twice")
            sources[name] = source
        for group in doc.get("group", []):
            basis = str(group.get("tpot_basis", "published"))
            if basis not in TPOT_BASES:
                raise ValueError(f"{path}: tpot_basis {basis!r} is not one of {TPOT_BASES}")
            for raw in group["rows"]:
                r = dict(zip(group["columns"], raw, strict=True))
                if r["id"] not in by_id:
                    raise ValueError(f"{path}: row {r['id']!r} has no frozen prediction")
                p = by_id[r["id"]]
                out.append(EngineCase(case_id=r["id"], source=group["source"], tpot_basis=basis,
                                      **_measured_fields(r, basis), **_predicted_fields(p, p["_file"])))
    if len(out) != len({c.case_id for c in out}):
        raise ValueError("a published engine row is measured twice")
    return out, sources, frozen_at
