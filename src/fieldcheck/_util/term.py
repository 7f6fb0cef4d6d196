"""Printing text that came from data (a key can hold ``\\x1b[2J``): control characters are shown
escaped by ``safe_text``, ``console.SafeConsole`` and ``SafeLogFilter``, never sent raw."""

from __future__ import annotations

import logging
import re

# C0 controls, DEL, C1 controls, the Unicode line/paragraph separators, the bidirectional
# overrides and isolates (which reorder what a terminal shows), and lone surrogates (a file
# name's byte that is not UTF-8: a UTF-8 stream cannot write them).
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# The same, keeping the newline (the line breaks Rich itself writes between lines and rows).
_UNSAFE_BUT_NEWLINE = re.compile(
    r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
# A CSV cell's: those that act on a terminal (``cat file.csv``); tab and line breaks are data.
_UNSAFE_IN_CELL = re.compile(
    r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
# In JSON text only string contents can hold these; \\uXXXX keeps the JSON equal.
_UNSAFE_JSON = re.compile(r"[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def safe_text(value: object, *, markup: bool = False) -> str:
    """``str(value)`` with every control character written as a visible escape (``\\x1b``,
    ``\\n``, ``\\u202e``); with ``markup=True`` also Rich markup escaped (``[red]`` stays text)."""
    text = _UNSAFE.sub(_escape_char, str(value))
    if not markup:
        return text
    from rich.markup import escape  # not at the top: a pool worker writing CSV has no Rich

    return escape(text)


def safe_markup(value: object) -> str:
    """``safe_text(value, markup=True)``: data placed inside a Rich markup string."""
    return safe_text(value, markup=True)


_BIDI = re.compile(r"[\u202a-\u202e\u2066-\u2069]")


def safe_bidi(text: str) -> str:
    """``text`` with its bidirectional overrides and isolates written as ``safe_text`` writes
    them (``\\u202e``): on a page they would reorder the numbers and names shown after them."""
    return _BIDI.sub(_escape_char, text)


def safe_json_text(text: str) -> str:
    """JSON text for a terminal: orjson leaves DEL, C1 and the separators raw; written as
    ``\\u00XX`` they are the same JSON and cannot act on the terminal."""
    return _UNSAFE_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def safe_cell(text: str) -> str:
    """A CSV cell's text with the control characters that act on a terminal escaped as
    ``safe_text`` writes them (``\\x1b``); tab and line breaks kept (CSV quotes them)."""
    return _UNSAFE_IN_CELL.sub(_escape_char, text)


def safe_lines(text: str) -> str:
    """Lines of data for a terminal (a CSV's rows): every control character escaped but the line
    breaks (``\\r\\n`` shown as one)."""
    return _UNSAFE_BUT_NEWLINE.sub(_escape_char, text.replace("\r\n", "\n"))


class SafeLogFilter(logging.Filter):
    """Escapes control characters in a log record's message (warnings quote data)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        record.msg, record.args = safe_text(message), None
        return True


def install_log_filter() -> None:
    """Add ``SafeLogFilter`` to the ``fieldcheck`` logger once."""
    logger = logging.getLogger("fieldcheck")
    if not any(isinstance(f, SafeLogFilter) for f in logger.filters):
        logger.addFilter(SafeLogFilter())
