"""Baseline: a bare asyncio loop over the ``openai`` client making the calls of ``json run``
(the same prompt ``json-extract-v1`` for every document of a JSONL file), 64 in flight.

``main([DATA.jsonl, BASE_URL, MODEL, CONCURRENCY])``: nothing is parsed, scored or written."""

from __future__ import annotations

import asyncio

import openai
import orjson

from fieldcheck.jsoneval import build_messages


def main(argv: list[str]) -> int:
    data, base_url, model, concurrency = argv[0], argv[1], argv[2], int(argv[3])
    with open(data, "rb") as f:
        messages = [build_messages(orjson.loads(line)["document"]) for line in f if line.strip()]

    async def go() -> int:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=3, timeout=60)
        limit = asyncio.Semaphore(concurrency)

        async def one(m: list[dict[str, str]]) -> bool:
            async with limit:
                response = await client.chat.completions.create(
                    model=model,
                    messages=m,  # type: ignore[arg-type]
                    temperature=0,
                )
            return response.choices[0].message.content is not None

        try:
            answered = await asyncio.gather(*(one(m) for m in messages))
        finally:
            await client.close()
        return 0 if all(answered) else 1

    return asyncio.run(go())
