"""Hold the passes ``gpumatch serve`` logged during a load level against the serving model's cost of each pass.

Usage: ``python benchmarks/serve_passes.py FILE [LEVEL.json] --gpu h100-sxm [--engine gpumatch] [--out
table.json]``. ``FILE``: a ``gpumatch bench serve --out`` file, whose last level holds the server's passes
(``server_passes``, :mod:`gpumatch.loadgen.passes`) and its warm-up time; or, as the runs before 2026-12-07 saved
them, a passes file of ``benchmarks/gpu/serve_passes.sh`` with the level's ``--out`` file as ``LEVEL.json`` (its
warm-up time drops the warm-up's passes). Prints one row per class of pass (kind × batch bucket) and one over all:
measured mean seconds, the gap after a pass, the model's cost as modelled (rows at their mean context) and as run
(the padded bucket shape) and the ratios (:mod:`gpumatch.calibrate.passes`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gpumatch.calibrate.passes import compare, level_iterations, summarize
from gpumatch.estimate import Request


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("passes", type=Path)
    ap.add_argument("level", type=Path, nargs="?")
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--engine", default="gpumatch")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    doc = json.loads(args.passes.read_text())
    warmup_s = 0.0
    if "levels" in doc:  # a bench serve --out file: the passes are in its last level
        last = doc["levels"][-1]
        doc, warmup_s = last.get("server_passes") or {}, float(last.get("warmup_s") or 0.0)
    elif args.level is not None:
        levels = json.loads(args.level.read_text())["levels"]
        warmup_s = float(levels[-1].get("warmup_s") or 0.0)
    its = level_iterations(doc, warmup_s)
    req = Request(task="serve", engine=args.engine, prompt=int(doc["prompt_tokens"]), gen=int(doc["output_tokens"]))
    rows = summarize(compare(its, args.model, args.gpu, req))
    what = f"c={doc['concurrency']}" if doc.get("concurrency") is not None else f"{doc.get('request_rate')} req/s"
    print(f"{args.passes.name}: {what}, {len(its)} passes after {warmup_s:.2f} s of warm-up")
    print(f"{'kind':7} {'span':>4} {'n':>5} {'rows':>5} {'prompt':>6} {'meas ms':>8} {'gap ms':>6} "
          f"{'model ms':>8} {'as run':>7} {'m/model':>7} {'m/run':>6}")
    for r in rows:
        print(f"{r['kind']:7} {r['span']:>4} {r['passes']:>5} {r['decode_rows']:>5.1f} {r['prefill_tokens']:>6.0f} "
              f"{r['measured_s'] * 1e3:>8.2f} {r['gap_s'] * 1e3:>6.2f} {r['modelled_s'] * 1e3:>8.2f} "
              f"{r['as_run_s'] * 1e3:>7.2f} {r['measured_over_modelled']:>7.2f} {r['measured_over_as_run']:>6.2f}")
    if args.out is not None:
        args.out.write_text(json.dumps({"source": args.passes.name, "warmup_s": warmup_s, "classes": rows}, indent=1))


if __name__ == "__main__":
    main()
