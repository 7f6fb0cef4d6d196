"""The saved configuration as the API serves it: the library's (``jsoneval._saved``) with its
errors as 422 responses naming the request's part, plus the uploads and the page's table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

import orjson

from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import document_error, loads
from fieldcheck.api._errors import ApiError
from fieldcheck.jsoneval import (
    EvalConfig,
    SavedConfig,
    SectionError,
    merged_config,
    parse_section,
)


def parse_json_file(raw: bytes, *, name: str) -> Any:
    """An uploaded JSON file's content (a UTF-8 byte order mark allowed), or InputError in the
    CLI's words (``f.json:1: invalid JSON: not UTF-8 text (byte 0xff at column 2)``)."""
    data = raw.removeprefix(b"\xef\xbb\xbf")
    try:
        return loads(data)  # integers beyond 64 bits exact, as every JSON input
    except orjson.JSONDecodeError as exc:
        raise document_error(exc, data, file=name) from None


def strategy_rows(rows: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The Configuration page's table (field, strategy) as a mapping for ``parse_strategies``:
    an empty field name or one listed twice is refused."""
    mapping: dict[str, Any] = {}
    for field, strategy in rows:
        if not field.strip():
            raise InputError("a field name must not be empty", value=strategy)
        if field in mapping:
            raise InputError("the field is listed twice", field=field)
        mapping[field] = strategy
    return mapping


def merged(
    saved: SavedConfig,
    base: EvalConfig,
    *,
    strategies: Mapping[str, Any] | None = None,
    thresholds: Mapping[str, Any] | None = None,
    weights: Mapping[str, Any] | None = None,
    flatten: bool = False,
    safety_check: Literal["off", "leaks"] = "off",
) -> EvalConfig:
    """A request's configuration merged with the saved one (``jsoneval.merged_config``) and the
    server's matcher ``base``; a bad section is a 422 naming the request's part."""
    given = {
        "strategies": strategies,
        "weights": weights,
        **(thresholds or {}),
        "flatten": flatten,
        "safety_check": safety_check,
        "matcher": base.matcher,
        "judge_base_url": base.judge_base_url,
        "judge_model": base.judge_model,
    }
    try:
        if thresholds is not None:  # its names and values checked as the section's
            try:
                parse_section("thresholds", thresholds)
            except InputError as exc:
                raise SectionError("thresholds", exc) from None
        return merged_config(given, saved, lambda _: None)
    except SectionError as exc:
        part = _REQUEST[exc.section]
        field = f"{part}.{exc.error.field}" if exc.error.field and not exc.saved else part
        raise ApiError.invalid(exc.error, field=field) from None


_REQUEST = {"strategies": "field_strategies", "thresholds": "thresholds", "weights": "weights"}
