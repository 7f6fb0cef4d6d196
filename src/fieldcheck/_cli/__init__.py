"""Command line: thin Typer shells over the library (parse, call, format; no scoring logic)."""
