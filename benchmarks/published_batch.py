"""Write the page of one blind batch of published serving rows: errors as predicted, per cohort and per row.

Usage: ``python benchmarks/published_batch.py ROWS.toml MEASURED.toml PREDICTIONS.json --out PAGE.md [--after
REFIT.json]`` (``--after``: the rows predicted again after reading them, a section of its own, called a fit). The
predictions were frozen (``benchmarks/freeze_engine_predictions.py``) and committed before the measured file was
read; this script only reads both and never recomputes an estimate (:func:`gpumatch.calibrate.published
.load_engine_cases`). Error = (predicted − published) / published; a median TPOT is compared with the replay's
median, every other figure with the mean.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import tomllib
from pathlib import Path

from published_table import _mean_abs, _ms_or_dash, _pct, _within

from gpumatch.calibrate.published import EngineCase, load_engine_cases

ROOT = Path(__file__).resolve().parents[1]


def _rel(p: Path) -> str:
    return str(p.resolve().relative_to(ROOT))


def _cohorts(cases: list[EngineCase]) -> list[str]:
    groups: dict[tuple[str, str, str, str], list[EngineCase]] = {}
    for c in cases:
        groups.setdefault((c.gpu, c.engine, c.model, f"tp{c.tp} {c.precision}"), []).append(c)
    lines = ["| card | engine | model | tp, weights | rows | TPOT mean abs err | TPOT within 10 % | "
             "TTFT mean abs err | TTFT signed mean | TTFT within 20 % |", "|---" * 10 + "|"]
    for (gpu, engine, model, weights), cs in sorted(groups.items()):
        tt = [c.ttft_error for c in cs if c.ttft_s is not None]
        signed = f"{100 * sum(tt) / len(tt):+.0f}%" if tt else "–"
        lines.append(f"| {gpu} | {engine} | {model} | {weights} | {len(cs)} | "
                     f"{_mean_abs([c.tpot_error for c in cs])} | {_within([c.tpot_error for c in cs], 0.10)} | "
                     f"{_mean_abs(tt)} | {signed} | {_within(tt, 0.20)} |")
    return lines


def _row(c: EngineCase, loop: str) -> str:
    return (f"| {c.case_id} | {loop} | {c.concurrency} | {_ms_or_dash(c.ttft_s)} | "
            f"{_ms_or_dash(c.predicted_ttft_s)} | {_pct(c.ttft_error)} | {_ms_or_dash(c.tpot_s, 2)} | "
            f"{_ms_or_dash(c.compared_tpot_s, 2)} | {_pct(c.tpot_error)} |")


def _totals(cases: list[EngineCase], loops: dict[str, str]) -> list[str]:
    by_loop: dict[str, list[EngineCase]] = {}
    for c in cases:
        by_loop.setdefault(loops.get(c.case_id, "closed"), []).append(c)
    out = ["| rows | loop | TPOT mean abs err | TPOT within 10 % | TTFT mean abs err | TTFT within 20 % |",
           "|---|---|---|---|---|---|"]
    for loop, cs in [("all", cases), *sorted(by_loop.items())]:
        tt = [c.ttft_error for c in cs if c.ttft_s is not None]
        out.append(f"| {len(cs)} | {loop} | {_mean_abs([c.tpot_error for c in cs])} | "
                   f"{_within([c.tpot_error for c in cs], 0.10)} | {_mean_abs(tt)} | {_within(tt, 0.20)} |")
    return out


def _medians(cases: list[EngineCase], loops: dict[str, str]) -> list[str]:
    """The section of the rows that publish a median TTFT (and no mean, or beside it): per cohort and per row."""
    rows = [c for c in cases if c.ttft_median_s]
    if not rows:
        return []
    groups: dict[tuple[str, str, str, str, str], list[float]] = {}
    lines = ["| case | loop | C | TTFT median published | gpumatch | of | error |", "|---|---|---|---|---|---|---|"]
    for c in rows:
        basis = "replay median" if c.predicted_ttft_p50_s is not None else "steady state"
        err = c.compared_ttft_median_error
        loop = loops.get(c.case_id, "closed")
        groups.setdefault((loop, c.gpu, c.engine, c.model, f"tp{c.tp} {c.precision}"), []).append(err)
        lines.append(f"| {c.case_id} | {loop} | {c.concurrency} | {_ms_or_dash(c.ttft_median_s)} | "
                     f"{_ms_or_dash(c.compared_ttft_median_s)} | {basis} | {_pct(err)} |")
    table = ["| loop | card | engine | model | tp, weights | rows | TTFT median abs err | signed mean | "
             "within 20 % |", "|---" * 9 + "|"]
    for (loop, gpu, engine, model, weights), errs in sorted(groups.items()):
        ok = [e for e in errs if e == e]
        signed = f"{100 * sum(ok) / len(ok):+.0f}%" if ok else "–"
        table.append(f"| {loop} | {gpu} | {engine} | {model} | {weights} | {len(errs)} | {_mean_abs(ok)} | "
                     f"{signed} | {_within(ok, 0.20)} |")
    every = [e for errs in groups.values() for e in errs if e == e]
    return ["", "## Median TTFT", "",
            f"{len(rows)} rows publish a median TTFT; it is held against the replay's median where the benchmark "
            "was replayed, else against the steady state's TTFT (a time-window or open-loop estimate has no "
            f"other). Over them: mean absolute error {_mean_abs(every)}, {_within(every, 0.20)} within 20 %.",
            "", *table, "", *lines]


def _after(measured: Path, after: Path, loops: dict[str, str]) -> list[str]:
    """The section of the same rows predicted again after the measured values were read: a fit, not blind."""
    cases, _, frozen_at = load_engine_cases((measured,), (after,))
    return ["", "## After reading them (a fit, not a blind result)", "",
            f"The same rows predicted again at estimator commit `{frozen_at[after.name][:10]}` (`{_rel(after)}`), "
            "after the changes made on reading this batch's values; these rows are fit cases from then on.", "",
            *_totals(cases, loops), "", *_cohorts(cases)]


def render(rows_path: Path, measured: Path, predictions: Path, after: Path | None = None) -> str:
    cases, sources, frozen_at = load_engine_cases((measured,), (predictions,))
    spec = tomllib.loads(rows_path.read_text())
    loops = {r[0]: dict(zip(spec["columns"], r, strict=True)).get("loop", "closed") for r in spec["rows"]}
    commit = frozen_at[predictions.name]
    out = [f"# Blind batch: {rows_path.stem.removeprefix('engine-rows-')}", "",
           f"_Generated by `benchmarks/published_batch.py` ({dt.date.today().isoformat()}); do not edit by hand._", "",
           f"Settings `{_rel(rows_path)}`, measured values `{_rel(measured)}`, predictions `{_rel(predictions)}` "
           f"frozen at estimator commit `{commit[:10]}` and committed before the measured file was read. The errors "
           "are the errors as predicted; nothing was fitted on these rows. Goal of the issue: TPOT within 10 %, "
           "TTFT within 20 % mean absolute error per cohort.", "", "## Totals", "", *_totals(cases, loops)]
    out += ["", "## Per card × engine × model", "", *_cohorts(cases), *_medians(cases, loops)]
    if after is not None:
        out += _after(measured, after, loops)
    out += ["", "## Sources", ""]
    for name, s in sources.items():
        out.append(f"- `{name}`: {s.get('engine', '')} — {s['url']}")
    out += ["", "## All rows", "",
            "| case | loop | C | TTFT published | TTFT gpumatch | error | TPOT published | TPOT gpumatch | error |",
            "|---|---|---|---|---|---|---|---|---|"]
    out += [_row(c, loops.get(c.case_id, "closed")) for c in cases]
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("rows", type=Path)
    ap.add_argument("measured", type=Path)
    ap.add_argument("predictions", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--after", type=Path, default=None,
                    help="the same rows predicted again after the values were read (shown apart, as a fit)")
    a = ap.parse_args()
    json.loads(a.predictions.read_text())  # a readable JSON file before anything is written
    a.out.write_text(render(a.rows, a.measured, a.predictions, a.after))


if __name__ == "__main__":
    main()
