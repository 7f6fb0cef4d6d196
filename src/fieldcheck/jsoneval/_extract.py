"""``fieldcheck json run``: a model extracts JSON from each document (prompt ``json-extract-v1``)
and its reply becomes the batch line that ``json batch`` scores; a failed call is kept apart with
its error type, never scored (docs/json.md "Running a model: `json run`")."""

from __future__ import annotations

import hashlib
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from fieldcheck._util.errors import InputError, UsageProblem, input_error_of
from fieldcheck._util.jsonio import (
    EMPTY_FILE,
    TOO_DEEP,
    dumps,
    id_text,
    iter_jsonl,
    loads,
    nesting_depth,
    read_json_bytes,
    repeated_key,
    write_json,
    write_jsonl,
)
from fieldcheck._util.sniff import check_input_file
from fieldcheck.jsoneval._models import MAX_DEPTH, RecordError, duplicate_id
from fieldcheck.runner import (
    Asked,
    ChatClient,
    Message,
    ModelSpec,
    RunHandle,
    Runner,
    RunSpec,
    estimate_tokens,
    in_order,
    item_calls,
    messages_tokens,
    run_task,
)

SYSTEM = "json"
TASK = "json-extract"
PROMPT_ID = "json-extract-v1"
DOCUMENT_OPEN = "<document>\n"
DOCUMENT_CLOSE = "\n</document>"

SYSTEM_PROMPT = f"""You extract structured data from documents. (prompt {PROMPT_ID})
Reply with exactly one JSON object and nothing else: no prose, no Markdown code fence.
Use null for a field the document does not state; never invent a value.
Copy names, identifiers and free text exactly as the document writes them.
Write dates as YYYY-MM-DD and amounts as JSON numbers, without currency symbols or thousands separators."""

SCHEMA_INTRO = "The object must follow this JSON Schema:"
NO_SCHEMA_NOTE = "Use short snake_case keys for the fields you find."
USER_INTRO = "Extract the data from this document."


STORED_SCHEMA_CHARS = 4096
"""A schema longer than this is kept in each item's stored prompt as its sha256 and size only:
the store grows per record by the document, not by the schema (sent whole on every request)."""
LARGE_SCHEMA_CHARS = 100_000
"""A schema longer than this (about 25,000 tokens on every request) is warned about."""


def system_message(schema_text: str | None = None) -> Message:
    """The system message every document of a run shares: the fixed instructions and the schema
    (or a note on naming keys)."""
    schema = NO_SCHEMA_NOTE if schema_text is None else f"{SCHEMA_INTRO}\n{schema_text}"
    return {"role": "system", "content": f"{SYSTEM_PROMPT}\n{schema}"}


def build_messages(
    document: str, schema_text: str | None = None, *, system: Message | None = None
) -> list[Message]:
    """The chat messages of one document (prompt ``json-extract-v1``): the system message (one
    object shared by a run's documents when ``system`` is given), then the document."""
    return [
        system or system_message(schema_text),
        {"role": "user", "content": f"{USER_INTRO}\n{DOCUMENT_OPEN}{document}{DOCUMENT_CLOSE}"},
    ]


def stored_system_message(schema_text: str | None) -> Message:
    """The system message as each item's stored prompt keeps it: whole, or for a schema over
    ``STORED_SCHEMA_CHARS`` with the schema named by its sha256 and size instead of its text."""
    if schema_text is None or len(schema_text) <= STORED_SCHEMA_CHARS:
        return system_message(schema_text)
    digest = document_digest(schema_text)
    shown = f"<the schema: {len(schema_text):,} characters, sha256:{digest}; not stored per item>"
    return system_message(shown)


def document_from_prompt(user_text: str) -> str | None:
    """The document inside a user message made by ``build_messages`` (None if it is not one),
    whole even when it contains the markers."""
    start = user_text.find(DOCUMENT_OPEN)
    end = user_text.rfind(DOCUMENT_CLOSE)
    if start < 0 or end < start + len(DOCUMENT_OPEN):
        return None
    return user_text[start + len(DOCUMENT_OPEN) : end]


