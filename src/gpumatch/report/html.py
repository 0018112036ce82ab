"""``gpumatch report --html FILE``: one self-contained page (inline CSS and SVG; no script, no network).

The page renders what :func:`gpumatch.usecases.report.build_report` assembled; plots come from
:mod:`gpumatch.report.figures` (matplotlib SVG drawn here, so the file opens offline in any browser and needs no
JavaScript). Every text is escaped. The plain 80-column text of the plan is kept at the end for copying.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

from gpumatch.report import figures
from gpumatch.report.bench import config_text, value_text

MAX_BYTES = 5_000_000
"""The page must stay under 5 MB (issue 15)."""

CSS = """
:root { --ink:#1d2430; --muted:#5b6575; --line:#d9dee7; --band:#f5f7fa; --accent:#1f5fbf; --ok:#1e7b34; --bad:#b3261e; }
* { box-sizing: border-box; }
body { margin:0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", "Noto Sans", Arial,
       sans-serif; color:var(--ink); background:#fff; font-size:16px; line-height:1.5; }
main { max-width: 1040px; margin: 0 auto; padding: 28px 24px 64px; }
header.top { border-bottom: 3px solid var(--accent); margin-bottom: 20px; padding-bottom: 10px; }
h1 { font-size: 28px; margin: 0 0 4px; }
h2 { font-size: 22px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 18px; margin: 26px 0 8px; }
p.meta, .muted { color: var(--muted); font-size: 14px; margin: 2px 0; }
nav.toc { background: var(--band); border: 1px solid var(--line); border-radius: 6px; padding: 10px 16px; }
nav.toc ul { margin: 4px 0; padding-left: 20px; }
a { color: var(--accent); }
table { border-collapse: collapse; width: 100%; margin: 8px 0 16px; font-size: 14px; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--band); font-weight: 600; }
tbody tr:nth-child(even) td { background: #fafbfc; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.good { color: var(--ok); font-weight: 600; } .bad { color: var(--bad); font-weight: 600; }
figure.plot { margin: 14px 0 22px; padding: 10px; border: 1px solid var(--line); border-radius: 6px; }
figure.plot svg { width: 100%; height: auto; display: block; }
figure.plot h4 { margin: 2px 0 6px; font-size: 16px; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 6px; }
section.pick { border-left: 4px solid var(--accent); padding-left: 16px; margin-top: 28px; }
ol.checks li, ul.exp li { margin: 4px 0; }
.note { background: #fff8e1; border: 1px solid #f0d98a; border-radius: 6px; padding: 8px 12px; margin: 8px 0;
        font-size: 14px; }
pre { background: var(--band); border: 1px solid var(--line); border-radius: 6px; padding: 12px; overflow-x: auto;
      font-size: 12.5px; line-height: 1.35; }
details summary { cursor: pointer; font-weight: 600; margin: 10px 0; }
@media print { nav.toc { display: none; } figure.plot { break-inside: avoid; } }
"""

Cell = Callable[[dict[str, Any]], str]


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str | Cell]],
          numeric: Sequence[str] = ()) -> str:
    """An HTML table: ``columns`` are (header, key or function of the row)."""
    head = "".join(f"<th>{_e(h)}</th>" for h, _ in columns)
    body = []
    for r in rows:
        cells = []
        for h, get in columns:
            text = get(r) if callable(get) else _e(r.get(get))
            cls = ' class="num"' if h in numeric else ""
            cells.append(f"<td{cls}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def figure(svg: str, caption: str, fig_id: str, title: str = "") -> str:
    head = f"<h4>{_e(title)}</h4>" if title else ""
    return f'<figure class="plot" id="{_e(fig_id)}">{head}{svg}<figcaption>{_e(caption)}</figcaption></figure>'


def _plan_header(p: dict[str, Any]) -> str:
    r = p["request"]
    keys = [("model", "model"), ("task", "task"), ("precision", "weights"), ("kv_precision", "KV cache"),
            ("concurrency", "concurrency"), ("prompt", "prompt tokens"), ("gen", "generated tokens"),
            ("global_batch", "global batch"), ("seq", "sequence"), ("max_gpus", "max GPUs"),
            ("ttft_p50_s", "TTFT p50 target (s)"), ("tpot_p50_s", "TPOT p50 target (s)"),
            ("w_per_node", "power per node (W)"), ("budget_usd", "budget (USD)"), ("cooling", "cooling")]
    rows = [{"field": label, "value": r[k]} for k, label in keys if r.get(k) is not None]
    pb = p.get("price_basis") or {}
    text = pb.get("text") if isinstance(pb, dict) else pb
    return (table(rows, [("workload", "field"), ("value", "value")]) +
            f'<p class="meta">searched {p["candidates_evaluated"]:,} configurations, {p["feasible"]:,} feasible; '
            f"basis: {_e(p['basis'])}; prices: {_e(text)}</p>")


def _shortlist(p: dict[str, Any]) -> str:
    rows = []
    for role, entries in p["shortlist"].items():
        if not entries:
            rows.append({"role": p["roles"].get(role, role), "rank": "-", "gpu": "no feasible candidate",
                         "count": "", "layout_text": "", "score": "", "why": "see the failed configurations"})
        for i, e in enumerate(entries, 1):
            rows.append({**e, "role": p["roles"].get(role, role), "rank": i})
    return table(rows, [("role", "role"), ("#", "rank"), ("card", "gpu"), ("GPUs", "count"), ("layout", "layout_text"),
                        ("score", "score"), ("why", "why")], numeric=("#", "GPUs", "score"))


def _rejected(p: dict[str, Any]) -> str:
    rows = p.get("rejected_groups") or []
    return (table(rows, [("rule", "rule"), ("cards (GPU counts tried)", "cards"), ("for example", "example"),
                         ("configurations", "configurations")], numeric=("configurations",)) +
            '<p class="muted">Every failed configuration with its reason: <code>gpumatch plan ... --format json'
            "</code> (<code>rejected</code>).</p>")


def _pick(i: int, k: dict[str, Any]) -> str:
    e = k["entry"]
    head = f"{k['gpu']} × {k['count']} — {k['role_title']}"
    exp = "".join(f"<li>{_e(x)}</li>" for x in e.get("experiments") or [])
    checks = "".join(f"<li>{_e(x)}</li>" for x in k["procurement"])
    roof = figure(figures.roofline(k["roofline"]), "Each operator class of one layer per GPU at its arithmetic "
                  "intensity and the rate the estimator expects it to reach; left of the ridge it is memory-bound.",
                  f"roofline-{i}", f"Roofline of {k['gpu']} with the workload's operators")
    mem = figure(figures.memory_growth(k), "Memory per GPU (weights, KV cache, activations) as the batch and the "
                 "sequence grow step by step; above the dashed capacity line it does not fit.", f"memory-{i}",
                 f"Memory growth on {k['gpu']}")
    return (f'<section class="pick" id="pick-{i}"><h3>{_e(head)}</h3><p>{_e(e.get("why"))}</p>'
            f'<p class="muted">{_e(e.get("cost"))}; {_e(e.get("flip") or "")}</p>{roof}{mem}'
            f"<h4>Experiment plan</h4><ul class=\"exp\">{exp}</ul>"
            f"<h4>Procurement re-check list</h4><ol class=\"checks\">{checks}</ol></section>")


def plan_html(p: dict[str, Any], plain: str) -> str:
    notes = "".join(f'<div class="note">{_e(n)}</div>' for n in p.get("notes") or [])
    picks = "".join(_pick(i, k) for i, k in enumerate(p.get("picks") or []))
    return (f'<h2 id="plan">Plan: {_e(p["request"].get("name") or p["request"].get("model"))}</h2>'
            f"{_plan_header(p)}{notes}<h3 id=\"shortlist\">Shortlist by role</h3>{_shortlist(p)}"
            f"<h2 id=\"picks\">Per pick: roofline, memory, experiments, procurement</h2>{picks}"
            f"<h2 id=\"rejected\">Failed configurations</h2>{_rejected(p)}"
            f"<details><summary>Plain text (80 columns)</summary><pre>{_e(plain)}</pre></details>")


def _ratio(r: dict[str, Any]) -> str:
    """measured / predicted, coloured by the ±10% band; measured / datasheet (a share of peak) plain."""
    x = r.get("ratio")
    if x is None:
        return "-"
    if r.get("predicted") is None:
        return f"{x:.3f} of peak"
    cls = "good" if 0.9 <= x <= 1.1 else "bad"
    return f'<span class="{cls}">{x:.3f}</span>'


def _predicted(r: dict[str, Any]) -> str:
    if r.get("predicted") is not None:
        return _e(value_text(r["predicted"], r["unit"]))
    if r.get("datasheet") is not None:
        return _e(value_text(r["datasheet"], r["unit"])) + " (ds)"
    return "-"


def _burst(series: dict[str, Any]) -> str:
    t, p = series["t_s"], series["power_w"]
    pts = [(a, b) for a, b in zip(t, p, strict=True) if b is not None]
    if len(pts) < 10:
        return ""
    cut = min(60.0, pts[-1][0] / 3)
    burst = [b for a, b in pts if a <= cut]
    sus = [b for a, b in pts if a > cut]
    if not burst or not sus:
        return ""
    return (f"burst (first {cut:.0f} s): mean {sum(burst) / len(burst):.0f} W; sustained (after): mean "
            f"{sum(sus) / len(sus):.0f} W")


def run_html(r: dict[str, Any]) -> str:
    run, m = r["run"], r["manifest"]
    rid = run["run_id"]
    facts = [{"k": "card", "v": r.get("card") or "unknown card"}]
    facts += [{"k": k, "v": m.get(k)} for k in ("gpu.uuid", "gpu.driver", "gpu.power_enforced_limit_w",
                                               "software.torch", "software.cuda", "suite.name") if m.get(k)]
    imported = (run.get("config") or {}).get("imported") or {}
    if imported:
        facts.append({"k": "imported from", "v": f"{imported.get('file')} (run {imported.get('run_id')} there)"})
    if r.get("serve"):
        facts += [{"k": k, "v": r["serve_facts"][k]} for k in ("model", "tool")]
    facts += [{"k": "started", "v": imported.get("started_at") or run.get("started_at")},
              {"k": "status", "v": run.get("status")}]
    if r["n_samples"] or not r.get("serve"):
        facts.append({"k": "telemetry samples", "v": r["n_samples"]})
    parts = [f'<h2 id="run-{rid}">Run {rid} ({_e(run.get("kind"))}): {_e(run.get("name"))}</h2>',
             table(facts, [("field", "k"), ("value", "v")])]
    predicted = [x for x in r["compared"] if x.get("predicted") is not None]
    if r.get("serve"):
        parts.append('<p>Its load levels, plots and predictions: <a href="#serving">Serving</a>.</p>')
    elif predicted:
        parts.append(figure(figures.predicted_vs_measured(predicted),
                            "Ratio of the measured value to gpumatch's estimate of the same configuration on this "
                            "card, per case (green: within ±10%). GEMM and copy rates are read against the "
                            "datasheet in the table below.", f"pvm-{rid}", f"Run {rid}: measured / predicted"))
    if r["telemetry"]:
        parts.append(figure(figures.telemetry(r["telemetry"]),
                            "Shaded: samples with a throttle reason set. " + _burst(r["telemetry"]), f"tel-{rid}",
                            f"Run {rid}: power, SM clock and temperature"))
    if not r.get("serve") and any(x.get("decode_tokens_per_s") for x in r["ladder"]):
        parts.append(figure(figures.load_curve(r["ladder"]),
                            "Throughput rises with the batch while energy per token falls, until the step becomes "
                            "compute-bound.", f"load-{rid}", f"Run {rid}: decode throughput and energy over load"))
    if r["scaling"]:
        parts.append(figure(figures.scaling_ladder(r["scaling"]), "", f"scale-{rid}", f"Run {rid}: scaling ladder"))
    parts += _scale_figures(rid, r.get("scale"))
    parts.append(f"<details><summary>All {len(r['results'])} results (measured, predicted or datasheet, ratio)"
                 "</summary>" + table(r["results"], [
        ("case", "case"), ("metric", "metric"), ("configuration", lambda x: _e(config_text(x.get("config")))),
        ("measured", lambda x: _e(value_text(x["measured"], x["unit"], x["metric"]))),
        ("predicted / datasheet", _predicted),
        ("ratio", _ratio)], numeric=("measured", "predicted / datasheet", "ratio")) + "</details>")
    if r["failures"]:
        parts.append("<h3>Failed configurations</h3>" + table(r["failures"], [
            ("case", "case"), ("class", "error_class"), ("message", "message")]))
    return "".join(parts)


def _scale_figures(rid: Any, scale: dict[str, Any] | None) -> list[str]:
    """The scaling ladder of a ``bench scale`` run (and its collectives' bus bandwidth)."""
    if not scale:
        return []
    out = []
    if scale.get("ladder"):
        out.append(figure(figures.scale_throughput(scale["ladder"]),
                          "Measured throughput X_n against ideal linear scaling n X_1 and gpumatch's estimate; below, "
                          "scaling efficiency X_n / (n X_1). The gap to the ideal line is communication waiting, "
                          "synchronisation bubbles and stragglers.", f"ladder-{rid}",
                          f"Run {rid}: scaling ladder ({_e(scale.get('workload'))})"))
    if any(c["n_gpus"] > 1 for c in scale.get("collectives") or []):
        out.append(figure(figures.scale_busbw(scale["collectives"]),
                          "busbw = algbw x the nccl-tests factor (doc/PERFORMANCE.md): comparable across rank "
                          "counts and with the link's bandwidth.", f"busbw-{rid}",
                          f"Run {rid}: collectives, bus bandwidth over message size"))
    return out


def _toc(data: dict[str, Any]) -> str:
    items = []
    if data["plan"]:
        items += ['<li><a href="#plan">Plan</a> · <a href="#shortlist">shortlist</a> · <a href="#picks">picks</a>'
                  ' · <a href="#rejected">failed configurations</a></li>']
    if data.get("side_by_side"):
        items.append('<li><a href="#side-by-side">Runs side by side</a></li>')
    if data.get("serving"):
        items.append('<li><a href="#serving">Serving: latency, throughput and the SLO over load</a></li>')
    items += [f'<li><a href="#run-{r["run"]["run_id"]}">Run {r["run"]["run_id"]}</a></li>' for r in data["runs"]]
    return f'<nav class="toc"><strong>Contents</strong><ul>{"".join(items)}</ul></nav>'


def report_html(data: dict[str, Any], plain_plan: str = "") -> str:
    """The whole page (module docstring)."""
    body = [f'<header class="top"><h1>{_e(data["title"])}</h1>'
            f'<p class="meta">generated {_e(data["generated_at"])} by gpumatch; self-contained, works offline</p>'
            "</header>", _toc(data)]
    if data["plan"]:
        body.append(plan_html(data["plan"], plain_plan))
    if data.get("side_by_side"):
        from gpumatch.report.sidebyside import side_by_side_html

        body.append(side_by_side_html(data["side_by_side"]))
    if data.get("serving"):
        from gpumatch.report.serve_page import serving_html

        body.append(serving_html(data["serving"]))
    body += [run_html(r) for r in data["runs"]]
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(data['title'])}</title><style>{CSS}</style></head>"
            f"<body><main>{''.join(body)}</main></body></html>\n")


def write_report(data: dict[str, Any], path: Any, plain_plan: str = "", force: bool = False) -> Any:
    """Write the page to ``path`` (a :class:`pathlib.Path`); refuses an existing file without ``force``, a missing
    folder, and a page over :data:`MAX_BYTES` (InputError)."""
    from gpumatch.errors import InputError

    if path.exists() and not force:
        raise InputError(f"{path} exists", "give another --html file or add --force to overwrite it")
    if not path.parent.is_dir():
        raise InputError(f"no folder {path.parent}", "create it first")
    page = report_html(data, plain_plan).encode("utf-8")
    if len(page) > MAX_BYTES:
        raise InputError(f"the report would be {len(page) / 1e6:.1f} MB, over {MAX_BYTES / 1e6:.0f} MB",
                         "report fewer runs at once")
    from gpumatch.outfiles import write_file

    return write_file(path, page, force=force, hint="give another --html file or add --force to overwrite it")


def report_text(data: dict[str, Any], plain_plan: str = "") -> str:
    """The report without --html: the plan's text, the serve runs' levels, and per other run its results against
    predictions."""
    from gpumatch.report.bench import show_text

    parts = [plain_plan] if plain_plan else []
    if data.get("side_by_side"):
        from gpumatch.report.sidebyside import side_by_side_text

        parts.append(side_by_side_text(data["side_by_side"]))
    if data.get("serving"):
        from gpumatch.report.serve_page import serving_text

        parts.append(serving_text(data["serving"]))
    for r in data["runs"]:
        if not r.get("serve"):
            parts.append(show_text(r))
    parts.append("(add --html FILE for the page with plots)")
    return "\n".join(p.rstrip("\n") for p in parts) + "\n"
