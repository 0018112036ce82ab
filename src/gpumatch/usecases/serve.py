"""``gpumatch serve``: gpumatch's own continuous-batching server, its options checked before anything is built.

The server's lifecycle (build the engine, idle power, GPU telemetry, serve until stopped) is
:func:`gpumatch.lab.serve.serve`; this module only orders the steps the command shows: a bad option is refused
(one line, exit 2) before ``on_building`` says that the model is being built. :class:`ServeOptions` and
:class:`Listening` are named here so ``cli/serve.py`` imports nothing of ``lab``.
"""

from __future__ import annotations

from collections.abc import Callable

from gpumatch.lab.serve import Listening, ServeOptions

__all__ = ["Listening", "ServeOptions", "serve"]


def serve(opts: ServeOptions, on_ready: Callable[[Listening], None],
          on_building: Callable[[], None] | None = None) -> None:
    """Check ``opts`` (InputError before anything is built), call ``on_building``, then serve until Ctrl-C or
    SIGTERM (their exception passes through); ``on_ready`` gets the address and the warnings once bound."""
    from gpumatch.lab import serve as lifecycle

    lifecycle.check_options(opts)
    if on_building is not None:
        on_building()
    lifecycle.serve(opts, on_ready=on_ready)
