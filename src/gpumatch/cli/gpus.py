"""``gpumatch gpus list|show``: the sourced GPU catalog."""

from __future__ import annotations

from typing import Any

import typer

from gpumatch.cli.common import Format, FormatOption, emit_object, emit_rows

app = typer.Typer(help="The GPU catalog (dense peaks, memory, links, power, prices, sources).", no_args_is_help=True)


def _summary(g: Any) -> dict[str, Any]:
    def tf(p: str) -> float | None:
        v = g.peak(p)
        return None if v is None else round(v / 1e12, 1)

    return {
        "name": g.name,
        "vendor": g.vendor,
        "segment": g.segment,
        "form": g.form_factor,
        "mem_GB": round(g.memory_bytes / 1e9, 1),
        "bw_TB/s": round(g.memory_bandwidth_bytes_per_s / 1e12, 2),
        "bf16_TF": tf("bf16"),
        "fp8_TF": tf("fp8"),
        "fp32_TF": tf("fp32"),
        "tdp_W": round(g.tdp_w),
        "link_GB/s": round(g.nvlink_bytes_per_s / 1e9),
    }


def _check_choice(flag: str, value: str, allowed: tuple[str, ...]) -> None:
    """An unknown filter value is an input error, not an empty list."""
    if value and value.lower() not in allowed:
        from gpumatch.errors import InputError

        raise InputError(f"{flag} {value!r} is not one of {', '.join(allowed)}", f"use e.g. {flag} {allowed[0]}")


@app.command("list", help="List every SKU. Example: gpumatch gpus list --format json")
def list_gpus(
    vendor: str = typer.Option("", help="Only this vendor (nvidia, amd, intel)."),
    segment: str = typer.Option("", help="Only this segment (datacenter, workstation, consumer)."),
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.catalog import load_catalog

    _check_choice("--vendor", vendor, ("nvidia", "amd", "intel"))
    _check_choice("--segment", segment, ("datacenter", "workstation", "consumer"))
    gpus = [
        g
        for g in load_catalog().gpus
        if (not vendor or g.vendor == vendor.lower()) and (not segment or g.segment == segment.lower())
    ]
    if fmt is Format.json:
        emit_rows([g.to_dict() for g in gpus], fmt)
    else:
        emit_rows([_summary(g) for g in gpus], fmt, title="Dense peaks (no 2:4 sparsity), TFLOP/s")


@app.command("show", help="Show one SKU with sources. Example: gpumatch gpus show 'H100 SXM'")
def show_gpu(
    name: str = typer.Argument(..., help="Canonical name or alias, e.g. h100-sxm5-80gb."), fmt: Format = FormatOption
) -> None:
    from gpumatch.catalog import get_gpu

    g = get_gpu(name)
    d = g.to_dict()
    view = {k: v for k, v in d.items() if k not in ("provenance", "sources", "prices")}
    view["peak_flops_per_s"] = {k: v for k, v in g.peak_flops_per_s.items() if v is not None}
    view["prices"] = [
        f"{p.kind} {p.usd or p.usd_per_gpu_hour} ({p.date}, {p.provider or p.source_url})" for p in g.prices
    ]
    view["sources"] = [s["url"] for s in g.sources]
    emit_object(d, fmt, view)
