"""Load GPU SKU files (built-in, then the user overlay) into :class:`GpuSpec` values.

Built-in SKU files live in ``gpumatch/catalog/data/gpus/*.toml`` and their dated price quotes in
``gpumatch/catalog/data/prices/*.toml`` (prices change monthly, specs do not); the overlay directory
(``$GPUMATCH_HOME/catalog/gpus``) adds SKUs or replaces one with the same canonical name, and
``$GPUMATCH_HOME/catalog/prices/*.toml`` appends price quotes. Every file is validated the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gpumatch.catalog.schema import GpuFile, PriceFile, PriceQuote
from gpumatch.catalog.spec import GpuSpec, price_from_quote, spec_from_file
from gpumatch.errors import DataFileError, GpumatchError
from gpumatch.files import parse_toml, read_text
from gpumatch.names import build_index, normalize, resolve
from gpumatch.settings import Settings, load_settings

MAX_FILE_BYTES = 1_000_000
M = TypeVar("M", bound=BaseModel)


def read_toml(path: Path | Any, label: str) -> dict[str, Any]:
    """Parse a TOML file (at most 1 MB, UTF-8 with or without BOM); errors name the file and the fix.

    Read through :mod:`gpumatch.files`: only regular files, never more than ``MAX_FILE_BYTES + 1`` bytes,
    so a hostile overlay entry (a FIFO, ``/dev/zero`` behind a symlink, a huge file) fails fast.
    """
    return parse_toml(read_text(path, label, MAX_FILE_BYTES), label)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def validation_message(label: str, err: ValidationError) -> DataFileError:
    """One line naming the file, the first bad field and what pydantic expected.

    An unknown field is reported first when there is one: a misspelt key ("tdp" for "tdp_w") also
    makes the real key "missing", and the unknown one is the better clue. Cross-field checks (model
    validators) carry no location; their message already starts with the dotted field path
    (``tdp_w: source 'x' is not in [sources]``), so it is used as is.
    """
    errors = err.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    where = ".".join(str(p) for p in first["loc"])
    n_more = err.error_count() - 1
    extra = f" (and {n_more} more problem{'s' if n_more > 1 else ''})" if n_more > 0 else ""
    msg = _one_line(str(first["msg"])).removeprefix("Value error, ")
    hint = "remove the field or check its spelling" if first["type"] == "extra_forbidden" else "fix that field"
    if not where:
        return DataFileError(f"{label}: {msg}{extra}", hint)
    return DataFileError(f"{label}: field '{where}': {msg}{extra}", hint)


def validate(model: type[M], data: dict[str, Any], label: str) -> M:
    """Validate ``data`` against ``model``; errors become one-line DataFileErrors."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise validation_message(label, e) from e


@dataclass(frozen=True)
class Catalog:
    """All SKUs known here, with name lookup."""

    gpus: tuple[GpuSpec, ...]

    def get(self, name: str) -> GpuSpec:
        """Resolve a canonical name or alias; raises UnknownNameError/AmbiguousNameError."""
        index = build_index((g.name, g.aliases, g) for g in self.gpus)
        return resolve(name, index, "GPU", "gpumatch gpus list")

    def names(self) -> list[str]:
        return [g.name for g in self.gpus]


def _builtin_files(kind: str = "gpus") -> Iterable[tuple[str, Any]]:
    """Built-in data files of one folder (``gpus`` or ``prices``), sorted by name."""
    folder = resources.files("gpumatch.catalog") / "data" / kind
    label = "catalog file" if kind == "gpus" else "price file"
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".toml"):
            yield f"built-in {label} {entry.name}", entry


def _overlay_files(folder: Path) -> Iterable[tuple[str, Path]]:
    if folder.is_dir():
        for p in sorted(folder.glob("*.toml")):
            yield str(p), p


def _load_gpu_files(files: Iterable[tuple[str, Any]], origin: str) -> list[GpuSpec]:
    """Validate every file; two files defining the same canonical name are an error naming both."""
    return [spec for _, spec in _load_labelled(files, origin)]


