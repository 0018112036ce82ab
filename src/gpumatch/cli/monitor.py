"""``gpumatch monitor``: GPU telemetry around any command (or until Ctrl-C), with a summary and a verdict."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpumatch.cli.common import Format, FormatOption, emit
from gpumatch.errors import GpumatchError

if TYPE_CHECKING:
    from gpumatch.record.monitor import MonitorRun

HELP = (
    'Sample GPU telemetry while a command runs (or until Ctrl-C); print a summary and a verdict per GPU.\n\n'
    'Samples power (instant and 1-s average), SM/memory clocks, clock-event reasons, temperatures, '
    'memory, utilization at 1/INTERVAL Hz, GPM SM/tensor/DRAM activity once a second where supported, and'
    ' energy, violation, ECC, PCIe-replay and remap counters at the start and the end. Exits with the '
    "command's exit code; SIGINT/SIGTERM/SIGHUP are passed to the command, the run is saved as interrupted and "
    "gpumatch exits 130/143/129. The run, its samples and its verdict go to the results store unless --no-store.\n\n"
    'Without a GPU, --replay TRACE.csv replays a recorded trace through the same analysis.\n\n'
    'Examples:\n'
    '  gpumatch monitor -- python train.py --epochs 1\n'
    '  gpumatch monitor --interval 0.05 --output run.csv -- ./bench.sh\n'
    '  gpumatch monitor -o run.csv --force -- ./bench.sh   # overwrite run.csv and run.json\n'
    '  gpumatch monitor                      # until Ctrl-C\n'
    '  gpumatch monitor --replay tests/data/traces/h200-2026-12-02-gemm-bf16.csv'
)

class CommandExit(GpumatchError):
    """The monitored command failed: gpumatch exits with the command's own exit code."""

    def __init__(self, code: int) -> None:
        super().__init__(f"the monitored command exited with code {code}", "its output is above; telemetry was kept")
        self.exit_code = code


#: Everything after the first positional argument is the command (so '--' is optional for simple commands).
CONTEXT = {"allow_interspersed_args": False}


def monitor(
    command: Annotated[list[str] | None, typer.Argument(help="The command to run, after '--'.")] = None,
    interval: Annotated[float | None, typer.Option(
        "--interval", "-i", help="Seconds between samples (default 0.1; 0.05-0.1 = 20-10 Hz).")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write the trace: .csv or .parquet (+ a .json sidecar); refused if either "
        "exists, unless --force.")] = None,
    force: bool = typer.Option(False, "--force", help="Overwrite the --output trace and its .json sidecar."),
    replay: Annotated[Path | None, typer.Option(
        "--replay", help="Replay a recorded trace instead of reading a GPU.")] = None,
    gpu: Annotated[list[int] | None, typer.Option(
        "--gpu", min=0, max=2**32 - 1, help="Only this GPU index (repeatable; NVML's order); default all.")] = None,
    store: bool = typer.Option(True, "--store/--no-store", help="Save the run in the results store."),
    prometheus: Annotated[str | None, typer.Option(
        "--prometheus", help="Also serve the live samples at http://HOST:PORT/metrics under dcgm-exporter's "
        "names (DCGM_FI_DEV_POWER_USAGE, ...); PORT alone: 127.0.0.1.")] = None,
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.record.monitor import run_monitor
    from gpumatch.report.monitor import monitor_view, saved_line

    _check(command, output, replay, force)
    if replay is not None and gpu:
        from gpumatch.errors import InputError

        raise InputError("--gpu does not apply to --replay (a replay analyses every GPU of the trace)",
                         "drop --gpu, or record only that GPU: gpumatch monitor --gpu N -o trace.csv -- CMD")
    run = run_monitor(command, interval, replay=replay, gpus=gpu, use_store=store, output=output,
                      on_start=_started(bool(command)), on_store_error=None if replay else _warn_store,
                      prometheus=prometheus)
    _say(saved_line(run))
    if run.written:
        _say(f"trace written to {', '.join(str(p) for p in run.written)}")
    emit(monitor_view(run.result, fmt.value))
    _end(run, store)


def _check(command: list[str] | None, output: Path | None, replay: Path | None, force: bool) -> None:
    """Refuse what cannot work before measuring (say so before an hours-long measurement, not after)."""
    from gpumatch.errors import InputError

    if replay is not None and command:
        raise InputError("--replay takes no command", "drop the command, or drop --replay to measure it")
    if output is not None and output.suffix.lower() not in (".csv", ".parquet"):
        raise InputError(f"--output must end in .csv or .parquet, not '{output.suffix or output.name}'",
                         "e.g. --output trace.csv")
    if output is not None and not output.parent.is_dir():
        raise InputError(f"cannot write {output}: folder {output.parent} does not exist",
                         "create the folder first, or choose another --output")
    if output is not None:
        _check_overwrite(output, force)


def _check_overwrite(output: Path, force: bool) -> None:
    """Like every other writer (``runs export``, ``report --html``): an existing trace or sidecar, or a link
    in their place, is refused unless ``force``; a folder in their place always is."""
    from gpumatch.errors import InputError
    from gpumatch.telemetry.trace import sidecar_path

    for p in (output, sidecar_path(output)):
        if p.is_dir():
            raise InputError(f"cannot write {p}: it is a directory", "choose another --output")
        if (p.exists() or p.is_symlink()) and not force:
            raise InputError(f"{p} already exists", "pass --force to overwrite it, or choose another --output")


def _end(run: MonitorRun, use_store: bool) -> None:
    """The exit: 2 when the store was not updated (a warning if the command failed or a signal stopped it),
    128 + N after a stop signal, else the command's own exit code."""
    from gpumatch.record.monitor import StoreNotUpdated
    from gpumatch.report.monitor import stopped_line

    result, rec = run.result, run.recording
    error = rec.error if rec is not None else None
    if rec is not None and error is not None:
        failed = StoreNotUpdated(error, rec.fallback)
        if not result.exit_code and result.signal is None:
            raise failed
        _say(f"warning: {failed}")
    if result.signal is not None:
        saved = "not stored" if not use_store else "not stored (see above)" if error else "saved"
        line = stopped_line(result, saved)
        if line is not None:
            _say(line)
            raise typer.Exit(128 + int(result.signal))
    if result.exit_code:
        raise CommandExit(result.exit_code)


def _started(with_command: bool) -> Callable[[int, float], None]:
    from gpumatch.report.monitor import start_line

    return lambda n_gpus, interval_s: _say(start_line(n_gpus, interval_s, until_ctrl_c=not with_command))


def _warn_store(e: Exception) -> None:
    """Said at once during a live run (it may go on for hours); the final error says where the trace is."""
    _say(f"warning: results store unavailable, measuring on (the trace goes to a file): {e}")


def _say(line: str | None) -> None:
    if line is not None:
        sys.stderr.write(f"gpumatch: {line}\n")
