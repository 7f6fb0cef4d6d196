"""Running a model over conversations: each user's sessions in order, a slot memory carried along
(slot spec; the update semantics of ``slot-memory-v1`` and resuming: docs/slots.md "Running
models")."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, RootModel, StrictInt, StrictStr, ValidationError

from fieldcheck._util.errors import CannotWrite, ErrorList, InputError, UsageProblem, cut
from fieldcheck._util.jsonio import iter_jsonl, write_json, write_jsonl
from fieldcheck._util.paths import unique_filenames
from fieldcheck.reports import RunFolder
from fieldcheck.runner import (
    Asked,
    ChatClient,
    Message,
    ModelSpec,
    Runner,
    RunSpec,
    in_order,
    item_calls,
    messages_tokens,
    run_task,
)
from fieldcheck.slots._loaders import validated

Memory = dict[str, dict[str, list[str]]]

PROMPT_ID = "slot-memory-v1"

# Limits of one reply: bigger is an invalid reply, never a memory that grows without bound.
MAX_REPLY_CHARS = 100_000
MAX_TOPICS = 20
MAX_FIELDS = 50  # per topic
MAX_VALUES = 20  # per slot
MAX_KEY_CHARS = 100
MAX_VALUE_CHARS = 500
MAX_MEMORY_SLOTS = 500  # after merging

SYSTEM_PROMPT = f"""You keep a memory of facts about one user, organised as slots. (prompt {PROMPT_ID})
You get the user's current memory and the transcript of one new conversation session.
Extract every fact the user states about themselves in this session into slots: topic -> field -> list of values.
Topics: basic_info (name, age, gender, location, occupation, family, ...), interests (hobbies, music, food, sports, books, likes and dislikes, ...), mental_state (mood, stress_level, sleep, worries, ...).
Use short snake_case field names and reuse the memory's field names for the same kind of fact. Values are short phrases in the user's own words.
Reply with only a JSON object holding the slots this session states: {{"topic": {{"field": ["value", ...]}}}}.
- Include a slot whenever the session states or restates it, even if the memory already holds the same value.
- A slot you give replaces that slot in the memory: give its complete list of values (memory values that still hold plus the new ones).
- Give [] for a slot the user says no longer holds.
- Leave out slots the session does not mention. Never add facts the user did not state.
- No prose, no Markdown. Reply {{}} when the session states nothing about the user."""

USER_TEMPLATE = """Current memory (JSON):
<memory>
{memory}
</memory>

Session {session} transcript:
<session>
{transcript}
</session>"""

NonEmpty = Annotated[StrictStr, Field(min_length=1)]


class Turn(BaseModel):
    """One turn of a session."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    role: Literal["user", "assistant", "system"]
    content: StrictStr


class Conversation(BaseModel):
    """One session of one user: ``{user, session, turns: [{role, content}]}`` (docs/formats.md)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    user: NonEmpty
    session: StrictInt
    turns: list[Turn]

    @property
    def key(self) -> tuple[str, int]:
        return (self.user, self.session)


def load_conversations(path: str | Path) -> list[Conversation]:
    """Read the conversations JSONL; the first bad or repeated line is an ``InputError`` (a
    skipped session would change every later memory)."""
    p = Path(path)
    out: list[Conversation] = []
    first_line: dict[tuple[str, int], int] = {}
    errors = ErrorList()
    for line, raw in iter_jsonl(p):
        conv = validated(raw, Conversation, p, line, errors)
        if conv is None:
            raise errors[0]
        if conv.key in first_line:
            raise InputError(
                f"user {conv.user!r} session {conv.session} repeats line {first_line[conv.key]}",
                file=p,
                line=line,
                field="session",
                value=conv.session,
            )
        first_line[conv.key] = line
        out.append(conv)
    if not out:
        raise InputError("no conversation in the file", file=p)
    return out


def render_transcript(turns: Sequence[Turn]) -> str:
    """The session as the model reads it: one ``role: content`` line per turn."""
    return "\n".join(f"{t.role}: {t.content}" for t in turns)


def transcript_digest(transcript: str) -> str:
    """What the synthetic responder indexes sessions by (sha256 of the rendered transcript)."""
    return hashlib.sha256(transcript.encode("utf-8")).hexdigest()


def memory_json(memory: Memory) -> str:
    """The memory in the prompt: sorted JSON with ``<`` and ``>`` escaped, so text a model wrote
    into the memory can never open or close a ``<session>`` block."""
    text = json.dumps(memory, ensure_ascii=False, sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e")


def build_messages(memory: Memory, conv: Conversation) -> list[Message]:
    """System prompt ``slot-memory-v1`` and the user message: memory, then the session."""
    user = USER_TEMPLATE.format(
        memory=memory_json(memory), session=conv.session, transcript=render_transcript(conv.turns)
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


class ReplyError(ValueError):
    """The model's reply is not a valid slot update (recorded as ``invalid_reply``)."""


