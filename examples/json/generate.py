"""Regenerate the bundled JSON example: ``python examples/json/generate.py`` (deterministic).

Writes ``invoices.jsonl`` (300 invoice-extraction records: ground truth and a simulated model's
output) and ``strategies.json`` next to this file; the same seed always gives the same bytes. Each
record's output is its ground truth passed through a seeded noise model of typical extraction
errors: typos in names, paraphrased descriptions, reformatted or wrong dates and amounts, missing,
null and invented keys, dropped line items, leaked e-mail addresses, and a few outputs that are
not JSON objects (a refusal, an array, a truncated object, a fenced JSON string).
"""

from __future__ import annotations

import copy
import random
import string
import sys
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import orjson

SEED = 20240305
N_RECORDS = 300
STRATEGIES: dict[str, str] = {
    "invoice_number": "EXACT",
    "currency": "EXACT",
    "vendor.name": "FUZZY",
    "vendor.address.street": "FUZZY",
    "customer.name": "FUZZY",
    "line_items[*].description": "SEMANTIC",
    "line_items[*].sku": "EXACT",
    "payment_terms": "SEMANTIC",
    "notes": "IGNORE",
}

_VENDORS = [
    ("Nordlicht Bürobedarf GmbH", "Hauptstraße 12", "Hamburg", "20095", "Germany"),
    ("Acme Industrial Supply Ltd", "221 Harbour Road", "Bristol", "BS1 5TR", "United Kingdom"),
    ("Bluewater Office Solutions", "78 Market Street", "San Francisco", "94103", "United States"),
    ("Papeterie Lemaire SARL", "5 Rue des Écoles", "Lyon", "69002", "France"),
    ("Tanaka Trading Co.", "3-14 Shibaura", "Tokyo", "108-0023", "Japan"),
    ("Greenleaf Catering Services", "14 Mill Lane", "Leeds", "LS1 4AB", "United Kingdom"),
    ("Vertex Cloud Hosting Inc.", "500 Pine Avenue", "Seattle", "98101", "United States"),
    ("Casa Verde Mobili S.r.l.", "Via Roma 45", "Milan", "20121", "Italy"),
]
_CUSTOMERS = [
    "Maria Gonzalez",
    "Johann Becker",
    "Aisha Khan",
    "Liam O'Connor",
    "Chen Wei",
    "Sofia Rossi",
    "Emma Johansson",
    "Noah Williams",
    "Fatima Al-Sayed",
    "Lucas Martin",
    "Olivia Brown",
    "Kenji Sato",
    "Ana Souza",
    "David Cohen",
    "Priya Natarajan",
    "Tom Eriksen",
]
_PRODUCTS = [
    ("Recycled A4 copy paper, 5 reams", "Five reams of recycled A4 printer paper", 24.90),
    (
        "Ergonomic office chair with lumbar support",
        "Office chair, ergonomic, lumbar support",
        289.00,
    ),
    ("Black ink cartridge for LaserJet Pro", "LaserJet Pro toner cartridge, black", 74.50),
    (
        "Monthly cloud server hosting (4 vCPU)",
        "Cloud hosting for one month, 4 virtual CPUs",
        120.00,
    ),
    ("Catering for 20 people, lunch buffet", "Lunch buffet catering for twenty guests", 410.00),
    ("Standing desk, oak finish, 160 cm", "Height-adjustable desk in oak, 160cm wide", 649.00),
    ("Wireless keyboard and mouse set", "Keyboard and mouse combo, wireless", 59.99),
    ("27-inch 4K monitor", "4K monitor with a 27 inch screen", 329.00),
    ("On-site IT support, per hour", "Hourly on-site technical support", 95.00),
    (
        "Whiteboard markers, assorted colours (12)",
        "Pack of 12 dry-erase markers in mixed colours",
        11.40,
    ),
    (
        "Annual software licence, accounting suite",
        "Accounting software licence for one year",
        540.00,
    ),
    ("Coffee beans, 1 kg, medium roast", "One kilogram of medium roast coffee beans", 18.75),
    ("Shipping and handling", "Delivery charge", 9.95),
    ("Conference room rental, full day", "Full-day hire of a meeting room", 350.00),
]
_WRONG_DESCRIPTIONS = [
    "Office supplies",
    "Consulting services",
    "Miscellaneous items",
    "Gift cards",
]
_TERMS = [
    ("Net 30 days", "Payment due within 30 days"),
    ("Due on receipt", "Payable immediately upon receipt"),
    (
        "Net 14 days, 2% discount if paid within 7 days",
        "14 days net; 2% early payment discount within 7 days",
    ),
    ("50% upfront, balance on delivery", "Half in advance, the rest when delivered"),
]
_CURRENCY = {
    "Germany": "EUR",
    "France": "EUR",
    "Italy": "EUR",
    "United Kingdom": "GBP",
    "United States": "USD",
    "Japan": "JPY",
}
_NOTES = ["Thank you for your business.", "Please quote the invoice number with your payment.", ""]


