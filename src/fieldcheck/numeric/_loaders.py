"""Loading ConvFinQA files (the derived ``{"dev": [...]}`` format and the original list format):
a bad record is one InputError naming file, record and field, and skipped; a gold program that
does not parse is reported the same way, its record kept (docs/numeric.md, "Inputs")."""

from __future__ import annotations

import random
import re
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple, overload

import orjson
from pydantic import BaseModel, ConfigDict, SkipValidation, ValidationError

from fieldcheck._util.errors import ErrorList, InputError, input_error_of
from fieldcheck._util.jsonio import read_json
from fieldcheck.metrics import ProgramParseError, cell_number, program_operations
from fieldcheck.numeric import _scan
from fieldcheck.numeric._records import Conversation, Document, Features, SourceFormat, Turn

DEFAULT_SPLIT = "dev"


class _TurnKeys(NamedTuple):
    """Where a format keeps its per-turn lists (one entry per question)."""

    container: str
    questions: str
    answers: str
    programs: str
    executed: str
    splits: str


_DERIVED = _TurnKeys(
    "dialogue", "conv_questions", "conv_answers", "turn_program", "executed_answers", "qa_split"
)
_ORIGINAL = _TurnKeys(
    "annotation", "dialogue_break", "answer_list", "turn_program", "exe_ans_list", "qa_split"
)
_SUFFIXED = re.compile(r" \(\d+\)$")


class LoadResult(BaseModel):
    """The conversations that loaded, and one InputError per problem found."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    path: str
    source_format: SourceFormat
    split: str
    # a list, or StoredConversations (read again from the file when iterated)
    conversations: SkipValidation[Sequence[Conversation]]
    errors: ErrorList
    total_records: int
    all_ids: set[str]
    # (sample_size, seed) when load_convfinqa kept fewer records than the split has: the
    # sample score_to_folder's signature names
    sample: tuple[int, int | None] | None = None

    def conversation_ids(self) -> list[str]:
        """The kept conversations' ids, in order (without reading the records again)."""
        found = self.conversations
        return found.ids if isinstance(found, StoredConversations) else [c.id for c in found]

    def turn_counts(self) -> dict[str, int]:
        """Each kept conversation's number of turns."""
        found = self.conversations
        if isinstance(found, StoredConversations):
            return dict(zip(found.ids, found.turn_counts, strict=True))
        return {c.id: len(c.turns) for c in found}

    def no_gold_turns(self) -> int:
        """Turns without a gold answer (not scored)."""
        found = self.conversations
        if isinstance(found, StoredConversations):
            return found.no_gold
        return sum(t.executed_answer is None for c in found for t in c.turns)


def load_convfinqa(
    path: str | Path,
    *,
    split: str | None = None,
    sample_size: int | None = None,
    seed: int | None = None,
) -> LoadResult:
    """A ConvFinQA file of either format as Conversation records: ``split`` picks the derived
    format's key (default ``"dev"``, or the only one) and labels an original file; ``sample_size``
    keeps the first N records, with ``seed`` a seeded random N in file order. InputError if the
    file is unreadable, of neither shape, or lacks the split. Issue 10: every record is checked
    now, the kept ones read again from the file when iterated (``StoredConversations``); a file
    ``_scan`` cannot follow (a syntax error, a record near the depth limit) is read whole."""
    file = Path(path)
    try:
        found = _scan.shape(file)
        if found.kind == "object":
            chosen = _choose_split(found.members, split, file)
            if found.members[chosen] is None:
                raise _scan.Broken  # not an array: read whole, its error names the type
            fmt: SourceFormat = "derived"
        else:
            fmt, chosen = "original", split or DEFAULT_SPLIT
        spans = found.spans[chosen if found.kind == "object" else ""]
        total = len(spans) // 2
        records = ((i, *read) for i, read in enumerate(_scan.read_spans(file, spans)))
        selected = _selected(total, sample_size, seed)
        stored = StoredConversations(file, fmt, chosen)
        loaded = _load_records(file, fmt, chosen, total, records, selected, stored=stored)
    except _scan.Broken:  # a file _scan cannot follow, or one that changed under us
        loaded = _load_whole(file, split=split, sample_size=sample_size, seed=seed)
    if sample_size is not None and sample_size < loaded.total_records:
        loaded.sample = (sample_size, seed)
    return loaded


