"""Views of the GPU catalog: ``gpumatch gpus list`` and ``gpumatch gpus show NAME``.

Tables fit the output width (:func:`gpumatch.report.render.output_width`, 80 columns in a pipe) and show
human units: memory in GiB (binary, as drivers report it), bandwidth in TB/s or GB/s, peaks in dense
TFLOP/s, power in W. ``show`` names the source of every number ("[hpctech]", listed with its URL at the
end) and says which usable-memory rule gave the capacity (:mod:`gpumatch.catalog.memory`). CSV keeps the
SI numbers; JSON is :meth:`gpumatch.catalog.GpuSpec.to_dict`. Nothing here computes a figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpumatch.catalog import PRECISIONS, GpuSpec
from gpumatch.report import human
from gpumatch.report.render import Column, output_width, to_csv, to_table, wrap_text
from gpumatch.units import GIB, MIB

LIST_TITLE = "GPU catalog: usable memory, dense peaks (no 2:4 sparsity), TDP, scale-up link"
_PEAK_LABEL = {"fp16_acc16": "fp16, fp16 acc.", "fp8_acc16": "fp8, fp16 acc.", "fp64_tensor": "fp64 tensor"}


def tflops(v: float | None) -> str:
    """Dense FLOP/s as TFLOP/s without the unit: '989.5', '67', '9,000', '0.25'; '-' when absent."""
    if v is None:
        return human.DASH
    x = v / 1e12
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 1:
        return f"{x:.1f}".removesuffix(".0")
    return f"{x:.3g}"


def _exact(v: Any) -> Any:
    """Whole floats as ints so CSV keeps every digit (85520809984, not 8.552e+10)."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _gib(n: float) -> str:
    return f"{n / GIB:.1f}"


def _rule_word(g: GpuSpec) -> str:
    u = g.memory_usable
    return u.tool if u.rule != "datasheet" else "rule"


# ---- list ------------------------------------------------------------------------------------------------


def list_row(g: GpuSpec) -> dict[str, Any]:
    """One SKU as a flat row of SI numbers (the CSV of ``gpus list``; the table formats it)."""
    u = g.memory_usable
    return {
        "name": g.name,
        "vendor": g.vendor,
        "segment": g.segment,
        "form_factor": g.form_factor,
        "memory_usable_bytes": u.usable_bytes,
        "memory_rule": u.rule,
        "memory_basis": u.summary,
        "memory_source_url": u.source_url,
        "memory_datasheet_bytes": g.memory_bytes,
        "memory_type": g.memory_type,
        "memory_bandwidth_bytes_per_s": g.memory_bandwidth_bytes_per_s,
        **{f"{p}_flops_per_s": g.peak(p) for p in ("bf16", "fp8", "fp32")},
        "tdp_w": g.tdp_w,
        "scale_up": g.scale_up,
        "scale_up_bytes_per_s": g.nvlink_bytes_per_s,
    }


LIST_COLUMNS: tuple[Column, ...] = (
    Column("name", "GPU"),
    Column("vendor", drop=1, wrap=False),
    Column("memory_usable_bytes", "GiB", wrap=False, align="right", fmt=_gib),
    Column("memory_rule", "from", drop=4, wrap=False),
    Column("memory_bandwidth_bytes_per_s", "TB/s", wrap=False, align="right", fmt=lambda v: f"{v / 1e12:.2f}"),
    Column("bf16_flops_per_s", "bf16 TF", wrap=False, align="right", fmt=tflops),
    Column("fp8_flops_per_s", "fp8 TF", drop=3, wrap=False, align="right", fmt=tflops),
    Column("tdp_w", "W", wrap=False, align="right", fmt=lambda v: f"{v:,.0f}"),
    Column("scale_up_bytes_per_s", "link GB/s", drop=2, wrap=False, align="right", fmt=lambda v: f"{v / 1e9:,.0f}"),
)


def render_list(gpus: Sequence[GpuSpec], width: int | None = None) -> str:
    """The ``gpus list`` table: one row per SKU; 'from' is the tool of the memory reading or 'rule'."""
    rows = [{**list_row(g), "memory_rule": _rule_word(g)} for g in gpus]
    note = ("GiB: usable memory (driver reading where public, else the datasheet rule); TF: dense TFLOP/s; "
            "link: scale-up GB/s. Full data: --format json|csv; sources: gpumatch gpus show NAME.")
    w = output_width() if width is None else width
    return to_table(rows, list(LIST_COLUMNS), LIST_TITLE, width=w) + "\n" + "\n".join(wrap_text(note, w))