_Key = Annotated[StrictStr, Field(min_length=1, max_length=MAX_KEY_CHARS)]
_Values = Annotated[
    list[Annotated[StrictStr, Field(max_length=MAX_VALUE_CHARS)]], Field(max_length=MAX_VALUES)
]
_Fields = Annotated[dict[_Key, _Values], Field(max_length=MAX_FIELDS)]


class SlotUpdate(RootModel[Annotated[dict[_Key, _Fields], Field(max_length=MAX_TOPICS)]]):
    """A reply: ``{topic: {field: [values]}}``, strings only, bounded sizes."""


_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)


def _short(part: Any) -> str:
    return cut(str(part), 40)


def parse_reply(text: str | None) -> Memory:
    """A reply as a slot update, or ``ReplyError`` with a one-line reason: a code fence around the
    JSON is tolerated, keys and values trimmed, blank values dropped, repeats kept once."""
    if text is None:
        raise ReplyError("the reply is empty")
    if len(text) > MAX_REPLY_CHARS:
        raise ReplyError(f"the reply has {len(text)} characters (at most {MAX_REPLY_CHARS})")
    body = text.strip()
    fence = _FENCE.match(body)
    if fence:
        body = fence.group(1).strip()
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ReplyError(f"the reply is not JSON: {exc.msg} (got {body[:60]!r})") from None
    if not isinstance(data, dict):
        raise ReplyError(f"the reply is not a JSON object (got {type(data).__name__})")
    try:
        update = SlotUpdate.model_validate(data).root
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(_short(part) for part in first["loc"])
        raise ReplyError(f"{loc or 'reply'}: {first['msg']}") from None
    out: Memory = {}
    for topic, fields in update.items():
        t = topic.strip()
        if not t:
            raise ReplyError(f"blank topic name {_short(topic)!r}")
        if t in out:
            raise ReplyError(f"topic {_short(t)!r} given twice")
        slots: dict[str, list[str]] = {}
        for name, values in fields.items():
            f = name.strip()
            if not f:
                raise ReplyError(f"{_short(t)}: blank field name {_short(name)!r}")
            if f in slots:
                raise ReplyError(f"{_short(t)}: field {_short(f)!r} given twice")
            slots[f] = list(dict.fromkeys(filter(None, (v.strip() for v in values))))
        out[t] = slots
    return out


def merge(memory: Memory, update: Memory) -> Memory:
    """A new memory: each slot of ``update`` replaces the memory's; ``[]`` removes the slot."""
    merged: Memory = {topic: dict(fields) for topic, fields in memory.items()}
    for topic, fields in update.items():
        target = merged.setdefault(topic, {})
        for name, values in fields.items():
            if values:
                target[name] = list(values)
            else:
                target.pop(name, None)
        if not target:
            del merged[topic]
    size = sum(len(fields) for fields in merged.values())
    if size > MAX_MEMORY_SLOTS:
        raise ReplyError(f"the memory would hold {size} slots (at most {MAX_MEMORY_SLOTS})")
    return merged


def item_key(user: str, session: int) -> str:
    """The run item of a session: ``["u1", 3]`` (JSON, so any user name is unambiguous)."""
    return json.dumps([user, session], ensure_ascii=False)


@dataclass(frozen=True)
class SessionOutcome:
    """One session of one model: the update (its prediction) and the memory after it; only when
    ``answered`` (valid or not) is ``latency_s`` the model's time."""

    user: str
    session: int
    update: Memory
    memory: Memory
    error_type: str | None
    error_message: str | None
    latency_s: float
    answered: bool
    calls: int
    cached: bool
    input_tokens: int
    output_tokens: int

    @property
    def call_failed(self) -> bool:
        """An infrastructure error (no usable reply): the session is not scored for the model,
        unlike ``invalid_reply``, the model's own failure, whose gold slots are missed."""
        return self.error_type is not None and self.error_type != "invalid_reply"