def _selected(total: int, sample_size: int | None, seed: int | None) -> range | set[int]:
    if sample_size is not None and sample_size < 0:
        raise InputError("sample size must be >= 0", field="sample_size", value=sample_size)
    if sample_size is None:
        return range(total)
    if seed is None:
        return range(min(sample_size, total))
    return set(random.Random(seed).sample(range(total), min(sample_size, total)))


def _load_whole(
    file: Path, *, split: str | None, sample_size: int | None, seed: int | None
) -> LoadResult:
    """``load_convfinqa`` over a file read whole (``read_json``)."""
    data = read_json(file)
    if isinstance(data, Mapping):
        fmt: SourceFormat = "derived"
        chosen = _choose_split(data, split, file)
        raw = data[chosen]
        if not isinstance(raw, list):
            raise InputError(
                "split is not a list of records", file=file, field=chosen, value=type(raw).__name__
            )
    elif isinstance(data, list):
        fmt = "original"
        chosen = split or DEFAULT_SPLIT
        raw = data
    else:
        expected = 'expected {"train": [...], "dev": [...]} or a list of records'
        raise InputError(expected, file=file, value=type(data).__name__)
    selected = _selected(len(raw), sample_size, seed)
    records = ((i, r, -1, 0) for i, r in enumerate(raw))
    return _load_records(file, fmt, chosen, len(raw), records, selected, stored=None)


def _load_records(
    file: Path,
    fmt: SourceFormat,
    chosen: str,
    total: int,
    raw: Iterable[tuple[int, Any, int, int]],
    selected: range | set[int],
    *,
    stored: StoredConversations | None,
) -> LoadResult:
    """Check every selected record (index, record, its offset and length in the file); keep the
    conversations (with ``stored``: where they are in the file) and one InputError per problem."""
    conversations: list[Conversation] = []
    errors = ErrorList()
    seen: set[str] = set()
    all_ids: set[str] = set()
    convert = _READERS[fmt]
    for i, record, start, size in raw:
        all_ids.add(_record_id(record, i))
        if i not in selected:
            continue
        try:
            conversation, warnings = convert(record, index=i, file=file)
        except InputError as exc:
            errors.append(exc)
            continue
        if conversation.id in seen:
            reason = "duplicate conversation id; later record skipped"
            errors.append(InputError(reason, file=file, record=conversation.id, field="id"))
            continue
        seen.add(conversation.id)
        errors.extend(warnings)
        if stored is None:
            conversations.append(conversation_model(conversation, chosen, fmt))
        else:
            stored.keep(i, conversation, start, size)
    return LoadResult(
        path=str(file),
        source_format=fmt,
        split=chosen,
        conversations=conversations if stored is None else stored,
        errors=errors,
        total_records=total,
        all_ids=all_ids,
    )


class PlainTurn(NamedTuple):
    """A turn as the loader reads it for scoring (``Turn``'s values, ``index`` as
    ``turn_index``)."""

    turn_index: int
    question: str
    answer: str | None
    program: str | None
    executed_answer: float | str | None
    qa_split: bool | None


class PlainConversation(NamedTuple):
    """A conversation as the loader reads it, checked, as plain data: ``features`` is
    ``Features.model_dump()``, ``document`` ``Document.model_dump(mode="json")``."""

    id: str
    turns: Sequence[PlainTurn | Turn]
    features: dict[str, Any]
    document: dict[str, Any]


def plain_conversation(conversation: Conversation) -> PlainConversation:
    """A validated conversation as plain data."""
    return PlainConversation(
        conversation.id,
        conversation.turns,
        conversation.features.model_dump(),
        conversation.doc.model_dump(mode="json"),
    )


def conversation_model(plain: PlainConversation, split: str, fmt: SourceFormat) -> Conversation:
    """The ``Conversation`` of a conversation the loader read (for the agent and the API)."""
    return Conversation(
        id=plain.id,
        split=split,
        source_format=fmt,
        doc=Document(**plain.document),
        turns=tuple(
            Turn(**dict(zip(Turn.model_fields, t, strict=True))) if isinstance(t, PlainTurn) else t
            for t in plain.turns
        ),
        features=Features(**plain.features),
    )