def list_csv(gpus: Sequence[GpuSpec]) -> str:
    return to_csv([{k: _exact(v) for k, v in list_row(g).items()} for g in gpus])


# ---- show ------------------------------------------------------------------------------------------------


def _source_ids(g: GpuSpec) -> dict[str, str]:
    """URL -> the SKU file's source id (the first id of a URL listed twice)."""
    out: dict[str, str] = {}
    for s in g.sources:
        out.setdefault(s["url"], s["id"])
    return out


def _fig(g: GpuSpec, where: str) -> dict[str, Any] | None:
    prov: dict[str, Any] | None = g.provenance.get(where)
    return prov


def _row(figure: str, value: str, g: GpuSpec, where: str = "", url: str = "", detail: str = "") -> dict[str, Any]:
    prov = _fig(g, where) if where else None
    url = url or (prov["source_url"] if prov else "")
    src = _source_ids(g).get(url, "") if url else ""
    flag = " (uncertain)" if prov and prov.get("uncertain") else ""
    return {"figure": figure, "value": value + flag, "source": src or human.DASH, "says": prov["says"] if prov else "",
            "detail": detail}


_RULE_FIGURE = {"process": "memory.process_bytes", "driver-reserved": "memory.reported_bytes",
                "driver-fitted": "memory.reported_bytes", "datasheet": "memory.capacity_bytes"}
"""The catalog figure each usable-memory rule starts from (its source is the row's source)."""


def memory_rows(g: GpuSpec) -> list[dict[str, Any]]:
    """Usable memory with its rule, the datasheet figure, bandwidth and L2."""
    u = g.memory_usable
    gb = g.memory_bytes / 1e9
    basis = f"{u.summary}; datasheet {gb:g} GB {g.memory_type}" if u.rule != "datasheet" else u.summary
    ecc = ("ECC on by default" if u.ecc_on else "ECC off by default") if g.ecc else "no ECC"
    steps = "; ".join(u.steps)
    rows = [
        _row("memory, usable", f"{human.gib(u.usable_bytes)} ({basis})", g, _RULE_FIGURE[u.rule],
             detail=f"rule: {u.rule_text} ({ecc}): {steps}"),
        _row("memory, datasheet", f"{gb:g} GB {g.memory_type} (= {u.dram_bytes // MIB} MiB)", g,
             "memory.capacity_bytes"),
        _row("memory bandwidth", human.bytes_per_s(g.memory_bandwidth_bytes_per_s), g,
             "memory.bandwidth_bytes_per_s"),
    ]
    if "memory.l2_cache_bytes" in g.provenance:
        rows.append(_row("L2 cache", human.gib(g.provenance["memory.l2_cache_bytes"]["value"]), g,
                         "memory.l2_cache_bytes"))
    return rows


def peak_rows(g: GpuSpec) -> list[dict[str, Any]]:
    """Dense peaks in TFLOP/s (TOP/s for int8), vector fp64/fp32 and the tensor paths."""
    rows = []
    for key in ("fp64", "fp64_tensor", *PRECISIONS[1:], "fp16_acc16", "fp8_acc16"):
        where = f"peak_flops_per_s.{key}"
        if where in g.provenance:
            unit = "TOP/s" if key == "int8" else "TFLOP/s"
            rows.append(_row(f"{_PEAK_LABEL.get(key, key)} dense", f"{tflops(g.provenance[where]['value'])} {unit}",
                             g, where))
    return rows


def system_rows(g: GpuSpec) -> list[dict[str, Any]]:
    """Power, links, ECC/MIG/cooling."""
    link = "none" if g.scale_up == "none" else f"{g.scale_up} {human.bytes_per_s(g.nvlink_bytes_per_s)}"
    p2p = "P2P yes" if g.pcie_p2p else "no P2P"
    return [
        _row("TDP", human.watts(g.tdp_w), g, "tdp_w"),
        _row("scale-up link", f"{link} (total, both directions)", g, "interconnect.scale_up_bytes_per_s"),
        _row("PCIe", f"gen {g.pcie_gen} x{g.pcie_lanes}, {human.bytes_per_s(g.pcie_bytes_per_s)} per direction, "
             f"{p2p}", g),
        _row("ECC / MIG / cooling", f"{'yes' if g.ecc else 'no'} / {g.mig_instances or 'no'} / {g.cooling}", g),
    ]


