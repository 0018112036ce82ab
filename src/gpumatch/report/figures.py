"""The report's plots, drawn server-side by matplotlib as inline SVG (no JavaScript, nothing fetched).

Each function takes the data :mod:`gpumatch.usecases.report` assembled and returns one ``<svg>`` element as text, with
its text kept as text (``svg.fonttype = none``: the page's font renders it, and it stays selectable). matplotlib
is imported lazily (the ``report`` extra); the Agg backend needs no display.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

GIB = 1024.0**3
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
THROTTLE_COLOURS = {"power cap": "#ffbf00", "HW slowdown": "#d62728", "thermal": "#9467bd"}
_STYLE: Any = {"svg.fonttype": "none", "font.family": "sans-serif", "font.size": 10.5, "axes.titlesize": 12,
          "axes.titleweight": "bold", "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
          "grid.alpha": 0.3, "legend.frameon": False, "legend.fontsize": 9, "figure.dpi": 96}


@contextmanager
def _figure(width: float = 7.2, height: float = 4.0, rows: int = 1,
            sharex: bool | None = None) -> Iterator[tuple[Any, Any]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context(_STYLE):
        share = rows > 1 if sharex is None else sharex
        fig, axes = plt.subplots(rows, 1, figsize=(width, height), sharex=share, squeeze=False)
        try:
            yield fig, (axes[0, 0] if rows == 1 else list(axes[:, 0]))
        finally:
            plt.close(fig)


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.tight_layout()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "gpumatch (matplotlib)"})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def roofline(r: dict[str, Any]) -> str:
    """The card's roofline (datasheet peak and bandwidth; dashed: at the Calibration's best efficiencies is not
    drawn, the points carry them) with the workload's operators at their intensity and attainable rate."""
    peak, bw = r["peak_flops_per_s"], r["bandwidth_bytes_per_s"]
    pts = r["points"]
    lo = min([0.5, *(p["intensity"] / 4 for p in pts)])
    hi = max([r["ridge_flops_per_byte"] * 8, *(p["intensity"] * 4 for p in pts)])
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    with _figure() as (fig, ax):
        ax.plot(xs, [min(peak, x * bw) / 1e12 for x in xs], color="#333", lw=2, label="datasheet roof")
        ax.axvline(r["ridge_flops_per_byte"], color="#999", ls=":", lw=1)
        ax.annotate(f"ridge {r['ridge_flops_per_byte']:.0f} FLOP/B", (r["ridge_flops_per_byte"], peak / 1e12 / 3),
                    rotation=90, fontsize=8, color="#666", ha="right", va="top")
        markers = {"prefill": "o", "decode": "s", "train step": "D"}
        for i, p in enumerate(pts):
            ax.scatter(p["intensity"], p["attainable_flops_per_s"] / 1e12, s=60, zorder=3,
                       marker=markers.get(p["phase"], "o"), color=PALETTE[i % len(PALETTE)],
                       label=f"{p['phase']}: {p['name']}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP per byte of HBM traffic)")
        ax.set_ylabel("TFLOP/s per GPU")
        ax.legend(loc="lower right")
        return _svg(fig)


def memory_growth(pick: dict[str, Any]) -> str:
    """Per-GPU memory over the sequence (prompt) length, one line per batch, with the card's capacity."""
    rows, cap = pick["memory_curve"], pick["capacity_bytes"]
    batches = sorted({r["batch"] for r in rows})
    with _figure() as (fig, ax):
        for i, b in enumerate(batches):
            mine = sorted((r for r in rows if r["batch"] == b), key=lambda r: r["seq"])
            ax.plot([r["seq"] for r in mine], [r["total_bytes"] / GIB for r in mine], marker="o", ms=3,
                    color=PALETTE[i % len(PALETTE)], label=f"batch {b}")
        ax.axhline(cap / GIB, color="#d62728", lw=2, ls="--", label=f"capacity {cap / GIB:.0f} GiB")
        here = pick.get("here")
        if here:
            ax.scatter([here["seq"]], [here["total_bytes"] / GIB], marker="*", s=220, color="#111", zorder=4,
                       label=f"this workload ({here['batch']} seq × {here['seq']})")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _plain_ticks(ax)
        ax.set_xlabel(f"{pick['x_label']} length (tokens)")
        ax.set_ylabel("memory per GPU (GiB)")
        top = max(r["total_bytes"] for r in rows) / GIB
        if top > 3 * cap / GIB:
            ax.set_ylim(top=3 * cap / GIB)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return _svg(fig)