class StoredConversations(Sequence[Conversation]):
    """The kept conversations of a file, read again from it one record at a time when needed:
    their record numbers, byte spans, ids and turn counts are kept, not the records."""

    def __init__(self, file: Path, fmt: SourceFormat, split: str) -> None:
        self.file = file
        self.fmt: SourceFormat = fmt
        self.split = split
        self.spans = array("q")  # record number, offset, length: three per kept record
        self.ids: list[str] = []
        self.turn_counts = array("q")
        self.no_gold = 0

    def keep(self, index: int, conversation: PlainConversation, start: int, size: int) -> None:
        self.spans.extend((index, start, size))
        self.ids.append(conversation.id)
        self.turn_counts.append(len(conversation.turns))
        self.no_gold += sum(1 for t in conversation.turns if t.executed_answer is None)

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[Conversation]:
        with self.file.open("rb") as handle:
            for k in range(len(self)):
                yield self._conversation(handle, k)

    def _conversation(self, handle: IO[bytes], position: int) -> Conversation:
        index, start, size = self.spans[3 * position : 3 * position + 3]
        handle.seek(start)
        plain, _ = read_record(self.fmt, handle.read(size), index, self.file)
        return conversation_model(plain, self.split, self.fmt)

    @overload
    def __getitem__(self, position: int) -> Conversation: ...

    @overload
    def __getitem__(self, position: slice) -> list[Conversation]: ...

    def __getitem__(self, position: int | slice) -> Conversation | list[Conversation]:
        if isinstance(position, slice):
            return [self[k] for k in range(*position.indices(len(self)))]
        if not -len(self) <= position < len(self):
            raise IndexError(position)
        with self.file.open("rb") as handle:
            return self._conversation(handle, position % len(self))


def read_record(
    fmt: SourceFormat, text: bytes, index: int, file: Path
) -> tuple[PlainConversation, list[InputError]]:
    """A record of a file of format ``fmt`` (its JSON text, at ``index``) read as the loader
    read it, but for its gold programs' parse: the loader checked them (and warned)."""
    return _READERS[fmt](orjson.loads(text), index=index, file=file, checked=True)


def _choose_split(data: Mapping[str, Any], split: str | None, file: Path) -> str:
    keys = sorted(data)
    if split is not None:
        if split not in data:
            raise InputError(
                f"no split {split!r} in file; it has {keys}", file=file, field="split", value=split
            )
        return split
    if DEFAULT_SPLIT in data:
        return DEFAULT_SPLIT
    if len(keys) == 1:
        return keys[0]
    raise InputError(f"several splits {keys}; choose one with --split", file=file, field="split")


def _mapping(value: Any) -> bool:
    """``isinstance(value, Mapping)``, sooner for a dict (what JSON reads as)."""
    return type(value) is dict or isinstance(value, Mapping)


def _record_id(record: Any, index: int) -> str:
    found = record.get("id") if _mapping(record) else None
    return str(found) if isinstance(found, str) and found else f"#{index}"


def _require(
    obj: Any, key: str, kind: type | tuple[type, ...], *, file: Path, record: str, field: str
) -> Any:
    if not _mapping(obj) or key not in obj:
        raise InputError("missing field", file=file, record=record, field=field)
    value = obj[key]
    if not (type(value) is dict and kind is Mapping) and not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InputError(f"expected {names}", file=file, record=record, field=field, value=value)
    return value


def _text(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value) if value is not None else ""


def _record_start(record: Any, index: int, file: Path) -> tuple[str, Mapping[str, Any]]:
    """The record's id (or ``#index``) and the record itself, checked to be an object with an id."""
    rid = _record_id(record, index)
    if not _mapping(record):
        raise InputError(
            "record is not an object", file=file, record=rid, value=type(record).__name__
        )
    if not _require(record, "id", str, file=file, record=rid, field="id"):
        # a prediction names its conversation by a non-empty id: this one could never match
        raise InputError("empty id", file=file, record=rid, field="id", value="")
    return rid, record


def _document(texts: Mapping[str, Any], table: dict[str, dict[str, float | str]]) -> dict[str, Any]:
    """``Document.model_dump(mode="json")`` of the texts and the table."""
    return {
        "pre_text": _text(texts.get("pre_text")),
        "post_text": _text(texts.get("post_text")),
        "table": table,
    }


