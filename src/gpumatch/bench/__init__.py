"""The fixed experiment package; the only place torch is imported. It measures and nothing else.

``import gpumatch.bench`` and the torch-free helpers (:mod:`.shapes`, :mod:`.stats`) work without torch.
The measuring modules (:mod:`.llama`, :mod:`.timing`, :mod:`.micro`, :mod:`.decode`, :mod:`.train`,
:mod:`.env`, :mod:`.kernelpath`, :mod:`.convergence`) import torch when they are imported, so only a caller that
measures pays for it.
Every entry point takes plain dicts and returns plain dicts (JSON-ready). The device that runs these has no
pydantic, so nothing here imports ``gpumatch.catalog`` or the validating parts of ``gpumatch.models``:
:mod:`.shapes` reads the model presets through :mod:`gpumatch.models.builtin` (standard library only).
Comparing measurements with estimates, and fitting a Calibration to them, is :mod:`gpumatch.calibrate`'s job;
an import contract keeps ``estimate``, ``calibrate`` and ``store`` out of this package.
"""
