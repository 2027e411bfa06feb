"""``python -m explorer``: the app (see explorer/cli.py, or ``--help``)."""

from explorer.cli import main

main()