def _from_derived(
    record: Any, *, index: int, file: Path, checked: bool = False
) -> tuple[PlainConversation, list[InputError]]:
    """A derived-format record checked and read as plain data, and its warnings (the loader and
    scoring both read with it; ``checked``: no warning of a gold program that does not parse);
    InputError naming the record and field of its first problem."""
    rid, record = _record_start(record, index, file)
    doc = _require(record, "doc", Mapping, file=file, record=rid, field="doc")
    columns = _require(doc, "table", Mapping, file=file, record=rid, field="doc.table")
    table: dict[str, dict[str, float | str]] = {}
    for column, rows in columns.items():
        field = f"doc.table[{column!r}]"
        if not _mapping(rows):
            raise InputError(
                "expected an object of rows", file=file, record=rid, field=field, value=rows
            )
        for row, cell in rows.items():
            kind = type(cell)
            if kind is float or kind is int:
                cell = float(cell)
            elif kind is not str:
                reason, where = "cell is not a number or text", f"{field}[{row!r}]"
                raise InputError(reason, file=file, record=rid, field=where, value=cell)
            table.setdefault(str(row), {})[str(column)] = cell
    turns, warnings = _read_turns(record, _DERIVED, file=file, record=rid, checked=checked)
    # without a features object: the derived format marks repeated headers "name (1)", "name (2)"
    suffixed = sum(1 for c in columns if _SUFFIXED.search(str(c)))
    features = _derive_features(rid, table, turns, has_duplicate_columns=suffixed > 1)
    raw_features = record.get("features")
    if _mapping(raw_features):  # its own features over the derived ones, checked
        try:
            features = Features.model_validate({**features, **raw_features}).model_dump()
        except ValidationError as exc:
            raise input_error_of(exc, file=file, record=rid, prefix="features.") from exc
        if features["num_dialogue_turns"] != len(turns):
            said = f"says {features['num_dialogue_turns']} turns but the dialogue has {len(turns)}"
            field = "features.num_dialogue_turns"
            warnings.append(InputError(said, file=file, record=rid, field=field))
    return PlainConversation(rid, turns, features, _document(doc, table)), warnings


def _from_original(
    record: Any, *, index: int, file: Path, checked: bool = False
) -> tuple[PlainConversation, list[InputError]]:
    """An original-format record checked and read as plain data, and its warnings."""
    rid, record = _record_start(record, index, file)
    turns, warnings = _read_turns(record, _ORIGINAL, file=file, record=rid, checked=checked)
    rows = _require(record, "table", list, file=file, record=rid, field="table")
    table, duplicate_columns = _table_from_rows(rows, file=file, record=rid)
    features = _derive_features(rid, table, turns, has_duplicate_columns=duplicate_columns)
    return PlainConversation(rid, turns, features, _document(record, table)), warnings


def _read_turns(
    obj: Mapping[str, Any],
    keys: _TurnKeys,
    *,
    file: Path,
    record: str,
    checked: bool = False,
) -> tuple[list[PlainTurn], list[InputError]]:
    """The per-turn lists of ``obj[keys.container]`` (each as long as the questions) as turns."""
    box = _require(obj, keys.container, Mapping, file=file, record=record, field=keys.container)
    field = f"{keys.container}.{keys.questions}"
    questions = _require(box, keys.questions, list, file=file, record=record, field=field)
    answers, programs, executed, splits = (
        _turn_list(box, key, len(questions), file=file, record=record, prefix=keys.container)
        for key in (keys.answers, keys.programs, keys.executed, keys.splits)
    )
    if keys is _ORIGINAL and any(
        isinstance(a, str) and _STEP_NAME.fullmatch(a) for a in answers or ()
    ):
        answers = None  # the original answer_list holds step names ("A0"), not answers

    def bad(reason: str, key: str, i: int, value: Any = ...) -> InputError:
        field = f"{keys.container}.{key}[{i}]"
        return InputError(reason, file=file, record=record, field=field, value=value)

    turns: list[PlainTurn] = []
    warnings: list[InputError] = []
    for i, question in enumerate(questions):
        if type(question) is not str:
            raise bad("question is not text", keys.questions, i, question)
        program = programs[i] if programs is not None else None
        if program is not None:
            if type(program) is not str:
                raise bad("program is not text", keys.programs, i, program)
            try:
                if not checked:  # (a record read again: the loader warned of it)
                    program_operations(program)
            except ProgramParseError as exc:
                warnings.append(bad(str(exc), keys.programs, i))
        gold: Any = executed[i] if executed is not None else None
        kind = type(gold)
        if kind is float or kind is int:
            gold = float(gold)
        elif gold is not None and kind is not str:
            raise bad("answer is not a number or text", keys.executed, i, gold)
        answer = None if answers is None or answers[i] is None else str(answers[i])
        flag = None if splits is None or splits[i] is None else bool(splits[i])
        turns.append(PlainTurn(i, question, answer, program, gold, flag))
    return turns, warnings


