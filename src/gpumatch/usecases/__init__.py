"""The commands' use cases: one module per command that has a library call, and the parts they share.

``cli/X.py`` parses, calls one function of ``usecases/X.py`` and renders the value it returns through
:mod:`gpumatch.report`; a use case never prints, exits or renders. It sits between ``report`` and the
measuring packages in the import layers (``cli > report > usecases > loadgen > lab > ...``): it may call the
measuring runs (:mod:`gpumatch.lab`, :mod:`gpumatch.loadgen`), read the store back, and put the estimator and
planner together with what is stored (a card's newest calibration).

Command modules: :mod:`.estimate`, :mod:`.plan`, :mod:`.bench`, :mod:`.serve`, :mod:`.report`. The parts they
share:

- :mod:`.calibrated` — the newest stored calibration of a card (estimate, plan, report);
- :mod:`.stored_bench`, :mod:`.stored_serving`, :mod:`.stored_scale` — stored bench, serving and scale runs read
  back (``bench list|show|compare|export``, ``report``);
- :mod:`.compare_serving` — two serving runs of any tool compared level by level (``bench compare``);
- :mod:`.import_bench` — a ``bench export`` / ``bench serve --out`` file back into a store (``bench import``);
- :mod:`.report_serving`, :mod:`.report_sidebyside` — the serving part and the runs side by side of ``report``.

The other commands (``gpus``, ``models``, ``workload``, ``doctor``, ``monitor``, ``calibrate``, ``runs``) call the
one library function of their own package directly (docs/architecture.md says which).
"""
