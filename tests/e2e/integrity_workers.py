"""Children of the integrity tests (no pytest import: they start fast).

``python -m integrity_workers stall MODULE MARKER -- ARGS...`` runs ``gpumatch ARGS`` with the
``write_bundle`` that ``MODULE`` calls replaced by one that writes the run's rows (inside the open transaction),
then creates ``MARKER`` and sleeps: the parent SIGKILLs it there, mid-write. With ``--after N`` the first N
bundles are written normally (a merge killed after it finished N runs).
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path
from typing import Any

from gpumatch.usecases.import_bench import import_file


def stall(module: str, marker: str, after: int, argv: list[str]) -> int:
    """Run the CLI with ``module.write_bundle`` stalling inside its transaction after ``after`` bundles."""
    mod = importlib.import_module(module)
    real = mod.write_bundle
    done = {"n": 0}

    def stalling(c: Any, b: Any) -> Any:
        out = real(c, b)
        done["n"] += 1
        if done["n"] > after:
            Path(marker).write_text("in the transaction")
            time.sleep(600)
        return out

    mod.write_bundle = stalling
    from gpumatch.cli.app import main

    return main(argv)


def importer(path: str, store: str, start: Any, out: Any) -> None:
    """One of several processes importing the same file at once (``bench import``'s library call)."""
    try:
        start.wait(timeout=60)
        _, run_id = import_file(Path(path), store)
        out.put(("stored", run_id, None))
    except BaseException as e:  # "already in" is the expected answer of all but one
        out.put(("refused", None, f"{type(e).__name__}: {e}"))


if __name__ == "__main__":
    args = sys.argv[1:]
    cut = args.index("--")
    head, rest = args[:cut], args[cut + 1:]
    n_after = int(head[head.index("--after") + 1]) if "--after" in head else 0
    sys.exit(stall(head[1], head[2], n_after, rest))
