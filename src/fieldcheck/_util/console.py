"""The terminal's console: a Rich console that escapes what it writes (``term`` escapes text
without Rich, for the processes that only write files)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment

from fieldcheck._util.term import _UNSAFE_BUT_NEWLINE, _escape_char


class SafeConsole(Console):
    """A Rich console that escapes control characters in every text segment it writes (Rich's
    own controls are separate segments and stay): the last line of defence. Emoji codes
    (``:smile:``) in data stay text."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("emoji", False)
        super().__init__(*args, **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment
            if segment.control
            else Segment(_UNSAFE_BUT_NEWLINE.sub(_escape_char, segment.text), segment.style)
            for segment in buffer
        )