def _plain_ticks(ax: Any) -> None:
    """Log axes labelled with plain numbers (512, 2k, 32k; 20, 50, 100) instead of powers."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    def short(v: float, _pos: int) -> str:
        return f"{v / 1024:g}k" if v >= 1024 else f"{v:g}"

    ax.xaxis.set_major_formatter(FuncFormatter(short))
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def telemetry(series: dict[str, Any]) -> str:
    """Power, SM clock and temperature over time, throttle periods shaded by reason."""
    t = series["t_s"]
    panels = (("power_w", "power (W)"), ("sm_clock_mhz", "SM clock (MHz)"), ("gpu_temp_c", "GPU temp (°C)"))
    with _figure(7.2, 6.0, rows=3) as (fig, axes):
        for ax, (key, label) in zip(axes, panels, strict=True):
            ys = [math.nan if v is None else v for v in series[key]]
            ax.plot(t, ys, lw=1.2, color="#1f77b4")
            ax.set_ylabel(label)
            for reason, spans in series["throttle"].items():
                for a, b in spans:
                    ax.axvspan(a, max(b, a + 0.05), color=THROTTLE_COLOURS[reason], alpha=0.25, lw=0)
        from matplotlib.patches import Patch

        shown = [Patch(color=THROTTLE_COLOURS[k], alpha=0.35, label=k) for k, v in series["throttle"].items() if v]
        if shown:
            axes[0].legend(handles=shown, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=len(shown),
                           title="shaded: throttled by", title_fontsize=9, alignment="left")
        axes[-1].set_xlabel("time since the first sample (s)")
        return _svg(fig)


def predicted_vs_measured(rows: list[dict[str, Any]]) -> str:
    """Measured against predicted (or datasheet) per result, normalised: the ratio measured / predicted by case."""
    pts = sorted(rows, key=lambda r: r["ratio"])
    with _figure(7.2, max(3.0, 0.22 * len(pts) + 1.2)) as (fig, ax):
        ys = list(range(len(pts)))
        colours = ["#2ca02c" if 0.9 <= r["ratio"] <= 1.1 else "#d62728" for r in pts]
        ax.scatter([r["ratio"] for r in pts], ys, color=colours, zorder=3, s=22)
        ax.axvspan(0.9, 1.1, color="#2ca02c", alpha=0.1, lw=0)
        ax.axvline(1.0, color="#333", lw=1)
        ax.set_yticks(ys, [_short(r) for r in pts], fontsize=8)
        ax.set_xlabel("measured / predicted (band: ±10%)")
        ax.grid(axis="y", alpha=0.15)
        return _svg(fig)


def _short(r: dict[str, Any]) -> str:
    cfg = {k: v for k, v in (r.get("config") or {}).items() if k not in ("case", "kind", "model")
           and not isinstance(v, dict | list)}
    key = f"{r['metric']} " + " ".join(f"{k}={v}" for k, v in cfg.items())
    return key if len(key) <= 58 else key[:55] + "..."


def load_curve(ladder: list[dict[str, Any]]) -> str:
    """Decode throughput and energy per token over batch, per context and variant."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in ladder:
        groups.setdefault(f"{r['variant']} ctx {r['context']}", []).append(r)
    with _figure(7.2, 5.0) as (fig, ax):
        ax2 = ax.twinx()
        for i, (name, rs) in enumerate(sorted(groups.items())):
            c = PALETTE[i % len(PALETTE)]
            rs = sorted(rs, key=lambda r: r["batch"])
            ax.plot([r["batch"] for r in rs], [r.get("decode_tokens_per_s") for r in rs], marker="o", color=c,
                    label=f"{name}: tokens/s")
            if any(r.get("decode_energy_j_per_token") for r in rs):
                ax2.plot([r["batch"] for r in rs], [r.get("decode_energy_j_per_token") for r in rs], ls="--",
                         marker="x", color=c, label=f"{name}: J/token")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax2.set_yscale("log")
        ax.set_xlabel("decode batch (sequences)")
        ax.set_ylabel("tokens/s (solid)")
        ax2.set_ylabel("J per token (dashed)")
        ax2.grid(False)
        ax2.spines["right"].set_visible(True)
        from matplotlib.ticker import FuncFormatter

        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
        return _svg(fig)


