"""gpumatch: match deep-learning workloads to GPUs, and prove the match with measurements.

The package imports without torch, pynvml or a GPU; heavy layers load lazily.
"""

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``__version__`` on first use: importing importlib.metadata costs ~70 ms, which the command line's
    start-up (and its Ctrl-C guard, gpumatch.cli.app) should not pay before it can handle a signal."""
    if name != "__version__":
        raise AttributeError(f"module 'gpumatch' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        value = version("gpumatch")
    except PackageNotFoundError:  # running from a source tree that was never installed
        value = "0.0.0+unknown"
    globals()["__version__"] = value
    return value
