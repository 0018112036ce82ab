"""Views of several bench runs side by side (:func:`gpumatch.usecases.report_sidebyside.side_by_side`): an
80-column text table (one line per quantity and run), CSV, and the HTML section of ``gpumatch report --html``. Computes
nothing new."""

from __future__ import annotations

import html
from typing import Any

from gpumatch.report.bench import _UNITS as UNITS
from gpumatch.report.bench import value_text
from gpumatch.report.render import Column, to_csv, to_table

COLUMNS = [Column("case", wrap=False, cut_to=12), Column("quantity", wrap=False), Column("run", align="right"),
           Column("value", align="right", wrap=False), Column("vs", "vs base", wrap=False)]
CSV_COLUMNS = ["run_id", "case", "quantity", "metric", "unit", "value", "low", "high", "predicted_over_measured",
               "vs_baseline", "vs_low", "vs_high", "significant", "key"]


def cell_value(v: Any, unit: str) -> str:
    """A value in the unit a person reads: $/M tokens as dollars, W whole, a verdict as it is."""
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if unit == "usd/Mtoken":
        return f"${v:.3g}"
    if unit == "W":
        return f"{v:.0f} W"
    if unit == "J/token":
        return f"{v:.3g} J/tok"
    return value_text(v, unit)


def _num(v: float, unit: str) -> str:
    """``v`` to 4 significant digits in the shown unit (an interval needs one digit more than a value)."""
    if unit == "usd/Mtoken":
        return f"${v:.4g}"
    scale = next((sc for name, sc, _ in UNITS if name == unit), 1.0)
    return f"{v / scale:.4g}"


def ci_text(c: dict[str, Any], unit: str) -> str:
    """``[low, high]`` of the value (same unit, unit left off); '-' without raw timings."""
    if c.get("low") is None:
        return "-"
    return f"[{_num(c['low'], unit)}, {_num(c['high'], unit)}]"


def vs_text(c: dict[str, Any]) -> str:
    """``1.03 [0.99,1.07]`` or ``0.91*`` (``*``: the 95% interval of run/baseline excludes 1)."""
    if c.get("same_as_baseline") is not None:
        return "same" if c["same_as_baseline"] else "differs"
    if c.get("vs_baseline") is None:
        return ""
    star = "*" if c.get("significant") else ""
    if c.get("vs_low") is None:
        return f"{c['vs_baseline']:.2f}"
    return f"{c['vs_baseline']:.2f}{star} [{c['vs_low']:.2f},{c['vs_high']:.2f}]"


def _text_rows(sbs: dict[str, Any]) -> list[dict[str, Any]]:
    """One line per quantity and run; the value's 95% interval and the predicted/measured ratio, where there,
    as their own lines below."""
    out = []
    for r in sbs["rows"]:
        for j, c in enumerate(r["cells"]):
            out.append({"case": r["case"] if j == 0 else "", "quantity": r["quantity"] if j == 0 else "",
                        "run": c["run_id"], "value": cell_value(c["value"], r["unit"]), "vs": vs_text(c)})
        if any(c.get("low") is not None for c in r["cells"]):
            out += [{"case": "", "quantity": "  95% CI" if j == 0 else "", "run": c["run_id"],
                     "value": ci_text(c, r["unit"]), "vs": ""} for j, c in enumerate(r["cells"])]
        if any(c.get("predicted_over_measured") is not None for c in r["cells"]):
            out += [{"case": "", "quantity": "  pred/meas" if j == 0 else "", "run": c["run_id"],
                     "value": "-" if c.get("predicted_over_measured") is None else
                     f"{c['predicted_over_measured']:.2f}", "vs": ""} for j, c in enumerate(r["cells"])]
    return out


def header_lines(sbs: dict[str, Any]) -> list[str]:
    """The runs (card, name), the price used for $/M tokens, and the software warning."""
    from gpumatch.report.render import output_width, wrap_text

    width = output_width()
    lines = [f"Runs side by side (baseline: run {sbs['baseline']})"]
    for r in sbs["runs"]:
        got = wrap_text(f"run {r['run_id']}: {r['gpu'] or 'card not recorded'} x{r['gpus'] or 1}, {r['name']}, "
                        f"{r['started_at']}; "
                        f"price {r['price']['source']}", width - 2)
        lines += [got[0], *("  " + g for g in got[1:])]
    if sbs["software_differs"]:
        lines += wrap_text(f"warning: the runs differ in software: {', '.join(sbs['software_differs'])}", width)
    return lines


FOOTER = ("95% CI: BCa bootstrap of the median from the raw timings (a rate from its step's timings); vs base: "
          "run / baseline with the bootstrap interval of that ratio, * = significant (excludes 1); pred/meas: "
          "predicted / measured; $/M tokens = $/h / (tokens/s x 3600) x 1e6 at the on-demand price above.")


def side_by_side_text(sbs: dict[str, Any]) -> str:
    """The view within the output width (80 columns by default)."""
    from gpumatch.report.render import wrap_block

    table = to_table(_text_rows(sbs), COLUMNS, "")
    return "\n".join([*header_lines(sbs), table.rstrip("\n"), wrap_block(FOOTER).rstrip("\n")]) + "\n"


def side_by_side_csv(sbs: dict[str, Any]) -> str:
    from gpumatch.usecases.report_sidebyside import long_rows

    return to_csv(long_rows(sbs), CSV_COLUMNS)


def _card(r: dict[str, Any]) -> str:
    """``H200 SXM 141GB ×2``; ``card not recorded`` when the manifest names none (never ``None ×1``)."""
    return f"{r['gpu'] or 'card not recorded'} ×{r['gpus'] or 1}"


def side_by_side_html(sbs: dict[str, Any]) -> str:
    """The section of the page: the runs with their price, then one table row per quantity, one column per run
    (value, its interval, and against the baseline)."""
    e = html.escape
    runs = sbs["runs"]
    items = "".join(f"<li>run {r['run_id']}: {e(_card(r))}, {e(str(r['name']))}; price "
                    f"{e(r['price']['source'])}</li>" for r in runs)
    warn = (f'<p class="note">The runs differ in software: {e(", ".join(sbs["software_differs"]))}</p>'
            if sbs["software_differs"] else "")
    head = "".join(f"<th>run {r['run_id']}<br>{e(r['gpu'] or 'card not recorded')}</th>" for r in runs)
    body = []
    for r in sbs["rows"]:
        cells = []
        for c in r["cells"]:
            parts = [e(cell_value(c["value"], r["unit"]))]
            if c.get("low") is not None:
                parts.append(f"<small>{e(ci_text(c, r['unit']))}</small>")
            if vs_text(c):
                parts.append(f"<small>vs base {e(vs_text(c))}</small>")
            if c.get("predicted_over_measured") is not None:
                parts.append(f"<small>pred/meas {c['predicted_over_measured']:.2f}</small>")
            cells.append(f'<td class="num">{"<br>".join(parts)}</td>')
        body.append(f"<tr><td>{e(str(r['case']))}</td><td>{e(r['quantity'])}</td>{''.join(cells)}</tr>")
    return (f'<section id="side-by-side"><h2>Runs side by side</h2><ul>{items}</ul>{warn}'
            f"<table><thead><tr><th>case</th><th>quantity</th>{head}</tr></thead><tbody>{''.join(body)}"
            f"</tbody></table><p>{e(FOOTER)}</p></section>")