def price_rows(g: GpuSpec) -> list[dict[str, Any]]:
    """One row per price kind: the range of quotes, their count and the newest date (quotes: JSON)."""
    rows = []
    for kind in sorted({p.kind for p in g.prices}):
        qs = [p for p in g.prices if p.kind == kind]
        vals = sorted(v for p in qs if (v := p.usd_per_gpu_hour if p.usd_per_gpu_hour is not None else p.usd))
        hourly = qs[0].usd_per_gpu_hour is not None
        fmt = (lambda v: human.usd(v) + "/GPU-h") if hourly else human.usd
        span = fmt(vals[0]) if len(vals) == 1 or vals[0] == vals[-1] else f"{fmt(vals[0])} to {fmt(vals[-1])}"
        latest = max(p.date for p in qs).isoformat()
        who = sorted({p.provider for p in qs if p.provider})
        rows.append(_row(f"price, {kind}", f"{span}; {len(qs)} quote{'s' * (len(qs) > 1)}, newest {latest}"
                         + (f" ({', '.join(who)})" if who else ""), g, url=qs[0].source_url if len(qs) == 1 else ""))
    return rows


SHOW_COLUMNS: tuple[Column, ...] = (Column("figure", wrap=True), Column("value"), Column("source", wrap=False))


def render_show(g: GpuSpec, width: int | None = None, quotes: bool = False) -> str:
    """``gpus show``: identity, every sourced figure with its source id, the memory rule, sources with URLs.
    ``quotes``: also print under each figure the words its source says."""
    w = output_width() if width is None else width
    cc = f", compute capability {g.compute_capability}" if g.compute_capability else ""
    head = [f"{g.name}: {g.vendor} {g.architecture}, {g.form_factor}, {g.segment}, {g.launch_year}{cc}"]
    if g.aliases:
        head.append("aliases: " + ", ".join(g.aliases))
    rows = memory_rows(g) + peak_rows(g) + system_rows(g) + price_rows(g)
    for r in rows:
        said = f'says: "{r["says"]}"' if quotes and r["says"] else ""
        r["detail"] = "\n".join(x for x in (r["detail"], said) if x)
    parts = ["\n".join(line for h in head for line in wrap_text(h, w))]
    parts.append(to_table(rows, list(SHOW_COLUMNS), width=w, detail_key="detail"))
    if g.notes:
        parts.append("\n".join(wrap_text("notes: " + g.notes, w)))
    parts.append(_sources_block(g, w))
    if not quotes:
        parts.append("\n".join(wrap_text("The words each source says: --quotes; every value in SI: --format json", w)))
    return "\n\n".join(parts)


def _sources_block(g: GpuSpec, width: int) -> str:
    lines = ["sources:"]
    for s in g.sources:
        lines.extend(wrap_text(f"[{s['id']}] {s['url']}", width))
        lines.extend("    " + x for x in wrap_text(s["title"], width - 4))
    return "\n".join(lines)


def show_csv(g: GpuSpec) -> str:
    """Identity, every sourced figure in SI with its URL and quote, then the usable memory and its rule."""
    ident = ("name", "vendor", "segment", "form_factor", "architecture", "compute_capability", "launch_year",
             "memory_type", "scale_up", "pcie_gen", "pcie_lanes", "pcie_p2p", "ecc", "mig_instances", "cooling")
    rows: list[dict[str, Any]] = [{"field": k, "value": getattr(g, k)} for k in ident]
    rows += [
        {"field": where, "value": _exact(p["value"]), "source_url": p["source_url"], "says": p["says"],
         "uncertain": p["uncertain"], "note": p.get("note", "")}
        for where, p in g.provenance.items()
    ]
    u = g.memory_usable
    rows.append({"field": "memory.usable_bytes", "value": u.usable_bytes, "source_url": u.source_url,
                 "says": u.says, "uncertain": False, "note": f"{u.rule}: " + "; ".join(u.steps)})
    return to_csv(rows, ["field", "value", "source_url", "says", "uncertain", "note"])
