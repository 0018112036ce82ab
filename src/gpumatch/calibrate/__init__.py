"""The loop from measurement back to estimation: measured cases, predicted against measured, the fit.

- :mod:`.cases` reads the committed measurement files (``tests/data/measurements/*-h200-*.json``) into
  :class:`~gpumatch.calibrate.cases.MeasuredCase` values, each in the fit set or held out (the rule is there).
- :mod:`.compare` predicts each case with :func:`gpumatch.estimate.estimate` under a given Calibration and
  gives its error; :mod:`.published` does the same for published serving figures (never fitted on).
- :mod:`.fit` fits a :class:`~gpumatch.estimate.Calibration` to the fit set and returns it as a value with its
  provenance; ``benchmarks/fit_calibration.py`` runs it.

Nothing under ``estimate/`` imports this package and nothing under ``bench/`` imports ``estimate``: a fitted
Calibration reaches the estimators as a value (JSON, ``gpumatch estimate --calibration``), or by being copied
into the defaults of :mod:`gpumatch.estimate.calibration` (docs/calibration.md).
"""
