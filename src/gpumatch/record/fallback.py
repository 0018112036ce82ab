"""Fallback files: where a run goes when the results store cannot be written.

``./gpumatch-<kind>-<UTC time>.csv`` (+ ``.json``) for a telemetry trace (replayable with ``gpumatch monitor
--replay``), ``./gpumatch-<kind>-<UTC time>.json`` for a run record; else the same names in the temp folder.

Every name is created exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW``): a file or a symlink planted under the
name (the temp folder is shared, the name predictable) is never written through; the next free name (``-2``,
``-3``...) is taken instead. The content is written in a private folder first (``tempfile.mkdtemp``, mode
0700) and copied into the new files.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpumatch.errors import GpumatchError
from gpumatch.store.codec import normalise
from gpumatch.telemetry.trace import Trace, write_trace

MakeFiles = Callable[[Path], list[Path]]
"""Writes the content into the given private folder; returns the files, in the order of the suffixes."""


def write_trace_fallback(kind: str, trace: Trace) -> list[Path]:
    """The trace as ``gpumatch-<kind>-<time>.csv`` + ``.json`` (its sidecar); [] when nothing could be written."""
    return write_exclusive(kind, (".csv", ".json"), lambda folder: write_trace(trace, folder / "trace.csv"))


def write_record_fallback(kind: str, record: dict[str, Any]) -> list[Path]:
    """A run record (plain JSON; non-JSON values as strings) as ``gpumatch-<kind>-<time>.json``; [] on failure."""

    def make(folder: Path) -> list[Path]:
        path = folder / "run.json"
        try:
            plain = normalise(record, "run record")  # non-finite floats -> null, Paths and datetimes as text
        except GpumatchError:
            plain = record
        path.write_text(json.dumps(plain, indent=1, default=str) + "\n", encoding="utf-8")
        return [path]

    return write_exclusive(kind, (".json",), make)


def write_exclusive(kind: str, suffixes: tuple[str, ...], make: MakeFiles) -> list[Path]:
    """Make the files privately, then copy them under the first free ``gpumatch-<kind>-<time>[-N]`` name
    (N up to 99) in the working folder, else in the temp folder. Returns the new paths, [] on failure."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    stem = f"gpumatch-{re.sub(r'[^A-Za-z0-9_-]', '-', kind)}-{stamp}"
    private = Path(tempfile.mkdtemp(prefix="gpumatch-trace-"))
    try:
        made = make(private)
        for folder in (*_cwd(), Path(tempfile.gettempdir())):
            for n in range(1, 100):
                base = folder / f"{stem}{'' if n == 1 else f'-{n}'}"
                try:
                    return _copy_exclusive(made, [base.with_name(base.name + s) for s in suffixes])
                except FileExistsError:
                    continue  # taken (or a planted link): the next name
                except OSError:
                    break  # this folder cannot be written: the next folder
    except (GpumatchError, OSError, ValueError):
        return []
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return []


def _cwd() -> list[Path]:
    try:
        return [Path.cwd()]
    except OSError:  # the working folder was deleted
        return []


def _copy_exclusive(sources: list[Path], targets: list[Path]) -> list[Path]:
    """Copy each source to a target that this call creates (never an existing file, never through a link)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    done: list[Path] = []
    try:
        for src, dst in zip(sources, targets, strict=True):
            fd = os.open(dst, flags, 0o644)
            done.append(dst)
            with os.fdopen(fd, "wb") as out, src.open("rb") as inp:
                shutil.copyfileobj(inp, out)
    except BaseException:
        for d in done:  # ours: created by this call
            with contextlib.suppress(OSError):
                d.unlink()
        raise
    return done
