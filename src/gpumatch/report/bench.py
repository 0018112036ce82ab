"""Views of ``gpumatch bench``: the progress of a run (a rich bar on a terminal, plain lines otherwise), the run
list, one run's cases and results (measured, predicted, ratio, n, percentiles), a comparison, all within 80
columns. Computes nothing new: the numbers come from :mod:`gpumatch.lab`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpumatch.report.progress import BarOrLines
from gpumatch.report.render import Column, key_values, to_csv, to_table

LIST_COLUMNS = [Column("run_id", "run"), Column("kind", wrap=False, drop=5),
                Column("name", wrap=False, cut_to=26), Column("status", wrap=False),
                Column("started_at", "started", drop=3), Column("results", drop=2), Column("failures", drop=1),
                Column("manifest", drop=4)]
_UNITS = (("flop/s", 1e12, "TFLOP/s"), ("B/s", 1e9, "GB/s"), ("token/s", 1.0, "tok/s"), ("1/s", 1.0, "/s"),
          ("s", 1e-3, "ms"), ("B", 2**30, "GiB"), ("1", 0.01, "%"))


COUNT_SUFFIXES = ("_requests", "_count")
"""Metrics of unit 1 that count things (``completed_requests``, ``mean_concurrent_requests``): shown as numbers,
never as a percentage."""


def value_text(value: Any, unit: str, metric: str = "") -> str:
    """``value`` (SI, in ``unit``) in the unit a person reads: TFLOP/s, GB/s, ms, GiB, %; '-' for None.
    A perplexity or a count (unit 1, not a fraction: :data:`COUNT_SUFFIXES`) is shown as the number."""
    if value is None:
        return "-"
    if metric == "quality_perplexity":
        return f"{float(value):.4g}"
    if unit == "1" and metric.endswith(COUNT_SUFFIXES):
        v = float(value)
        return f"{v:,.0f}" if v.is_integer() else f"{v:.3g}"
    for name, scale, shown in _UNITS:
        if unit == name:
            v = float(value) / scale
            return f"{v:.3g} {shown}" if abs(v) < 1000 else f"{v:,.0f} {shown}"
    return f"{float(value):.4g} {unit}"


def _pct(row: dict[str, Any]) -> str:
    """``n`` and the percentiles it supports, in ms (p90 from 10 samples, p99 from 100)."""
    parts = [f"{k[:3]} {row[k] * 1e3:.3g}" for k in ("p50_s", "p90_s", "p99_s") if row.get(k) is not None]
    n = row.get("n")
    return " ".join([f"n={n}" if n is not None else "n=-", *parts])


def config_text(config: dict[str, Any] | None) -> str:
    """A result's configuration in a few characters: ``4096x4096x4096``, ``b16 c2048``, ``b4 s1024 rc=full``,
    ``1 GiB``."""
    c = config or {}
    if c.get("case") == "serve" or ("mode" in c and "label" in c):
        return serve_load_text(c)
    if {"m", "n", "k"} <= c.keys():
        return f"{c['m']}x{c['n']}x{c['k']}"
    if "variant" in c and "window" in c:
        return f"{c['variant']} w{c['window']}/{c['stride']}"
    if "size_bytes" in c:
        size = int(c["size_bytes"])
        return f"{size / 2**30:g} GiB" if size >= 2**30 else f"{size / 2**20:g} MiB"
    parts = [f"b{c['batch']}"] if "batch" in c else []
    parts += [f"c{c['context']}"] if "context" in c else []
    parts += [f"s{c['seq']}"] if "seq" in c else []
    parts += [f"rc={c['recompute']}"] if c.get("recompute") not in (None, "none") else []
    return " ".join(parts)


def serve_load_text(c: dict[str, Any]) -> str:
    """A serving level's load: its label (``c=4``, ``20/s poisson``), else ``c=8`` / ``4/s`` from an imported
    file's ``max_concurrency`` / ``request_rate`` (an infinite rate is a closed loop), else its strategy."""
    if c.get("label"):
        return str(c["label"])
    rate = c.get("request_rate")
    finite = isinstance(rate, int | float) and rate == rate and rate not in (float("inf"), 0)
    if finite:
        return f"{rate:g}/s"
    if c.get("max_concurrency") is not None:
        return f"c={c['max_concurrency']}"
    return str(c.get("strategy") or "")


RESULT_COLUMNS = [Column("case", wrap=True), Column("metric", wrap=False, cut_to=18),
                  Column("measured", wrap=False, align="right"), Column("predicted", wrap=False, align="right",
                                                                       drop=3),
                  Column("ratio", wrap=False, align="right", drop=2)]
TIMING_COLUMNS = [Column("case", wrap=True), Column("metric", wrap=False, cut_to=18),
                  Column("pct_ms", "n and percentiles (ms)", wrap=False)]
