"""Reading a self-contained report.html back in tests (issue 28: one file, plots embedded)."""

from __future__ import annotations

import base64
from html.parser import HTMLParser

PNG_URI = "data:image/png;base64,"


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.images: dict[str, bytes] = {}  # alt -> PNG bytes

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = {k: v or "" for k, v in attrs}
        self.refs += [
            (tag, k, v)
            for k, v in named.items()
            if k in {"src", "href", "srcset", "action", "data", "poster"}
        ]
        if tag == "img" and named.get("src", "").startswith(PNG_URI):
            self.images[named.get("alt", "")] = base64.b64decode(
                named["src"][len(PNG_URI) :], validate=True
            )


def embedded_pngs(page: str) -> dict[str, bytes]:
    """Every ``<img>`` whose source is an embedded PNG, alt text -> the PNG's bytes."""
    parser = _Refs()
    parser.feed(page)
    return parser.images


def external_refs(page: str) -> list[tuple[str, str, str]]:
    """Every reference the page makes to anything but a ``data:`` URI or an in-page anchor, and
    every ``url(`` or ``@import`` in it (a stylesheet could fetch one)."""
    parser = _Refs()
    parser.feed(page)
    outside = [r for r in parser.refs if not r[2].startswith(("data:", "#"))]
    outside += [("css", "url", page[i : i + 40]) for i in _find_all(page, "url(")]
    outside += [("css", "@import", page[i : i + 40]) for i in _find_all(page, "@import")]
    return outside


def _find_all(text: str, needle: str) -> list[int]:
    found, at = [], text.find(needle)
    while at >= 0:
        found.append(at)
        at = text.find(needle, at + 1)
    return found
