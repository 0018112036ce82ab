"""``python -m gpumatch``: the same command line as the ``gpumatch`` script."""

from gpumatch.cli.app import main

if __name__ == "__main__":
    main()
