"""The serving plots of ``gpumatch report --html`` (matplotlib, inline SVG), drawn from
:func:`gpumatch.usecases.report_serving.serving_section`: one line per run, so a gpumatch run and an imported vLLM or
GuideLLM run overlay.

- :func:`load_curves`: TTFT and TPOT (p99 solid, p50 dashed) and output tokens/s over the load (concurrency for a
  closed loop, requests/s for an open loop), with the estimator's prediction (its mean TTFT/TPOT, its tokens/s) as
  open diamonds on a dotted line where the run stored one;
- :func:`energy_curves`: energy per output token over the load, gross (solid) and net of idle power (dashed);
- :func:`slo_frontier`: output tokens/s against p99 TTFT and p99 TPOT, the SLO thresholds as lines; a level that
  meets the SLO is filled, one that misses it is an open red-edged marker.
"""

from __future__ import annotations

from typing import Any

from gpumatch.report.figures import PALETTE, _figure, _svg

X_LABELS = {"concurrency": "concurrency (requests in flight, closed loop)",
            "rate": "request rate (requests/s, open loop)"}
MISS = "#d62728"


def colour(serving: dict[str, Any], run: dict[str, Any]) -> str:
    """The run's colour, the same in every plot of the page (by its place among the serve runs)."""
    i = next(i for i, r in enumerate(serving["runs"]) if r["run_id"] == run["run_id"])
    return PALETTE[i % len(PALETTE)]


def run_label(run: dict[str, Any]) -> str:
    """``run 3: H200 SXM 141GB, guidellm benchmark 0.4.0`` (short enough for a legend)."""
    tool = str(run["tool"]).replace("gpumatch bench serve", "gpumatch")
    return f"run {run['run_id']}: {run['card']}, {tool}"


def _levels(run: dict[str, Any], mode: str) -> list[dict[str, Any]]:
    return sorted((lv for lv in run["levels"] if lv["mode"] == mode and lv["load"]), key=lambda lv: lv["load"])


def _x_axis(ax: Any, xs: list[float], mode: str) -> None:
    from matplotlib.ticker import FuncFormatter

    if xs and min(xs) > 0 and max(xs) / min(xs) >= 8:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.set_xlabel(X_LABELS[mode])


def _series(ax: Any, lv: list[dict[str, Any]], key: str, scale: float, **kw: Any) -> bool:
    pts = [(x["load"], x[key] * scale) for x in lv if x.get(key) is not None]
    if pts:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], **kw)
    return bool(pts)


def _predicted(ax: Any, lv: list[dict[str, Any]], key: str, scale: float, colour: str) -> bool:
    pts = [(x["load"], x["predicted"][key] * scale) for x in lv if x["predicted"].get(key) is not None]
    if pts:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], ls=":", marker="D", ms=6, mfc="white", mec=colour,
                color=colour, lw=1.2)
    return bool(pts)


def _style_legend(ax: Any, serving: dict[str, Any], runs: list[dict[str, Any]], predicted: bool,
                  styles: list[tuple[str, str]]) -> None:
    """One entry per run (its colour), then what each line style means."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colour(serving, r), lw=2.5, label=run_label(r)) for r in runs]
    handles += [Line2D([], [], color="#444", ls=ls, marker="o" if ls == "-" else None, ms=4, label=text)
                for ls, text in styles]
    if predicted:
        handles.append(Line2D([], [], color="#444", ls=":", marker="D", mfc="white", label="predicted by gpumatch "
                              "(mean TTFT/TPOT)"))
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.02), ncol=2, fontsize=8.5)


def load_curves(serving: dict[str, Any], mode: str) -> str:
    """TTFT, TPOT and output tokens/s over the load of ``mode`` (module docstring), one colour per run."""
    runs = [r for r in serving["runs"] if _levels(r, mode)]
    panels = (("ttft", "TTFT (ms)", 1e3), ("tpot", "TPOT (ms)", 1e3), ("output_tokens_per_s", "output tokens/s", 1.0))
    predicted = False
    with _figure(7.6, 8.2, rows=3) as (fig, axes):
        for run in runs:
            c, lv = colour(serving, run), _levels(run, mode)
            for ax, (key, _label, scale) in zip(axes, panels, strict=True):
                if key == "output_tokens_per_s":
                    _series(ax, lv, key, scale, color=c, marker="o", lw=2)
                    predicted |= _predicted(ax, lv, key, scale, c)
                    continue
                _series(ax, lv, f"{key}_p99_s", scale, color=c, marker="o", lw=2)
                _series(ax, lv, f"{key}_p50_s", scale, color=c, marker=".", lw=1.2, ls="--")
                predicted |= _predicted(ax, lv, f"{key}_mean_s", scale, c)
        for ax, (_key, label, _scale) in zip(axes, panels, strict=True):
            ax.set_ylabel(label)
            ax.set_ylim(bottom=0)
        _x_axis(axes[-1], [lv["load"] for r in runs for lv in _levels(r, mode)], mode)
        styles = [("-", "p99 latency; measured tokens/s"), ("--", "p50 latency")]
        _style_legend(axes[0], serving, runs, predicted, styles)
        return _svg(fig)


def energy_curves(serving: dict[str, Any], mode: str) -> str:
    """Energy per output token over the load: gross (solid) and net of the server's idle power (dashed)."""
    runs = [r for r in serving["runs"] if any(lv["energy_per_output_token_j"] for lv in _levels(r, mode))]
    with _figure(7.6, 4.4) as (fig, ax):
        for run in runs:
            c, lv = colour(serving, run), _levels(run, mode)
            _series(ax, lv, "energy_per_output_token_j", 1.0, color=c, marker="o", lw=2)
            _series(ax, lv, "energy_net_per_output_token_j", 1.0, color=c, marker="s", ms=4, lw=1.5, ls="--")
        ax.set_ylabel("energy per output token (J)")
        ax.set_ylim(bottom=0)
        _x_axis(ax, [lv["load"] for r in runs for lv in _levels(r, mode)], mode)
        _style_legend(ax, serving, runs, False, [("-", "gross (all GPU energy)"), ("--", "net of idle power")])
        return _svg(fig)


