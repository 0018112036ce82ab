"""Freeze gpumatch's serving-engine predictions for published rows before their measured values are transcribed.

Usage: ``python benchmarks/freeze_engine_predictions.py ROWS.toml OUT.json`` (ROWS: the settings of each row, e.g.
``tests/data/published/engine-rows-2026-12-04.toml``). Each row is predicted with ``gpumatch estimate --task serve
--engine E --concurrency C [--num-prompts N --length-low R] [--kv-precision K] [--prefix-hit-ratio H] --format json``
at the current commit (recorded as ``frozen_at_commit``); an open-loop row (``--request-rate``) is the finite run of
its ``num_prompts`` arrivals replayed (``--num-prompts N --length-low R``; from batch 2026-12-07i on, before it the
long-run steady state at that rate); ``K`` is the row's ``kv_precision`` (the KV-cache dtype the
source ran; from batch 2026-12-07g on, before it the engine's default was taken); ``H`` comes from the rows file's
optional ``[prefix_cache.hit_ratio]``
table (row id -> share of the prompt the engine's prefix cache holds, where a source repeats its prompts). The
comparison (``gpumatch.calibrate.published.load_engine_cases``) reads these numbers and never recomputes them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MAX_NUM_PROMPTS = 100_000
"""The most requests ``gpumatch estimate`` replays (``gpumatch.estimate.replay.MAX_NUM_PROMPTS``); a longer
open-loop run (MLPerf's tens of thousands of queries) is predicted at the long-run steady state."""


def _cli(args: list[str]) -> str:
    """``python -m gpumatch ARGS`` in a fresh process (as a user runs it); its standard output."""
    return subprocess.run([sys.executable, "-m", "gpumatch", *args], capture_output=True, text=True, check=True,
                          cwd=ROOT).stdout


def predict(r: dict[str, Any], hit_ratio: float = 0.0, cli: Callable[[list[str]], str] = _cli) -> dict[str, Any]:
    """Row ``r``'s prediction as ``gpumatch estimate --task serve ... --format json`` gives it (module docstring);
    ``cli`` runs the command line (default: a fresh process)."""
    cmd = ["estimate", "--model", r["model"], "--gpu", r["gpu"], "--count",
           str(r["tp"]), "--tp", str(r["tp"]), "--precision", r["precision"], "--task", "serve", "--engine",
           r["engine"], "--prompt", str(r["prompt"]), "--gen", str(r["gen"]), "--format", "json"]
    rate = str(r.get("request_rate", "inf"))
    if rate != "inf":  # open loop, Poisson arrivals at that rate
        cmd += ["--request-rate", rate]
        if 0 < int(r.get("num_prompts") or 0) <= MAX_NUM_PROMPTS:  # the run's N arrivals replayed (2026-12-07i on)
            cmd += ["--num-prompts", str(r["num_prompts"]), "--length-low", str(r.get("length_low", 1.0))]
    else:
        cmd += ["--concurrency", str(r["concurrency"])]
        for key, flag in (("num_prompts", "--num-prompts"), ("length_low", "--length-low")):
            if key in r:  # the benchmark replayed (rows collected with their client settings)
                cmd += [flag, str(r[key])]
    kv = r.get("kv_precision") or None
    if kv is not None:  # the KV-cache dtype the source states (the engine's "auto" otherwise)
        cmd += ["--kv-precision", str(kv)]
    if hit_ratio > 0:
        cmd += ["--prefix-hit-ratio", str(hit_ratio)]
    d = json.loads(cli(cmd))
    return {"id": r["id"], "model": r["model"], "gpu": d["gpu"], "tp": r["tp"], "precision": r["precision"],
            "kv_precision": kv, "engine": r["engine"], "concurrency": r["concurrency"], "prompt": r["prompt"],
            "gen": r["gen"], "num_prompts": r.get("num_prompts"), "length_low": r.get("length_low"),
            "prefix_hit_ratio": hit_ratio, "fits": d["fits"], "ttft_s": d["ttft_s"], "tpot_s": d["tpot_s"],
            "output_tokens_per_s": d["output_tokens_per_s"], "serving": d["serving"], "warnings": d["warnings"]}


def load_rows(rows_path: Path) -> list[tuple[dict[str, Any], float]]:
    """(settings, prefix-cache hit ratio) of every row of a settings file (the optional ``[prefix_cache.hit_ratio]``
    table; 0 for a row it does not name). ValueError when that table names a row the file does not hold."""
    spec = tomllib.loads(rows_path.read_text())
    rows = [dict(zip(spec["columns"], raw, strict=True)) for raw in spec["rows"]]
    hits: dict[str, float] = spec.get("prefix_cache", {}).get("hit_ratio", {})
    unknown = set(hits) - {r["id"] for r in rows}
    if unknown:
        raise ValueError(f"[prefix_cache.hit_ratio] names rows that do not exist: {sorted(unknown)}")
    return [(r, float(hits.get(r["id"], 0.0))) for r in rows]


def main() -> None:
    rows_path, out_path = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    try:
        rows = load_rows(rows_path)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                            cwd=ROOT).stdout.strip()
    doc = {"frozen_at_commit": commit,
           "rule": "predicted with `gpumatch estimate --task serve` at the commit named, before the published values "
                   "were transcribed next to them; the comparison reads these numbers, never recomputes them",
           "rows_from": str(rows_path.relative_to(ROOT)),
           "rows": [predict(r, hit) for r, hit in rows]}
    out_path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(rows)} predictions frozen at {commit} -> {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