_STEP_NAME = re.compile(r"A\d+")


def _turn_list(
    obj: Mapping[str, Any], key: str, n: int, *, file: Path, record: str, prefix: str
) -> list[Any] | None:
    """``obj[key]``, a list of ``n`` entries (one per turn); ``None`` when the key is absent."""
    if key not in obj:
        return None
    value = obj[key]
    if isinstance(value, list) and len(value) == n:
        return value
    listed = isinstance(value, list)
    reason = (
        f"has {len(value)} entries but the dialogue has {n} questions"
        if listed
        else "expected a list (one entry per turn)"
    )
    field = f"{prefix}.{key}"
    raise InputError(reason, file=file, record=record, field=field, value=... if listed else value)


def _table_from_rows(
    rows: Sequence[Any], *, file: Path, record: str
) -> tuple[dict[str, dict[str, float | str]], bool]:
    """The original list-of-rows table (first row = header) as row -> column -> cell."""
    if not rows:
        return {}, False
    for r, row in enumerate(rows):
        if not isinstance(row, list) or not all(isinstance(c, str | int | float) for c in row):
            reason = "table row is not a list of cells"
            raise InputError(reason, file=file, record=record, field=f"table[{r}]", value=row)
    header = [str(c) for c in rows[0][1:]]
    duplicate = len(set(header)) != len(header)
    columns = _disambiguate(header)
    entries: list[tuple[str, dict[str, float | str]]] = []
    for row in rows[1:]:
        if not row:
            continue
        cells: dict[str, float | str] = {}
        for j, cell in enumerate(row[1:]):
            column = columns[j] if j < len(columns) else f"column {j + 1}"
            number = cell_number(cell)
            # a percentage keeps its text: the table_* operations read "19.3% ( 19.3 % )" as
            # 0.193, as the upstream executor does (cell_number would say 19.3)
            if number is None or (isinstance(cell, str) and "%" in cell):
                cells[column] = str(cell)
            else:
                cells[column] = number
        entries.append((str(row[0]), cells))
    return _rows_by_name(entries), duplicate


def _rows_by_name(
    entries: Sequence[tuple[str, dict[str, float | str]]],
) -> dict[str, dict[str, float | str]]:
    """Rows by name: a repeated name means its LAST row, as in the upstream executor; the earlier
    ones are kept as ``name (1)``, ``name (2)`` (a further number when that name is taken)."""
    last = {name: i for i, (name, _) in enumerate(entries)}
    taken = set(last)
    table: dict[str, dict[str, float | str]] = {}
    counts: dict[str, int] = {}
    for i, (name, cells) in enumerate(entries):
        key = name
        if last[name] != i:
            while True:
                counts[name] = counts.get(name, 0) + 1
                key = f"{name} ({counts[name]})"
                if key not in taken:
                    break
            taken.add(key)
        table[key] = cells
    return table


def _disambiguate(names: Sequence[str]) -> list[str]:
    """A repeated header name numbered: ``name (1)``, ``name (2)``, ...; the others as they are."""
    counts, seen = Counter(names), Counter[str]()
    out: list[str] = []
    for name in names:
        seen[name] += 1
        out.append(f"{name} ({seen[name]})" if counts[name] > 1 else name)
    return out


def _derive_features(
    record: str,
    table: Mapping[str, Mapping[str, float | str]],
    turns: Sequence[PlainTurn],
    *,
    has_duplicate_columns: bool | None,
) -> dict[str, Any]:
    """``Features.model_dump()`` of a record that has none, derived as docs/numeric.md ("Inputs")
    says: type-2, duplicate columns, non-numeric cells."""
    flags = [t.qa_split for t in turns if t.qa_split is not None]
    return {
        "num_dialogue_turns": len(turns),
        "has_type2_question": any(flags) if flags else record.startswith("Double_"),
        "has_duplicate_columns": bool(has_duplicate_columns),
        "has_non_numeric_values": any(
            cell_number(cell) is None for cells in table.values() for cell in cells.values()
        ),
    }


_READERS = {"derived": _from_derived, "original": _from_original}
