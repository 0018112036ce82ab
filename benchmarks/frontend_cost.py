"""Print each engine's front-end cost per request from the published batches read so far.

Usage: ``python benchmarks/frontend_cost.py``. Published TTFT minus the frozen prediction at one to four clients
and prompts of at most 1,100 tokens, per engine: n, median and quartiles
(:func:`gpumatch.calibrate.front_end.front_end_costs`). The ``frontend_s`` of ``src/gpumatch/estimate/data/
engines.toml`` was set from this over :data:`FIT_BATCHES` (docs/estimators.md, "The front end's cost per
request"); batches frozen after that test it blind.
"""

from __future__ import annotations

from pathlib import Path

from gpumatch.calibrate.front_end import front_end_costs

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "published"
FIT_BATCHES = ("2026-12-06", "2026-12-07", "2026-12-07b", "2026-12-07c", "2026-12-07d", "2026-12-07e", "2026-12-07f")
"""The batches ``frontend_s`` was fitted on (every batch read by 2026-12-07)."""


def main() -> None:
    for f in front_end_costs(DATA, FIT_BATCHES):
        print(f"{f.engine:<8} n={f.n:<3} median {f.median_s * 1e3:+7.1f} ms  quartiles {f.q25_s * 1e3:+7.1f} .. "
              f"{f.q75_s * 1e3:+7.1f} ms")


if __name__ == "__main__":
    main()
