"""The one reader of user-supplied files, and the parsers behind it: bounded, non-blocking, one-line errors.

Every data file gpumatch reads (workload files, ``--calibration``, ``--hf-config``, traces and their JSON
sidecars, catalog and model overlays) goes through :func:`read_bytes` / :func:`read_text` (whole small
files) or :func:`open_text` / :func:`open_binary` (streamed traces). They:

- read only regular files: a FIFO, a character or block device (``/dev/zero``, ``/dev/urandom``), a
  socket or a directory is refused with one line, also when a symlink points at one;
- open with ``O_NONBLOCK``, so a FIFO swapped in after the check cannot block the ``open`` (the opened
  descriptor is checked again with ``fstat``);
- read at most ``max_bytes + 1`` bytes and refuse the file past ``max_bytes``: the bytes actually read are
  bounded, not the size ``stat()`` reports (``/proc`` files and devices report 0).

:func:`parse_json`, :func:`parse_toml` and :func:`parse_yaml` turn what the parsers raise on hostile text
into the same :class:`DataFileError`: syntax errors, ``RecursionError`` (nesting thousands deep),
``ValueError`` from Python's int-string limit (an integer of thousands of digits), ``MemoryError``; and
they refuse nesting deeper than :data:`MAX_NESTING` and, for JSON, NaN/Infinity and numbers out of the
float range. Commands never catch parser errors themselves.
"""

from __future__ import annotations

import io
import json
import math
import os
import stat
import sys
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.resources.abc import Traversable
from typing import IO, Any

from gpumatch.errors import DataFileError, MissingDependencyError

#: Default limit of one small data file (workload, calibration, config.json, overlay, sidecar), bytes.
MAX_DATA_FILE_BYTES = 2_000_000
#: Deepest nesting of lists/tables a data file may have (real files need fewer than 10 levels).
MAX_NESTING = 64

PathArg = str | os.PathLike[str] | Traversable
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1 << 16
_KINDS = (
    (stat.S_ISDIR, "a directory", "give the path of the file itself"),
    (stat.S_ISFIFO, "a FIFO (named pipe)", "save the data to a regular file and give that"),
    (stat.S_ISCHR, "a character device", "give a regular file"),
    (stat.S_ISBLK, "a block device", "give a regular file"),
    (stat.S_ISSOCK, "a socket", "give a regular file"),
)


