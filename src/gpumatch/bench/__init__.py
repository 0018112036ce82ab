"""The fixed experiment package; the only place torch is imported.

``import gpumatch.bench`` and the torch-free helpers (:mod:`.shapes`, :mod:`.stats`) work without torch.
The measuring modules (:mod:`.llama`, :mod:`.timing`, :mod:`.micro`, :mod:`.decode`, :mod:`.train`,
:mod:`.env`) import torch when they are imported, so only a caller that measures pays for it.
Every entry point takes plain dicts and returns plain dicts (JSON-ready): the device that runs these
has no pydantic, so nothing here imports ``gpumatch.catalog`` or ``gpumatch.models``.
"""
