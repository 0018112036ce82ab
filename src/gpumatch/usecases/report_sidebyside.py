"""Several stored bench or serving runs side by side (``gpumatch report --run A --run B ...``; issue 15 item 2).

One row per comparable quantity (a result key shared by the runs, or a case's telemetry), one cell per run:

- from the results: decode tokens/s, TPOT (``decode_step_s``), prefill TTFT (``prefill_s``), prefill and train
  tokens/s, train peak memory, J/token gross (``*_energy_j_per_token``) and net of idle
  (``*_energy_net_j_per_token``), and the stored predicted/measured ``ratio`` of each;
- derived: $/M tokens per ``*_tokens_per_s`` result, ``$/h / (tokens/s × 3600) × 1e6``
  (:func:`gpumatch.estimate.cost.usd_per_million_tokens`, estimator-formulas.md section F) with ``$/h`` the card's
  on-demand price in the catalog (:func:`gpumatch.catalog.prices.select_price`: median of the newest quote per
  provider; its text names the providers and the months of the quotes) times the manifest's ``gpu.count``;
- from each case event's telemetry: the mean board power (``power_w_mean``, W) and the ``verdict``.

Each cell has its 95% interval where the raw timings are stored (``raw_s``): the bootstrap interval of the
median (BCa, :func:`scipy.stats.bootstrap`), carried to a rate by ``rate = k / median``; and, for each run
after the first (the baseline), the interval of run/baseline from :func:`gpumatch.usecases.stored_bench.ratio_interval`,
``significant`` when it excludes 1. A rate (tokens/s, $/M tokens) uses the timings of its step metric.

The runs may differ in card (the point of it); manifests differing in software fields are listed in
``software_differs`` as a warning, never refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpumatch.errors import InputError
from gpumatch.metric_names import SERVING_LABELS

QUANTITIES: dict[str, str] = {
    "decode_tokens_per_s": "tok/s", "decode_step_s": "TPOT", "prefill_s": "TTFT",
    "prefill_tokens_per_s": "tok/s", "train_tokens_per_s": "tok/s",
    "train_peak_memory_bytes": "peak memory",
    # serving levels (gpumatch bench serve, and runs imported from vLLM, GuideLLM, AIPerf), by their canonical
    # names (metric_names.py; older stored names read through canonical_metric)
    **{m: SERVING_LABELS[m] for m in ("output_tokens_per_s", "request_throughput_per_s", "ttft_p50_s", "ttft_p99_s",
                                      "tpot_p50_s", "tpot_p99_s", "e2e_p99_s")},
}
"""The result metrics shown, with their short label; plus every ``*_energy_j_per_token`` (J/token gross) and
``*_energy_net_j_per_token`` (J/token net)."""
STEP_OF = {"decode_tokens_per_s": "decode_step_s", "prefill_tokens_per_s": "prefill_s",
           "train_tokens_per_s": "train_step_s"}
"""The time metric whose raw timings a rate is computed from (same case and configuration)."""
PRICE_BASIS = "on-demand"


def _label(metric: str) -> str | None:
    if metric in QUANTITIES:
        return QUANTITIES[metric]
    if metric.endswith("_energy_net_j_per_token"):
        return "J/tok net"
    if metric.endswith("_energy_j_per_token"):
        return "J/tok gross"
    return None


def _price(manifest: dict[str, Any]) -> dict[str, Any]:
    """The run's card-hour price: ``usd_per_hour`` (None when unpriced or unknown) and ``source`` (one line)."""
    from gpumatch.lab.predict import catalog_gpu

    name = catalog_gpu(manifest.get("gpu.name"))
    if name is None:
        return {"gpu": manifest.get("gpu.name"), "usd_per_hour": None, "source": "card not in the catalog"}
    from gpumatch.catalog import get_gpu
    from gpumatch.catalog.prices import select_price

    choice = select_price(get_gpu(name), PRICE_BASIS)
    count = int(manifest.get("gpu.count") or 1)
    value = None if choice.value is None else choice.value * count
    return {"gpu": name, "usd_per_hour": value, "gpus": count, "source": f"{name}: {choice.text()}",
            "last_quote": None if choice.last_date is None else choice.last_date.isoformat()}


def median_interval(raw: Any, seed: int = 0) -> tuple[float, float] | None:
    """95% BCa bootstrap interval of the median of ``raw`` (seconds; 2000 resamples,
    :func:`scipy.stats.bootstrap`); None under :data:`gpumatch.usecases.stored_bench.MIN_BOOTSTRAP_SAMPLES` samples."""
    from gpumatch.usecases.stored_bench import CONFIDENCE, MIN_BOOTSTRAP_SAMPLES

    if not isinstance(raw, list) or len(raw) < MIN_BOOTSTRAP_SAMPLES:
        return None
    try:
        import numpy as np
        from scipy.stats import bootstrap
    except ImportError:
        return None
    res = bootstrap((np.asarray(raw, float),), np.median, n_resamples=2000, confidence_level=CONFIDENCE,
                    method="BCa", vectorized=True, rng=np.random.default_rng(seed))
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return (low, high) if np.isfinite(low) and np.isfinite(high) and low != high else None


