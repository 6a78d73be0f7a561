"""Where the memory's knowledge lives: the table, :class:`KnowledgeStore`, and the ranking of
entries for a task (:func:`rank_entries`; part of :mod:`darwin.memory.llm`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import Boolean, DateTime, Index, Integer, String, Text, UniqueConstraint, select
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from darwin.database import Database, StoreOpenError, utcnow
from darwin.memory.llm_answers import _WORD

EntryKind = Literal["summary", "knowledge"]
"""What an entry is: the summary of one episode, or a fact about an app."""

KINDS: tuple[EntryKind, ...] = ("knowledge", "summary")

RECENCY_WEIGHT = 0.3
"""Weight of recency in :func:`rank_entries` (the newest entry gets the whole weight)."""
COUNT_WEIGHT = 0.2
"""Weight of repetition in :func:`rank_entries` (an entry learned again and again nears it)."""


_STOPWORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "to",
        "of",
        "in",
        "on",
        "at",
        "by",
        "for",
        "from",
        "with",
        "and",
        "or",
        "is",
        "are",
        "be",
        "it",
        "its",
        "this",
        "that",
        "as",
        "into",
        "then",
        "your",
        "you",
        "my",
        "me",
        "i",
        "go",
        "turn",
        "open",
        "set",
    }
)


# --------------------------------------------------------------------------- errors


class MemoryStoreError(StoreOpenError, ValueError):
    """The memory's database cannot be opened; the message names the URL and the fix.

    Also a ``ValueError``: the database is one of the memory's settings, so an experiment's
    check (``darwin run --dry-run``) reports it with the other bad settings.
    """


# --------------------------------------------------------------------------- storage


def app_key(app: str) -> str:
    """How an app is stored and looked up: whitespace collapsed, case folded.

    >>> app_key("  Google   Play ")
    'google play'
    """
    return " ".join(app.split()).casefold()


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` (letters, digits, underscores)."""
    return _WORD.findall(text.casefold())


def text_hash(text: str) -> str:
    """SHA-256 of the normalised text (its words, lower case): the deduplication key.

    >>> text_hash("Dark theme is under Display.") == text_hash("dark  theme is under display")
    True
    """
    return hashlib.sha256(" ".join(words(text)).encode("utf-8")).hexdigest()


class _Base(DeclarativeBase):
    """Declarative base of the memory's tables (kept apart from the run store's schema)."""