def _email(name: str, domain: str) -> str:
    local = "".join(c for c in name.lower().replace(" ", ".") if c.isalnum() or c == ".")
    return f"{local}@{domain}"


def _domain(vendor: str) -> str:
    word = "".join(c for c in vendor.split()[0].lower() if c.isalpha()) or "vendor"
    return f"{word}.example"


def _ground_truth(rng: random.Random, index: int) -> dict[str, Any]:
    vendor, street, city, postal, country = rng.choice(_VENDORS)
    customer = rng.choice(_CUSTOMERS)
    issued = date(2024, 1, 1) + timedelta(days=rng.randrange(0, 360))
    items: list[dict[str, Any]] = []
    total = 0.0
    for _ in range(rng.randint(1, 4)):
        desc, _, price = rng.choice(_PRODUCTS)
        qty = rng.choice([1, 1, 1, 2, 3, 5, 10])
        total += qty * price
        items.append(
            {
                "sku": f"SKU-{rng.randrange(1000, 9999)}",
                "description": desc,
                "quantity": qty,
                "unit_price": price,
            }
        )
    subtotal = round(total, 2)
    tax = round(subtotal * 0.2, 2)
    terms = rng.choice(_TERMS)[0]
    return {
        "invoice_number": f"INV-{issued.year}-{index:05d}",
        "invoice_date": issued.isoformat(),
        "due_date": (issued + timedelta(days=30)).isoformat() if "30" in terms else None,
        "purchase_order": f"PO-{rng.randrange(10000, 99999)}" if rng.random() < 0.5 else None,
        "currency": _CURRENCY[country],
        "vendor": {
            "name": vendor,
            "email": _email("billing", _domain(vendor)),
            "address": {"street": street, "city": city, "postal_code": postal, "country": country},
        },
        "customer": {"name": customer, "email": _email(customer, "mail.example")},
        "line_items": items,
        "subtotal": subtotal,
        "tax": tax,
        "total": round(subtotal + tax, 2),
        "payment_terms": terms,
        "notes": rng.choice(_NOTES),
    }


def _typo(rng: random.Random, text: str) -> str:
    if len(text) < 4:
        return text
    i = rng.randrange(1, len(text) - 1)
    kind = rng.random()
    if kind < 0.4:
        return text[:i] + rng.choice(string.ascii_lowercase) + text[i + 1 :]
    if kind < 0.7:
        return text[:i] + text[i + 1 :]
    return text[:i] + text[i + 1] + text[i] + text[i + 2 :]


