"""The side-by-side view of one configuration estimated on several GPUs (``gpumatch estimate --gpu A --gpu B``).

One row per GPU with the figures that decide between them (fit, memory per GPU, latency or step time, throughput,
cost, bound); what each throughput counts is said once under the table; a GPU on which the configuration does
not fit shows "does not fit" instead of speed and cost (it would not run), and its warning (with what would fit)
follows. Computes nothing: it selects and formats fields of :meth:`gpumatch.estimate.Estimate.to_dict`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpumatch.report.render import to_table, wrap_block
from gpumatch.units import GIB
from gpumatch.vocab import TRAINING_TASKS

TRAINING = TRAINING_TASKS
NO_RUN = "does not fit"


def _training(d: dict[str, Any]) -> bool:
    return d["task"] in TRAINING


def _fmt(v: float | None, spec: str, scale: float = 1.0) -> str:
    return "-" if v is None else format(v * scale, spec)


def comparison_rows(estimates: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Table rows, one per GPU (JSON has every field of every estimate)."""
    rows = []
    for d in estimates:
        mem = d["memory"]
        row: dict[str, Any] = {"gpu": f"{d['gpu']} ×{d['count']}", "fits": "yes" if d["fits"] else "no",
                               "GiB/GPU": f"{mem['total_bytes'] / GIB:.1f}/{mem['capacity_bytes'] / GIB:.1f}"}
        runs = d["fits"]
        if _training(d):
            row["step"] = _fmt(d["step_s"], ".3g") + " s" if runs else NO_RUN
            row["tok/s"] = _fmt(d["tokens_per_s"], ",.0f") if runs else "-"
            row["MFU"] = _fmt(d["mfu"], ".0%") if runs else "-"
        else:
            row["TTFT"] = _fmt(d["ttft_s"], ".0f", 1e3) + " ms" if runs else NO_RUN
            row["TPOT"] = _fmt(d["tpot_s"], ".1f", 1e3) + " ms" if runs else "-"
            row["gen tok/s"] = _fmt(d["tokens_per_s"], ",.0f") if runs else "-"
        row["$/1M tok"] = _fmt(d.get("usd_per_million_tokens"), ".3g") if runs else "-"
        row["bound"] = d["bound"] if runs else "-"
        rows.append(row)
    return rows


def comparison_csv_rows(estimates: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """CSV rows, one per GPU, SI values."""
    keys = ("step_s", "tokens_per_s", "mfu") if estimates and _training(estimates[0]) else (
        "ttft_s", "tpot_s", "tokens_per_s", "decode_tokens_per_s")
    out = []
    for d in estimates:
        row: dict[str, Any] = {"gpu": d["gpu"], "count": d["count"], "fits": d["fits"],
                               "total_bytes": d["memory"]["total_bytes"],
                               "capacity_bytes": d["memory"]["capacity_bytes"]}
        row.update({k: d.get(k) for k in (*keys, "usd_per_million_tokens", "bound")})
        row["warnings"] = " | ".join(d["warnings"])
        out.append(row)
    return out


def _ttft_meaning(estimates: Sequence[dict[str, Any]]) -> str:
    """What the TTFT column is: a serving engine's steady-state mean (``--task serve``: waiting for the pass in
    flight, queueing, the request's own prefill) or, for a static batch, one prompt alone (docs/estimators.md)."""
    served = [d.get("serving") or {} for d in estimates]
    engines = {sv.get("engine") for sv in served}
    if engines <= {None, "static"}:
        return "one prompt alone, no queueing"
    if engines & {None, "static"}:
        return "mean per request (serving engine: with the pass in flight and queueing; static: one prompt alone)"
    replayed = {sv.get("replay") is not None for sv in served}
    where = ("over the replayed benchmark (first burst included)" if replayed == {True}
             else "at the engine's steady state" if replayed == {False} else "(benchmark or steady state)")
    return f"mean per request {where}, including the pass in flight and queueing"


def comparison_text(estimates: Sequence[dict[str, Any]]) -> str:
    """The table, what its throughput counts, the basis, then each GPU's warnings."""
    first = estimates[0]
    title = f"{first['model']} {first['task']}: {len(estimates)} alternatives, one configuration per row"
    parts = [to_table(comparison_rows(estimates), title=title)]
    if _training(first):
        parts.append(wrap_block("tok/s: trained tokens per second over all data-parallel ranks"))
    else:
        parts.append(wrap_block("gen tok/s: generated tokens per second over all replicas, prefill time included; "
                                f"TTFT: {_ttft_meaning(estimates)}"))
    parts.append(wrap_block(f"basis: {first['basis']}"))
    for d in estimates:
        parts.extend(wrap_block(f"{d['gpu']}: {w}") for w in d["warnings"])
    return "\n".join(parts)
