"""``python -m gpumatch ...``: the same command line as the ``gpumatch`` console script."""

from __future__ import annotations

from gpumatch.cli.app import main

if __name__ == "__main__":
    raise SystemExit(main())