class MemoryEntryModel(_Base):
    """One summary or fact; unique per (app, kind, normalised text)."""

    __tablename__ = "memory_entries"
    __table_args__ = (
        UniqueConstraint("app", "kind", "text_hash", name="uq_memory_entries_app_kind_hash"),
        Index("ix_memory_entries_app_seen", "app", "last_seen_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    app: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(16))
    text: Mapped[str] = mapped_column(Text)
    text_hash: Mapped[str] = mapped_column(String(64))
    times_seen: Mapped[int] = mapped_column(Integer, default=1)
    task_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    goal: Mapped[str | None] = mapped_column(Text, nullable=True)
    success: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    last_seen_at: Mapped[datetime] = mapped_column(DateTime)


@dataclass(frozen=True)
class KnowledgeEntry:
    """A stored entry, as queries return it (no ORM object leaks out)."""

    id: int
    app: str
    kind: EntryKind
    text: str
    times_seen: int
    task_id: str | None
    goal: str | None
    success: bool | None
    created_at: datetime
    last_seen_at: datetime

    @property
    def note(self) -> str:
        """How the entry reads as a prompt note."""
        if self.kind == "knowledge":
            return self.text
        outcome = {True: "succeeded", False: "failed", None: "not verified"}[self.success]
        goal = f' at "{self.goal}"' if self.goal else ""
        return f"Earlier attempt{goal} ({outcome}): {self.text}"


def _entry(row: MemoryEntryModel) -> KnowledgeEntry:
    return KnowledgeEntry(
        id=row.id,
        app=row.app,
        kind=row.kind,  # type: ignore[arg-type]  # the store writes only KnowledgeEntry kinds
        text=row.text,
        times_seen=row.times_seen,
        task_id=row.task_id,
        goal=row.goal,
        success=row.success,
        created_at=row.created_at,
        last_seen_at=row.last_seen_at,
    )


_MEMORY_FIX = "set url to another database (or leave it unset to use the run's SQLite database)"


class KnowledgeStore(Database):
    """The memory's SQL table (``memory_entries``) in any SQLAlchemy database.

    Opened (and the table created) at construction; a database that cannot be opened raises
    :class:`MemoryStoreError` naming the URL and the fix. SQLite files are shared safely with
    the run store and other processes (WAL, busy timeout, writes take the lock up front).

    >>> store = KnowledgeStore(None)             # in memory
    >>> store.add("Clock", "knowledge", "The + button adds an alarm.")
    True
    >>> store.add("clock", "knowledge", "the + button adds an alarm")   # same text: counted
    False
    >>> [(e.text, e.times_seen) for e in store.entries("Clock")]
    [('The + button adds an alarm.', 2)]
    >>> store.close()
    """

    what = "memory database"
    fix = _MEMORY_FIX
    error = MemoryStoreError
    metadata = _Base.metadata

    def add(
        self,
        app: str,
        kind: EntryKind,
        text: str,
        *,
        task_id: str | None = None,
        goal: str | None = None,
        success: bool | None = None,
    ) -> bool:
        """Store ``text`` for ``app``; ``True`` if new, ``False`` if already known (its
        ``times_seen`` and ``last_seen_at`` are bumped instead)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        key, digest = app_key(app), text_hash(text)
        if not key or not words(text):
            raise ValueError("an entry needs an app name and some words of text")
        for attempt in range(2):
            try:
                with self._session(write=True) as s:
                    now = utcnow(naive=True)
                    row = s.scalar(
                        select(MemoryEntryModel).where(
                            MemoryEntryModel.app == key,
                            MemoryEntryModel.kind == kind,
                            MemoryEntryModel.text_hash == digest,
                        )
                    )
                    if row is not None:
                        row.times_seen += 1
                        row.last_seen_at = now
                        return False
                    s.add(
                        MemoryEntryModel(
                            app=key,
                            kind=kind,
                            text=text,
                            text_hash=digest,
                            times_seen=1,
                            task_id=task_id,
                            goal=goal,
                            success=success,
                            created_at=now,
                            last_seen_at=now,
                        )
                    )
                    return True
            except sa_exc.IntegrityError:
                if attempt:
                    raise
                # A concurrent writer inserted the same text between our read and write: count it.
        raise AssertionError("unreachable")

    def entries(
        self, app: str | None = None, kinds: Sequence[EntryKind] = KINDS, limit: int | None = None
    ) -> list[KnowledgeEntry]:
        """Entries (of ``app`` if given), most recently seen first."""
        query = select(MemoryEntryModel).where(MemoryEntryModel.kind.in_(list(kinds)))
        if app is not None:
            query = query.where(MemoryEntryModel.app == app_key(app))
        query = query.order_by(MemoryEntryModel.last_seen_at.desc(), MemoryEntryModel.id.desc())
        if limit is not None:
            query = query.limit(limit)
        with self._session(write=False) as s:
            return [_entry(row) for row in s.scalars(query)]


def rank_entries(entries: Sequence[KnowledgeEntry], goal: str) -> list[tuple[float, KnowledgeEntry]]:
    """Entries scored by relevance to ``goal``, best first (ties: the more recent first).

    ``score = overlap + RECENCY_WEIGHT / (1 + r) + COUNT_WEIGHT * (1 - 1 / times_seen)``:
    ``overlap`` is the share of the goal's words (minus a few stop words) that the entry
    contains (its goal too, for summaries), ``r`` the entry's rank by last-seen time (0 =
    the newest of the app's entries). Word overlap dominates; recency and repetition
    order entries the goal says little about.
    """
    goal_words = set(words(goal)) - _STOPWORDS or set(words(goal))
    by_recency = sorted(entries, key=lambda e: (e.last_seen_at, e.id), reverse=True)
    scored = []
    for rank, entry in enumerate(by_recency):
        entry_words = set(words(entry.text)) | (
            set(words(entry.goal)) if entry.kind == "summary" and entry.goal else set()
        )
        overlap = len(goal_words & entry_words) / len(goal_words) if goal_words else 0.0
        score = overlap + RECENCY_WEIGHT / (1 + rank) + COUNT_WEIGHT * (1 - 1 / max(1, entry.times_seen))
        scored.append((rank, score, entry))
    scored.sort(key=lambda x: (-x[1], x[0]))
    return [(score, entry) for _, score, entry in scored]
