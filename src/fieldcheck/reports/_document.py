"""The report skeleton every system shares (issue 9, "Reports and gating"): a :class:`Report`
rendered as ``report.md`` and a standalone, escaped ``report.html``, plus plot helpers."""

from __future__ import annotations

import base64
import ctypes
import html
import re
import signal
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from fieldcheck._util.term import safe_text
from fieldcheck.reports._folder import RunFolder

# and an "&" that would start an entity (``&lt;`` shown as "<"); "Q&A" stays as written
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|#~]|&(?=[0-9A-Za-z]+;))")
LINE_BREAKS = re.compile(r"[\r\n\v\f\x85\u2028\u2029]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
LABEL_CHARS = 24

CSS = (
    "body{font-family:system-ui,sans-serif;line-height:1.4;color:#1f2328;margin:2em auto;"
    "padding:0 1.5em;max-width:80em}"
    "table{border-collapse:collapse;margin:1em 0;display:block;max-width:100%;overflow-x:auto}"
    "th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
    "th{background:#f4f4f4}td{overflow-wrap:break-word}"
    "img{width:calc(50% - 1em);min-width:20em;max-width:100%;height:auto;margin:.5em .4em .5em 0;"
    "vertical-align:top}img.wide{width:100%}"
    "code{background:#f4f4f4;overflow-wrap:break-word}"
    "dt{font-weight:bold;margin-top:.5em}"
)
"""Inline in ``report.html``: long values wrap, wide tables scroll, plots go two by two (a wide
one, ``WIDE`` times wider than high, takes the whole width: a 30-topic heatmap at half width
was unreadable), so the page never scrolls sideways at 1366 px (issue 28's screenshot pass)."""

WIDE = 2.5


def visible(text: str) -> str:
    """One line with every other control character shown as an escape (``\\x1b``): a report
    opened with ``cat`` must not act on the terminal (issue 9)."""
    return safe_text(LINE_BREAKS.sub(" ", text))


def md(text: str) -> str:
    """Escape Markdown syntax (and table pipes) in text that comes from the data; line breaks
    become spaces, so a value can never end a table row or start a heading."""
    return _MD_SPECIAL.sub(r"\\\1", visible(text))


def esc(text: str) -> str:
    """HTML-escape text from the data, on one line, control characters visible."""
    return html.escape(visible(text))


def md_code(text: str) -> str:
    """Inline code in Markdown: one line, no backtick that could close it early."""
    return "`" + visible(text).replace("`", "'") + "`"


def embedded_image(key: str, path: Path) -> str:
    """An ``<img>`` holding the plot's PNG bytes as a ``data:`` URI, so ``report.html`` is one
    file that opens anywhere with no server and no network (issue 28); the PNG stays beside it."""
    raw = path.read_bytes()
    width, height = int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")  # IHDR
    wide = ' class="wide"' if height and width > WIDE * height else ""
    data = base64.b64encode(raw).decode("ascii")
    alt = html.escape(visible(key), quote=True)
    return f'<img{wide} src="data:image/png;base64,{data}" alt="{alt}">'


@dataclass(frozen=True)
class Strong:
    """Text shown in bold (slots' Results Summary bolds the spec's verdicts)."""

    text: str


Inline = str | Strong | Sequence[str | Strong]
"""Text from the data: plain, bold, or a run of both (a table cell, a list item)."""


def _inline(text: Inline, escape: Callable[[str], str], bold: str) -> str:
    if isinstance(text, Strong):
        return bold.format(escape(text.text))
    if isinstance(text, str):
        return escape(text)
    return "".join(_inline(t, escape, bold) for t in text)


_md_inline = partial(_inline, escape=md, bold="**{}**")
_html_inline = partial(_inline, escape=esc, bold="<strong>{}</strong>")


@dataclass(frozen=True)
class Term:
    """A glossary entry: the metric's name, its formula as the spec writes it, what it tells."""

    name: str
    formula: str
    meaning: str


@dataclass
class Report:
    """An ordered list of blocks, each rendered twice (Markdown, HTML) as it is added. Every
    text argument is plain text from any source: the renderers escape it."""

    title: str
    signature: str = ""
    _md: list[str] = field(default_factory=list)
    _html: list[str] = field(default_factory=list)

    def _add(self, lines: Sequence[str], html_text: str) -> Report:
        self._md.append("\n".join([*lines, ""]))  # a blank line after each block
        self._html.append(html_text)
        return self

    def heading(self, text: str, level: int = 2) -> Report:
        return self._add(["#" * level + " " + md(text)], f"<h{level}>{esc(text)}</h{level}>")

    def paragraph(self, text: str) -> Report:
        return self._add([md(text)], f"<p>{esc(text)}</p>")

    def table(
        self,
        head: Sequence[str],
        rows: Sequence[Sequence[Inline]],
        *,
        text_columns: int | None = None,
    ) -> Report:
        """``text_columns``: how many leading columns hold data text (Markdown-escaped); by
        default every column is escaped."""
        columns = len(head) if text_columns is None else text_columns
        lines = ["| " + " | ".join(map(md, head)) + " |", "|" + "|".join("---" for _ in head) + "|"]
        for row in rows:
            texts = (
                c if i >= columns and isinstance(c, str) else _md_inline(c)
                for i, c in enumerate(row)
            )
            lines.append("| " + " | ".join(texts) + " |")
        cells = ["".join(f"<td>{_html_inline(c)}</td>" for c in row) for row in rows]
        header = "".join(f"<th>{esc(h)}</th>" for h in head)
        shown = [f"<thead><tr>{header}</tr></thead>", "<tbody>", *(f"<tr>{c}</tr>" for c in cells)]
        return self._add(lines, "\n".join(["<table>", *shown, "</tbody>", "</table>"]))

    def bullets(self, items: Sequence[Inline]) -> Report:
        listed = "".join(f"<li>{_html_inline(item)}</li>" for item in items)
        return self._add([f"- {_md_inline(item)}" for item in items], f"<ul>{listed}</ul>")

    def numbered(self, items: Sequence[tuple[Inline, Sequence[str]]]) -> Report:
        """An ordered list, each item with its bullets beneath it."""
        lines, listed = [], []
        for number, (text, bullets) in enumerate(items, 1):
            lines += [f"{number}. {_md_inline(text)}", *(f"   - {md(b)}" for b in bullets)]
            sub = "".join(f"<li>{esc(b)}</li>" for b in bullets)
            listed.append(f"<li>{_html_inline(text)}{f'<ul>{sub}</ul>' if sub else ''}</li>")
        return self._add(lines, "<ol>" + "".join(listed) + "</ol>")

    def images(self, images: Mapping[str, Path]) -> Report:
        """The Plots section, when there are plots (written beside the report): report.md links
        their files, report.html embeds them."""
        if not images:
            return self
        self.heading("Plots")
        return self._add(
            [f"![{md(key)}]({path.name})" for key, path in images.items()],
            "\n".join(embedded_image(key, path) for key, path in images.items()),
        )

    def glossary(self, terms: Sequence[Term]) -> Report:
        """The Glossary section: each metric, its formula as the spec writes it, what it tells."""
        self.heading("Glossary")
        listed = "".join(
            f"<dt>{esc(t.name)}</dt><dd><code>{esc(t.formula)}</code>: {esc(t.meaning)}</dd>"
            for t in terms
        )
        lines = [f"- **{md(t.name)}** {md_code(t.formula)}: {md(t.meaning)}" for t in terms]
        return self._add(lines, f"<dl>{listed}</dl>")

    def markdown(self) -> str:
        parts = [f"# {md(self.title)}", ""]
        if self.signature:
            parts += ["Signature: " + md_code(self.signature), ""]
        parts += self._md
        return "\n".join(parts).rstrip("\n") + "\n"

    def html(self) -> str:
        body = [
            "<!DOCTYPE html>",
            f'<html lang="en"><head><meta charset="utf-8"><title>{esc(self.title)}</title>',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<style>{CSS}</style></head><body>",
            f"<h1>{esc(self.title)}</h1>",
        ]
        if self.signature:
            shown = re.sub(r"([|,])", r"\1<wbr>", esc(self.signature))  # wraps after them
            body.append(f"<p>Signature: <code>{shown}</code></p>")
        body += [*self._html, "</body></html>"]
        return "\n".join(body) + "\n"


def write_report(out: str | Path | RunFolder, report: Report) -> dict[str, Path]:
    """``report.md`` and ``report.html`` in the folder ``out`` (a file name's byte that is not
    UTF-8 shown as U+FFFD)."""
    folder = RunFolder.of(out)
    return {
        name: folder.write_text(name, text)
        for name, text in (("report.md", report.markdown()), ("report.html", report.html()))
    }


def label(text: str, chars: int = LABEL_CHARS) -> str:
    """A plot label: one line, at most ``chars`` characters (a long name would squeeze the axes
    away), safe from matplotlib's mathtext (``$`` would start a formula)."""
    text = _CONTROL.sub(" ", text)
    if len(text) > chars:
        text = text[: chars - 1] + "\u2026"
    return text.replace("$", r"\$")


# Legends go right of the axes, so they never hide a bar (tight_layout makes room for them).
LEGEND_OUTSIDE: dict[str, Any] = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0)}


