"""What an input file looks like, to name the likely cause when a file gives no usable record
(issue 9: swapped ``--data`` and ``--predictions`` said only "invalid JSON"); error path only."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from fieldcheck._util.errors import InputError, UsageProblem

KINDS = {  # kind -> (what it is, which option takes it)
    "convfinqa": ("a ConvFinQA dataset", "numeric score --data"),
    "numeric-predictions": ("numeric predictions (JSONL)", "numeric score --predictions"),
    "slot-lines": ("slot lines (JSONL)", "slots score --gold or --pred"),
    "slot-latency": ("slot latencies (JSONL)", "slots score --latency"),
    "slot-judge": ("slot judge scores (JSONL)", "slots score --judge"),
    "slot-conversations": ("conversations (JSONL)", "slots run --conversations"),
    "json-batch": ("a JSON batch (JSONL)", "json batch DATA.jsonl"),
    "json-documents": ("documents to extract (JSONL)", "json run DATA.jsonl"),
    "json-object": ("one JSON object, not JSONL (one object per line)", ""),
    "json-array": ("one JSON array, not JSONL (one object per line)", ""),
    "csv": ("CSV or TSV text, not JSON", ""),
    "text": ("plain text, not JSON", ""),
    "utf-16": ("UTF-16 text (save it as UTF-8)", ""),
    "binary": ("a binary file, not text", ""),
}
_FIRST_BYTES = 1 << 16
_WHOLE_FILE_LIMIT = 256 << 20  # bytes: a larger single JSON document is not parsed to guess


def _line_kind(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    keys = set(value)
    if {"conversation_id", "turn"} <= keys:
        return "numeric-predictions"
    if {"user", "session"} <= keys:
        if "turns" in keys or "messages" in keys:
            return "slot-conversations"
        if "seconds" in keys:
            return "slot-latency"
        if {"topic", "field", "score"} <= keys:
            return "slot-judge"
        if {"topic", "field"} <= keys:
            return "slot-lines"
    if "document" in keys:
        return "json-documents"
    if {"ground_truth", "output"} & keys:
        return "json-batch"
    if {"pre_text", "table"} <= keys or {"doc", "dialogue"} & keys or "annotation" in keys:
        return "convfinqa"
    return None


def _document_kind(value: Any) -> str:
    if isinstance(value, dict):
        splits = [value.get(s) for s in ("train", "dev", "test", "test_private")]
        if any(isinstance(s, list) for s in splits):
            return "convfinqa"
        return _line_kind(value) or "json-object"
    if isinstance(value, list) and value and _line_kind(value[0]) == "convfinqa":
        return "convfinqa"
    return "json-array" if isinstance(value, list) else "text"


def sniff(path: str | Path) -> str | None:
    """A key of :data:`KINDS` saying what ``path`` looks like, or None when unsure/unreadable."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_FIRST_BYTES)
            size = handle.seek(0, 2)
    except OSError:
        return None
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or (
        b"\x00" in head[:2] and b"\x00\x00" not in head
    ):
        return "utf-16"  # a byte-order mark, or ASCII text with every other byte 0
    if b"\x00" in head:
        return "binary"
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if not text:
        return None
    first, _, rest = text.partition(b"\n")
    try:
        value = orjson.loads(first)
    except orjson.JSONDecodeError:
        pass
    else:  # a JSONL line, or a whole document on one line
        kind = _line_kind(value)
        if kind is None and not rest.strip() and size <= len(head):
            kind = _document_kind(value)
        return None if kind in ("json-object", "text") else kind
    if text[:1] in (b"{", b"[") and size <= _WHOLE_FILE_LIMIT:
        try:
            return _document_kind(
                orjson.loads(Path(path).read_bytes().removeprefix(b"\xef\xbb\xbf"))
            )
        except (OSError, orjson.JSONDecodeError):
            return None
    if not rest and size > len(head):
        return None  # a first line longer than what is read: too long to tell (not "CSV")
    if b"," in first or b"\t" in first:  # a JSON value would have parsed above
        return "csv"
    return "text"


def likely_cause(path: str | Path, expected: str, others: dict[str, str] | None = None) -> str:
    """``"; it looks like X ..."`` or ``""``; ``others``: the command's other file options and
    the kinds they want, so a file meant for one of them is named as a swap."""
    kind = sniff(path)
    if kind is None or kind == expected:
        return ""
    what, used_by = KINDS[kind]
    for option, wanted in (others or {}).items():
        if wanted == kind:
            return f"; it looks like {what}, the file of {option}: are the two swapped?"
    return f"; it looks like {what}" + (f", for `fieldcheck {used_by}`" if used_by else "")


def check_input_file(
    path: Path,
    *,
    records: int,
    errors: Sequence[InputError],
    option: str,
    expected: str,
    others: dict[str, str] | None = None,
    problems: int | None = None,
    role: str | None = None,
) -> None:
    """The rule of every system (issue 9): an input file with no usable record is a usage error
    naming the first problem and what the file looks like instead (``problems``: how many there
    were, when ``errors`` holds only the first ones; ``role``: the input's role as given)."""
    if records:
        return
    if not errors:
        message = f"{path}: no records (the file is empty)"
    else:
        count = len(errors) if problems is None else problems
        lines = f"{count} problem{'s' if count != 1 else ''}"
        cause = likely_cause(path, expected, others)
        message = f"{path}: no valid record ({lines}; first: {errors[0].one_line()}){cause}"
    raise UsageProblem(message, option, role=role)
