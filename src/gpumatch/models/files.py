"""Reading user-supplied data files safely: size limit, UTF-8, JSON/TOML parse errors as one line.

Every failure is a :class:`DataFileError` that names the file and says what to do. (The catalog has its
own reader; ``models`` sits beside ``catalog`` in the layer order and may not import it.)
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from gpumatch.errors import DataFileError

MAX_FILE_BYTES = 2_000_000


class Readable(Protocol):
    """A path or an importlib resource: anything with ``read_bytes``."""

    def read_bytes(self) -> bytes: ...


def read_text(path: Path | Readable, label: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """Read a small UTF-8 text file; refuse directories, missing files, huge or binary files."""
    if isinstance(path, Path) and path.is_dir():
        raise DataFileError(f"{label}: is a directory, not a file", "give the path of the file itself")
    try:
        if isinstance(path, Path) and path.stat().st_size > max_bytes:
            raise DataFileError(
                f"{label}: file is over the {max_bytes // 1_000_000} MB limit", "is this the right file?"
            )
        raw = path.read_bytes()
    except OSError as e:
        raise DataFileError(f"{label}: cannot read ({e.strerror or e})", "check the path and permissions") from e
    if len(raw) > max_bytes:
        raise DataFileError(f"{label}: file is over the {max_bytes // 1_000_000} MB limit", "is this the right file?")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataFileError(f"{label}: not UTF-8 text (binary file?)", "give a UTF-8 text file") from e


def parse_json_object(text: str, label: str) -> dict[str, Any]:
    """Parse JSON whose top level must be an object; NaN/Infinity literals are refused."""

    def _no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    try:
        data = json.loads(text, parse_constant=_no_constants)
    except (json.JSONDecodeError, ValueError) as e:
        raise DataFileError(f"{label}: not valid JSON ({e})", "fix the JSON syntax, or point at the right file") from e
    except RecursionError as e:
        raise DataFileError(f"{label}: JSON nested too deeply", "is this a model config.json?") from e
    if not isinstance(data, dict):
        raise DataFileError(
            f"{label}: top level is a JSON {type(data).__name__}, not an object", "is this a config.json?"
        )
    return data


def parse_toml(text: str, label: str) -> dict[str, Any]:
    """Parse TOML; errors name the file and the line."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise DataFileError(f"{label}: invalid TOML: {e}", "fix the TOML syntax at that line") from e
    except RecursionError as e:
        raise DataFileError(f"{label}: TOML nested too deeply", "simplify the file") from e


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
