"""The json-evaluation.md walkthrough (RQS 0.7375), shared by the JSON, API and browser tests."""

from __future__ import annotations

from typing import Any

WALK_GT: dict[str, Any] = {
    "name": "John Smith",
    "email": "john@example.com",
    "bio": "Senior engineer with 10 years of experience...",
    "internal_id": None,
    "status": "active",
}
WALK_AIO: dict[str, Any] = {
    "name": "John Smyth",
    "email": "john@example.com",
    "bio": "Experienced senior engineer, 10+ years...",
    "internal_id": "abc123",
    "extra_field": "surprise",
}
WALK_STRATEGIES = {"name": "FUZZY", "bio": "SEMANTIC"}