@dataclass
class Extraction:
    """Every session of one model's run, in the conversations file's order."""

    model: str
    run_id: str
    resumed_items: int
    sessions: list[SessionOutcome] = field(default_factory=list)
    tokens_estimated: int = 0  # sessions whose token counts are the characters / 4 estimate
    item_calls: dict[str, dict[str, Any]] = field(default_factory=dict)  # by scored item key

    @property
    def failed(self) -> list[SessionOutcome]:
        return [s for s in self.sessions if s.error_type]

    @property
    def failures(self) -> int:
        """Sessions whose call failed (not the model's invalid reply, a scored miss): the run is
        incomplete."""
        return sum(1 for s in self.sessions if s.call_failed)

    def not_scored(self) -> dict[tuple[str, int], str]:
        """The sessions whose call failed, with the error type: left out of the scores."""
        return {
            (s.user, s.session): s.error_type
            for s in self.sessions
            if s.error_type and s.call_failed
        }

    def pred_records(self) -> list[dict[str, Any]]:
        """The predictions in the slot format: one line per slot with values of each update."""
        return [
            {"user": s.user, "session": s.session, "topic": t, "field": f, "values": v}
            for s in self.sessions
            for t, fields in s.update.items()
            for f, v in fields.items()
            if v
        ]

    def latency_records(self) -> list[dict[str, Any]]:
        """Seconds per session the model answered (infrastructure failures have no line)."""
        return [
            {"user": s.user, "session": s.session, "seconds": s.latency_s}
            for s in self.sessions
            if s.answered
        ]

    def memory_records(self) -> list[dict[str, Any]]:
        return [{"user": s.user, "session": s.session, "memory": s.memory} for s in self.sessions]

    def error_records(self) -> list[dict[str, Any]]:
        return [
            {
                "model": self.model,
                "user": s.user,
                "session": s.session,
                "error_type": s.error_type,
                "error_message": s.error_message,
            }
            for s in self.failed
        ]


def by_user(conversations: Sequence[Conversation]) -> list[list[Conversation]]:
    """Units of the run: each user's sessions in session order (users in first-seen order)."""
    users: dict[str, list[Conversation]] = {}
    for conv in conversations:
        users.setdefault(conv.user, []).append(conv)
    return [sorted(sessions, key=lambda c: c.session) for sessions in users.values()]


async def _ask(conv: Conversation, earlier: list[dict[str, Any]], client: ChatClient) -> Asked:
    """A session asked with the memory after the user's earlier sessions."""
    memory: Memory = earlier[-1]["memory"] if earlier else {}
    r = await client.complete(build_messages(memory, conv))
    update: Memory = {}
    error_type, error_message = r.error_type, r.error_message
    if r.ok:
        try:
            update = parse_reply(r.text)
            memory = merge(memory, update)
        except ReplyError as exc:
            update, error_type, error_message = {}, "invalid_reply", str(exc)
    outcome = SessionOutcome(
        user=conv.user,
        session=conv.session,
        update=update,
        memory=memory,
        error_type=error_type,
        error_message=error_message,
        latency_s=r.latency_s,
        answered=r.text is not None,
        calls=1,
        cached=r.cached,
        input_tokens=r.input_tokens,
        output_tokens=r.output_tokens,
    )
    return asdict(outcome), error_type, [r]


def estimate(conversations: Sequence[Conversation]) -> tuple[int, int, int]:
    """``(calls, input_tokens, output_tokens)``: one call per session, memory of ~200 tokens."""
    tokens = sum(messages_tokens(build_messages({}, conv)) + 200 for conv in conversations)
    return len(conversations), tokens, 150 * len(conversations)


async def run_extraction(
    runner: Runner,
    spec: ModelSpec,
    conversations_path: Path,
    conversations: Sequence[Conversation],
    *,
    console: Any = None,
    show_progress: bool = True,
) -> Extraction:
    """Run model ``spec`` over every session (users concurrently, sessions in order), resumable."""
    handle = await run_task(
        runner,
        RunSpec(
            system="slots",
            task="slot-memory",
            dataset=conversations_path,
            model=spec,
            settings={"prompt": PROMPT_ID, "memory": "update-merge"},
        ),
        by_user(conversations),
        in_order(lambda conv: item_key(conv.user, conv.session), _ask),
        total_items=len(conversations),
        estimate=estimate(conversations),
        console=console,
        show_progress=show_progress,
    )
    stored = {item.key: item.result for item in handle.items()}
    out = Extraction(
        model=spec.name,
        run_id=handle.id,
        resumed_items=handle.resumed_items,
        tokens_estimated=handle.tokens_estimated,
        item_calls=item_calls(
            handle, lambda key: "/".join(map(str, [spec.name, *json.loads(key)]))
        ),
    )
    for conv in conversations:
        result = stored.get(item_key(conv.user, conv.session))
        if result is not None:
            names = SessionOutcome.__dataclass_fields__
            out.sessions.append(SessionOutcome(**{k: result[k] for k in names}))
    return out


