"""``python -m infercast``: the same entry point as the ``infercast`` script."""

from infercast.cli import main

if __name__ == "__main__":
    main()
