"""Output files that appear whole or not at all: written to a temporary beside the target, then published.

Every file a command writes for the user (``bench export --out``, ``runs export --output``, ``report --html``,
``calibrate --out``, ``bench serve --out``, trace files and their sidecars) goes through :func:`publishing` or
:func:`write_file`. The data is written to ``.NAME.partial-PID`` in the target's folder (same filesystem, so the
last step is atomic), fsynced, then published in one step:

- without ``force`` by a hard link (``os.link``), which never replaces a file that appeared meanwhile: of several
  processes writing one new name, one wins and the others get a one-line :class:`~gpumatch.errors.InputError`;
- with ``force`` by ``os.replace`` (rename(2)): a reader sees the old file or the new one, never a mix.

The folder is fsynced after publishing. A process killed at any instant leaves the target as it was (absent, or
the old file) and at most its temporary, which the next write of that name removes once its process is gone.
A symlink is written through (its target is the file published); a device or FIFO (``--html /dev/full``) is
written in place, since it cannot be renamed over.
(rename(2) and link(2) atomicity: POSIX.1-2017, https://pubs.opengroup.org/onlinepubs/9699919799/functions/rename.html)
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpumatch.errors import InputError

_CHUNK_BYTES = 1 << 16
_PARTIAL = ".partial-"


def partial_path(path: Path) -> Path:
    """The temporary that this process writes before publishing ``path``."""
    return path.with_name(f".{path.name}{_PARTIAL}{os.getpid()}")


@contextmanager
def publishing(path: Path, *, force: bool = False, hint: str = "choose another output file") -> Iterator[Path]:
    """Yield the temporary path to write; when the block ends without an exception, publish it as ``path``
    (module docstring). On an exception the temporary is removed and ``path`` is left as it was."""
    path = _target(Path(path))
    if _is_special(path):  # a device or FIFO (/dev/null, /dev/full, a pipe): written in place, nothing to publish
        yield path
        return
    remove_stale_partials(path)
    tmp = partial_path(path)
    _unlink(tmp)
    try:
        yield tmp
        _fsync(tmp)
        _publish(tmp, path, force, hint)
        _fsync_dir(path.parent)
    except OSError as e:
        if e.filename is not None and Path(e.filename) == tmp:  # messages name the user's file, not ours
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise
    finally:
        for side in ("", "-wal", "-shm", "-journal"):  # a SQLite file built there (runs recover) has side files
            _unlink(Path(f"{tmp}{side}"))


def write_file(path: Path, data: bytes | str, *, force: bool = False,
               hint: str = "choose another output file") -> Path:
    """Write ``data`` (text is UTF-8) to ``path`` whole or not at all (:func:`publishing`); returns ``path``."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with publishing(path, force=force, hint=hint) as tmp:
        new = 0 if _is_special(tmp) else os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(tmp, os.O_WRONLY | new | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view[:_CHUNK_BYTES]):]
        finally:
            os.close(fd)
    return path


def remove_stale_partials(path: Path) -> None:
    """Remove the temporaries of ``path`` left by writers that were killed (their process is gone)."""
    prefix = f".{path.name}{_PARTIAL}"
    try:
        names = [n for n in os.listdir(path.parent) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix):].split("-")[0]  # also the -wal/-shm of a SQLite file built there
        if pid.isdigit() and not _alive(int(pid)):
            _unlink(path.parent / name)


def _target(path: Path) -> Path:
    """``path``, or the file a symlink at ``path`` points to (the link is written through, not replaced)."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _is_special(path: Path) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _publish(tmp: Path, path: Path, force: bool, hint: str) -> None:
    if force:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise InputError(f"{path} exists (another process wrote it meanwhile); nothing was written", hint) from None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync(path: Path) -> None:
    """Flush ``path`` (a file, or a folder: its entries) to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every filesystem lets a folder be opened or fsynced
        _fsync(folder)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
