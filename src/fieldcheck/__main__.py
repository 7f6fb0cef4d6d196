"""``python -m fieldcheck``: the ``fieldcheck`` command (docs/cli.md)."""

from fieldcheck._cli.entry import main

main()