def slo_frontier(serving: dict[str, Any]) -> str:
    """Output tokens/s against p99 TTFT (top) and p99 TPOT (bottom), one line per run and load mode (a level of
    neither mode, GuideLLM's ``throughput``, a lone point), the SLO as a red dashed line; filled markers meet the
    SLO, open red-edged ones miss it."""
    slo = serving["slo"]
    panels = (("ttft_p99_s", "p99 TTFT (ms)"), ("tpot_p99_s", "p99 TPOT (ms)"))
    with _figure(7.6, 7.4, rows=2, sharex=False) as (fig, axes):
        for ax, (key, label) in zip(axes, panels, strict=True):
            for run in serving["runs"]:
                _frontier_run(ax, run, key, colour(serving, run))
            if slo.get(key) is not None:
                ms = slo[key] * 1e3
                ax.axvline(ms, color=MISS, ls="--", lw=1.5)
                ax.axvspan(0, ms, color="#2ca02c", alpha=0.06, lw=0)
                ax.annotate(f"SLO {ms:g} ms", (ms, 1.0), xycoords=("data", "axes fraction"), color=MISS,
                            fontsize=9, ha="right", va="top", rotation=90, xytext=(-3, -3),
                            textcoords="offset points")
            ax.set_xlabel(label)
            ax.set_ylabel("output tokens/s")
            ax.set_xlim(left=0)
            ax.set_ylim(bottom=0)
        _frontier_legend(axes[0], serving)
        return _svg(fig)


def _frontier_run(ax: Any, run: dict[str, Any], key: str, colour: str) -> None:
    for mode, ls in (("concurrency", "-"), ("rate", "--"), ("other", "")):
        pts = sorted((lv for lv in run["levels"] if lv["mode"] == mode and lv.get(key) is not None
                      and lv.get("output_tokens_per_s")), key=lambda lv: lv["load"] or 0.0)
        if not pts:
            continue
        xs, ys = [lv[key] * 1e3 for lv in pts], [lv["output_tokens_per_s"] for lv in pts]
        if ls:
            ax.plot(xs, ys, color=colour, ls=ls, lw=1.5, zorder=2)
        for x, y, lv in zip(xs, ys, pts, strict=True):
            ok = lv["meets_slo"] is True
            ax.scatter([x], [y], s=55, zorder=3, color=colour if ok else "white", edgecolors=colour if ok else MISS,
                       linewidths=1.8)
            ax.annotate(lv["label"].replace(" poisson", "").replace(" constant", ""), (x, y), fontsize=7.5,
                        color="#333", xytext=(5, 3), textcoords="offset points")


def _frontier_legend(ax: Any, serving: dict[str, Any]) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colour(serving, r), lw=2.5, label=run_label(r)) for r in serving["runs"]]
    handles += [Line2D([], [], ls="-", color="#444", label="closed loop (concurrency)"),
                Line2D([], [], ls="--", color="#444", label="open loop (request rate)"),
                Line2D([], [], ls="", marker="o", color="#444", label="meets the SLO"),
                Line2D([], [], ls="", marker="o", mfc="white", mec=MISS, mew=1.8, label="misses it (or no p99)")]
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.02), ncol=2, fontsize=8.5)
