"""Views of the model presets for ``gpumatch models list``: which columns go first on a narrow terminal."""

from __future__ import annotations

from gpumatch.report.render import Column

LIST_COLUMNS = [
    Column("name", wrap=False),
    Column("family", drop=3),
    Column("params_B", align="right"),
    Column("active_B", align="right"),
    Column("layers", drop=4, align="right"),
    Column("hidden", drop=5, align="right"),
    Column("heads", drop=6, align="right"),
    Column("kv_heads", drop=7, align="right"),
    Column("ffn", drop=2, align="right"),
    Column("vocab", drop=1, align="right"),
    Column("moe", wrap=False),
    Column("kv_KiB/token", align="right"),
]
"""``gpumatch models list``: the size and KV cost a buyer reads stay; the shapes go first (vocab, ffn, ...)."""
