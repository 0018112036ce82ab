"""Root of the ``gpumatch`` command. Sub-commands live in one module each and are registered here.

The error boundary is :func:`main`, the console-script entry point; it returns the exit code:

==== ==========================================================================================
0    ok
1    internal error (a bug: one line asking to rerun with ``--debug``); ``bench serve``: the server went away
     mid-run (:class:`~gpumatch.errors.ServerGoneError`; what was measured is saved)
2    bad input (a :class:`GpumatchError`: one line ``gpumatch: error: <what> (<hint>)``); also an optional
     extra that is not installed (an ImportError of a module of :data:`~gpumatch.errors.OPTIONAL_MODULES`:
     the hint is ``pip install 'gpumatch[EXTRA]'``)
3    the command failed (a failed preflight check; ``monitor`` exits with its command's own code)
74   output could not be written (ENOSPC, EIO, EDQUOT, EFBIG: a full disk, ``> /dev/full``); EX_IOERR of
     BSD's sysexits.h
130  interrupted (Ctrl-C / SIGINT; after the command saved what it had): ``gpumatch: interrupted``
141  a write to stdout failed because its reader had closed (``gpumatch ... | head``): nothing more is printed
143  terminated (SIGTERM; the same cleanup as Ctrl-C): ``gpumatch: terminated``
==== ==========================================================================================

A traceback is printed only with ``--debug``. Ctrl-C while the commands are still importing (before
:func:`main` runs) also gives one line and 130. ``main`` also makes stdout/stderr degrade characters an
ASCII-only stream cannot encode instead of failing (:mod:`gpumatch.cli.console`).
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT, EXIT_FAILED = 0, 1, 2, 3
EXIT_INTERRUPTED, EXIT_BROKEN_PIPE, EXIT_TERMINATED = 130, 141, 143
EXIT_IO = 74  # EX_IOERR of BSD's sysexits.h: output could not be written
_IO_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG})


def _interrupted_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C while this module imports the command tree (~0.2 s, before main() can catch it)."""
    os.write(2, b"gpumatch: interrupted\n")
    os._exit(EXIT_INTERRUPTED)