def _raw_of(metric: str, row: dict[str, Any], by_key: dict[str, dict[str, Any]]) -> tuple[Any, dict[str, Any]]:
    """The raw timings behind ``row`` and the row that holds them (the step metric's for a rate)."""
    if row.get("raw_s"):
        return row["raw_s"], row
    step = STEP_OF.get(metric)
    if step is None:
        return None, row
    other = by_key.get(row["key"].replace(f" {metric}", f" {step}", 1))
    return (other or {}).get("raw_s"), other or row


def _value_interval(value: float | None, raw: Any, holder: dict[str, Any], unit: str) -> tuple[float, float] | None:
    """The interval of ``value``: of the median itself for a time; for a rate ``k / median`` (``k = value ×
    step``); for $/M tokens, proportional to the step time (``value / step × median``)."""
    ci = median_interval(raw)
    if ci is None or value is None:
        return None
    if unit == "s":
        return ci
    step = holder.get("measured")
    if not step:
        return None
    if unit == "usd/Mtoken":
        scale = float(value) / float(step)
        return (ci[0] * scale, ci[1] * scale)
    k = float(value) * float(step)
    return (k / ci[1], k / ci[0])


def _runs(store: Path | str | None, run_ids: tuple[int, ...]) -> list[dict[str, Any]]:
    """Each run as :func:`gpumatch.usecases.stored_bench.load_run` shapes a bench run; a serving run (any tool's, kind
    ``serve``) in the same shape, its results under their canonical names, no cases."""
    from gpumatch.usecases.stored_bench import load_run
    from gpumatch.usecases.stored_serving import is_serving_run

    return [_serving_shape(store, r) if is_serving_run(store, r) else load_run(store, r, raw=True) for r in run_ids]


def _serving_shape(store: Path | str | None, run_id: int) -> dict[str, Any]:
    from gpumatch.store import open_existing_store
    from gpumatch.usecases.stored_bench import result_row

    with open_existing_store(store) as st:
        data = st.export_run(run_id)
    run = data["run"]
    return {"run": {k: v for k, v in run.items() if k != "manifest"}, "manifest": run.get("manifest") or {},
            "cases": [], "results": [result_row(r) for r in data["results"]], "failures": []}


def software_differs(runs: list[dict[str, Any]]) -> list[str]:
    """Manifest ``software.*`` fields (and the driver) that differ between the runs."""
    keys = sorted({k for r in runs for k in r["manifest"] if k.startswith("software.") or k == "gpu.driver"})
    return [k for k in keys if len({str(r["manifest"].get(k)) for r in runs}) > 1]


def side_by_side(store: Path | str | None, run_ids: tuple[int, ...]) -> dict[str, Any]:
    """The side-by-side table of ``run_ids`` (module docstring); the first run is the baseline."""
    if len(run_ids) < 2:
        raise InputError("a side-by-side view needs two runs or more", "give --run A --run B ...")
    runs = _runs(store, run_ids)
    prices = [_price(r["manifest"]) for r in runs]
    rows: dict[str, dict[str, Any]] = {}
    for i, run in enumerate(runs):
        by_key = {r["key"]: r for r in run["results"]}
        for r in run["results"]:
            label = _label(r["metric"])
            if label is None:
                continue
            raw, holder = _raw_of(r["metric"], r, by_key)
            _put(rows, r["key"], r, label, r["unit"], i, r["measured"], raw, holder, r.get("ratio"))
            if r["metric"].endswith("_tokens_per_s") and r["measured"]:
                usd = prices[i]["usd_per_hour"]
                from gpumatch.estimate.cost import usd_per_million_tokens

                cost = None if usd is None else float(usd_per_million_tokens(usd, float(r["measured"])))
                _put(rows, r["key"] + " usd", r, "$/M tokens", "usd/Mtoken", i, cost, raw, holder, None)
        for c in run["cases"]:
            tel = c.get("telemetry") or {}
            case = {"case": c.get("case_id"), "config": {}, "metric": "case"}
            if tel.get("power_w_mean") is not None:
                _put(rows, f"{c.get('case_id')} power", case, "mean power", "W", i, tel["power_w_mean"], None, {},
                     None)
            if tel.get("verdict"):
                _put(rows, f"{c.get('case_id')} verdict", case, "verdict", "", i, tel["verdict"], None, {}, None)
    order = {case: i for i, case in reversed(list(enumerate(r["case"] for r in rows.values())))}
    table = [_finish(r, runs, len(runs)) for r in sorted(rows.values(), key=lambda r: order[r["case"]])]
    return {"runs": [{"run_id": rid, "gpu": r["manifest"].get("gpu.name"), "gpus": r["manifest"].get("gpu.count"),
                      "name": r["run"].get("name"), "started_at": str(r["run"].get("started_at", ""))[:19],
                      "price": p} for rid, r, p in zip(run_ids, runs, prices, strict=True)],
            "baseline": run_ids[0], "software_differs": software_differs(runs), "price_basis": PRICE_BASIS,
            "rows": table}


