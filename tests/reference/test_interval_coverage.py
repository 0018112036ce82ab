"""How often the intervals hold: the share of HELD-OUT H200 measurements inside the interval of their estimate.

The residual table behind the intervals is computed from the fit cases only (gpumatch.calibrate.residuals); the
held-out cases (the split of src/gpumatch/calibrate/cases.py) were not used to set any quantile or factor of the
rule. Measured on 2026-12-04 (docs/accuracy.md, "Intervals"): first decode 49/59, prefill 26/27, train step
29/37, training memory 28/37, all 132/160 (82%) for a nominal 90% band; then, after the attention split refit
(the fit set fits better, so its residual bands narrowed) and with the 21 long-context cases of the fourth run,
decode 47/65, prefill 36/42, train step 28/37, memory 28/37, all 139/181 (77%); with the fifth run's 7B-14B
training (train step 35/45, memory 31/45), all 149/197 (76%); with the bench's AMP runs estimated as the ``amp``
recipe (issue 12 item 4: train step 38/45, memory 36/45), all 157/197 (80%); with the sixth run's LoRA/QLoRA
fine-tuning (its step times under-predicted by 9-27%, KNOWN_MISSES in test_estimate_vs_measured.py) train step
40/53, memory 44/53, all 167/213 (78%):
the intervals under-cover. The
thresholds below sit under the measured shares so a change that makes the intervals hold much less often fails
here and is looked at (regenerate the numbers with ``python benchmarks/residual_table.py``).
"""

from __future__ import annotations

from pathlib import Path

from gpumatch.calibrate.residuals import coverage

DATA = Path(__file__).resolve().parents[1] / "data" / "measurements"
ALL_AT_LEAST = 0.70
EACH_AT_LEAST = 0.65


def test_held_out_coverage_stays_near_what_was_measured() -> None:
    got = {c.kind: c for c in coverage(DATA)}
    assert {k: c.n for k, c in got.items()} == {"decode": 65, "prefill": 42, "train-step": 53, "memory": 53}
    inside, n = sum(c.inside for c in got.values()), sum(c.n for c in got.values())
    assert inside / n >= ALL_AT_LEAST
    assert all(c.share >= EACH_AT_LEAST for c in got.values())


OUTSIDE_THEIR_OWN_INTERVAL = {
    # Fit cases outside the band their own residuals set (in-sample), since the bench's AMP runs are estimated as
    # the ``amp`` recipe. Memory: llama-3.2-1b b1 s1024, 7.6% under the measurement; its process (like every train
    # case of the 2026-12-02/03 runs) held 1.1 GB from earlier suite groups before the step (``after_init`` less
    # the parameters), which today's bench without them does not show (17.18 against 18.05 bytes per parameter
    # allocated, 2026-12-04). Train step: llama-3.2-1b b1 s2048, measured 4.4% under the estimate against a band
    # edge of 4.3%.
    "memory": 1,
    "train-step": 1,
}


def test_every_fit_case_is_inside_its_own_interval() -> None:
    for c in coverage(DATA, held_out=False):
        assert c.n - c.inside == OUTSIDE_THEIR_OWN_INTERVAL.get(c.kind, 0), c.kind
