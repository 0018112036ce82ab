"""The serving part of the report: the HTML section (plots and per-level tables) and its 80-column text, from
:func:`gpumatch.usecases.report_serving.serving_section`. Computes nothing new: it formats the levels' figures and the
prediction errors the data already holds."""

from __future__ import annotations

import html
from typing import Any

from gpumatch.report.render import Column, to_csv, to_table, wrap_block

ERROR_NOTE = ("error = (predicted - measured) / measured; the prediction is gpumatch's estimate of the same "
              "load (its engine profile), of the mean TTFT and TPOT and of the output tokens/s")


LOAD_CAPTION = ("One colour per run. TTFT = first token minus the send (gpumatch: the scheduled send); TPOT = "
                "(E2E - TTFT) / (output tokens - 1) per request; p99 needs 100 requests or more. Open diamonds: "
                "gpumatch's prediction of the mean.")


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def ms(v: float | None) -> str:
    """Seconds as milliseconds to 3 significant digits; '-' for none."""
    if v is None:
        return "-"
    x = v * 1e3
    return f"{x:.3g}" if x < 1000 else f"{x:,.0f}"


def num(v: float | None) -> str:
    """A rate to 3 significant digits (thousands separated); '-' for none."""
    if v is None:
        return "-"
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def count(v: float | None) -> str:
    """A count of requests: an integer."""
    return "-" if v is None else f"{round(v):,}"


def err(p: float | None) -> str:
    return "-" if p is None else f"{p:+.0f}%"


def slo_text(slo: dict[str, Any], le: str = "<=") -> str:
    """``p99 TTFT <= 450 ms and p99 TPOT <= 40 ms (default: ...)`` (``le``: the sign, ``≤`` on the page)."""
    parts = [f"p99 {name} {le} {slo[key] * 1e3:g} ms" for key, name in (("ttft_p99_s", "TTFT"), ("tpot_p99_s", "TPOT"))
             if slo.get(key) is not None]
    return f"SLO: {' and '.join(parts)}, no request failed ({slo['source']})"


def run_heading(run: dict[str, Any]) -> str:
    """``Run 3: H200 SXM 141GB, meta-llama/Llama-3.1-8B-Instruct, guidellm benchmark 0.4.0``."""
    return f"Run {run['run_id']}: {run['card']}, {run['model']}, {run['tool']}"


def prediction_text(run: dict[str, Any]) -> str:
    if run.get("predicted_by"):
        return f"prediction: {run['predicted_by']} (basis {run.get('basis') or 'assumed'})"
    return run.get("prediction_note") or "no prediction stored with this run (an imported file carries none)"


def _verdict(lv: dict[str, Any]) -> str:
    return {True: "meets", False: "misses", None: "no p99"}[lv["meets_slo"]]


def _predicted_cell(lv: dict[str, Any]) -> str:
    p, e = lv["predicted"], lv["error_pct"]
    lines = [f"{label} {fmt(p[key])}{unit} ({err(e.get(key))})" for key, label, fmt, unit in (
        ("ttft_mean_s", "TTFT", ms, " ms"), ("tpot_mean_s", "TPOT", ms, " ms"),
        ("output_tokens_per_s", "tok/s", num, "")) if key in p]
    return "<br>".join(_e(x) for x in lines) or "-"


def _cells(lv: dict[str, Any], in_flight: bool, energy: bool) -> list[tuple[str, str, bool]]:
    """(header, html, numeric) of one level's row."""
    cls = {True: "good", False: "bad"}.get(lv["meets_slo"], "muted")
    out = [("load", _e(lv["label"]), False),
           ("requests ok / failed", f"{count(lv['completed_requests'])} / {count(lv['failed_requests'])}", True),
           ("TTFT p50 / p99 ms", f"{ms(lv['ttft_p50_s'])} / {ms(lv['ttft_p99_s'])}", True),
           ("TPOT p50 / p99 ms", f"{ms(lv['tpot_p50_s'])} / {ms(lv['tpot_p99_s'])}", True),
           ("output tok/s", num(lv["output_tokens_per_s"]), True),
           ("req/s", num(lv["request_throughput_per_s"]), True)]
    if in_flight:
        out.append(("in flight mean / peak", f"{num(lv['mean_concurrent_requests'])} / "
                                             f"{count(lv['peak_concurrent_requests'])}", True))
    if energy:
        out.append(("J/token gross / net", f"{num(lv['energy_per_output_token_j'])} / "
                                           f"{num(lv['energy_net_per_output_token_j'])}", True))
    out += [("predicted (error)", _predicted_cell(lv), True),
            ("SLO", f'<span class="{cls}">{_verdict(lv)}</span>', False)]
    return out