def document_digest(document: str) -> str:
    """sha256 of the document text (how the synthetic models recognise a document)."""
    return hashlib.sha256(document.encode("utf-8", "surrogatepass")).hexdigest()


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (from a JSON ``"\\ud800"`` escape) as U+FFFD: storable UTF-8."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def parse_reply(text: str) -> tuple[Any, bool]:
    """``(value, parsed)``: the trimmed reply as JSON when it is strict JSON nested at most
    MAX_DEPTH deep, else the raw text for the scorer's non-object rule."""
    text = clean_text(text)
    try:
        value = loads(text.strip())
    except orjson.JSONDecodeError:
        return text, False
    if nesting_depth(value, limit=MAX_DEPTH + 1) > MAX_DEPTH:
        return text, False
    return value, True


class ExtractRecord(BaseModel):
    """One input line: ``{"id", "document": str, "ground_truth": {...}}`` (other keys ignored)."""

    model_config = ConfigDict(extra="ignore")

    id: StrictStr | StrictInt
    document: StrictStr
    ground_truth: dict[str, Any]
    line: int | None = Field(None, exclude=True)

    @property
    def key(self) -> str:
        return str(self.id)


_REASONS = {
    "missing": "missing",
    "dict_type": "must be a JSON object",
    "string_type": "must be a string",
}


def read_documents(path: str | Path) -> tuple[list[ExtractRecord], list[InputError]]:
    """Every good line of a documents file and a one-line InputError (``file:line``) per bad one;
    raises InputError only when the file cannot be read."""
    p = Path(path)
    records: list[ExtractRecord] = []
    errors: list[InputError] = []
    first: dict[str, int] = {}
    for line, value in iter_jsonl(p):
        if isinstance(value, InputError):
            errors.append(value)
            continue
        if not isinstance(value, dict):
            errors.append(
                InputError(
                    "a line must be a JSON object with id, document and ground_truth",
                    file=p,
                    line=line,
                    value=value,
                )
            )
            continue
        rid = id_text(value.get("id"))
        try:
            record = ExtractRecord.model_validate({**value, "line": line})
        except ValidationError as exc:
            error = input_error_of(exc, file=p, line=line, record=rid, reasons=_REASONS)
            if error.field == "id" and error.reason != "missing":
                error = error.replace(reason="must be a string or an integer")
            errors.append(error)
            continue
        if isinstance(record.id, str) and not record.id.strip():
            errors.append(
                InputError("must not be empty", file=p, line=line, field="id", value=record.id)
            )
            continue
        if record.key in first:
            errors.append(duplicate_id(first[record.key], file=p, line=line, record=record.key))
            continue
        first[record.key] = line
        records.append(record)
    return records, errors


def load_schema(path: str | Path) -> str:
    """The target JSON Schema file as the compact, key-sorted JSON text shown to the model;
    InputError, in a schema's words, when it cannot be read or is not a JSON object."""
    try:
        schema, text = read_json_bytes(path)
    except InputError as exc:
        if exc.reason == EMPTY_FILE:
            raise exc.replace(reason="no JSON Schema (the file is empty)") from None
        if exc.reason == TOO_DEEP:
            under = f" (under key '{exc.field}')" if exc.field is not None else ""
            reason = f"the JSON Schema is nested deeper than {MAX_DEPTH} arrays/objects{under}"
            raise exc.replace(reason=reason, field=None) from None
        raise
    if not isinstance(schema, dict):
        kind = next(k for t, k in _JSON_KINDS if isinstance(schema, t))
        raise InputError(f"a JSON Schema must be a JSON object (got {kind})", file=path)
    if twice := repeated_key(text):  # JSON would keep the last one
        raise InputError(
            f"the key {twice[0]!r} is given twice in one object", file=path, line=twice[1]
        )
    return dumps(schema)


_JSON_KINDS = (
    (type(None), "null"),
    (bool, "a boolean"),
    (int | float, "a number"),
    (str, "a string"),
    (list, "an array"),
)


