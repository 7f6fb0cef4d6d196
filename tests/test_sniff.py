"""What an input file looks like (``_util/sniff.py``), for naming the likely cause of a wrong file."""

from __future__ import annotations

from pathlib import Path

import pytest

from fieldcheck._util.sniff import likely_cause, sniff

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("numeric/data.json", "convfinqa"),
        ("convfinqa/dev.json", "convfinqa"),
        ("numeric/predictions_model_a.jsonl", "numeric-predictions"),
        ("slots/gold.synthetic.jsonl", "slot-lines"),
        ("slots/latency_synthetic-fast.synthetic.jsonl", "slot-latency"),
        ("slots/judge_synthetic-fast.synthetic.jsonl", "slot-judge"),
        ("slots/conversations.synthetic.jsonl", "slot-conversations"),
        ("json/invoices.jsonl", "json-batch"),
        ("json/documents.jsonl", "json-documents"),
        ("json/invoice.schema.json", "json-object"),
    ],
)
def test_every_bundled_file_is_recognised(path: str, kind: str) -> None:
    assert sniff(EXAMPLES / path) == kind


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("", None),
        ("a,b\n1,2\n", "csv"),
        ("a\tb\n", "csv"),
        ("hello world\n", "text"),
        ('{"x": 1}\n{"y": 2}\n', None),  # JSONL of unknown lines: no guess
        ('[{"x": 1}]', "json-array"),
        ('{"train": [], "dev": []}', "convfinqa"),  # the derived format on one line
        ('\ufeff{"conversation_id": "c", "turn": 0}\n', "numeric-predictions"),  # BOM
    ],
)
def test_small_files(tmp_path: Path, text: str, kind: str | None) -> None:
    path = tmp_path / "f"
    path.write_text(text, encoding="utf-8")
    assert sniff(path) == kind


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ('{"conversation_id": "c", "turn": 0}\n'.encode("utf-16"), "utf-16"),  # with its BOM
        ('{"id": 1}\n'.encode("utf-16-le"), "utf-16"),  # without: every other byte 0
        ('{"id": 1}\n'.encode("utf-16-be"), "utf-16"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
    ],
)
def test_utf16_and_binary_files_are_named(tmp_path: Path, raw: bytes, kind: str) -> None:
    """A UTF-16 file and a binary one (a PNG) are named as such, not "CSV or TSV text" or
    "plain text" (a tester's finding)."""
    path = tmp_path / "f"
    path.write_bytes(raw)
    assert sniff(path) == kind


def test_likely_cause_names_a_swap_only_for_the_other_option(tmp_path: Path) -> None:
    preds = EXAMPLES / "numeric/predictions_model_a.jsonl"
    assert likely_cause(preds, "numeric-predictions") == ""  # the right kind: nothing to say
    assert likely_cause(preds, "convfinqa", {"--predictions": "numeric-predictions"}) == (
        "; it looks like numeric predictions (JSONL), the file of --predictions: "
        "are the two swapped?"
    )
    assert likely_cause(preds, "json-batch") == (
        "; it looks like numeric predictions (JSONL), for `fieldcheck numeric score --predictions`"
    )
    assert likely_cause(tmp_path / "missing", "json-batch") == ""