CSV_COLUMNS = ["case", "metric", "measured", "unit", "predicted", "datasheet", "ratio", "n", "p50_s", "p90_s",
               "p99_s", "key"]


def result_cells(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        ref = r["predicted"] if r.get("predicted") is not None else r.get("datasheet")
        mark = "" if r.get("predicted") is not None or ref is None else " (ds)"
        what = config_text(r.get("config"))
        out.append({"case": f"{r['case']} {what}".strip(), "metric": r["metric"],
                    "measured": value_text(r["measured"], r["unit"], r["metric"]),
                    "predicted": value_text(ref, r["unit"]) + mark,
                    "ratio": "-" if r.get("ratio") is None else f"{r['ratio']:.2f}",
                    "n_given": r.get("n") is not None and r["unit"] == "s", "pct_ms": _pct(r)})
    return out


TELEMETRY_COLUMNS = [Column("case", wrap=False), Column("verdict", wrap=False),
                     Column("power", "pwr cap", wrap=False, align="right"),
                     Column("thermal", "therm", wrap=False, align="right"), Column("idle", wrap=False, align="right"),
                     Column("watts", "mean W", wrap=False, align="right"),
                     Column("temp", "max C", wrap=False, align="right"), Column("errors", "err", wrap=False,
                                                                                 align="right", drop=1)]


def _share_text(t: dict[str, Any], counter: str, sampled: str) -> str:
    """A limiter's share of the case window (:func:`gpumatch.lab.ceiling.window_share`: the violation counter when
    read, else the share of samples, marked ``s``)."""
    from gpumatch.lab.ceiling import window_share

    value, src = window_share(t, counter, sampled)
    return "-" if value is None else f"{value:.0%}" + (" s" if src == "of samples" else "")


def telemetry_cells(cases: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per case with telemetry: its verdict, the shares of its window under the power cap, thermal
    slowdown and low utilization (start-up), mean power, peak temperature and the errors counted (Xid events, ECC
    and PCIe-replay deltas)."""
    out = []
    for c in cases:
        t = c.get("telemetry") or {}
        if not t:
            continue
        e = t.get("errors") or {}
        n_err = len(e.get("xid") or []) + sum(int(e.get(k) or 0) for k in ("ecc_uncorrected_delta",
                                                                           "pcie_replays_delta"))
        out.append({"case": c.get("case_id"), "verdict": t.get("verdict") or "-",
                    "power": _share_text(t, "power", "power_cap_frac"),
                    "thermal": _share_text(t, "thermal", "thermal_frac"),
                    "idle": _share_text(t, "low_utilization", ""),  # a counter only: no sampled reason bit
                    "watts": "-" if t.get("power_w_mean") is None else f"{float(t['power_w_mean']):.0f}",
                    "temp": "-" if t.get("gpu_temp_c_max") is None else f"{float(t['gpu_temp_c_max']):.0f}",
                    "errors": str(n_err)})
    return out


def show_text(data: dict[str, Any]) -> str:
    """``bench show``: the run, its results, its failed and skipped cases."""
    run, man = data["run"], data["manifest"]
    head = {"run": run["run_id"], "name": run["name"], "status": run["status"],
            "gpu": man.get("gpu.name") or man.get("device.name"), "torch": man.get("software.torch"),
            "manifest": str(run.get("manifest_sha256", ""))[:16]}
    parts = [key_values(head)]
    if data["results"]:
        parts += ["", to_table(result_cells(data["results"]), RESULT_COLUMNS, "Results (predicted: gpumatch "
                                                                              "estimate; (ds): datasheet)")]
    if data.get("ceilings"):
        parts += ["", ceiling_text(data["ceilings"])]
    tele = telemetry_cells(data.get("cases") or [])
    if tele:
        parts += ["", to_table(tele, TELEMETRY_COLUMNS, "NVML per case window (violation counters; s: share of "
                                                        "10 Hz samples)")]
    timed = [c for c in result_cells(data["results"]) if c["n_given"]]
    if timed:
        parts += ["", to_table(timed, TIMING_COLUMNS, "Timings (p90 from n >= 10, p99 from n >= 100)")]
    if data["failures"]:
        rows = [{"case": f["case"], "class": f["error_class"], "reason": f["message"]} for f in data["failures"]]
        parts += ["", to_table(rows, [Column("case", wrap=False), Column("class", wrap=False), Column("reason")],
                               "Failed or skipped")]
    return "".join(p if p.endswith("\n") else p + "\n" for p in parts)


CEILING_COLUMNS = [Column("case", wrap=True), Column("achieved", wrap=False, align="right"),
                   Column("ratio", "of ceil.", wrap=False, align="right"),
                   Column("mbu", "of copy", wrap=False, align="right"), Column("reason", wrap=True)]


def ceiling_cells(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Table cells of :func:`gpumatch.lab.ceiling.ceiling_rows`."""
    return [{"case": f"{r['case']} {config_text(r.get('config'))}{' read' * (r['metric'] == 'read_bytes_per_s')}"
             .strip(),
             "achieved": value_text(r["achieved"], r["unit"]), "ratio": f"{r['ceiling_ratio']:.2f}",
             "mbu": f"{r['mbu_vs_copy']:.2f}" if r.get("mbu_vs_copy") is not None else "-",
             "reason": r.get("reason") or ""} for r in rows]


def ceiling_text(rows: Sequence[dict[str, Any]]) -> str:
    """The results against the card's ceilings (catalog dense peak or HBM; decode also the run's measured copy,
    its MBU), with the reason of each low ratio, and the ceilings used under the table."""
    bases = sorted({str(r["ceiling_basis"]) for r in rows})
    table = to_table(ceiling_cells(rows), CEILING_COLUMNS, "Against the card's ceilings (of copy: decode MBU "
                                                             "against the run's measured copy)")
    return table.rstrip("\n") + "\n" + "".join(f"ceiling: {b}\n" for b in bases)


def show_csv(data: dict[str, Any]) -> str:
    return to_csv(data["results"], CSV_COLUMNS)


COMPARE_COLUMNS = [Column("case", wrap=True), Column("metric", wrap=False, cut_to=18),
                   Column("a", "A", wrap=False, align="right"),
                   Column("b", "B", wrap=False, align="right"), Column("ratio", "B/A", wrap=False, align="right"),
                   Column("ci", "95% CI", wrap=False, align="right", drop=1)]


def _ci(r: dict[str, Any]) -> str:
    """The bootstrap interval of B/A, starred when it excludes 1 (a significant difference)."""
    if r.get("b_over_a_low") is None:
        return "-"
    star = " *" if r.get("significant") else ""
    return f"{r['b_over_a_low']:.3f}-{r['b_over_a_high']:.3f}{star}"


def compare_text(cmp: dict[str, Any]) -> str:
    rows = [{"case": f"{r['case']} {config_text(r.get('config'))}".strip(), "metric": r["metric"],
             "a": value_text(r["a"], r["unit"] or "", r["metric"] or ""),
             "b": value_text(r["b"], r["unit"] or "", r["metric"] or ""),
             "ratio": "-" if r["b_over_a"] is None else f"{r['b_over_a']:.3f}", "ci": _ci(r)} for r in cmp["rows"]]
    text = to_table(rows, COMPARE_COLUMNS, f"Run {cmp['run_a']} (A) against run {cmp['run_b']} (B)")
    if any(r.get("b_over_a_low") is not None for r in cmp["rows"]):
        text = text.rstrip("\n") + ("\n95% CI: bootstrap of the ratio of medians from the raw timings; * = "
                                     "significant (the interval excludes 1)\n")
    if cmp["differing_fields"]:
        text = (f"warning: compared with --force; the manifests differ in {', '.join(cmp['differing_fields'])}\n"
                + text)
    return text


class BenchProgress(BarOrLines):
    """``progress(phase, done, total, case_id, eta_s)`` for :func:`gpumatch.lab.run.run_bench`: a rich bar
    (phase, case, ETA) on stderr when it is a terminal, one plain line per case otherwise."""

    def __call__(self, phase: str, done: int, total: int, case_id: str, eta_s: float) -> None:
        if self.tty:
            from rich.progress import TextColumn

            self.bar(f"{phase} {case_id}", done, total, TextColumn("{task.fields[eta]}"),
                     eta=f"ETA {eta_s:.0f} s" if phase == "case" else "")
        elif phase == "case":
            self.line(f"[{done + 1}/{total}] {case_id} (about {eta_s:.0f} s left)")
        elif phase == "probe":
            self.line("describing this machine (environment manifest)")


def _reason(error_class: str, message: str, width: int = 72) -> str:
    """``class: message`` on at most ``width`` characters (``bench show`` has the whole message and log)."""
    if not message:
        return ""
    text = " ".join(message.split()) if error_class == "skipped" else f"{error_class}: {' '.join(message.split())}"
    return text if len(text) <= width else text[: width - 1] + "…"


def run_summary(run: Any) -> str:
    """The lines printed after ``bench run``: each case's status, then where the run is stored."""
    rows = [{"case": c.case_id, "status": c.status, "seconds": f"{c.wall_s:.1f}", "results": c.results,
             "reason": _reason(c.error_class, c.message)} for c in run.cases]
    table = to_table(rows, [Column("case", wrap=False), Column("status", wrap=False), Column("seconds", drop=2),
                            Column("results", drop=1), Column("reason")])
    notes = "".join(f"note: {n}\n" for n in getattr(run, "notes", ()))
    return table + f"\n{notes}run {run.run_id} saved in {run.store_path} (gpumatch bench show {run.run_id})\n"
