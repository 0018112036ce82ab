"""``gpumatch bench run|serve|scale|list|show|compare|export|import``: one function per subcommand.

The measuring runs are :func:`gpumatch.lab.run.run_bench` (the fixed experiment package),
:func:`gpumatch.loadgen.bench.run_serve_bench` (the load generator) and :func:`gpumatch.lab.scale.run_scale` (the
scaling ladder); the stored runs are read back by :mod:`.stored_bench`, :mod:`.stored_serving` and
:mod:`.stored_scale`, compared by :mod:`.stored_bench` (:mod:`.compare_serving` for serving runs) and imported by
:mod:`.import_bench`. Each function returns a value for :mod:`gpumatch.report` to render; none prints.

The requests the command line builds (:class:`BenchRequest`, :class:`ServeRequest` with :class:`Slo` and
:class:`Limits`, :class:`ScaleRequest`) and their flag parsers are named here too, so ``cli/bench.py`` imports
nothing of ``lab`` or ``loadgen`` (an import-linter contract).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpumatch.errors import InputError, ServerGoneError
from gpumatch.lab.run import BenchRequest, BenchRun
from gpumatch.lab.scale import ScaleOutcome, ScaleRequest, parse_counts, parse_sizes
from gpumatch.loadgen.bench import ServeRequest, ServeRun
from gpumatch.loadgen.client import parse_extra_body, parse_headers
from gpumatch.loadgen.metrics import Slo
from gpumatch.loadgen.selftest import Limits

__all__ = ["BenchRequest", "Limits", "ScaleRequest", "ServeRequest", "Slo", "compare", "export", "gone_error",
           "import_file", "list_runs", "parse_counts", "parse_extra_body", "parse_headers", "parse_sizes", "run",
           "scale", "serve", "show"]

Store = Path | str | None


def run(req: BenchRequest, progress: Callable[..., None] | None = None) -> BenchRun:
    """``bench run``: the suite measured and recorded (:func:`gpumatch.lab.run.run_bench`)."""
    from gpumatch.lab.run import run_bench

    return run_bench(req, progress)


def serve(req: ServeRequest, progress: Callable[..., None] | None = None, out: Path | None = None) -> ServeRun:
    """``bench serve``: the load levels measured and recorded (:func:`gpumatch.loadgen.bench.run_serve_bench`),
    and the run also written as JSON to ``out`` (refused before anything is sent when ``out`` exists)."""
    from gpumatch.loadgen.bench import run_serve_bench, write_json

    if out is not None and out.exists():
        raise InputError(f"{out} exists", "give another --out")
    done = run_serve_bench(req, progress)
    if out is not None:
        write_json(done, out)
    return done


def gone_error(done: ServeRun) -> ServerGoneError | None:
    """The error ``bench serve`` ends with when the server went away mid-run (what was measured is saved), else
    None."""
    if not done.server_gone:
        return None
    completed = sum(lv.summary["completed"] for lv in done.levels)
    failed = sum(lv.summary["failed"] + lv.not_sent for lv in done.levels)
    return ServerGoneError(f"the server went away during level {done.levels[-1].level.label}: "
                           f"{completed} requests completed, {failed} failed or not sent; run "
                           f"{done.run_id if done.run_id is not None else '(not stored)'} saved as {done.status}",
                           done.server_gone[:120])


def scale(req: ScaleRequest, progress: Callable[[str, int, int, str], None] | None = None) -> ScaleOutcome:
    """``bench scale``: the ladder measured and recorded (:func:`gpumatch.lab.scale.run_scale`)."""
    from gpumatch.lab.scale import run_scale

    return run_scale(req, progress)


def list_runs(store: Store, limit: int = 50) -> list[dict[str, Any]]:
    """``bench list``: the bench runs, newest first."""
    from gpumatch.usecases.stored_bench import list_bench_runs

    return list_bench_runs(store, limit)


def show(store: Store, run_id: int, raw: bool = False) -> tuple[str, dict[str, Any]]:
    """``bench show``: the run's kind (``serve``, ``scale`` or a bench run's) and the run read back in the shape of
    that kind; ``raw`` keeps a serving or scale run's raw samples (the JSON output)."""
    from gpumatch.usecases.stored_bench import load_run, run_kind

    kind = run_kind(store, run_id)
    if kind == "serve":
        from gpumatch.usecases.stored_serving import load_serve_run

        return kind, load_serve_run(store, run_id, raw=raw)
    if kind == "scale":
        from gpumatch.usecases.stored_scale import load_scale_run

        return kind, load_scale_run(store, run_id, raw=raw)
    return kind, load_run(store, run_id)


def compare(store: Store, run_a: int, run_b: int, force: bool = False) -> dict[str, Any]:
    """``bench compare``: two bench runs per case, or two serving runs level by level
    (:func:`gpumatch.usecases.stored_bench.compare_runs`)."""
    from gpumatch.usecases.stored_bench import compare_runs

    return compare_runs(store, run_a, run_b, force)


def export(store: Store, run_id: int, out: Path, force: bool = False) -> Path:
    """``bench export``: the run written as JSON to ``out``; returns the path written."""
    from gpumatch.usecases.stored_bench import export_run

    return export_run(store, run_id, out, force)


def import_file(file: Path, store: Store) -> tuple[str, int]:
    """``bench import``: a ``bench export`` or ``bench serve --out`` file stored as a new run; returns its kind and
    id. Another tool's result file is refused (it belongs to ``runs import``; one line, nothing written)."""
    from gpumatch.store.formats import sniff
    from gpumatch.usecases.import_bench import import_file as import_export

    if file.is_file() and (found := sniff(file)) is not None:
        raise InputError(f"{file} is a {found} result file, not a 'gpumatch bench export' or 'bench serve --out' "
                         "file", f"store it with 'gpumatch runs import {file}'")
    return import_export(file, store)
