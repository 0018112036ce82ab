"""``gpumatch calibrate`` as text: per operator class, held-out error before and after, and leave-one-out."""

from __future__ import annotations

import math
from typing import Any

from gpumatch.report.render import Column, to_table

COLUMNS = [Column("cls", "class"), Column("shapes", "shapes fit/held", wrap=False),
           Column("before", "held-out before", wrap=False), Column("after", "held-out after", wrap=False),
           Column("loo", "leave-one-out", wrap=False)]


def _pct(mean: float, high: float) -> str:
    if mean is None or math.isnan(mean):
        return "-"
    return f"{mean * 100:.1f}% / {high * 100:.0f}%"


def class_rows(classes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per class: mean |error| with the largest in brackets."""
    return [{"cls": c["cls"], "shapes": f"{c['fit_shapes']}/{c['held_shapes']}",
             "before": _pct(c["held_before_mean"], c["held_before_max"]),
             "after": _pct(c["held_after_mean"], c["held_after_max"]),
             "loo": _pct(c["loo_mean"], c["loo_max"])} for c in classes]


def _residual_line(counts: dict[str, int]) -> str:
    from gpumatch.estimate.intervals import MIN_CALIBRATION_N

    kinds = ("decode", "prefill", "train-step", "memory")
    parts = [f"{k} n={counts.get(k, 0)}" + ("" if counts.get(k, 0) >= MIN_CALIBRATION_N else " (shipped table)")
             for k in kinds]
    return f"intervals from held-out residuals: {', '.join(parts)}"


def calibrate_text(fit: dict[str, Any]) -> str:
    """The fit: which runs and card, the per-class table, where it went."""
    prov = fit["provenance"]
    lines = [f"{fit['basis']}",
             f"card {fit['card']}; runs {', '.join(map(str, prov['run_ids']))}; measured {', '.join(prov['dates'])}",
             "", to_table(class_rows(fit["classes"]), COLUMNS,
                          "|predicted/measured - 1| per operator class: mean / max").rstrip(),
             f"held out: {prov['split']}", _residual_line(fit.get("residuals") or {})]
    if fit.get("not_measured"):
        lines.insert(4, f"not measured by any run: {', '.join(fit['not_measured'])} (no serve run of the card)")
    if fit.get("serving"):
        sv = fit["serving"]
        lines.append(f"serving: engine {sv['engine']} per-pass costs {sv['host_pass_s'] * 1e3:.3g} ms + "
                     f"{sv['host_seq_s'] * 1e6:.3g} us per running sequence (the profile's host_pass_s, "
                     f"host_seq_s); held out: {prov.get('serving_split', '')}")
    unknown = fit.get("not_identified") or {}
    if unknown:
        lines.append("not fitted (the fit shapes cannot tell their value; kept as they were): " + ", ".join(
            f"{k} (halving/doubling moves a fit case by {v * 100:.1f}%)" for k, v in sorted(unknown.items())))
    if fit.get("calibration_id") is not None:
        lines.append(f"stored as calibration {fit['calibration_id']}: 'gpumatch estimate --gpu ...' on this card "
                     "uses it (--no-calibration: the defaults)")
    if fit.get("out"):
        lines.append(f"written to {fit['out']}")
    import textwrap

    out: list[str] = []
    for line in lines:
        out += [line] if "\n" in line or len(line) <= 80 else textwrap.wrap(line, 80, subsequent_indent="  ")
    return "\n".join(out) + "\n"
