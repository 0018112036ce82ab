"""``gpumatch gpus list|show``: the sourced GPU catalog (views in :mod:`gpumatch.report.gpus`)."""

from __future__ import annotations

import typer

from gpumatch.cli.common import Format, FormatOption, emit

app = typer.Typer(help="The GPU catalog (usable memory, dense peaks, links, power, prices, sources).",
                  no_args_is_help=True)


def _check_choice(flag: str, value: str, allowed: tuple[str, ...]) -> None:
    """An unknown filter value is an input error, not an empty list."""
    if value and value.lower() not in allowed:
        from gpumatch.errors import InputError

        raise InputError(f"{flag} {value!r} is not one of {', '.join(allowed)}", f"use e.g. {flag} {allowed[0]}")


@app.command("list", help="List every SKU. Example: gpumatch gpus list --vendor amd --format json")
def list_gpus(
    vendor: str = typer.Option("", help="Only this vendor (nvidia, amd, intel)."),
    segment: str = typer.Option("", help="Only this segment (datacenter, workstation, consumer)."),
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.catalog import load_catalog
    from gpumatch.report import gpus as view
    from gpumatch.report.render import to_json

    _check_choice("--vendor", vendor, ("nvidia", "amd", "intel"))
    _check_choice("--segment", segment, ("datacenter", "workstation", "consumer"))
    gpus = [
        g
        for g in load_catalog().gpus
        if (not vendor or g.vendor == vendor.lower()) and (not segment or g.segment == segment.lower())
    ]
    if fmt is Format.json:
        emit(to_json([g.to_dict() for g in gpus]))
    elif fmt is Format.csv:
        emit(view.list_csv(gpus))
    else:
        emit(view.render_list(gpus))


@app.command("show", help="Show one SKU: every figure with its source, and the usable-memory rule. "
             "Example: gpumatch gpus show 'H100 SXM' --quotes")
def show_gpu(
    name: str = typer.Argument(..., help="Canonical name or alias, e.g. h100-sxm5-80gb."),
    quotes: bool = typer.Option(False, "--quotes", help="Also print the words each source says."),
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.catalog import get_gpu
    from gpumatch.report import gpus as view
    from gpumatch.report.render import to_json

    g = get_gpu(name)
    if fmt is Format.json:
        emit(to_json(g.to_dict()))
    elif fmt is Format.csv:
        emit(view.show_csv(g))
    else:
        emit(view.render_show(g, quotes=quotes))