def _load_labelled(files: Iterable[tuple[str, Any]], origin: str) -> list[tuple[str, GpuSpec]]:
    specs: list[tuple[str, GpuSpec]] = []
    seen: dict[str, str] = {}
    for label, p in files:
        gf = validate(GpuFile, read_toml(p, label), label)
        _check_finite([(f"{w}.value", f.value) for w, f in gf.figures()] + _price_numbers(gf.prices), label)
        _check_physical(gf, label)
        spec = spec_from_file(gf, origin)
        key = normalize(spec.name)
        if key in seen:
            raise DataFileError(
                f"{label}: GPU {spec.name!r} is already defined in {seen[key]}",
                "give it another name, or delete one of the two files",
            )
        seen[key] = label
        specs.append((label, spec))
    return specs


def _keys(g: GpuSpec) -> set[str]:
    return {k for k in (normalize(g.name), *(normalize(a) for a in g.aliases)) if k}


def _check_collisions(merged: list[GpuSpec], overlay: list[tuple[str, GpuSpec]]) -> None:
    """An overlay SKU's name or alias may not be another SKU's name or alias (lookups would turn
    ambiguous). Overriding a SKU by its canonical name replaces it, aliases included, so that one
    is not a collision."""
    for label, mine in overlay:
        for other in merged:
            if other is mine:
                continue
            shared = _keys(mine) & _keys(other)
            if shared:
                names = [n for n in (mine.name, *mine.aliases) if normalize(n) in shared]
                raise DataFileError(
                    f"{label}: name or alias {names[0]!r} is already used by GPU {other.name!r}",
                    f"remove or rename that alias, or name the file's SKU {other.name!r} to replace it",
                )


def _price_numbers(quotes: Iterable[PriceQuote], prefix: str = "prices") -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    for i, q in enumerate(quotes):
        for key in ("usd", "usd_per_gpu_hour"):
            v = getattr(q, key)
            if v is not None:
                out.append((f"{prefix}.{i}.{key}", v))
    return out


def _check_finite(numbers: list[tuple[str, float]], label: str) -> None:
    """TOML allows ``inf``/``nan``; the schema's bounds let ``inf`` through, so reject it here."""
    for where, v in numbers:
        if not math.isfinite(v):
            raise DataFileError(f"{label}: field '{where}': {v} is not a finite number", "fix that field")


# Fields that must be strictly positive (a 0-byte card divides estimates by zero) and the most any
# real or near-future single GPU could have. Built-in maxima (2026): 256 GB, 7.7 TB/s, 1000 W,
# 1.8 TB/s NVLink, 9e15 FLOP/s (dense fp4); the ceilings leave one to two orders of magnitude.
_POSITIVE = ("memory.capacity_bytes", "memory.bandwidth_bytes_per_s", "tdp_w")
_CEILINGS: tuple[tuple[str, float, str], ...] = (
    ("memory.capacity_bytes", 1e13, "10 TB"),
    ("memory.reported_bytes", 1e13, "10 TB"),
    ("memory.reserved_bytes", 1e13, "10 TB"),
    ("memory.process_bytes", 1e13, "10 TB"),
    ("memory.l2_cache_bytes", 1e11, "100 GB"),
    ("memory.bandwidth_bytes_per_s", 1e14, "100 TB/s"),
    ("tdp_w", 1e4, "10 kW"),
    ("interconnect.scale_up_bytes_per_s", 1e14, "100 TB/s"),
    ("peak_flops_per_s.", 1e17, "1e17 FLOP/s"),
)


