"""Parsing and running a ConvFinQA program in one call, as the tests run gold programs (the
library parses and executes in two steps: ``parse_program``, ``execute_program``)."""

from __future__ import annotations

from collections.abc import Mapping

from fieldcheck.metrics import execute_program, parse_program


def run_program(
    text: str, *, table: Mapping[str, Mapping[str, float | str]] | None = None
) -> float | bool:
    """``execute_program(parse_program(text))``: ProgramParseError or ProgramExecutionError."""
    return execute_program(parse_program(text), table=table)