@dataclass
class ModelRun:
    """One model's finished run, in input order: batch lines (records with an output), call
    errors and counts (a cached item with those of the call that filled the cache)."""

    spec: ModelSpec
    run_id: str
    resumed_items: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    call_errors: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0
    cached_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_estimated: bool = False
    latencies: list[float] = field(default_factory=list)
    unparsed: int = 0
    truncated: int = 0  # records whose reply was cut by the token limit
    item_calls: dict[str, dict[str, Any]] = field(default_factory=dict)  # by record id

    @property
    def failures(self) -> int:
        """Records with no output (a failed call): the run is incomplete."""
        return len(self.call_errors)

    @property
    def error_counts(self) -> dict[str, int]:
        return dict(sorted(Counter(e["error_type"] for e in self.call_errors).items()))

    @property
    def cost_usd(self) -> float | None:
        return self.spec.cost_usd(self.input_tokens, self.output_tokens)

    def info(self) -> dict[str, Any]:
        """``run.json``: what ran, where it is stored, and the counts (no timestamps or keys)."""
        lat = self.latencies
        return {
            "run_id": self.run_id,
            "resumed_items": self.resumed_items,
            "model": self.spec.public(),
            "task": TASK,
            "prompt": PROMPT_ID,
            "records": len(self.rows) + len(self.call_errors),
            "with_output": len(self.rows),
            "unparsed_replies": self.unparsed,
            "truncated_replies": self.truncated,
            "call_errors": self.error_counts,
            "calls": self.calls,
            "cached_calls": self.cached_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "tokens_estimated": self.tokens_estimated,
            "cost_usd": self.cost_usd,
            "latency_s_mean": math.fsum(lat) / len(lat) if lat else None,
            "latency_s_median": statistics.median(lat) if lat else None,
        }


@dataclass
class JsonTask:
    """A ``json run``'s documents (and the errors of its bad lines), the schema shown to the
    model, the settings every model is scored with and the matchers their pairs share."""

    data: Path
    records: list[ExtractRecord]
    errors: list[Any]
    schema_text: str | None
    settings: dict[str, Any]
    matchers: Any


