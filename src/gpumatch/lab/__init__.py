"""The lab: ``gpumatch bench run|list|show|compare|export`` as library calls.

It sits between ``report`` and ``plan | calibrate | bench`` in the import layers: it runs a suite's cases
(:mod:`.suites`) each in a child process (:mod:`.child`), records them through :class:`gpumatch.record.Recording`
(:mod:`.run`), stores the estimator's prediction beside each measurement (:mod:`.predict`), and reads runs back
for ``show`` and ``compare`` (:mod:`.results`). The parent process never imports torch: only the children do.
"""