def write_extractions(
    extractions: Sequence[Extraction], out: RunFolder, specs: Sequence[ModelSpec]
) -> tuple[dict[str, Path], dict[str, Path]]:
    """Each model's pred, latency and memory files, ``session_errors.jsonl`` and ``runs.json``
    (docs/formats.md); returns the pred and latency files by model."""
    stems = unique_filenames(e.model for e in extractions)
    preds: dict[str, Path] = {}
    lats: dict[str, Path] = {}
    runs: dict[str, Any] = {}
    by_name = {s.name: s for s in specs}
    try:
        for ex in extractions:
            stem = stems[ex.model]
            preds[ex.model] = out / f"pred_{stem}.jsonl"
            lats[ex.model] = out / f"latency_{stem}.jsonl"
            for name, rows in (
                (f"pred_{stem}.jsonl", ex.pred_records()),
                (f"latency_{stem}.jsonl", ex.latency_records()),
                (f"memory_{stem}.jsonl", ex.memory_records()),
            ):
                with out.atomic(name) as tmp:
                    write_jsonl(tmp, rows)
            runs[ex.model] = {
                "run_id": ex.run_id,
                "model": by_name[ex.model].public(),
                "sessions": len(ex.sessions),
                "session_errors": len(ex.failed),
                "errors": dict(Counter(s.error_type for s in ex.failed if s.error_type)),
                "resumed": ex.resumed_items,
                "cached": sum(s.cached for s in ex.sessions),
                "input_tokens": sum(s.input_tokens for s in ex.sessions),
                "output_tokens": sum(s.output_tokens for s in ex.sessions),
                "tokens_estimated_sessions": ex.tokens_estimated,
                "files": {"pred": preds[ex.model].name, "latency": lats[ex.model].name},
            }
        with out.atomic("session_errors.jsonl") as tmp:
            write_jsonl(tmp, [r for ex in extractions for r in ex.error_records()])
        with out.atomic("runs.json") as tmp:
            write_json(tmp, {"prompt": PROMPT_ID, "memory": "update-merge", "runs": runs})
    except OSError as exc:
        raise CannotWrite(
            f"--out: cannot write {exc.filename or out}: {exc.strerror or exc}"
        ) from None
    return preds, lats


@dataclass
class SlotsTask:
    """The conversations every model runs over, the gold and the settings they are scored with."""

    path: Path
    conversations: list[Conversation]
    gold: Path
    settings: dict[str, Any]


class SlotsRuns:
    """What ``slots run`` asks a model (``core.Runs``): each user's sessions in order with a slot
    memory; every model's predictions scored together into one run."""

    run_inputs = (
        ("conversations", "JSONL: one session per line, {user, session, turns}"),
        ("gold", "JSONL: the slots each session states, {user, session, topic, field, values}"),
    )
    together = True
    folder_per_model = False

    def read_task(
        self,
        inputs: Sequence[tuple[str, Any]],
        settings: Mapping[str, Any],
        extras: Mapping[str, Any],
    ) -> SlotsTask:
        """The conversations (a bad line stops the run: it would change every later memory)
        and the gold, read and checked before any model is called."""
        from fieldcheck.slots._system import check_gold

        roles = dict(inputs)
        try:
            conversations = load_conversations(roles["conversations"])
        except InputError as exc:
            raise UsageProblem(exc.one_line(), "conversations") from None
        check_gold(
            Path(roles["gold"]), Path(roles["conversations"]), [c.key for c in conversations]
        )
        return SlotsTask(Path(roles["conversations"]), conversations, roles["gold"], dict(settings))

    async def run_model(
        self, task: SlotsTask, runner: Runner, spec: ModelSpec, *, console: Any, show_progress: bool
    ) -> Extraction:
        return await run_extraction(
            runner,
            spec,
            task.path,
            task.conversations,
            console=console,
            show_progress=show_progress,
        )

    def predictions(
        self,
        task: SlotsTask,
        calls: Sequence[Extraction],
        specs: Sequence[ModelSpec],
        folder: RunFolder,
    ) -> tuple[list[tuple[str, Path]], dict[str, Any], dict[str, Any]]:
        """Every model's pred, latency and memory files, session_errors.jsonl and runs.json; the
        inputs to score, the conversations among them (recorded, not read)."""
        preds, latencies = write_extractions(calls, folder, specs)
        inputs = [
            ("gold", task.gold),
            ("conversations", task.path),  # the dataset with the gold (runs compare's check)
            *((f"pred:{n}", p) for n, p in preds.items()),
            *((f"latency:{n}", p) for n, p in latencies.items()),
        ]
        invalid = {
            ex.model: frozenset(
                (s.user, s.session) for s in ex.sessions if s.error_type == "invalid_reply"
            )
            for ex in calls
        }
        return (
            inputs,
            task.settings,
            {
                "not_scored": {ex.model: ex.not_scored() for ex in calls},
                "invalid_replies": invalid,
            },
        )

    def comparison(self, task: SlotsTask, calls: Extraction, scored: Any) -> None:
        """None: the models are compared in metrics.json (paired F1)."""
        return None
