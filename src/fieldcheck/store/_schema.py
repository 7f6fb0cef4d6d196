"""The store's tables (SQLAlchemy 2.0): runs, the runner's journal, the reply cache and the saved
configuration, mirroring the Alembic migrations in ``migrations/`` (which alone make them)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class RunRow(Base):
    """One run of one task for one model: what ran, on what, with which settings, how it went."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_key: Mapped[str] = mapped_column(String(64), index=True)
    system: Mapped[str] = mapped_column(String(32))
    task: Mapped[str] = mapped_column(String(64))
    dataset: Mapped[str] = mapped_column(Text)
    dataset_sha256: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(Text)
    endpoint: Mapped[str] = mapped_column(Text)
    settings: Mapped[str] = mapped_column(Text)  # JSON
    signature: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))  # running | interrupted | failed | finished
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    n_items: Mapped[int] = mapped_column(Integer, default=0)
    n_done: Mapped[int] = mapped_column(Integer, default=0)
    n_errors: Mapped[int] = mapped_column(Integer, default=0)
    # run | score (given outputs; a re-score has a parent) | calls (of its parent's run); and
    # model-run, scored: before 0006 merged them
    kind: Mapped[str] = mapped_column(String(16), default="run")

    parent_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    former_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    out_dir: Mapped[str | None] = mapped_column(Text, nullable=True)
    inputs: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON [{name, path, sha256}]
    metrics: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON
    intervals: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON
    # what the runs list sorts by, set when the run is finished (0008: ``_figures``)
    headline: Mapped[float | None] = mapped_column(Float, nullable=True)
    n_failed: Mapped[int | None] = mapped_column(Integer, nullable=True)
    n_call_errors: Mapped[int | None] = mapped_column(Integer, nullable=True)
    input_tokens: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    output_tokens: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    cost_usd: Mapped[float | None] = mapped_column(Float, nullable=True)
    latency_mean_s: Mapped[float | None] = mapped_column(Float, nullable=True)


class JournalRow(Base):
    """The runner's journal: one item of a model run as its calls finished (what a resume
    reads back), committed at once."""

    __tablename__ = "run_journal"

    run_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    item_key: Mapped[str] = mapped_column(Text, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer)
    error_type: Mapped[str | None] = mapped_column(String(32), nullable=True)
    calls: Mapped[int] = mapped_column(Integer, default=0)
    cached_calls: Mapped[int] = mapped_column(Integer, default=0)
    latency_s: Mapped[float] = mapped_column(Float, default=0.0)
    result: Mapped[str] = mapped_column(Text)  # JSON
    call_log: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON list, one per call
    finished_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class CacheRow(Base):
    """A model reply keyed on endpoint, model, messages and parameters (never the API key)."""

    __tablename__ = "response_cache"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    model: Mapped[str] = mapped_column(Text)
    value: Mapped[str] = mapped_column(Text)  # JSON: text, tokens, latency
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ConfigRow(Base):
    """One section of the saved configuration (``strategies``, ``thresholds``, ``weights``) as
    JSON: what the API and the pages use when a request brings none of its own."""

    __tablename__ = "saved_config"

    section: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)  # JSON
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