class JsonRuns:
    """What ``json run`` asks a model (``core.Runs``): every document extracted, the replies
    written as the batch file outputs.jsonl that ``json batch`` scores, one run and folder per
    model, each a row of comparison.csv."""

    run_inputs = (
        ("documents", 'JSONL: one {"id", "document": "...", "ground_truth": {...}} per line'),
        ("schema", "JSON Schema of the target object, shown to the model"),
    )
    together = False
    folder_per_model = True

    def read_task(
        self,
        inputs: Sequence[tuple[str, Any]],
        settings: Mapping[str, Any],
        extras: Mapping[str, Any],
    ) -> JsonTask:
        """The configuration merged with the saved one and its matchers built once; the
        schema and the documents read (a file with no usable document: ``UsageProblem``)."""
        from fieldcheck.jsoneval._evaluate import build_matchers
        from fieldcheck.jsoneval._saved import resolve_config
        from fieldcheck.matchers import judge_options

        config, _ = resolve_config(
            dict(settings.get("config") or {}),
            store=extras.get("store") or False,
            warn=extras.get("warn"),
            note=extras.get("note"),
        )
        roles = dict(inputs)
        data, role = Path(roles["documents"]), "schema"
        try:
            schema = load_schema(roles["schema"]) if roles.get("schema") else None
            role = "documents"
            records, errors = read_documents(data)
        except InputError as exc:
            raise UsageProblem(str(exc), role) from None
        check_input_file(
            data, records=len(records), errors=errors, option="documents", expected="json-documents"
        )
        if schema is not None and len(schema) > LARGE_SCHEMA_CHARS and extras.get("warn"):
            extras["warn"](
                f"warning: the schema is {len(schema):,} characters (about "
                f"{estimate_tokens(schema):,} tokens), sent with every request; each item's "
                "stored prompt names it by its sha256"
            )
        stored = {"config": config.model_dump(mode="json")}
        stored |= {"bootstrap": settings.get("bootstrap", 1000), "seed": settings.get("seed", 0)}
        prior = [RecordError.of(e) for e in errors]
        return JsonTask(
            data,
            records,
            prior,
            schema,
            stored,
            build_matchers(config, judge=judge_options(extras)),
        )

    async def run_model(
        self, task: JsonTask, runner: Runner, spec: ModelSpec, *, console: Any, show_progress: bool
    ) -> ModelRun:
        """Ask ``spec`` for every record, resuming a stored unfinished run; a model or transport
        error is saved with its type (``call_errors``), a Ctrl-C raises ``RunInterrupted``."""
        records, schema_text = task.records, task.schema_text
        system, kept = system_message(schema_text), stored_system_message(schema_text)
        prompts = {r.key: build_messages(r.document, system=system) for r in records}

        async def ask(record: ExtractRecord, _: Any, client: ChatClient) -> Asked:
            reply = await client.complete(prompts[record.key])
            if kept is not system and reply.messages:
                reply = replace(reply, messages=[kept, *reply.messages[1:]])
            result: dict[str, Any] = {
                "input_tokens": reply.input_tokens,
                "output_tokens": reply.output_tokens,
                "tokens_estimated": reply.tokens_estimated,
                "attempts": reply.attempts,
            }
            if reply.ok and reply.text is not None:
                value, parsed = parse_reply(reply.text)
                result.update(output=value, parsed=parsed)
            else:
                message = reply.error_message
                result.update(
                    error_type=reply.error_type,
                    error_message=clean_text(message) if message is not None else None,
                )
            return result, reply.error_type, [reply]

        estimate = (
            len(records),
            sum(messages_tokens(m) for m in prompts.values()),
            sum(estimate_tokens(dumps(r.ground_truth)) for r in records),
        )
        schema = "none" if schema_text is None else "sha256:" + document_digest(schema_text)[:12]
        run = RunSpec(SYSTEM, TASK, task.data, spec, {"prompt": PROMPT_ID, "schema": schema})
        handle = await run_task(
            runner,
            run,
            [[r] for r in records],
            in_order(lambda r: r.key, ask),
            total_items=len(records),
            estimate=estimate,
            console=console,
            show_progress=show_progress,
        )
        return collect(handle, spec, records)

    def predictions(
        self, task: JsonTask, calls: Sequence[ModelRun], specs: Sequence[ModelSpec], folder: Any
    ) -> tuple[list[tuple[str, Path]], dict[str, Any], dict[str, Any]]:
        """outputs.jsonl (the batch lines), call_errors.jsonl and run.json of one model."""
        [run] = calls
        folder.expect("outputs.jsonl", "call_errors.jsonl", "run.json")
        for name, write, value in (
            ("outputs.jsonl", write_jsonl, run.rows),
            ("call_errors.jsonl", write_jsonl, run.call_errors),
            ("run.json", write_json, run.info()),
        ):
            with folder.atomic(name) as path:
                write(path, value)
        inputs = [("documents", task.data), ("outputs", folder / "outputs.jsonl")]
        return inputs, task.settings, {"matchers": task.matchers, "prior_errors": task.errors}

    def comparison(self, task: JsonTask, calls: ModelRun, scored: Any) -> dict[str, Any]:
        """The model's row of comparison.csv: outputs, errors, mean scores, tokens, cost."""
        info, summary = calls.info(), scored.result
        return {
            "model": calls.spec.name,
            "run_id": calls.run_id,
            "records": info["records"],
            "with_output": info["with_output"],
            "call_errors": len(calls.call_errors),
            "not_an_object": summary.not_an_object,
            "failed": summary.failed,
            "not_scored": summary.not_scored,
            **{k: summary.means[k] for k in ("completeness", "hallucination", "accuracy", "rqs")},
            "input_tokens": calls.input_tokens,
            "output_tokens": calls.output_tokens,
            "cost_usd": calls.cost_usd,
            "latency_s_mean": info["latency_s_mean"],
        }


def collect(handle: RunHandle, spec: ModelSpec, records: list[ExtractRecord]) -> ModelRun:
    """The run's items in input order: batch lines for outputs, ``call_errors`` for failed calls."""
    done = {item.key: item for item in handle.items()}
    run = ModelRun(
        spec=spec,
        run_id=handle.id,
        resumed_items=handle.resumed_items,
        calls=handle.new_calls,  # made by this command; resumed items' calls were made before
        cached_calls=handle.new_cached_calls,
        truncated=handle.truncated,
        item_calls=item_calls(handle),
    )
    for record in records:
        item = done[record.key]  # a finished run_task saved every record
        res = item.result
        run.input_tokens += int(res.get("input_tokens", 0))
        run.output_tokens += int(res.get("output_tokens", 0))
        run.tokens_estimated |= bool(res.get("tokens_estimated", False))
        if item.error_type is None and "output" in res:
            run.latencies.append(item.latency_s)  # means over the records with an output
            run.rows.append(
                {"id": record.id, "ground_truth": record.ground_truth, "output": res["output"]}
            )
            run.unparsed += not res.get("parsed", True)
        else:
            run.call_errors.append(
                {
                    "id": record.id,
                    "line": record.line,
                    "error_type": item.error_type or res.get("error_type") or "invalid_reply",
                    "error_message": res.get("error_message"),
                    "attempts": res.get("attempts"),
                }
            )
    return run
