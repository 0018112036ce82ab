"""The lab: the measuring runs that gpumatch starts itself, each recorded through :class:`gpumatch.record.Recording`.

- ``bench run``: :mod:`.run` runs a suite's cases (:mod:`.suites`, or a workload file's: :mod:`.workload`; weights
  and text inputs: :mod:`.inputs`) each in a child process (:mod:`.child`), with the case's telemetry window
  (:mod:`.telemetry`), the estimator's prediction beside each measurement (:mod:`.predict`) and each result's ratio
  to the card's ceiling (:mod:`.ceiling`);
- ``serve``: the lifecycle of gpumatch's own server (:mod:`.serve`) and its GPU telemetry (:mod:`.serve_telemetry`);
- ``bench scale``: the scaling ladder (:mod:`.scale`, formulas :mod:`.scale_derive`, predictions
  :mod:`.scale_predict`).

The parent process never imports torch: only the children and the server do (through :mod:`gpumatch.bench`).
Reading stored runs back, reports and imports are :mod:`gpumatch.usecases`'; the load generator is
:mod:`gpumatch.loadgen`.
"""