def _check_physical(gf: GpuFile, label: str) -> None:
    """Reject physically impossible figures (SI units): zero memory/bandwidth/TDP, or absurd values.

    The schema only asks for ``value >= 0``; a 0 here made ``estimate`` crash on a division and
    ``plan`` print numpy warnings, and ``bf16 = 1e30`` was taken at face value.
    """
    for where, fig in gf.figures():
        if where in _POSITIVE and fig.value <= 0:
            raise DataFileError(
                f"{label}: field '{where}.value': {fig.value:g} must be greater than 0",
                "give the datasheet figure in SI units (bytes, bytes/s, W)",
            )
        for prefix, ceiling, shown in _CEILINGS:
            if where.startswith(prefix) and fig.value > ceiling:
                raise DataFileError(
                    f"{label}: field '{where}.value': {fig.value:g} is implausibly large (over {shown})",
                    "check the unit and the exponent (values are SI: bytes, bytes/s, FLOP/s, W)",
                )


def _merge(base: list[GpuSpec], overlay: list[GpuSpec]) -> list[GpuSpec]:
    by_key = {normalize(g.name): g for g in base}
    for g in overlay:
        by_key[normalize(g.name)] = g
    return sorted(by_key.values(), key=lambda g: (g.vendor, g.name))


def _apply_prices(gpus: list[GpuSpec], files: Iterable[tuple[str, Any]]) -> list[GpuSpec]:
    """Append the quotes of price files (``[[quotes]]`` naming a GPU) to the SKUs they name."""
    catalog = Catalog(tuple(gpus))
    extra: dict[str, list[Any]] = {}
    for label, path in files:
        pf = validate(PriceFile, read_toml(path, label), label)
        _check_finite(_price_numbers(pf.quotes, "quotes"), label)
        for i, q in enumerate(pf.quotes):
            if q.source not in pf.sources:
                raise DataFileError(f"{label}: quotes[{i}].source {q.source!r} is not in [sources]", "add it")
            try:
                gpu = catalog.get(q.gpu)
            except GpumatchError as e:
                raise DataFileError(f"{label}: quotes[{i}].gpu: {e.message}", e.hint) from e
            extra.setdefault(gpu.name, []).append(price_from_quote(q, pf.sources[q.source].url))
    return [replace(g, prices=g.prices + tuple(extra.get(g.name, []))) for g in gpus]


_CACHE: dict[tuple[str, float], Catalog] = {}


def _overlay_stamp(settings: Settings) -> float:
    stamps = [0.0]
    for folder in (settings.gpu_overlay_dir, settings.price_overlay_dir):
        if folder.is_dir():
            stamps.append(folder.stat().st_mtime)
            for p in folder.glob("*.toml"):
                try:
                    stamps.append(p.stat().st_mtime)
                except OSError:  # dangling symlink: read_toml reports it
                    stamps.append(float("inf"))
    return max(stamps)


def load_catalog(settings: Settings | None = None) -> Catalog:
    """Built-in SKUs plus the user's overlay (cached until an overlay file changes)."""
    s = settings or load_settings()
    key = (str(s.home), _overlay_stamp(s))
    if key not in _CACHE:
        builtin = _load_gpu_files(_builtin_files(), "builtin")
        overlay = _load_labelled(_overlay_files(s.gpu_overlay_dir), "overlay")
        merged = _merge(builtin, [spec for _, spec in overlay])
        _check_collisions(merged, overlay)
        merged = _apply_prices(merged, [*_builtin_files("prices"), *_overlay_files(s.price_overlay_dir)])
        _CACHE[key] = Catalog(tuple(merged))
    return _CACHE[key]


def get_gpu(name: str, settings: Settings | None = None) -> GpuSpec:
    """Shortcut: ``load_catalog().get(name)``."""
    return load_catalog(settings).get(name)


def catalog_name(device_name: str | None, settings: Settings | None = None) -> str | None:
    """The catalog name of the card a device reports as ``device_name`` (NVML's or nvidia-smi's name, torch's
    ``get_device_name``, a stored manifest's ``gpu.name``, or any alias); None when the name is empty or no
    catalog card answers to it (a measurement on an unknown card is kept, only without a catalog figure)."""
    if not device_name:
        return None
    try:
        return get_gpu(str(device_name), settings).name
    except GpumatchError:
        return None
