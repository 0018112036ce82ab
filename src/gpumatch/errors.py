"""The one error tree of gpumatch.

Every error a user can cause derives from :class:`GpumatchError`. Messages say what happened
and, in ``hint``, what to do; the CLI prints them on one line and exits with code 2.
"""

from __future__ import annotations


class GpumatchError(Exception):
    """Root of every gpumatch error.

    ``message`` says what is wrong; ``hint`` says what to do about it (may be empty).
    """

    exit_code = 2

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class InputError(GpumatchError):
    """A value given by the user (flag, field, unit string) is malformed or out of range."""


class UnknownNameError(GpumatchError):
    """A GPU, model or other name does not resolve; the hint lists close matches."""


class AmbiguousNameError(UnknownNameError):
    """A name matches several entries; the hint lists them."""


class DataFileError(GpumatchError):
    """A data file (catalog SKU, workload, model config) is unreadable or fails validation."""


class MissingDependencyError(GpumatchError):
    """An optional dependency (torch, pynvml, pyarrow) is needed for this feature."""


#: Optional top-level modules (the import name) -> the extra of pyproject.toml that installs them.
OPTIONAL_MODULES: dict[str, str] = {
    "torch": "bench", "pynvml": "bench", "safetensors": "bench", "tokenizers": "bench",
    "matplotlib": "report", "scipy": "report",
    "aiohttp": "serve", "prometheus_client": "prometheus",
    "psycopg": "postgres", "psycopg_binary": "postgres",
    "pyarrow": "parquet", "yaml": "yaml", "llm_analysis": "compare",
}


class MissingExtraError(MissingDependencyError):
    """An optional module of a gpumatch extra is not installed; ``extra`` names the extra (exit code 2)."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(f"this needs the optional module '{module}', which is not installed",
                         f"pip install 'gpumatch[{extra}]'")
        self.module = module
        self.extra = extra


def missing_extra(error: ImportError) -> MissingExtraError | None:
    """The :class:`MissingExtraError` an ImportError amounts to when it is about a module of
    :data:`OPTIONAL_MODULES` (``error.name``, its top-level part; ``import x`` with ``x`` absent, or
    ``sys.modules['x'] = None``); None for any other import failure (a bug, reported as one)."""
    name = (getattr(error, "name", None) or "").split(".")[0]
    extra = OPTIONAL_MODULES.get(name)
    return MissingExtraError(name, extra) if extra is not None else None


class NoDeviceError(GpumatchError):
    """No GPU (or no NVML) is available where one is needed."""


class StoreError(GpumatchError):
    """The results store cannot be opened, migrated or written."""


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while a command ran (the CLI's handler raises it; exit code 143).

    A subclass of :class:`KeyboardInterrupt`, so cleanup written for Ctrl-C (``except KeyboardInterrupt``,
    ``finally``) runs for SIGTERM too; code that must tell them apart catches this class first.
    """


class ServerGoneError(GpumatchError):
    """The server under measurement stopped answering mid-run (``gpumatch bench serve``): what was measured is
    saved, and the command exits 1 with one line."""

    exit_code = 1


class DistLaunchError(GpumatchError):
    """A distributed benchmark (torchrun and its ranks, :mod:`gpumatch.bench.dist.launch`) failed, timed out or
    wrote no result; the message ends with the tail of its log. ``returncode`` is torchrun's exit status (None
    when it was killed on a timeout)."""

    def __init__(self, message: str, hint: str = "", returncode: int | None = None, log_tail: str = "") -> None:
        super().__init__(message, hint)
        self.returncode = returncode
        self.log_tail = log_tail


class DataWarning(UserWarning):
    """Stored data that a reader could not take whole (a row with damaged JSON read without that field) and
    went on. Issued with :func:`warnings.warn`; the CLI prints each as one line ``gpumatch: warning: ...``."""
