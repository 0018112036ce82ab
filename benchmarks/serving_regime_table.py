"""Where the serving estimate misses now: every published serving row predicted again with today's code, by regime.

Usage: ``python benchmarks/serving_regime_table.py [--jobs 2]``. Reads the settings and measured values of the blind
batches (:data:`serving_residual_table.BATCHES`, ``tests/data/published``), predicts each row as
``freeze_engine_predictions.predict`` does (the same ``gpumatch estimate`` command line, run in this process) and
prints a markdown table of the errors per engine, dense or MoE, one GPU or tensor-parallel, and closed or open
loop. These rows were read before today's code was written, so this is a FIT view of where the model stands, not
a blind result: the errors as predicted are the batch pages' (``docs/published-batch-*.md``). Error = (predicted
− published) / published; TPOT compared as each batch page compares it (mean, or the replay's median where only a
median is published), TTFT by its mean; rows the estimate calls overloaded (no mean TTFT) count for TPOT only.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import statistics
import tempfile
from collections.abc import Iterable
from multiprocessing import Pool
from pathlib import Path
from typing import Any

from freeze_engine_predictions import load_rows, predict
from published_table import _mean_abs, _within
from serving_residual_table import BATCHES, DATA

from gpumatch.calibrate.published import EngineCase, load_engine_cases
from gpumatch.cli.app import main as gpumatch_main
from gpumatch.models import get_model


def _in_process(args: list[str]) -> str:
    """``gpumatch ARGS`` in this process; its standard output."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = gpumatch_main(args)
    if rc:
        raise RuntimeError(f"gpumatch {' '.join(args)} exited {rc}")
    return out.getvalue()


def _predict(job: tuple[dict[str, Any], float]) -> dict[str, Any]:
    return predict(job[0], job[1], cli=_in_process)


def settings() -> dict[str, list[tuple[dict[str, Any], float]]]:
    """Batch -> its rows (settings, prefix-cache hit ratio), as the freeze reads them."""
    return {date: load_rows(DATA / f"engine-rows-{date}.toml") for date in BATCHES}


def cases_now(by_batch: dict[str, list[tuple[dict[str, Any], float]]], jobs: int, scratch: Path) -> list[EngineCase]:
    """Every published row with today's prediction beside it, compared as the batch pages compare them
    (:func:`gpumatch.calibrate.published.load_engine_cases` over the predictions written to ``scratch``)."""
    order = [(date, row) for date, rows in by_batch.items() for row in rows]
    with Pool(jobs) as pool:
        predicted = pool.map(_predict, [row for _, row in order], chunksize=8)
    out: list[EngineCase] = []
    for date in by_batch:
        path = scratch / f"now-{date}.json"
        path.write_text(json.dumps({"frozen_at_commit": "working tree", "rows": [
            p for (d, _), p in zip(order, predicted, strict=True) if d == date]}))
        out += load_engine_cases([DATA / f"engine-measured-{date}.toml"], [path])[0]
    return out


def regime(r: dict[str, Any]) -> tuple[str, str, str, str]:
    moe = get_model(r["model"]).experts > 0
    return (r["engine"], "MoE" if moe else "dense", "1 GPU" if int(r["tp"]) == 1 else "TP > 1",
            "closed" if r["loop"] == "closed" else "open")


def _stats(errors: Iterable[float], within: float) -> str:
    """Mean absolute error, signed median and share within ``within`` of the finite errors."""
    e = [x for x in errors if math.isfinite(x)]
    median = f"{100 * statistics.median(e):+.0f}%" if e else "–"
    return f"{_mean_abs(e)} | {median} | {_within(e, within)}"


def table(by_id: dict[str, dict[str, Any]], cases: list[EngineCase]) -> str:
    groups: dict[tuple[str, str, str, str], list[EngineCase]] = {}
    for c in cases:
        groups.setdefault(regime(by_id[c.case_id]), []).append(c)
    lines = ["| engine | model | GPUs | loop | rows | TTFT mean abs err | TTFT median | TTFT within 20 % | "
             "TPOT mean abs err | TPOT median | TPOT within 10 % |", "|---" * 11 + "|"]
    for key, cs in [*sorted(groups.items()), (("all", "", "", ""), cases)]:
        lines.append(f"| {' | '.join(key)} | {len(cs)} | {_stats((c.ttft_error for c in cs), 0.20)} | "
                     f"{_stats((c.tpot_error for c in cs), 0.10)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2, help="processes predicting rows (default 2)")
    args = ap.parse_args()
    by_batch = settings()
    with tempfile.TemporaryDirectory() as scratch:
        cases = cases_now(by_batch, args.jobs, Path(scratch))
    print(table({r["id"]: r for rows in by_batch.values() for r, _ in rows}, cases))


if __name__ == "__main__":
    main()
