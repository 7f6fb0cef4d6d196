"""A model's cost in USD: the one formula of every file, line and list that shows one."""

from __future__ import annotations


def cost_usd(input_tokens: int, output_tokens: int, price_in: float, price_out: float) -> float:
    """USD for these tokens at ``price_in``/``price_out`` USD per 1M input/output tokens:
    ``(input * price_in + output * price_out) / 1e6`` (numeric's statistics.json, a model run's
    run.json and estimate, the runs list's ``cost_usd`` alike, to the last digit)."""
    return (input_tokens * price_in + output_tokens * price_out) / 1_000_000