def _guard_startup() -> Any:
    """Install :func:`_interrupted_while_starting` if SIGINT has Python's default handler; return the old one."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None
    return signal.signal(signal.SIGINT, _interrupted_while_starting)


_STARTUP_SIGINT = _guard_startup()

import typer  # noqa: E402  (imported after the startup guard on purpose, as is everything below)

from gpumatch import __version__  # noqa: E402
from gpumatch.cli.console import degrade_unencodable  # noqa: E402
from gpumatch.errors import DataWarning, GpumatchError, Terminated, missing_extra  # noqa: E402

EPILOG = (
    "Exit codes: 0 ok, 1 internal error, 2 bad input (or a missing optional extra), 3 the command failed "
    "(monitor: its command's code), 74 output could not be written, 130 interrupted (Ctrl-C), 141 stdout closed "
    "by its reader, 143 terminated (SIGTERM)."
)

app = typer.Typer(
    name="gpumatch",
    help="Match deep-learning workloads to GPUs, and prove the match with measurements.",
    epilog=EPILOG,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_DEBUG = {"on": False}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpumatch {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors (accepted anywhere on the line)."),
) -> None:
    _DEBUG["on"] = _DEBUG["on"] or debug  # main() takes --debug out of argv wherever it stands


def _register() -> None:
    # --- command registry: one line per verb module (keep sorted) ---
    from gpumatch.cli import (
        bench,
        calibrate,
        doctor,
        estimate,
        gpus,
        models,
        monitor,
        plan,
        report,
        runs,
        serve,
        workload,
    )

    app.add_typer(bench.app, name="bench")
    app.command("calibrate", help=calibrate.HELP)(calibrate.calibrate_cmd)
    app.command("doctor", help=doctor.HELP)(doctor.doctor)
    app.command("estimate", help=estimate.HELP)(estimate.estimate_cmd)
    app.add_typer(gpus.app, name="gpus")
    app.add_typer(models.app, name="models")
    app.command("monitor", help=monitor.HELP, context_settings=monitor.CONTEXT)(monitor.monitor)
    app.command("plan", help=plan.HELP)(plan.plan_cmd)
    app.command("report", help=report.HELP)(report.report_cmd)
    app.add_typer(runs.app, name="runs")
    app.command("serve", help=serve.HELP)(serve.serve_cmd)
    app.add_typer(workload.app, name="workload")
    # --- end of registry ---


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code (module docstring)."""
    degrade_unencodable()
    args = sys.argv[1:] if argv is None else list(argv)
    args, _DEBUG["on"] = _take_debug(args)
    try:
        with _signals(), _data_warnings():
            code = _run(args)
            _flush_stdout()
            return code
    except Terminated:
        return _say("terminated", EXIT_TERMINATED)
    except KeyboardInterrupt:  # also a second Ctrl-C while an error was being reported
        return _say("interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        return _stdout_gone()
    except OSError as e:  # only the errnos of _IO_ERRNOS get here (_run re-raises them)
        if _DEBUG["on"]:
            raise
        return _output_failed(e)


def _run(args: list[str]) -> int:
    """Parse and run one command; every way it can end becomes an exit code and at most one line.

    The click command is driven directly (``make_context`` + ``invoke``) rather than through typer's
    ``standalone_mode=False``, which returns ``typer.Exit`` codes (a dropped return value read as 0) and
    turns Ctrl-C into a silent ``Exit(130)``.
    """
    command = typer.main.get_command(app)
    try:
        with command.make_context("gpumatch", args) as ctx:
            command.invoke(ctx)
    except GpumatchError as e:
        if _DEBUG["on"]:
            raise
        return _say(f"error: {_one_line(str(e))}", e.exit_code)
    except (KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as e:  # click's exits and usage errors, a missing optional extra, then bugs
        code = _click_exit(e)
        if code is not None:
            return code
        if _DEBUG["on"] or (isinstance(e, OSError) and e.errno in _IO_ERRNOS):
            raise  # an output that cannot be written: main() says so (exit 74)
        extra = missing_extra(e) if isinstance(e, ImportError) else None
        if extra is not None:  # e.g. torch, matplotlib, aiohttp not installed: name the extra (exit 2)
            return _say(f"error: {_one_line(str(extra))}", extra.exit_code)
        what = "out of memory" if isinstance(e, MemoryError) else f"{type(e).__name__}: {_one_line(str(e))}"
        return _say(f"internal error: {what} (rerun with --debug; please report)", EXIT_INTERNAL)
    return EXIT_OK


@contextmanager
def _signals() -> Iterator[None]:
    """While a command runs: Ctrl-C raises KeyboardInterrupt (Python's default, also after the startup
    guard) and SIGTERM raises :class:`Terminated`, so the command's cleanup (closing a run as
    'interrupted') runs for both; the previous handlers come back afterwards (main() runs in-process in
    tests)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    if previous[signal.SIGINT] is _interrupted_while_starting:
        previous[signal.SIGINT] = signal.default_int_handler
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


@contextmanager
def _data_warnings() -> Iterator[None]:
    """While a command runs, each :class:`DataWarning` (a reader skipped a damaged stored value and went on) is
    one line on stderr, ``gpumatch: warning: ...``, every time it is issued; other warnings are left as they are."""
    default = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        if issubclass(category, DataWarning):
            _say(f"warning: {_one_line(str(message))}", 0)
        else:
            default(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.simplefilter("always", DataWarning)
        warnings.showwarning = show
        yield


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


def _say(line: str, code: int) -> int:
    """Write ``gpumatch: <line>`` to stderr (if stderr can still take it) and return ``code``."""
    try:
        sys.stderr.write(f"gpumatch: {line}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return code


def _flush_stdout() -> None:
    """Flush here, where a closed pipe is still caught, not at interpreter exit."""
    if sys.stdout is not None:
        sys.stdout.flush()


def _stdout_gone() -> int:
    """The reader of stdout went away: point stdout at /dev/null so the exit flush is quiet (Python docs,
    "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return EXIT_BROKEN_PIPE


def _output_failed(e: OSError) -> int:
    """Output could not be written (a full disk, ``> /dev/full``, an I/O error): one line and exit 74. When
    stdout is what failed, it is pointed at /dev/null so the interpreter's exit flush does not fail again."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError):
        _stdout_gone()
    where = f"writing {e.filename}" if e.filename else "writing the output"
    return _say(f"error: {where}: {e.strerror or e} (free some space or write elsewhere)", EXIT_IO)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _take_debug(args: list[str]) -> tuple[list[str], bool]:
    """Accept ``--debug`` anywhere (errors say "rerun with --debug"): drop it from ``args`` and return whether
    it was there. Only before a ``--`` separator (after it the words belong to the command ``monitor`` runs)."""
    end = args.index("--") if "--" in args else len(args)
    head = [a for a in args[:end] if a != "--debug"]
    return head + args[end:], len(head) < end


def _click_exit(e: Exception) -> int | None:
    """Map click's own exceptions (bad flags, --help exits) to exit codes with one-line messages.

    Typer may vendor its own copy of click, so the classes are recognised by name, not identity.
    """
    kinds = {cls.__name__ for cls in type(e).__mro__}
    if "Exit" in kinds:
        return int(getattr(e, "exit_code", 0))
    if "Abort" in kinds:  # click's own name for Ctrl-C or end of input at a prompt
        return _say("interrupted", EXIT_INTERRUPTED)
    if "NoArgsIsHelpError" in kinds:  # 'gpumatch' or 'gpumatch gpus' alone: the help was the answer
        text = e.format_message() if hasattr(e, "format_message") else ""
        if text.strip():
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return EXIT_INPUT
    if "UsageError" in kinds or "ClickException" in kinds:
        message = e.format_message() if hasattr(e, "format_message") else str(e)
        message = message.replace("Value error, ", "").replace("\n", " ").strip()
        ctx = getattr(e, "ctx", None)
        cmd = getattr(ctx, "command_path", None) or "gpumatch"
        return _say(f"error: {message} (see '{cmd} --help')", EXIT_INPUT)
    return None


_register()
if _STARTUP_SIGINT is not None and signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
    signal.signal(signal.SIGINT, _STARTUP_SIGINT)  # the command tree is imported; main() handles Ctrl-C now

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
