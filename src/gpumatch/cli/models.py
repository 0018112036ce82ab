"""``gpumatch models list|show``: model architecture presets and local Hugging Face config.json files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpumatch.cli.common import Format, FormatOption, emit_object, emit_rows
from gpumatch.errors import InputError
from gpumatch.units import KIB

app = typer.Typer(
    help="Model architectures: presets from published configs, or a local Hugging Face config.json.",
    no_args_is_help=True,
)

HF_CONFIG_OPTION = typer.Option(None, "--hf-config", help="A local Hugging Face config.json instead of a NAME.")


def _summary(m: Any) -> dict[str, Any]:
    moe = f"{m.experts}x top-{m.experts_per_token}" if m.experts else ""
    return {
        "name": m.name,
        "family": m.family,
        "params_B": round(m.params_total / 1e9, 2),
        "active_B": round(m.params_active / 1e9, 2),
        "layers": m.layers,
        "hidden": m.hidden_size,
        "heads": m.heads,
        "kv_heads": m.kv_heads,
        "ffn": m.ffn_size,
        "vocab": m.vocab_size,
        "moe": moe,
        "kv_KiB/token": round(m.kv_bytes_per_token(2) / KIB, 1),
    }


@app.command("list", help="List every preset. Example: gpumatch models list --format json")
def list_models(fmt: Format = FormatOption) -> None:
    from gpumatch.models import load_models

    models = load_models().models
    if fmt is Format.json:
        emit_rows([m.to_dict() for m in models], fmt)
    else:
        from gpumatch.report.models import LIST_COLUMNS

        emit_rows([_summary(m) for m in models], fmt, LIST_COLUMNS, title="Parameters in billions; KV cache in BF16")


@app.command(
    "show",
    help="Show one architecture. Examples: gpumatch models show llama-3.1-8b; "
    "gpumatch models show --hf-config ./Llama-3.1-8B/config.json --format json",
)
def show_model(
    name: str = typer.Argument("", help="Preset name or alias, e.g. llama-3.1-8b or meta-llama/Llama-3.1-8B."),
    hf_config: Path | None = HF_CONFIG_OPTION,
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.models import get_model, import_hf_config

    if bool(name) == (hf_config is not None):
        raise InputError("give either a model NAME or --hf-config PATH", "see 'gpumatch models list' for names")
    m = import_hf_config(hf_config) if hf_config is not None else get_model(name)
    d = m.to_dict()
    view = {k: v for k, v in d.items() if v not in (None, "", [], 0) or k in ("experts", "tied_embeddings")}
    emit_object(d, fmt, view)