def tail_text(path: str | os.PathLike[str], max_bytes: int) -> str:
    """The last ``max_bytes`` bytes of a log file as text (UTF-8, bad bytes replaced); "" when it cannot be
    read. Reads only the tail, whatever the file's size."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - max_bytes))
            return f.read(max_bytes).decode("utf-8", "replace")
    except OSError:
        return ""


def limit_text(max_bytes: int) -> str:
    """``2_000_000`` -> ``"2 MB"`` (decimal units, as the limits are written)."""
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if max_bytes >= size and max_bytes % size == 0:
            return f"{max_bytes // size} {unit}"
    return f"{max_bytes} bytes"


def too_large(label: str, max_bytes: int, hint: str = "is this the right file?") -> DataFileError:
    return DataFileError(f"{label}: file is over the {limit_text(max_bytes)} limit", hint)


def read_bytes(path: PathArg, label: str, max_bytes: int = MAX_DATA_FILE_BYTES,
               hint: str = "is this the right file?") -> bytes:
    """The whole content of a regular file of at most ``max_bytes`` bytes (module docstring)."""
    with open_binary(path, label, max_bytes, hint) as fh:
        return fh.read()


def read_text(path: PathArg, label: str, max_bytes: int = MAX_DATA_FILE_BYTES,
              hint: str = "is this the right file?") -> str:
    """:func:`read_bytes` decoded as UTF-8 (a byte-order mark is dropped); binary content is refused."""
    raw = read_bytes(path, label, max_bytes, hint)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataFileError(f"{label}: not UTF-8 text (binary file? byte {e.start})", "give a UTF-8 text file") from e


@contextmanager
def open_binary(path: PathArg, label: str, max_bytes: int,
                hint: str = "is this the right file?") -> Iterator[IO[bytes]]:
    """A buffered binary stream of a regular file that raises :class:`DataFileError` (naming ``label``
    and the limit) as soon as more than ``max_bytes`` bytes have been read through it."""
    if isinstance(path, str | os.PathLike):
        fd = _open_regular(os.fspath(path), label)
        raw: io.RawIOBase = _BoundedRaw(lambda n: os.read(fd, n), lambda: os.close(fd), max_bytes, label, hint)
    else:  # an importlib resource (built-in data shipped with gpumatch, possibly inside a zip)
        try:
            fh = path.open("rb")
        except OSError as e:
            raise _cannot_read(label, e) from e
        raw = _BoundedRaw(fh.read, fh.close, max_bytes, label, hint)
    with io.BufferedReader(raw, buffer_size=_CHUNK) as stream:
        yield stream


@contextmanager
def open_text(path: PathArg, label: str, max_bytes: int, hint: str = "is this the right file?",
              newline: str | None = "") -> Iterator[IO[str]]:
    """:func:`open_binary` as UTF-8 text (BOM dropped; ``newline=""`` as :mod:`csv` wants); a byte that is
    not UTF-8 raises :class:`DataFileError` naming its offset."""
    with (open_binary(path, label, max_bytes, hint) as raw,
          io.TextIOWrapper(raw, encoding="utf-8-sig", errors="strict", newline=newline) as text):
        try:
            yield text
        except UnicodeDecodeError as e:
            raise DataFileError(f"{label}: not UTF-8 text (binary file? byte {e.start} of a read block)",
                                "give a UTF-8 text file") from e


@contextmanager
def open_seekable(path: str | os.PathLike[str], label: str, max_bytes: int,
                  hint: str = "is this the right file?") -> Iterator[IO[bytes]]:
    """A plain seekable binary file (for formats read by offset, such as Parquet), opened the same safe way,
    refused when its size is over ``max_bytes``: for a regular file, unlike a device or ``/proc``, the size
    ``fstat`` reports is the size there is to read."""
    fd = _open_regular(os.fspath(path), label)
    if os.fstat(fd).st_size > max_bytes:
        os.close(fd)
        raise too_large(label, max_bytes, hint)
    with os.fdopen(fd, "rb") as fh:
        yield fh


def check_regular(path: str | os.PathLike[str], label: str) -> os.stat_result:
    """``stat`` of ``path`` (following symlinks) when it is a regular file; else one-line :class:`DataFileError`."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise _cannot_read(label, e) from e
    _require_regular(st.st_mode, label)
    return st


def _open_regular(path: str, label: str) -> int:
    check_regular(path, label)  # a clear message before open() (a socket cannot be opened at all)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as e:
        raise _cannot_read(label, e) from e
    try:
        _require_regular(os.fstat(fd).st_mode, label)  # replaced between the check and the open
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _require_regular(mode: int, label: str) -> None:
    if stat.S_ISREG(mode):
        return
    for test, what, hint in _KINDS:
        if test(mode):
            raise DataFileError(f"{label}: not a regular file but {what}", hint)
    raise DataFileError(f"{label}: not a regular file", "give a regular file")


def _cannot_read(label: str, e: OSError) -> DataFileError:
    return DataFileError(f"{label}: cannot read ({e.strerror or e})", "check the path and permissions")


class _BoundedRaw(io.RawIOBase):
    """A raw stream that counts the bytes read and raises :func:`too_large` past ``max_bytes``; read errors
    become :class:`DataFileError` naming ``label``."""

    def __init__(self, read: Callable[[int], bytes], close: Callable[[], None], max_bytes: int, label: str,
                 hint: str) -> None:
        super().__init__()
        self._read, self._close, self._left, self._max = read, close, max_bytes, max_bytes
        self._label, self._hint = label, hint

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        try:
            data = self._read(min(len(view), self._left + 1))
        except OSError as e:
            raise _cannot_read(self._label, e) from e
        if len(data) > self._left:
            raise too_large(self._label, self._max, self._hint)
        self._left -= len(data)
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            try:
                self._close()
            finally:
                super().close()


# --- parsers ------------------------------------------------------------------------------------------


