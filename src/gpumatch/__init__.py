"""gpumatch: match deep-learning workloads to GPUs, and prove the match with measurements.

The package imports without torch, pynvml or a GPU; heavy layers load lazily.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("gpumatch")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
