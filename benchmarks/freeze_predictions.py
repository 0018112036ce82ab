"""Freeze gpumatch's predictions for a planned device run before it runs (the blind protocol).

Usage: ``python benchmarks/freeze_predictions.py --plan heldout4 --out FILE`` (FILE:
``tests/data/measurements/DATE-h200-heldout4-blind-predictions.json``)

The cases are the ones ``benchmarks/gpu/run_suite.py --plan NAME`` will measure, named and configured exactly as
:mod:`gpumatch.calibrate.cases` reads them back (decode: ``tpot_s`` at ``prompt = context - 1``; prefill:
``prefill_s``; train, LoRA and QLoRA: ``step_s``, ``reserved_bytes`` and whether it fits), predicted with the
estimator as committed (the default Calibration). Commit the file before the
run; after it, ``benchmarks/accuracy_table.py`` reports the error as predicted beside the error now.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpumatch.calibrate.cases import MeasuredCase, train_setup
from gpumatch.calibrate.compare import predict

ROOT = Path(__file__).resolve().parents[1]


def _suite_plan(name: str) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("run_suite", ROOT / "benchmarks" / "gpu" / "run_suite.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    plan: dict[str, Any] = mod._plan(False, name)
    return plan


def planned_cases(plan: dict[str, Any]) -> list[MeasuredCase]:
    """The cases of a suite plan, as :mod:`gpumatch.calibrate.cases` will name them."""
    out = []
    for shape in plan.get("decode_models", []):
        for ctx in plan["contexts"]:
            for b in plan["batches"]:
                out.append(MeasuredCase(case_id=f"decode {shape['name']} b{b} ctx{ctx}", kind="decode", shape=shape,
                                        options={"task": "infer", "concurrency": b, "prompt": ctx - 1, "gen": 1},
                                        metric="tpot_s", measured=math.nan, source="planned", fit=False))
    for shape in plan.get("prefill_models", []):
        for b, s in plan["prefill"]:
            out.append(MeasuredCase(case_id=f"prefill {shape['name']} b{b} s{s}", kind="prefill", shape=shape,
                                    options={"task": "infer", "concurrency": b, "prompt": s, "gen": 1},
                                    metric="prefill_s", measured=math.nan, source="planned", fit=False))
    rows = [{"model": shape["name"], "batch": b, "seq": s, "recompute": rc, "master": master, "shape": shape}
            for shape, b, s, rc, master in plan.get("train", [])]
    rows += [{"model": shape["name"], "batch": b, "seq": s, "recompute": rc, "master": "none", "variant": variant,
              "lora_rank": rank, "shape": shape} for shape, b, s, rc, variant, rank in plan.get("adapters", [])]
    for row in rows:
        name, opts = train_setup(row)
        shape = row["shape"]
        for cid, kind, metric in ((f"train {name}", "train-time", "step_s"),
                                  (f"memory {name}", "train-memory", "reserved_bytes"),
                                  (f"fits {name}", "train-fit", "fits")):
            out.append(MeasuredCase(case_id=cid, kind=kind, shape=shape, options=opts, metric=metric,
                                    measured=math.nan, source="planned", fit=False))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    cases = [{"case": c.case_id, "metric": c.metric, "measured": None, "predicted": predict(c), "error": None}
             for c in planned_cases(_suite_plan(args.plan))]
    doc = {"schema": "gpumatch.blind-predictions/1",
           "what": f"gpumatch's predictions for the '{args.plan}' H200 run, computed with the estimator as committed "
                   "(the default Calibration) before the run; 'measured' and 'error' are filled in after it",
           "commit": commit, "computed_utc": datetime.now(UTC).strftime("%Y-%m-%d"), "cases": cases}
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(cases)} predictions frozen at {commit} -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
