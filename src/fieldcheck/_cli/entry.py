"""The ``fieldcheck`` console script: the command line's modules take a moment to import, and a
Ctrl-C then said so with a traceback; it is one line, as at any other moment."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from fieldcheck._cli.main import main as run
    except KeyboardInterrupt:
        sys.stderr.write("interrupted before any output was written\n")
        raise SystemExit(130) from None
    run()