PLOTTING = threading.RLock()
"""Held while a figure is drawn and saved: pyplot's figures are state of the process, not
safe to share between threads (the API scores several runs at once, one thread each)."""


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, imported on first use (never at module load)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_stopping = threading.Lock()
_deferring: dict[int, int] = {}  # a thread (not the main one) inside ``interrupts_deferred``: depth
_asked: set[int] = set()  # those of them ``interrupt_thread`` asked to stop meanwhile


def _async_exc(ident: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(ident), None if exc is None else ctypes.py_object(exc)
    )


def interrupt_thread(ident: int) -> None:
    """Ctrl-C for the thread ``ident`` (not the main one: an API request's scoring whose client
    left): KeyboardInterrupt raised in it at once, or when it leaves ``interrupts_deferred``."""
    with _stopping:
        if _deferring.get(ident):
            _asked.add(ident)
        else:
            _async_exc(ident, KeyboardInterrupt)


def interrupt_withdrawn(ident: int) -> None:
    """The thread ``ident`` is done with its work: an ``interrupt_thread`` not raised yet is
    dropped (it must not reach the next task of a pool's thread)."""
    with _stopping:
        _asked.discard(ident)
        _async_exc(ident, None)


@contextmanager
def _deferred_in_thread() -> Iterator[None]:
    ident = threading.get_ident()
    with _stopping:
        _deferring[ident] = _deferring.get(ident, 0) + 1
    try:
        yield
    finally:
        with _stopping:
            depth = _deferring.pop(ident) - 1
            if depth:
                _deferring[ident] = depth
            asked = not depth and ident in _asked
            if asked:
                _asked.discard(ident)
    if asked:
        raise KeyboardInterrupt


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """A Ctrl-C (and a handled SIGTERM, SIGHUP) while a plot is drawn takes effect once it is
    saved: raised inside matplotlib it became a traceback or was lost (testers' findings); in
    another thread, an ``interrupt_thread``."""
    if threading.current_thread() is not threading.main_thread():
        with _deferred_in_thread():
            yield
        return
    caught: list[tuple[int, Any]] = []
    previous: dict[int, Any] = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        handler = signal.getsignal(sig)
        if callable(handler) or (sig == signal.SIGINT and handler == signal.SIG_DFL):
            previous[sig] = signal.signal(sig, lambda signum, frame: caught.append((signum, frame)))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if caught:
        signum, frame = caught[0]
        handler = previous[signum]
        if callable(handler):
            handler(signum, frame)
        else:  # SIGINT's default action
            raise KeyboardInterrupt


def count_axis(axis: Any) -> None:
    """Whole-number ticks on an axis of counts (``ax.yaxis``): no ``0.25`` of a turn."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


@contextmanager
def figure(path: Path, **subplots: Any) -> Iterator[tuple[Any, Any]]:
    """``with figure(folder / 'plot_x.png', figsize=...) as (fig, ax):`` draws, then saves and
    closes it (a Ctrl-C meanwhile takes effect after: ``interrupts_deferred``)."""
    with interrupts_deferred(), PLOTTING:
        plt = pyplot()
        fig, ax = plt.subplots(**subplots)
        try:
            with warnings.catch_warnings():  # a glyph the font lacks draws as a box: no warning
                warnings.filterwarnings("ignore", r"Glyph \d+ .*missing from", UserWarning)
                yield fig, ax
                fig.tight_layout()
                fig.savefig(path, dpi=110)
        finally:
            plt.close(fig)
