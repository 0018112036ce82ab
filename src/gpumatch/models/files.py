"""One-line messages for data files that fail validation (pydantic), with a "did you mean" for unknown fields.

Reading and parsing the files (bounded, regular files only, parser errors as one line) is
:mod:`gpumatch.files`'s job.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from gpumatch.errors import DataFileError


def first_error(
    label: str, err: ValidationError, valid_names: dict[tuple[str, ...], list[str]] | None = None
) -> DataFileError:
    """One line for the first problem pydantic found: file, field, what is wrong, how to fix it.

    ``valid_names`` maps a location prefix (tuple of keys, ``()`` for top level) to the field names
    valid there, so an unknown field gets a "did you mean" from :mod:`difflib`.
    """
    errors = err.errors()
    # An unknown field is usually a misspelling, and explains the "missing" error beside it: report it first.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = tuple(str(p) for p in first["loc"])
    where = ".".join(loc) or "(top level)"
    n_more = err.error_count() - 1
    more = f" (and {n_more} more problem{'s' if n_more > 1 else ''})" if n_more > 0 else ""
    if first["type"] == "extra_forbidden":
        return DataFileError(f"{label}: unknown field '{where}'{more}", _unknown_hint(loc, valid_names or {}))
    if first["type"] == "missing":
        return DataFileError(f"{label}: field '{where}' is missing{more}", f"add '{loc[-1] if loc else where}'")
    msg = str(first["msg"])
    if first["type"] == "value_error":
        return DataFileError(f"{label}: field '{where}': {msg.removeprefix('Value error, ')}{more}", "fix that field")
    got = first.get("input")
    shown = f" (got {got!r})" if got is not None and not isinstance(got, dict | list) and len(repr(got)) < 60 else ""
    return DataFileError(f"{label}: field '{where}': {msg}{shown}{more}", "fix that field")


def _unknown_hint(loc: tuple[str, ...], valid_names: dict[tuple[str, ...], list[str]]) -> str:
    """ "did you mean" at the same level, else anywhere in the file (as a dotted path), else the valid names."""
    import difflib

    if not loc:
        return "remove it or check its spelling"
    names = valid_names.get(loc[:-1], [])
    close = difflib.get_close_matches(loc[-1], names, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    elsewhere = {name: ".".join((*prefix, name)) for prefix, ns in valid_names.items() for name in ns if prefix}
    close = difflib.get_close_matches(loc[-1], list(elsewhere), n=1, cutoff=0.8)
    if close:
        return f"did you mean '{elsewhere[close[0]]}'?"
    hint = "remove it or check its spelling"
    return f"{hint}; valid here: {', '.join(sorted(names))}" if names else hint


def field_names(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], list[str]]:
    """Valid field names per location for :func:`first_error`, following nested models."""
    out: dict[tuple[str, ...], list[str]] = {prefix: list(model.model_fields)}
    for name, info in model.model_fields.items():
        for sub in _nested_models(info.annotation):
            out.update(field_names(sub, (*prefix, name)))
    return out


def _nested_models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in getattr(annotation, "__args__", ()) for m in _nested_models(a)]
