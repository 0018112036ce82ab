"""The view of two serving runs compared level by level (:func:`gpumatch.usecases.compare_serving.compare_serving`):
an 80-column text table of the metrics both runs measured, and the CSV columns. Computes nothing new."""

from __future__ import annotations

from typing import Any

from gpumatch.report.bench import value_text
from gpumatch.report.render import Column, to_table, wrap_block

COLUMNS = [Column("level", wrap=False), Column("quantity", wrap=False), Column("a", "A", align="right", wrap=False),
           Column("b", "B", align="right", wrap=False), Column("ratio", "B/A", align="right", wrap=False),
           Column("ci", "95% CI of B/A", wrap=False, drop=1)]
CSV_COLUMNS = ["load", "level", "metric", "unit", "a", "b", "b_over_a", "b_over_a_low", "b_over_a_high",
               "significant", "n_a", "n_b", "samples_a", "samples_b"]
COUNTS = ("completed_requests", "failed_requests")


def cell(value: Any, unit: str | None, metric: str) -> str:
    """A value in the unit a person reads (ms, tok/s, %); request counts as whole numbers."""
    if value is not None and metric in COUNTS:
        return f"{float(value):.0f}"
    return value_text(value, unit or "", metric)


def _ci(row: dict[str, Any]) -> str:
    if row.get("b_over_a_low") is None:
        return "-"
    star = "*" if row.get("significant") else ""
    return f"[{row['b_over_a_low']:.3f}, {row['b_over_a_high']:.3f}]{star}"


def header_lines(cmp: dict[str, Any]) -> list[str]:
    """Which run is A and B (tool, model), and what the two manifests do not both record."""
    lines = [f"A: run {cmp['run_a']}, {cmp['source_a']}, {cmp['model_a'] or 'model not recorded'}",
             f"B: run {cmp['run_b']}, {cmp['source_b']}, {cmp['model_b'] or 'model not recorded'}"]
    if cmp["differing_fields"]:
        lines.append(f"warning: compared with --force; the runs differ in {', '.join(cmp['differing_fields'])}")
    return lines


def footer_lines(cmp: dict[str, Any]) -> list[str]:
    """Levels and metrics measured by one run only, and how the interval is made."""
    out = []
    for side in ("a", "b"):
        levels = cmp[f"levels_only_in_{side}"]
        if levels:
            out.append(f"levels only in {side.upper()}: {', '.join(levels)}")
    one_sided = sum(1 for r in cmp["rows"] if r["a"] is None or r["b"] is None)
    if one_sided:
        out.append(f"{one_sided} results measured by one run only are left out here (--format json or csv "
                   "lists them)")
    if cmp["unrecorded"]:
        out.append(f"recorded by one run only: {', '.join(cmp['unrecorded'])}")
    out.append("Levels pair by load (c = concurrent clients, /s = requests per second). 95% CI: bootstrap of the "
               "ratio of the statistic (mean, median, percentile) from both runs' raw per-request samples, where "
               "both runs keep them; * = significant (excludes 1).")
    return out


def serve_compare_text(cmp: dict[str, Any]) -> str:
    """The comparison within the output width (80 columns by default): shared results only."""
    rows = [{"level": r["level"], "quantity": r["quantity"], "a": cell(r["a"], r["unit"], r["metric"]),
             "b": cell(r["b"], r["unit"], r["metric"]),
             "ratio": "-" if r["b_over_a"] is None else f"{r['b_over_a']:.3f}", "ci": _ci(r)}
            for r in cmp["rows"] if r["a"] is not None and r["b"] is not None]
    title = f"Serving run {cmp['run_a']} (A) against run {cmp['run_b']} (B)"
    table = to_table(rows, COLUMNS, title) if rows else f"{title}\nno level and metric measured by both runs\n"
    parts = ["\n".join(header_lines(cmp)), table.rstrip("\n"), *(wrap_block(x).rstrip("\n") for x in
                                                                   footer_lines(cmp))]
    return "\n".join(parts) + "\n"
