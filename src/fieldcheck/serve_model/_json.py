"""Synthetic JSON-extraction responder (``json-extract-v1``): the document's ground truth with
each model's seeded errors (``PROFILES``: docs/json.md "The synthetic models"), drawn in a fixed
order."""

from __future__ import annotations

import copy
import json
import random
import string
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from fieldcheck._util.errors import InputError
from fieldcheck.jsoneval import PROMPT_ID, document_digest, document_from_prompt, read_documents
from fieldcheck.serve_model._base import LookupResponder, Responder

DOCUMENTS_FILE = Path("json") / "documents.jsonl"
OPTIONAL_KEYS = ("due_date", "purchase_order", "payment_terms", "customer")
EXTRA_KEYS: tuple[tuple[str, Any], ...] = (
    ("confidence", 0.93),
    ("vendor_vat_id", "GB123456789"),
    ("bank_iban", "DE89370400440532013000"),
    ("document_type", "invoice"),
    ("language", "en"),
    ("page_count", 1),
)


@dataclass(frozen=True)
class Profile:
    """Error rates of one synthetic model (see the module docstring's table)."""

    typo: float = 0.0
    wrong_amount: float = 0.0
    date_format: float = 0.0
    missing_key: float = 0.0
    drop_item: float = 0.0
    invent_null: float = 0.0
    extra_key_draws: tuple[float, ...] = ()
    fence: float = 0.0
    prose: float = 0.0
    invalid_json: float = 0.0


PROFILES: dict[str, Profile] = {
    "synthetic-careful": Profile(typo=0.05),
    "synthetic-eager": Profile(typo=0.05, invent_null=0.30, extra_key_draws=(0.5, 0.3), fence=0.05),
    "synthetic-fast": Profile(
        typo=0.20,
        wrong_amount=0.15,
        date_format=0.10,
        missing_key=0.05,
        drop_item=0.10,
        extra_key_draws=(0.05,),
        fence=0.05,
        prose=0.06,
        invalid_json=0.05,
    ),
}


def typo(text: str, rng: random.Random) -> str:
    """``text`` with one letter replaced, dropped or swapped with the next (not the first or last)."""
    if len(text) < 4:
        return text
    i = rng.randrange(1, len(text) - 2)
    kind = rng.randrange(3)
    if kind == 0:
        letter = rng.choice([c for c in string.ascii_lowercase if c != text[i].lower()])
        return text[:i] + letter + text[i + 1 :]
    if kind == 1 or text[i] == text[i + 1]:  # a swap of two same letters drops one
        return text[:i] + text[i + 1 :]
    return text[:i] + text[i + 1] + text[i] + text[i + 2 :]


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _invent(key: str, out: dict[str, Any], rng: random.Random) -> Any:
    if key == "due_date" and isinstance(out.get("invoice_date"), str):
        try:
            return (date.fromisoformat(out["invoice_date"]) + timedelta(days=30)).isoformat()
        except ValueError:
            pass
    if key == "purchase_order":
        return f"PO-{rng.randrange(10000, 99999)}"
    return "Thank you for your business."


def answer(gt: dict[str, Any], profile: Profile, rng: random.Random) -> str:
    """The reply of a model with ``profile`` for a document whose ground truth is ``gt``."""
    out = copy.deepcopy(gt)
    if rng.random() < profile.typo:
        names = [("vendor", "name"), ("customer", "name"), ("vendor", "address", "street")]
        path = rng.choice(names)
        holder: Any = out
        for part in path[:-1]:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and isinstance(holder.get(path[-1]), str):
            holder[path[-1]] = typo(holder[path[-1]], rng)
    if rng.random() < profile.wrong_amount:
        key = rng.choice(["subtotal", "tax", "total"])
        if isinstance(out.get(key), int | float):
            out[key] = round(out[key] * 1.1, 2)
    if rng.random() < profile.date_format and isinstance(out.get("invoice_date"), str):
        y, _, rest = out["invoice_date"].partition("-")
        m, _, d = rest.partition("-")
        out["invoice_date"] = f"{d}/{m}/{y}"
    for key in OPTIONAL_KEYS:
        if rng.random() < profile.missing_key:
            out.pop(key, None)
    items = out.get("line_items")
    if rng.random() < profile.drop_item and isinstance(items, list) and len(items) > 1:
        items.pop()
    if rng.random() < profile.invent_null:
        nulls = sorted(k for k, v in out.items() if _is_null(v))
        if nulls:
            key = rng.choice(nulls)
            out[key] = _invent(key, out, rng)
    for chance in profile.extra_key_draws:
        if rng.random() < chance:
            key, value = rng.choice(EXTRA_KEYS)
            out[key] = value
    text = json.dumps(out, ensure_ascii=False)
    roll = rng.random()
    if roll < profile.invalid_json:
        return text[: len(text) // 2]
    roll -= profile.invalid_json
    if roll < profile.prose:
        return (
            f"Here is the data I extracted from the invoice:\n{text}\nLet me know if you need more."
        )
    roll -= profile.prose
    if roll < profile.fence:
        return f"```json\n{json.dumps(out, ensure_ascii=False, indent=2)}\n```"
    return text


def index(responses_dir: Path) -> dict[str, dict[str, Any]]:
    """Document digest -> ground truth; empty when the examples file is missing or unreadable."""
    try:
        records, _ = read_documents(responses_dir / DOCUMENTS_FILE)
    except InputError:
        return {}
    return {document_digest(r.document): r.ground_truth for r in records}


def build(responses_dir: Path) -> list[Responder]:
    """The JSON-extraction responder over ``responses_dir`` (default: the repository's examples/)."""
    table = index(responses_dir)
    data = f"JSON extraction ({DOCUMENTS_FILE})"
    return [
        LookupResponder(
            PROMPT_ID, table, document_from_prompt, document_digest, answer, PROFILES, data
        )
    ]
