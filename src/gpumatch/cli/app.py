"""Root of the ``gpumatch`` command. Sub-commands live in one module each and are registered here.

The error boundary is :func:`main`: any :class:`GpumatchError` becomes one line on stderr and exit
code 2 (a traceback only with ``--debug``); Ctrl-C exits 130 after the command has saved what it had.
"""

from __future__ import annotations

import sys

import typer

from gpumatch import __version__
from gpumatch.errors import GpumatchError

app = typer.Typer(
    name="gpumatch",
    help="Match deep-learning workloads to GPUs, and prove the match with measurements.",
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
    from gpumatch.cli import doctor, estimate, gpus, models, monitor, plan, runs, workload

    app.command("doctor", help=doctor.HELP)(doctor.doctor)
    app.command("estimate", help=estimate.HELP)(estimate.estimate_cmd)
    app.add_typer(gpus.app, name="gpus")
    app.add_typer(models.app, name="models")
    app.command("monitor", help=monitor.HELP, context_settings=monitor.CONTEXT)(monitor.monitor)
    app.command("plan", help=plan.HELP)(plan.plan_cmd)
    app.add_typer(runs.app, name="runs")
    app.add_typer(workload.app, name="workload")
    # --- end of registry ---


_register()


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    args, _DEBUG["on"] = _take_debug(args)
    try:
        app(args=args, prog_name="gpumatch", standalone_mode=False)
    except GpumatchError as e:
        if _DEBUG["on"]:
            raise
        sys.stderr.write(f"gpumatch: error: {e}\n")
        return e.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("gpumatch: interrupted\n")
        return 130
    except Exception as e:  # click usage errors and the like
        code = _click_exit(e)
        if code is not None:
            return code
        if _DEBUG["on"]:
            raise
        sys.stderr.write(f"gpumatch: internal error: {type(e).__name__}: {e} (rerun with --debug; please report)\n")
        return 1
    return 0


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
    if "Abort" in kinds:
        sys.stderr.write("gpumatch: aborted\n")
        return 130
    if "UsageError" in kinds or "ClickException" in kinds:
        message = e.format_message() if hasattr(e, "format_message") else str(e)
        message = message.replace("Value error, ", "").replace("\n", " ").strip()
        ctx = getattr(e, "ctx", None)
        cmd = getattr(ctx, "command_path", None) or "gpumatch"
        sys.stderr.write(f"gpumatch: error: {message} (see '{cmd} --help')\n")
        return 2
    return None


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
