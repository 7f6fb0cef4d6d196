"""The shared report skeleton (reports/_document.py): one description, two escaped renderings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fieldcheck.reports._document import Report, Term, write_report

HOSTILE = "<img src=x onerror=alert(1)> | # *x*\n## not a heading"


def _report() -> Report:
    return (
        Report("Title <b>", signature="sys|a:1`x")
        .heading(HOSTILE)
        .paragraph(HOSTILE)
        .table(["name", "value"], [[HOSTILE, "0.500 [0.1, 0.9]"]], text_columns=1)
        .bullets([HOSTILE])
        .glossary([Term("F1", "2PR/(P+R)", HOSTILE)])
    )


def test_markdown_escapes_data_and_keeps_numbers() -> None:
    text = _report().markdown()
    assert not re.search(r"(?<!\\)<img", text) and "\\<img src=x onerror=alert(1)\\>" in text
    assert "\n## not a heading" not in text  # a line break in data never starts a heading
    assert "| 0.500 [0.1, 0.9] |" in text  # a number column is left as formatted
    assert "\\| \\# \\*x\\*" in text  # pipes cannot split a table row
    assert "Signature: `sys|a:1'x`" in text
    assert "- **F1** `2PR/(P+R)`: " in text


def test_an_ampersand_is_escaped_so_an_entity_in_data_stays_text() -> None:
    """``&lt;script&gt;`` in a value rendered as ``<script>`` in report.md (a Markdown viewer
    reads entities): an ``&`` that starts an entity is backslash-escaped as the other specials
    are, in every text cell; one that starts none (``Q&A``, ``P & R``) is left as written."""
    report = Report("t").paragraph("&lt;script&gt; Q&A P & R").table(["k"], [["&amp;"]])
    text = report.markdown()
    assert "\\&lt;script\\&gt; Q&A P & R" in text and "| \\&amp; |" in text


def test_html_escapes_every_value() -> None:
    page = _report().html()
    assert "<img src=x" not in page
    assert page.count("&lt;img src=x onerror=alert(1)&gt;") == 5
    assert "<title>Title &lt;b&gt;</title>" in page
    assert "Signature: <code>sys|<wbr>a:1`x</code>" in page  # wraps after a separator
    assert "<dt>F1</dt><dd><code>2PR/(P+R)</code>" in page


def test_write_report_writes_both_files_in_the_folder(tmp_path: Path) -> None:
    paths = write_report(tmp_path, Report("T").paragraph("p"))
    assert sorted(p.name for p in paths.values()) == ["report.html", "report.md"]
    assert (tmp_path / "report.md").read_text() == "# T\n\np\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "report.md"]


def test_control_characters_from_data_are_visible_not_raw() -> None:
    # the tester's case: `cat report.md` must not clear the screen or set the window title
    report = Report("t").table(["id"], [["a\x1b[2J\x1b]0;TITLE\x1b\\b\u202e"]]).paragraph("\x07")
    for text in (report.markdown(), report.html()):
        assert not any(ch in text for ch in "\x1b\x07\u202e")
    assert "x1b[2J" in report.html().replace("\\\\", "\\") and "\\u202e" in report.html()


def test_a_ctrl_c_while_a_plot_is_drawn_takes_effect_once_it_is_saved(tmp_path: Path) -> None:
    """A real SIGINT while a figure is drawn: the figure is finished, saved whole and closed,
    then KeyboardInterrupt is raised (inside matplotlib it became "ValueError: Invalid bounding
    box" with a traceback; a tester's finding), and Python's own handler is back."""
    import os
    import signal

    from fieldcheck.reports._document import figure

    path = tmp_path / "plot.png"
    drawn = []
    with pytest.raises(KeyboardInterrupt), figure(path, figsize=(3, 2)) as (_, ax):
        os.kill(os.getpid(), signal.SIGINT)
        ax.bar(["a", "b"], [1, 2])
        drawn.append(True)
    assert drawn == [True]
    assert path.read_bytes().startswith(b"\x89PNG") and not list(tmp_path.glob(".*"))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_sigterm_while_a_plot_is_drawn_with_sigint_ignored_takes_effect_once_it_is_saved(
    tmp_path: Path,
) -> None:
    """A command started with SIGINT ignored (a script's `cmd &`) and sent SIGTERM while a plot is
    drawn: the plot is saved, then the CLI's SIGTERM handler raises KeyboardInterrupt (Ctrl-C's
    path). The SIGTERM was dropped and the command finished with status 0 (a tester's finding);
    SIGINT stays ignored meanwhile."""
    import os
    import signal

    from fieldcheck._cli.main import _as_ctrl_c
    from fieldcheck.reports._document import figure

    path = tmp_path / "plot.png"
    drawn = []
    before = signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGTERM, _as_ctrl_c)
    try:
        with pytest.raises(KeyboardInterrupt), figure(path, figsize=(3, 2)) as (_, ax):
            os.kill(os.getpid(), signal.SIGTERM)
            ax.bar(["a", "b"], [1, 2])
            drawn.append(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)
        assert drawn == [True]
        assert path.read_bytes().startswith(b"\x89PNG")
        assert signal.getsignal(signal.SIGTERM) is _as_ctrl_c
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])


def test_a_wide_plot_takes_the_whole_width_of_the_page(tmp_path: Path) -> None:
    """A plot much wider than high (a 30-topic heatmap, 3534 x 528 px) was shown at half the
    page's width like every plot, its labels 2 px high (a new-user trial): it gets class "wide",
    the full width; an ordinary plot stays two by two."""
    from fieldcheck.reports._document import CSS, embedded_image

    def png(name: str, width: int, height: int) -> Path:
        header = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR"
        path = tmp_path / name
        path.write_bytes(header + width.to_bytes(4, "big") + height.to_bytes(4, "big") + b"\x08")
        return path

    assert embedded_image("heat", png("h.png", 3534, 528)).startswith('<img class="wide" src=')
    assert embedded_image("bars", png("b.png", 1000, 600)).startswith("<img src=")
    assert "img.wide{width:100%}" in CSS