def scaling_ladder(rows: list[dict[str, Any]]) -> str:
    """A scaling metric over GPU count (results whose config has ``gpus`` or ``count``)."""
    pts = sorted((r["config"].get("gpus") or r["config"].get("count") or 1, r["measured"]) for r in rows)
    with _figure() as (fig, ax):
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs")
        ax.set_ylabel(rows[0]["metric"])
        return _svg(fig)


def scale_throughput(ladder: list[dict[str, Any]]) -> str:
    """A ``bench scale`` ladder: measured tokens/s over GPUs against ideal linear scaling n·X_1 and the
    estimator's prediction (top); scaling efficiency X_n / (n X_1) (bottom)."""
    rows = sorted(ladder, key=lambda r: r["n_gpus"])
    ns = [r["n_gpus"] for r in rows]
    x1 = next((r["tokens_per_s"] for r in rows if r["n_gpus"] == 1), None)
    with _figure(7.2, 5.6, rows=2) as (fig, (ax, ax2)):
        ax.plot(ns, [r["tokens_per_s"] for r in rows], marker="o", color=PALETTE[0], label="measured X_n")
        if x1:
            ax.plot(ns, [n * x1 for n in ns], ls=":", color="#888888", label="ideal n X_1")
        pred = [(r["n_gpus"], r["predicted_tokens_per_s"]) for r in rows if r.get("predicted_tokens_per_s")]
        if pred:
            ax.plot([p[0] for p in pred], [p[1] for p in pred], ls="--", marker="x", color=PALETTE[1],
                    label="gpumatch estimate")
        ax.set_ylabel("tokens/s")
        ax.legend(fontsize=8)
        eff = [(r["n_gpus"], r["scaling_efficiency"]) for r in rows if r.get("scaling_efficiency") is not None]
        ax2.plot([e[0] for e in eff], [e[1] * 100 for e in eff], marker="o", color=PALETTE[2])
        ax2.axhline(100, ls=":", color="#888888")
        ax2.set_ylabel("efficiency X_n / (n X_1), %")
        ax2.set_xlabel("GPUs")
        ax2.set_xscale("log", base=2)
        from matplotlib.ticker import FuncFormatter

        ax2.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
        return _svg(fig)


def scale_busbw(rows: list[dict[str, Any]]) -> str:
    """Collectives of a ``bench scale`` run: bus bandwidth over message size, one line per op and GPU count
    (1 rank left out: nothing crosses a link), the communication model's prediction dashed."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        if r["n_gpus"] > 1:
            groups.setdefault((r["op"], r["n_gpus"]), []).append(r)
    with _figure(7.2, 5.0) as (fig, ax):
        for i, ((op, n), rs) in enumerate(sorted(groups.items())):
            c = PALETTE[i % len(PALETTE)]
            rs = sorted(rs, key=lambda r: r["size_bytes"])
            ax.plot([r["size_bytes"] for r in rs], [r["busbw_bytes_per_s"] / 1e9 for r in rs], marker="o", ms=3,
                    color=c, label=f"{op} n={n}")
            pred = [r for r in rs if r.get("predicted")]
            if pred:
                ax.plot([r["size_bytes"] for r in pred],
                        [r["size_bytes"] / r["predicted"] * (r.get("busbw_factor") or 1.0) / 1e9 for r in pred],
                        ls="--", color=c)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("busbw (GB/s); dashed: estimate")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3)
        return _svg(fig)