def _put(rows: dict[str, dict[str, Any]], key: str, r: dict[str, Any], label: str, unit: str, i: int, value: Any,
         raw: Any, holder: dict[str, Any], ratio: Any) -> None:
    row = rows.setdefault(key, {"key": key, "case": _case(r), "metric": r["metric"], "quantity": label,
                                "unit": unit, "config": r.get("config"), "cells": {}})
    row["cells"][i] = {"value": value, "raw": raw, "holder": holder, "ratio": ratio}


def _case(r: dict[str, Any]) -> Any:
    """The row's case; a serving level's is its load (``serve c=8``), the level it pairs by."""
    if r.get("case") != "serve":
        return r.get("case")
    from gpumatch.usecases.stored_serving import level_label

    return f"serve {level_label(r.get('config') or {})}"


def _finish(row: dict[str, Any], runs: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """Per run: value, its interval, predicted/measured ratio, and against the baseline: ratio, interval, star."""
    from gpumatch.usecases.stored_bench import ratio_interval

    is_time = row["unit"] == "s"
    base = row["cells"].get(0)
    cells = []
    for i in range(n):
        c = row["cells"].get(i)
        if c is None:
            cells.append({"run_id": runs[i]["run"]["run_id"], "value": None})
            continue
        numeric = isinstance(c["value"], int | float)
        ci = _value_interval(c["value"], c["raw"], c["holder"], row["unit"]) if numeric else None
        cell: dict[str, Any] = {"run_id": runs[i]["run"]["run_id"], "value": c["value"],
                                "low": ci[0] if ci else None, "high": ci[1] if ci else None,
                                "predicted_over_measured": _pred_ratio(c["ratio"])}
        if i > 0 and base is not None and numeric and isinstance(base["value"], int | float) and base["value"]:
            # A rate's ratio from the timings is median(A)/median(B) (ratio_interval, is_time False); $/M tokens
            # falls as the rate rises, so its ratio is the step time's: median(B)/median(A).
            rate_like = not is_time and row["unit"] != "usd/Mtoken"
            rci = ratio_interval(base["raw"], c["raw"], not rate_like)
            if rci and row["unit"] == "usd/Mtoken":  # the timings give the step ratio; the price ratio scales it
                scale = (c["value"] / base["value"]) / _median_ratio(base["raw"], c["raw"])
                rci = (rci[0] * scale, rci[1] * scale)
            cell.update(vs_baseline=c["value"] / base["value"], vs_low=rci[0] if rci else None,
                        vs_high=rci[1] if rci else None,
                        significant=(not rci[0] <= 1.0 <= rci[1]) if rci else None)
        elif i > 0 and base is not None and not numeric:
            cell["same_as_baseline"] = c["value"] == base["value"]
        cells.append(cell)
    return {k: v for k, v in row.items() if k != "cells"} | {"cells": cells}


def _median_ratio(raw_a: list[float], raw_b: list[float]) -> float:
    """median(B) / median(A) of two lists of timings (s)."""
    import statistics

    return statistics.median(raw_b) / statistics.median(raw_a)


def _pred_ratio(ratio: Any) -> float | None:
    """Predicted / measured from the stored ``ratio`` (measured / predicted or datasheet)."""
    return 1.0 / float(ratio) if isinstance(ratio, int | float) and ratio else None


def long_rows(sbs: dict[str, Any]) -> list[dict[str, Any]]:
    """One flat row per quantity and run (CSV and the text table)."""
    out = []
    for r in sbs["rows"]:
        for c in r["cells"]:
            out.append({"case": r["case"], "quantity": r["quantity"], "metric": r["metric"], "unit": r["unit"],
                        "key": r["key"], "run_id": c["run_id"], "value": c["value"], "low": c.get("low"),
                        "high": c.get("high"), "predicted_over_measured": c.get("predicted_over_measured"),
                        "vs_baseline": c.get("vs_baseline"), "vs_low": c.get("vs_low"), "vs_high": c.get("vs_high"),
                        "significant": c.get("significant")})
    return out