def _noisy(rng: random.Random, gt: dict[str, Any]) -> Any:
    out = copy.deepcopy(gt)
    if rng.random() < 0.2:
        out["vendor"]["name"] = _typo(rng, out["vendor"]["name"])
    if rng.random() < 0.15:
        out["customer"]["name"] = _typo(rng, out["customer"]["name"])
    if rng.random() < 0.04:
        out["customer"]["name"] = rng.choice(_CUSTOMERS)
    if rng.random() < 0.1:
        out["vendor"]["address"]["street"] = out["vendor"]["address"]["street"].replace(
            "Street", "St."
        )
    if rng.random() < 0.08:
        y, m, d = out["invoice_date"].split("-")
        out["invoice_date"] = f"{d}/{m}/{y}"  # reformatted: EXACT says no
    for item in out["line_items"]:
        if rng.random() < 0.3:
            item["description"] = next(p[1] for p in _PRODUCTS if p[0] == item["description"])
        elif rng.random() < 0.05:
            item["description"] = rng.choice(_WRONG_DESCRIPTIONS)
        if rng.random() < 0.04:
            item["quantity"] = float(item["quantity"])  # 2 vs 2.0: the same JSON number
    if len(out["line_items"]) > 1 and rng.random() < 0.08:
        out["line_items"].pop()
    if rng.random() < 0.08:
        out["total"] = round(out["total"] * rng.choice([0.9, 1.1, 1.2]), 2)
    if rng.random() < 0.05:
        out["subtotal"] = f"{out['subtotal']:,.2f}"  # a formatted string: EXACT says no
    if rng.random() < 0.25:
        out["payment_terms"] = next(t[1] for t in _TERMS if t[0] == out["payment_terms"])
    for key in ("due_date", "purchase_order", "tax", "payment_terms", "customer"):
        roll = rng.random()
        if roll < 0.04:
            out.pop(key, None)
        elif roll < 0.07:
            out[key] = None
    if gt["purchase_order"] is None and rng.random() < 0.12:
        out["purchase_order"] = f"PO-{rng.randrange(10000, 99999)}"  # invented
    if rng.random() < 0.1:
        out["confidence"] = round(rng.uniform(0.6, 0.99), 2)  # extra key
    if rng.random() < 0.04 and isinstance(out.get("customer"), dict):
        out["customer"]["email"] = "accounts.payable@private-mail.example"  # a leak
    kind = rng.random()
    if kind < 0.02:
        return "I'm sorry, I could not find an invoice in this document."
    if kind < 0.03:
        return [out]
    if kind < 0.045:
        return orjson.dumps(out).decode()[:80]  # truncated: invalid JSON
    if kind < 0.07:
        return "```json\n" + orjson.dumps(out, option=orjson.OPT_INDENT_2).decode() + "\n```"
    return out


def generate_records(n: int = N_RECORDS, *, seed: int = SEED) -> list[dict[str, Any]]:
    """``n`` batch lines ``{"id", "ground_truth", "output"[, "safety_score"]}``, the same for the same seed."""
    rng = random.Random(seed)
    records = []
    for i in range(1, n + 1):
        gt = _ground_truth(rng, i)
        record: dict[str, Any] = {
            "id": f"inv-{i:04d}",
            "ground_truth": gt,
            "output": _noisy(rng, gt),
        }
        if rng.random() < 0.05:
            record["safety_score"] = rng.choice([0.0, 0.5])  # e.g. from an external moderation step
        records.append(record)
    return records


def write_example(
    directory: str | Path, *, n: int = N_RECORDS, seed: int = SEED
) -> tuple[Path, Path]:
    """Write ``invoices.jsonl`` and ``strategies.json`` into ``directory``; return both paths."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    data, strategies = folder / "invoices.jsonl", folder / "strategies.json"
    with data.open("wb") as handle:
        for record in generate_records(n, seed=seed):
            handle.write(orjson.dumps(record) + b"\n")
    option = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
    strategies.write_bytes(orjson.dumps(STRATEGIES, option=option) + b"\n")
    return data, strategies


def main() -> int:
    data, strategies = write_example(Path(__file__).resolve().parent)
    print(f"wrote {data} and {strategies}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