@contextmanager
def parser_errors(label: str, kind: str) -> Iterator[None]:
    """Turn what a parser raises on hostile input into one :class:`DataFileError` (module docstring).

    Syntax errors are handled by each parser (their message differs); this covers the rest.
    """
    try:
        yield
    except RecursionError as e:
        raise _too_deep(label, kind) from e
    except MemoryError as e:
        raise DataFileError(f"{label}: {kind} too large to parse in memory", "is this the right file?") from e
    except ValueError as e:
        if "integer string conversion" in str(e):
            limit = sys.get_int_max_str_digits()
            raise DataFileError(f"{label}: an integer has more than {limit} digits", "no real value is that long; "
                                "check the file") from e
        raise DataFileError(f"{label}: not valid {kind} ({_one_line(str(e))})", f"fix the {kind} there") from e


def parse_json(text: str, label: str) -> Any:
    """Parse JSON; NaN/Infinity literals, numbers beyond the float range and deep nesting are refused."""

    def _no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a number JSON allows")

    def _finite(s: str) -> float:
        x = float(s)
        if not math.isfinite(x):
            raise ValueError(f"number {s[:20]}{'...' if len(s) > 20 else ''} is beyond the float range")
        return x

    with parser_errors(label, "JSON"):
        try:
            data = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
        except json.JSONDecodeError as e:
            raise DataFileError(f"{label}: not valid JSON ({e})", "fix the JSON syntax, or give the right file") from e
    check_nesting(data, label, "JSON")
    return data


def parse_json_object(text: str, label: str, what: str = "a JSON object") -> dict[str, Any]:
    """:func:`parse_json` whose top level must be an object."""
    data = parse_json(text, label)
    if not isinstance(data, dict):
        raise DataFileError(f"{label}: top level is a JSON {type(data).__name__}, not an object", f"give {what}")
    return data


def parse_toml(text: str, label: str) -> dict[str, Any]:
    """Parse TOML; errors name the file and the line."""
    with parser_errors(label, "TOML"):
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            message = f"{label}: invalid TOML: {_one_line(str(e))}"
            raise DataFileError(message, "fix the TOML syntax at that line") from e
    check_nesting(data, label, "TOML")
    return data


def parse_yaml(text: str, label: str) -> Any:
    """Parse YAML with PyYAML's safe loader (libyaml's when built); aliases (``&a``/``*a``, which let a small
    file expand into a huge structure) are refused. Flow nesting (``[[[...``) deeper than :data:`MAX_NESTING`
    is refused before parsing: PyYAML's pure-Python scanner takes time quadratic in that depth (10 s for
    5000 levels)."""
    try:
        import yaml
    except ImportError as e:
        raise MissingDependencyError(f"{label}: reading YAML files needs PyYAML",
                                     "pip install 'gpumatch[yaml]', or write the file in TOML") from e
    if _flow_depth(text) > MAX_NESTING:
        raise _too_deep(label, "YAML")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with parser_errors(label, "YAML"):
        try:
            if any(isinstance(ev, yaml.AliasEvent) for ev in yaml.parse(text, Loader=loader)):
                raise DataFileError(f"{label}: YAML aliases (*name) are not allowed", "write the values out")
            data = yaml.load(text, Loader=loader)  # a safe loader: SafeLoader or CSafeLoader
        except yaml.YAMLError as e:
            raise DataFileError(f"{label}: invalid YAML: {_one_line(str(e))[:300]}", "fix the YAML syntax there") from e
    check_nesting(data, label, "YAML")
    return data


def _flow_depth(text: str) -> int:
    """The deepest run of unclosed ``[``/``{`` in ``text``, quotes ignored (an over-estimate is harmless)."""
    depth = deepest = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(depth - 1, 0)
    return deepest


def check_nesting(data: Any, label: str, kind: str, limit: int = MAX_NESTING) -> None:
    """Refuse lists/mappings nested deeper than ``limit`` (checked without recursion)."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        if depth >= limit:
            raise _too_deep(label, kind, limit)
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list | tuple))


def _too_deep(label: str, kind: str, limit: int = MAX_NESTING) -> DataFileError:
    return DataFileError(f"{label}: {kind} nested too deeply (more than {limit} levels)", "is this the right file?")


def _one_line(text: str) -> str:
    return " ".join(text.split())