def level_table(run: dict[str, Any]) -> str:
    """The run's levels as an HTML table (columns for in-flight and energy only where a level has them)."""
    lv = run["levels"]
    in_flight = any(x["mean_concurrent_requests"] is not None or x["peak_concurrent_requests"] is not None
                    for x in lv)
    energy = any(x["energy_per_output_token_j"] is not None for x in lv)
    rows = [_cells(x, in_flight, energy) for x in lv]
    if not rows:
        return '<p class="muted">No load level stored.</p>'
    head = "".join(f"<th>{_e(h)}</th>" for h, _, _ in rows[0])
    num_td = ' class="num"'
    body = "".join("<tr>" + "".join(f"<td{num_td if n else ''}>{c}</td>" for _, c, n in r) + "</tr>"
                   for r in rows)
    return f'<table class="levels"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def serving_html(sv: dict[str, Any]) -> str:
    """The page's serving section: the SLO, the runs, the plots, one level table per run."""
    from gpumatch.report import figures_serve as fs
    from gpumatch.report.html import figure

    what = {"concurrency": "closed loop", "rate": "open loop"}
    parts = ['<h2 id="serving">Serving: latency, throughput and the SLO over load</h2>',
             f'<p class="note">{_e(slo_text(sv["slo"], "≤"))}</p>', "<ul>"]
    parts += [f"<li>{_e(run_heading(r))}; {_e(prediction_text(r))}</li>" for r in sv["runs"]]
    parts.append("</ul>")
    for mode in sv["modes"]:
        parts.append(figure(fs.load_curves(sv, mode), LOAD_CAPTION, f"serve-load-{mode}",
                            f"Latency and throughput over {'concurrency' if mode == 'concurrency' else 'request rate'}"
                            f" ({what[mode]})"))
        if sv["energy"]:
            parts.append(figure(fs.energy_curves(sv, mode), "GPU energy of the level's window over its output "
                                "tokens; net subtracts the server's idle power (measured at its start) over the "
                                "window.", f"serve-energy-{mode}", f"Energy per output token ({what[mode]})"))
    if not sv["energy"]:
        parts.append('<p class="muted">No energy per token: none of these runs stored GPU telemetry (gpumatch '
                     "serve publishes it at /gpumatch/telemetry; other servers do not).</p>")
    if not sv["tails"]:
        parts.append('<p class="muted">No SLO frontier: no level has a p99 (it needs 100 requests or more).</p>')
    else:
        parts.append(figure(fs.slo_frontier(sv), "Each point is one load level; the further up and left, the better. "
                            "Filled: meets the SLO at p99; open with a red edge: misses it or has no p99.",
                            "serve-slo", "SLO frontier: throughput against tail latency"))
    for r in sv["runs"]:
        parts.append(f'<h3 id="serve-run-{r["run_id"]}">{_e(run_heading(r))}</h3>{level_table(r)}')
    parts.append(f'<p class="muted">{_e(ERROR_NOTE)}.</p>')
    return "".join(parts)


TEXT_COLUMNS = [Column("load", wrap=False), Column("ok/fail", wrap=False, align="right"),
                Column("ttft", "TTFT p50/p99", wrap=False, align="right"),
                Column("tpot", "TPOT p50/p99", wrap=False, align="right"),
                Column("tok/s", align="right", wrap=False), Column("req/s", align="right", wrap=False, drop=2),
                Column("flight", "in flight", align="right", wrap=False, drop=1),
                Column("j", "J/tok", align="right", wrap=False, drop=3),
                Column("pred", "pred tok/s", align="right", wrap=False, drop=4),
                Column("slo", "SLO", wrap=False)]


def _text_row(lv: dict[str, Any]) -> dict[str, Any]:
    pred = lv["predicted"].get("output_tokens_per_s")
    return {"load": lv["label"], "ok/fail": f"{count(lv['completed_requests'])}/{count(lv['failed_requests'])}",
            "ttft": f"{ms(lv['ttft_p50_s'])}/{ms(lv['ttft_p99_s'])}",
            "tpot": f"{ms(lv['tpot_p50_s'])}/{ms(lv['tpot_p99_s'])}", "tok/s": num(lv["output_tokens_per_s"]),
            "req/s": num(lv["request_throughput_per_s"]), "flight": num(lv["mean_concurrent_requests"]),
            "j": num(lv["energy_per_output_token_j"]),
            "pred": "-" if pred is None else f"{num(pred)} {err(lv['error_pct'].get('output_tokens_per_s'))}",
            "slo": _verdict(lv)}


def serving_text(sv: dict[str, Any]) -> str:
    """The serving part in 80 columns: the SLO, then per run its heading and one row per level (ms)."""
    parts = [wrap_block(slo_text(sv["slo"])).rstrip("\n")]
    for r in sv["runs"]:
        rows = [_text_row(lv) for lv in r["levels"]]
        cols = [c for c in TEXT_COLUMNS if c.drop == 0 or any(row[c.key] != "-" for row in rows)]
        table = to_table(rows, cols, "")
        parts += ["", wrap_block(run_heading(r)).rstrip("\n"), wrap_block(prediction_text(r)).rstrip("\n"),
                  table.rstrip("\n")]
    parts += ["", wrap_block("TTFT/TPOT in ms. pred tok/s: gpumatch's prediction and its error; " + ERROR_NOTE)
              .rstrip("\n")]
    return "\n".join(parts) + "\n"


CSV_FIGURES = ("completed_requests", "failed_requests", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s",
               "ttft_mean_s", "tpot_mean_s", "output_tokens_per_s", "request_throughput_per_s",
               "mean_concurrent_requests", "peak_concurrent_requests", "energy_per_output_token_j",
               "energy_net_per_output_token_j")
CSV_COLUMNS = ["run_id", "card", "tool", "label", "mode", "load", *CSV_FIGURES, "predicted_ttft_mean_s",
               "predicted_tpot_mean_s", "predicted_output_tokens_per_s", "meets_slo"]


def serving_csv(sv: dict[str, Any]) -> str:
    """One row per run and level, SI units (``--format csv`` of serve runs)."""
    rows = []
    for r in sv["runs"]:
        for lv in r["levels"]:
            rows.append({"run_id": r["run_id"], "card": r["card"], "tool": r["tool"], "label": lv["label"],
                         "mode": lv["mode"], "load": lv["load"], **{k: lv[k] for k in CSV_FIGURES},
                         **{f"predicted_{k}": lv["predicted"].get(k) for k in ("ttft_mean_s", "tpot_mean_s",
                                                                              "output_tokens_per_s")},
                         "meets_slo": lv["meets_slo"]})
    return to_csv(rows, CSV_COLUMNS)
