"""The JSON evaluation's configuration saved in the store (strategies: json-evaluation.md "Field
Strategy Config File"; thresholds; RQS weights), merged into a call's ``EvalConfig``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fieldcheck._util.errors import (
    InputError,
    UsageProblem,
    exception_line,
    input_error_of,
    reason_of,
    short_repr,
)
from fieldcheck.jsoneval._config import EvalConfig, parse_strategies
from fieldcheck.metrics import RqsWeights

if TYPE_CHECKING:
    from fieldcheck.store import Store

Section = Literal["strategies", "thresholds", "weights"]
SECTIONS: tuple[Section, ...] = ("strategies", "thresholds", "weights")
_DEFAULTS = EvalConfig()


class Thresholds(BaseModel):
    """The FUZZY and SEMANTIC thresholds (spec Phase 3): a field scores 1 at or above its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fuzzy_threshold: float = Field(_DEFAULTS.fuzzy_threshold, ge=0, le=1, allow_inf_nan=False)
    semantic_threshold: float = Field(_DEFAULTS.semantic_threshold, ge=0, le=1, allow_inf_nan=False)


def parse_section(section: Section, data: Any, *, file: str | None = None) -> dict[str, Any]:
    """A section's value validated (strategies upper-cased; thresholds and weights left out keep
    their default), or InputError with the CLI's line naming the bad name and value (and
    ``file`` when it came from one, as ``--strategies FILE`` does)."""
    if section == "strategies":
        return dict(parse_strategies(data, file=file))
    if not isinstance(data, dict):
        raise InputError(f"{section} must be a JSON object", file=file, value=data)
    model = Thresholds if section == "thresholds" else RqsWeights
    try:  # strict: a JSON true or "0.5" is not a number that decides RQS
        return model.model_validate(data, strict=True).model_dump()
    except ValidationError as exc:
        raise input_error_of(exc, file=file) from None


class SectionError(Exception):
    """A given section that is not valid: which one, and the library's one-line error."""

    def __init__(self, section: Section, error: InputError, *, saved: bool = False) -> None:
        super().__init__(str(error))
        self.section = section
        self.error = error
        self.saved = saved  # the section saved in the store (none given) is the bad one


@dataclass
class SavedConfig:
    """The configuration sections in the store, with defaults when never saved."""

    store: Store

    def saved(self) -> list[Section]:
        """The sections saved in the store (the others are their defaults)."""
        return [s for s in SECTIONS if self.store.get_config(s) is not None]

    def get(self, section: Section) -> dict[str, Any]:
        saved = self.store.get_config(section)
        return dict(saved) if saved is not None else parse_section(section, {})  # the defaults

    def checked(self, section: Section) -> dict[str, Any]:
        """The section as ``get`` gives it, validated with today's rules: one saved before a rule
        was added raises SectionError(saved=True) saying where it is from and how to replace it."""
        try:
            return parse_section(section, self.get(section))
        except InputError as exc:
            where = f"{section}.{exc.field}" if exc.field else section
            got = "" if exc.value is ... else f" (got {short_repr(exc.value)})"
            reason = (
                f"the {section} saved in the store are not valid: {where} {exc.reason}{got}; "
                f"save new ones (the Configuration page, PUT /api/config/{section}) or give them"
            )
            raise SectionError(section, InputError(reason), saved=True) from None

    def put(self, section: Section, data: Any, *, file: str | None = None) -> dict[str, Any]:
        """Validate and save a section; returns what was saved. Raises InputError."""
        value = parse_section(section, data, file=file)
        self.store.put_config(section, value)
        return value


_OPTION = {"strategies": "--strategies", "thresholds": "--fuzzy-threshold", "weights": "--weights"}


def merged_config(
    given: Mapping[str, Any], saved: SavedConfig | None, note: Callable[[str], None]
) -> EvalConfig:
    """The one rule for every command and API route (issue 27): a setting given wins, then the
    one saved in the store (said by ``note``), then its default; each threshold on its own."""
    values = {k: v for k, v in given.items() if v is not None or k.startswith("judge")}
    sections = saved.saved() if saved is not None else []
    used: list[str] = []
    for section in ("strategies", "weights"):
        if given.get(section) is not None:
            try:
                values[section] = parse_section(section, given[section])
            except InputError as exc:
                raise SectionError(section, exc) from None
        elif section in sections:
            values[section] = saved.checked(section)  # type: ignore[union-attr]
            n = len(values[section])
            used.append(f"strategies ({n} fields)" if section == "strategies" else section)
    names = ("fuzzy_threshold", "semantic_threshold")
    thresholds = saved.checked("thresholds") if "thresholds" in sections else {}  # type: ignore[union-attr]
    if any(given.get(n) is None for n in names if n in thresholds):
        used.append("thresholds")
    wanted = {n: given[n] for n in names if given.get(n) is not None}
    try:
        values.update(parse_section("thresholds", {**thresholds, **wanted}))
    except InputError as exc:
        raise SectionError("thresholds", exc) from None
    if used:
        note(
            f"using the configuration saved in the store: {', '.join(used)} "
            "(an option given wins; --no-store ignores the store)"
        )
    try:
        return EvalConfig.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        option = "--" + str(first["loc"][0]).replace("_", "-") if first["loc"] else None
        raise UsageProblem(reason_of(first), option) from None


def resolve_config(
    given: Mapping[str, Any],
    *,
    store: bool | Store,
    warn: Callable[[str], None] | None,
    note: Callable[[str], None] | None,
) -> tuple[EvalConfig, bool]:
    """``merged_config`` with the store's configuration (``store`` True: the default one), a bad
    section a ``UsageProblem``; False beside it when the store cannot be read (said by ``warn``)."""
    warn, note = warn or (lambda _: None), note or (lambda _: None)
    saved, readable = None, True
    if store is not False:
        try:
            from fieldcheck.store import Store

            saved = SavedConfig(Store() if store is True else store)
            saved.saved()
        except Exception as exc:  # an unreachable or unreadable store: the defaults, said once
            warn(
                f"warning: the store cannot be used ({exception_line(exc)}): the saved "
                "configuration is not read and the run is not stored; its files are complete"
            )
            saved, readable = None, False
    try:
        return merged_config(given, saved, note), readable
    except SectionError as exc:
        raise UsageProblem(str(exc.error), _OPTION[exc.section]) from None
