"""The run database: runs, tasks, episodes, steps and verdicts, plus content-addressed screenshots.

One SQLite file per run by default (``<run_dir>/run.db`` with screenshots under
``<run_dir>/screenshots/``); any SQLAlchemy URL (e.g. ``postgresql://...``) for runs shared
between machines. Every write is one transaction (nothing half-written), every query
returns frozen dataclasses (no ORM objects or open sessions leak out), and the store is
safe to use from several threads at once (one engine, one session per call).

>>> import numpy as np
>>> from darwin.store import RunStore
>>> store = RunStore("sqlite://")  # in memory; RunStore.for_run_dir(run_dir) for a real run
>>> run_id = store.start_run("demo", config=None)
>>> [r.name for r in store.runs()]
['demo']
>>> store.close()

Secrets never reach the database: run configs pass through :func:`redact_secrets` first.
See ``docs/store.md`` for the schema and SQL examples.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import logging
import os
import re
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image
from pydantic import BaseModel, JsonValue, TypeAdapter
from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    case,
    func,
    null,
    select,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy import inspect as sa_inspect
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from darwin.actions import Action, parse_action
from darwin.database import (
    DB_FILENAME,
    Database,
    StoreError,
    StoreOpenError,
    UTCDateTime,
    create_database_engine,
    describe_url,
    resolve_database_url,
    utcnow,
)
from darwin.png import encode_png
from darwin.types import (
    EpisodeMetrics,
    ParseError,
    Phase,
    Task,
    TerminationReason,
    Trajectory,
    Transition,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 5
"""Bumped whenever the tables change; opening an older database migrates it where a
migration exists (:data:`_MIGRATIONS`) and says so otherwise."""

# version -> statements that bring a database of that version to the next one. Version 2
# records which agent produced each step and the words of turns that do not act. Version 3
# records what a model judge's verdict cost (tokens, dollars, requests) and its settings,
# and each episode's phone size and final screen (what a judge reviewing the run looks at).
# Version 4 records each episode's metrics (progress rate, side effects, false completion,
# over-time; darwin.types.EpisodeMetrics). Version 5 adds the phone_events table (hard
# resets and replacements of the fleet's phones), which create_all makes on its own.
# An "ADD COLUMN" whose column exists already is skipped, so every step is safe to rerun.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "ALTER TABLE steps ADD COLUMN agent VARCHAR(64) NOT NULL DEFAULT 'actor'",
        "ALTER TABLE steps ADD COLUMN message TEXT",
    ),
    2: (
        "ALTER TABLE verdicts ADD COLUMN prompt_tokens INTEGER",
        "ALTER TABLE verdicts ADD COLUMN completion_tokens INTEGER",
        "ALTER TABLE verdicts ADD COLUMN cost_usd FLOAT",
        "ALTER TABLE verdicts ADD COLUMN requests INTEGER",
        "ALTER TABLE verdicts ADD COLUMN verifier_config JSON",
        "ALTER TABLE episodes ADD COLUMN device_width INTEGER",
        "ALTER TABLE episodes ADD COLUMN device_height INTEGER",
        "ALTER TABLE episodes ADD COLUMN final_screenshot_path VARCHAR(256)",
    ),
    3: (
        "ALTER TABLE episodes ADD COLUMN progress_rate FLOAT",
        "ALTER TABLE episodes ADD COLUMN side_effects JSON",
        "ALTER TABLE episodes ADD COLUMN false_completion BOOLEAN",
        "ALTER TABLE episodes ADD COLUMN over_time_steps INTEGER",
        "ALTER TABLE episodes ADD COLUMN goal_first_met_step INTEGER",
    ),
    4: (),
}
_ADD_COLUMN = re.compile(r"^ALTER TABLE (\w+) ADD COLUMN (\w+) ")

SCREENSHOT_DIRNAME = "screenshots"
MAX_TEXT_CHARS = 100_000
"""Longest model response stored per step; longer text is cut (and the cut is logged)."""

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"



# --------------------------------------------------------------------------- secrets

# A name is secret-looking when its last word is one of these (``api_key``, ``hf_token``,
# ``db_password``) or when it contains one of the always-secret words anywhere. Matching
# on words rather than substrings keeps harmless fields such as ``max_tokens``,
# ``key_components`` and ``tokenizer`` in the stored config.
_SECRET_LAST_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "credential",
        "credentials",
        "authorization",
        "auth",
        "cookie",
    }
)
_SECRET_ANY_WORDS = frozenset({"apikey", "secret", "password", "passwd", "credentials"})
_SECRET_VALUE_PATTERNS = re.compile(
    r"""
      \bsk-[A-Za-z0-9_\-]{6,}            # OpenAI / Anthropic style (sk-..., sk-ant-...)
    | \bAIza[0-9A-Za-z_\-]{20,}          # Google API keys
    | \bgh[pousr]_[A-Za-z0-9]{20,}       # GitHub tokens
    | \bgithub_pat_[A-Za-z0-9_]{20,}
    | \bhf_[A-Za-z0-9]{20,}              # Hugging Face tokens
    | \bxox[abprs]-[A-Za-z0-9\-]{10,}    # Slack tokens
    | \bAKIA[0-9A-Z]{16}\b               # AWS access key ids
    | \bBearer\s+\S{8,}                  # HTTP bearer credentials
    | [a-z][a-z0-9+.\-]*://[^/\s:@]+:[^/\s@]+@  # URLs with user:password@
    """,
    re.VERBOSE,
)


def _name_words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def is_secret_name(name: str) -> bool:
    """True if a config key looks like it holds a credential (``api_key``, ``hfToken``...)."""
    words = _name_words(name)
    if not words:
        return False
    joined = "".join(words)
    return (
        words[-1] in _SECRET_LAST_WORDS
        or any(w in _SECRET_ANY_WORDS for w in words)
        or joined.endswith("apikey")
    )


def _secret_env_values() -> frozenset[str]:
    """Values of secret-looking environment variables (so they are caught under any name)."""
    return frozenset(v for k, v in os.environ.items() if is_secret_name(k) and len(v) >= 8)


def is_secret_value(value: str, env_secrets: frozenset[str] | None = None) -> bool:
    """True if a string looks like (or contains) a credential, or equals a secret env var."""
    if _SECRET_VALUE_PATTERNS.search(value):
        return True
    secrets = _secret_env_values() if env_secrets is None else env_secrets
    return any(s in value for s in secrets)


_DROP = object()


def redact_secrets(value: JsonValue) -> JsonValue:
    """Return a copy of a JSON-like value with everything that looks like a secret dropped.

    Drops mapping entries whose key looks secret (``api_key``, ``token``, ``password``,
    ``client_secret``...), and any string (mapping value or list item) that looks like a
    credential (``sk-...``, ``hf_...``, ``Bearer ...``, ``scheme://user:pass@host``) or equals
    the value of a secret-looking environment variable (``OPENAI_API_KEY``...).

    >>> redact_secrets({"model": "gpt-4o", "api_key": "x", "n": [1, "sk-abcdef123"]})
    {'model': 'gpt-4o', 'n': [1]}
    """
    env_secrets = _secret_env_values()

    def walk(v: JsonValue) -> object:
        if isinstance(v, str):
            return _DROP if is_secret_value(v, env_secrets) else v
        if isinstance(v, Mapping):
            out: dict[str, JsonValue] = {}
            for k, item in v.items():
                if is_secret_name(str(k)):
                    continue
                cleaned = walk(item)
                if cleaned is not _DROP:
                    out[str(k)] = cleaned  # type: ignore[assignment]
            return out
        if isinstance(v, list | tuple):
            return [c for c in (walk(item) for item in v) if c is not _DROP]
        return v

    result = walk(value)
    return None if result is _DROP else result  # type: ignore[return-value]


def _config_to_json(config: BaseModel | DataclassInstance) -> JsonValue:
    """Dump a pydantic model or dataclass config to JSON-compatible data (mode='json')."""
    if isinstance(config, BaseModel):
        return config.model_dump(mode="json")
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return TypeAdapter(type(config)).dump_python(config, mode="json")
    raise TypeError(
        f"config must be a pydantic BaseModel or a dataclass instance, got {type(config).__name__}"
    )


# --------------------------------------------------------------------------- ORM models


_JSON = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    """Declarative base of the run-database tables."""


class StoreMeta(Base):
    """Key/value facts about the database itself (``schema_version``)."""

    __tablename__ = "store_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(256))


class RunModel(Base):
    """One experiment run; ``config`` is the redacted experiment config."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    config: Mapped[JsonValue | None] = mapped_column(_JSON, nullable=True)


class TaskModel(Base):
    """A task as run; ``task_json`` is the full ``Task.model_dump_json()``."""

    __tablename__ = "tasks"

    id: Mapped[str] = mapped_column(String(256), primary_key=True)
    instruction: Mapped[str] = mapped_column(Text)
    app: Mapped[str] = mapped_column(String(256))
    source: Mapped[str] = mapped_column(String(256), default="")
    task_json: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class EpisodeModel(Base):
    """One episode on one phone; ``success`` NULL means unverified (or not finished)."""

    __tablename__ = "episodes"
    __table_args__ = (
        Index("ix_episodes_run_task", "run_id", "task_id"),
        Index("ix_episodes_run_started", "run_id", "started_at"),
    )

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"))
    phone: Mapped[str] = mapped_column(String(256))
    seed: Mapped[int | None] = mapped_column(Integer, nullable=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    termination_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    termination_cause: Mapped[str] = mapped_column(Text, default="")
    success: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    num_steps: Mapped[int | None] = mapped_column(Integer, nullable=True)
    phase_success: Mapped[dict[str, bool | None] | None] = mapped_column(_JSON, nullable=True)
    device_width: Mapped[int | None] = mapped_column(Integer, nullable=True)
    device_height: Mapped[int | None] = mapped_column(Integer, nullable=True)
    final_screenshot_path: Mapped[str | None] = mapped_column(String(256), nullable=True)
    # EpisodeMetrics; progress_rate NULL: the episode was not measured (then all five are NULL).
    progress_rate: Mapped[float | None] = mapped_column(Float, nullable=True)
    side_effects: Mapped[list[str] | None] = mapped_column(_JSON, nullable=True)
    false_completion: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    over_time_steps: Mapped[int | None] = mapped_column(Integer, nullable=True)
    goal_first_met_step: Mapped[int | None] = mapped_column(Integer, nullable=True)


class StepModel(Base):
    """One transition: the action (or parse error), the response, tokens and reward."""

    __tablename__ = "steps"
    __table_args__ = (
        UniqueConstraint("episode_id", "phase", "step", name="uq_steps_episode_phase_step"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    episode_id: Mapped[str] = mapped_column(ForeignKey("episodes.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    phase: Mapped[str] = mapped_column(String(16))
    action_type: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    action_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    parse_error_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    parse_error_text: Mapped[str | None] = mapped_column(Text, nullable=True)
    agent: Mapped[str] = mapped_column(String(64), default="actor", server_default="actor")
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    response_text: Mapped[str | None] = mapped_column(Text, nullable=True)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    response_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    policy_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    reward: Mapped[float] = mapped_column(Float, default=0.0)
    done: Mapped[bool] = mapped_column(Boolean, default=False)
    termination_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    termination_cause: Mapped[str] = mapped_column(Text, default="")
    screenshot_path: Mapped[str | None] = mapped_column(String(256), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class VerdictModel(Base):
    """A verifier's verdict on one phase of an episode; ``success`` NULL means unverified."""

    __tablename__ = "verdicts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    episode_id: Mapped[str] = mapped_column(
        ForeignKey("episodes.id", ondelete="CASCADE"), index=True
    )
    phase: Mapped[str] = mapped_column(String(16))
    verifier_kind: Mapped[str] = mapped_column(String(64))
    success: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    reward: Mapped[float | None] = mapped_column(Float, nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    prompt_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    completion_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cost_usd: Mapped[float | None] = mapped_column(Float, nullable=True)
    requests: Mapped[int | None] = mapped_column(Integer, nullable=True)
    verifier_config: Mapped[JsonValue | None] = mapped_column(_JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class PhoneEventModel(Base):
    """Something the fleet did to one phone during a run: a hard reset, a replacement by a
    spare, a phone taken out of service (:class:`darwin.envs.fleet.PhoneEvent`)."""

    __tablename__ = "phone_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    phone: Mapped[str] = mapped_column(String(256))
    kind: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text, default="")
    episodes: Mapped[int] = mapped_column(Integer, default=0)
    replacement: Mapped[str | None] = mapped_column(String(256), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


# --------------------------------------------------------------------------- query rows


@dataclass(frozen=True)
class RunRow:
    """A run as stored."""

    run_id: str
    name: str
    created_at: datetime
    config: JsonValue | None


@dataclass(frozen=True)
class EpisodeRow:
    """An episode as stored; ``success is None`` means unverified or not finished."""

    episode_id: str
    run_id: str
    task_id: str
    phone: str
    seed: int | None
    started_at: datetime
    ended_at: datetime | None
    termination_reason: TerminationReason | None
    termination_cause: str
    success: bool | None
    num_steps: int | None
    phase_success: Mapping[Phase, bool | None]
    device_size: tuple[int, int] | None = None
    """The phone's ``(width, height)`` in pixels, which action coordinates refer to."""
    final_screenshot_path: str | None = None
    """The screen when the episode ended (after its last action), relative to the screenshot directory."""
    metrics: EpisodeMetrics | None = None
    """Progress rate, side effects, false completion and over-time (``None``: not measured)."""

    @property
    def finished(self) -> bool:
        return self.ended_at is not None


@dataclass(frozen=True)
class StoredStep:
    """A step as stored. ``screenshot_path`` is relative to the store's screenshot directory."""

    episode_id: str
    step: int
    phase: Phase
    action_json: str | None
    parse_error: ParseError | None
    response_text: str | None
    prompt_tokens: int | None
    response_tokens: int | None
    policy_version: int | None
    reward: float
    done: bool
    termination_reason: TerminationReason | None
    termination_cause: str
    screenshot_path: str | None
    agent: str = "actor"
    """The agent that produced the step (see :attr:`darwin.types.Transition.agent`)."""
    message: str | None = None
    """The words of a turn that did not act on the phone (a plan, a note, a judgement)."""

    @property
    def action(self) -> Action | None:
        """The action, parsed back from ``action_json`` (``None`` for a parse error)."""
        return None if self.action_json is None else parse_action(self.action_json)


@dataclass(frozen=True)
class VerdictRow:
    """A verdict as stored; ``success is None`` / ``reward is None`` mean unverified."""

    episode_id: str
    phase: Phase
    verifier_kind: str
    success: bool | None
    reward: float | None
    reason: str
    created_at: datetime
    prompt_tokens: int | None = None
    """Tokens a model judge read for this verdict (``None`` for rule checks)."""
    completion_tokens: int | None = None
    cost_usd: float | None = None
    """Dollars per LiteLLM's price map; ``None`` when unpriced (self-hosted models) or not a model."""
    requests: int | None = None
    """Requests the judge sent (answers from its cache not counted)."""
    verifier_config: JsonValue | None = None
    """The judge's settings (redacted: never a key)."""


@dataclass(frozen=True)
class PhoneEventRow:
    """A phone event as stored (:meth:`RunStore.phone_events`)."""

    phone: str
    kind: str
    """``hard_reset``, ``replaced`` or ``retired``."""
    reason: str
    episodes: int
    """Episodes the phone had played in this run when it happened."""
    replacement: str | None
    """``replaced``: the spare that took the phone's place."""
    created_at: datetime


@dataclass(frozen=True)
class SuccessStats:
    """Outcome counts of one task's episodes in a run.

    Every episode lands in exactly one bucket: ``infra_truncated`` (the phone failed; never
    a failure), ``errors`` (a bug, recorded with its cause), ``unfinished`` (no
    ``finish_episode`` yet), ``already_done`` (the goal held before the agent acted: not
    scored), else by verdict: ``successes``, ``failures`` or ``unverified`` (the verifier
    could not decide; never a silent 0 or 1).
    """

    episodes: int = 0
    successes: int = 0
    failures: int = 0
    unverified: int = 0
    infra_truncated: int = 0
    errors: int = 0
    unfinished: int = 0
    already_done: int = 0

    @property
    def verified(self) -> int:
        return self.successes + self.failures

    @property
    def success_rate(self) -> float | None:
        """Successes over verified episodes; ``None`` when none was verified."""
        return self.successes / self.verified if self.verified else None


# --------------------------------------------------------------------------- helpers


def _clean_text(text: str | None, limit: int | None = None) -> str | None:
    """Make text storable everywhere: no NUL (PostgreSQL), no lone surrogates, bounded length."""
    if text is None:
        return None
    if limit is not None and len(text) > limit:
        logger.warning("truncating stored text from %d to %d characters", len(text), limit)
        text = text[:limit]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text.replace("\x00", "\ufffd")


def _enum_or_none(cls: type[enum.Enum], value: str | None) -> Any:
    return None if value is None else cls(value)


def _episode_metrics(row: EpisodeModel) -> EpisodeMetrics | None:
    if row.progress_rate is None:
        return None
    return EpisodeMetrics(
        progress_rate=row.progress_rate,
        side_effects=None if row.side_effects is None else tuple(row.side_effects),
        false_completion=bool(row.false_completion),
        over_time_steps=row.over_time_steps,
        goal_first_met_step=row.goal_first_met_step,
    )


# --------------------------------------------------------------------------- the store


_RUN_STORE_FIX = "open the run with RunStore.for_run_dir(run_dir), which creates the directory"


class RunStore(Database):
    """The run database: SQLAlchemy tables plus a content-addressed screenshot directory.

    ``url_or_path`` is a filesystem path to a SQLite file (its directory must exist) or any
    SQLAlchemy URL (``sqlite:///abs/run.db``, ``sqlite://`` in memory,
    ``postgresql+psycopg://user@host/db``). Tables are created on open. Screenshots go to
    ``screenshot_dir``, by default ``screenshots/`` next to a SQLite file; in-memory and
    server databases need an explicit ``screenshot_dir`` to store screenshots.

    Thread-safe: one engine, one session per call; each write is one transaction. SQLite
    runs in WAL mode with a busy timeout, and writes take the write lock up front
    (``BEGIN IMMEDIATE``) so concurrent writers queue instead of failing.

    >>> store = RunStore("sqlite://")
    >>> rid = store.start_run("smoke", config=None)
    >>> store.episodes(rid)
    []
    >>> store.close()
    """

    what = "run database"
    fix = _RUN_STORE_FIX
    metadata = Base.metadata

    def __init__(
        self,
        url_or_path: str | os.PathLike[str],
        *,
        screenshot_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(url_or_path)
        if screenshot_dir is not None:
            self.screenshot_dir: Path | None = Path(screenshot_dir)
        elif self._is_sqlite and not self._in_memory:
            self.screenshot_dir = Path(str(self.url.database)).parent / SCREENSHOT_DIRNAME
        else:
            self.screenshot_dir = None
        logger.info("opened run store %s", describe_url(self.url))

    # ----------------------------------------------------------------- opening

    @classmethod
    def for_run_dir(cls, run_dir: str | os.PathLike[str]) -> RunStore:
        """Open (creating the directory if needed) ``<run_dir>/run.db`` + ``<run_dir>/screenshots/``."""
        root = Path(run_dir)
        root.mkdir(parents=True, exist_ok=True)
        return cls(root / DB_FILENAME, screenshot_dir=root / SCREENSHOT_DIRNAME)

    def _create_tables(self) -> None:
        """The tables (:meth:`Database._create_tables`), then the schema version: recorded in a
        new database, an older one migrated in place, a newer one refused."""
        super()._create_tables()
        try:
            with self._lock, self._write_sessions.begin() as s:
                row = s.get(StoreMeta, "schema_version")
                if row is None:
                    s.add(StoreMeta(key="schema_version", value=str(SCHEMA_VERSION)))
                else:
                    self._migrate(s, row, self.url_text)
                if row is not None and row.value != str(SCHEMA_VERSION):
                    raise StoreOpenError(
                        f"database {self.url_text} has schema version {row.value}, this darwin "
                        f"expects {SCHEMA_VERSION}. Open it with the darwin version that wrote "
                        "it, or start a new run directory."
                    )
        except sa_exc.DBAPIError as e:
            raise StoreOpenError(f"cannot open the {self.what} {self.url_text}: {e.orig or e}. {self._open_fix()}") from e

    @staticmethod
    def _migrate(s: Session, row: StoreMeta, url_text: str) -> None:
        """Bring an older database up to :data:`SCHEMA_VERSION` in place (nothing is lost)."""
        while row.value.isdigit() and int(row.value) < SCHEMA_VERSION and int(row.value) in _MIGRATIONS:
            version = int(row.value)
            for statement in _MIGRATIONS[version]:
                added = _ADD_COLUMN.match(statement)
                if added is not None:
                    table, column = added.groups()
                    if column in {c["name"] for c in sa_inspect(s.connection()).get_columns(table)}:
                        continue  # already there (a database created by a newer darwin and relabelled)
                s.execute(sql_text(statement))
            row.value = str(version + 1)
            logger.info("migrated %s from schema version %d to %d", url_text, version, version + 1)

    # ----------------------------------------------------------------- sessions

    @contextmanager
    def _write(self) -> Iterator[Session]:
        """One write transaction: commits on success, rolls everything back on any error."""
        lock = self._lock if self._is_sqlite else None
        if lock is not None:
            lock.acquire()
        try:
            with self._write_sessions.begin() as s:
                yield s
        finally:
            if lock is not None:
                lock.release()

    @contextmanager
    def _read(self) -> Iterator[Session]:
        lock = self._lock if self._in_memory else None
        if lock is not None:
            lock.acquire()
        try:
            with self._sessions.begin() as s:
                yield s
        finally:
            if lock is not None:
                lock.release()

    # ----------------------------------------------------------------- screenshots

    def put_screenshot(self, image: bytes | np.ndarray) -> str:
        """Store a screenshot (PNG bytes or ``(H, W, 3)`` uint8 array) once; return its relative path.

        The file is ``<screenshot_dir>/<sha[:2]>/<sha>.png`` with ``sha`` the SHA-256 of the
        PNG bytes, written via a temporary file and an atomic rename; identical bytes map to
        the same file, which is written only once.
        """
        if self.screenshot_dir is None:
            raise StoreError(
                f"store {describe_url(self.url)} has no screenshot directory. Pass "
                "screenshot_dir=... to RunStore, or use RunStore.for_run_dir(run_dir)."
            )
        if isinstance(image, np.ndarray):
            png = encode_png(image)
        elif isinstance(image, bytes | bytearray | memoryview):
            png = bytes(image)
            if not png.startswith(_PNG_SIGNATURE):
                raise ValueError("screenshot bytes are not a PNG (missing the PNG signature)")
        else:
            raise TypeError(
                f"screenshot must be PNG bytes or a numpy array, got {type(image).__name__}"
            )
        digest = hashlib.sha256(png).hexdigest()
        rel = f"{digest[:2]}/{digest}.png"
        final = self.screenshot_dir / rel
        if final.is_file() and final.stat().st_size == len(png):
            return rel
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=".tmp-", suffix=".png", dir=final.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(png)
            os.replace(tmp_name, final)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        return rel

    def screenshot_file(self, rel_path: str) -> Path:
        """The absolute path of a stored screenshot given its relative path from a :class:`StoredStep`."""
        if self.screenshot_dir is None:
            raise StoreError(f"store {describe_url(self.url)} has no screenshot directory")
        return self.screenshot_dir / rel_path

    def load_screenshot(self, rel_path: str) -> np.ndarray:
        """Decode a stored screenshot back to an ``(H, W, 3)`` uint8 array."""
        with Image.open(self.screenshot_file(rel_path)) as im:
            return np.asarray(im.convert("RGB"), dtype=np.uint8)

    # ----------------------------------------------------------------- writes

    def start_run(
        self,
        name: str,
        config: BaseModel | DataclassInstance | None = None,
        *,
        run_id: str | None = None,
    ) -> str:
        """Record a new run and return its id; ``config`` (pydantic model or dataclass) is redacted.

        Passing the ``run_id`` of an existing run resumes it (nothing is changed).
        """
        config_json = None if config is None else redact_secrets(_config_to_json(config))
        rid = run_id or uuid.uuid4().hex
        with self._write() as s:
            existing = s.get(RunModel, rid)
            if existing is not None:
                logger.info("resuming run %s (%s)", rid, existing.name)
                return rid
            s.add(
                RunModel(
                    id=rid, name=_clean_text(name) or "", created_at=utcnow(), config=config_json
                )
            )
        logger.info("started run %s (%s)", rid, name)
        return rid

    def record_task(self, task: Task) -> None:
        """Insert or update a task (idempotent; the latest definition of an id wins)."""
        with self._write() as s:
            self._upsert_task(s, task)

    def _upsert_task(self, s: Session, task: Task) -> None:
        values = {
            "id": task.id,
            "instruction": _clean_text(task.instruction) or "",
            "app": task.app,
            "source": task.source,
            "task_json": task.model_dump_json(),
            "updated_at": utcnow(),
        }
        dialect = self._engine.dialect.name
        if dialect in ("sqlite", "postgresql"):
            ins = sqlite_insert(TaskModel) if dialect == "sqlite" else pg_insert(TaskModel)
            stmt = ins.values(**values)
            changed = stmt.excluded.task_json != TaskModel.task_json
            stmt = stmt.on_conflict_do_update(
                index_elements=[TaskModel.id],
                set_={k: stmt.excluded[k] for k in values if k != "id"},
                where=changed,
            )
            s.execute(stmt)
            return
        existing = s.get(TaskModel, task.id)
        if existing is None:
            s.add(TaskModel(**values))
        elif existing.task_json != values["task_json"]:
            for k, v in values.items():
                setattr(existing, k, v)

    def start_episode(
        self,
        run_id: str,
        episode_id: str,
        task: Task,
        phone: str,
        seed: int | None = None,
        device_size: tuple[int, int] | None = None,
    ) -> None:
        """Record the start of an episode (also records ``task``); episode ids are unique.

        ``device_size`` is the phone's ``(width, height)``: action coordinates are in its pixels.
        """
        with self._write() as s:
            if s.get(RunModel, run_id) is None:
                raise StoreError(
                    f"cannot start episode {episode_id!r}: run {run_id!r} does not exist; call start_run first"
                )
            if s.get(EpisodeModel, episode_id) is not None:
                raise StoreError(
                    f"episode {episode_id!r} already exists; every episode needs a fresh id (e.g. uuid4().hex)"
                )
            self._upsert_task(s, task)
            s.add(
                EpisodeModel(
                    id=episode_id,
                    run_id=run_id,
                    task_id=task.id,
                    phone=_clean_text(phone) or "",
                    seed=seed,
                    started_at=utcnow(),
                    device_width=None if device_size is None else int(device_size[0]),
                    device_height=None if device_size is None else int(device_size[1]),
                )
            )

    def record_step(
        self, transition: Transition, screenshot_png: bytes | np.ndarray | None = None
    ) -> None:
        """Record one transition, with an optional screenshot (PNG bytes or the observation array).

        Pass ``transition.observation.screenshot`` to keep what the agent saw, or the device's
        raw PNG. Raises :class:`StoreError` if the episode was not started or the
        ``(phase, step)`` was already recorded (nothing is written then).
        """
        shot = None if screenshot_png is None else self.put_screenshot(screenshot_png)
        with self._write() as s:
            if s.get(EpisodeModel, transition.episode_id) is None:
                raise StoreError(
                    f"cannot record step {transition.step} of episode {transition.episode_id!r}: "
                    "the episode does not exist; call start_episode first"
                )
            s.add(self._step_model(transition, shot))
            try:
                s.flush()
            except sa_exc.IntegrityError as e:
                raise StoreError(
                    f"step {transition.step} ({transition.phase.value}) of episode "
                    f"{transition.episode_id!r} is already recorded; a transition is stored once"
                ) from e

    @staticmethod
    def _step_model(t: Transition, screenshot_path: str | None) -> StepModel:
        d = t.decision
        g = d.generation
        return StepModel(
            episode_id=t.episode_id,
            step=t.step,
            phase=t.phase.value,
            action_type=None if d.action is None else d.action.type,
            action_json=None if d.action is None else d.action.model_dump_json(),
            parse_error_reason=None
            if d.parse_error is None
            else _clean_text(d.parse_error.reason, MAX_TEXT_CHARS),
            parse_error_text=None if d.parse_error is None else _clean_text(d.parse_error.text),
            agent=t.agent,
            message=None if d.message is None else _clean_text(d.message, MAX_TEXT_CHARS),
            response_text=None if g is None else _clean_text(g.text, MAX_TEXT_CHARS),
            prompt_tokens=None if g is None else len(g.prompt_ids),
            response_tokens=None if g is None else len(g.response_ids),
            policy_version=None if g is None else g.policy_version,
            reward=float(t.reward),
            done=bool(t.done),
            termination_reason=None if t.termination is None else t.termination.reason.value,
            termination_cause=""
            if t.termination is None
            else _clean_text(t.termination.cause, MAX_TEXT_CHARS) or "",
            screenshot_path=screenshot_path,
            created_at=utcnow(),
        )

    def record_verdict(
        self,
        episode_id: str,
        phase: Phase,
        verifier_kind: str,
        success: bool | None,
        reward: float | None,
        reason: str = "",
        *,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        cost_usd: float | None = None,
        requests: int | None = None,
        verifier_config: JsonValue | None = None,
    ) -> None:
        """Record a verifier's verdict on one phase (``success=None``: unverified, never a 0 or 1).

        Model judges add what the verdict cost (tokens, dollars, requests) and their settings
        (``verifier_config``, passed through :func:`redact_secrets`).
        """
        with self._write() as s:
            if s.get(EpisodeModel, episode_id) is None:
                raise StoreError(
                    f"cannot record a verdict for episode {episode_id!r}: it does not exist; call start_episode first"
                )
            s.add(
                VerdictModel(
                    episode_id=episode_id,
                    phase=Phase(phase).value,
                    verifier_kind=verifier_kind,
                    success=success,
                    reward=None if reward is None else float(reward),
                    reason=_clean_text(reason, MAX_TEXT_CHARS) or "",
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    cost_usd=None if cost_usd is None else float(cost_usd),
                    requests=requests,
                    verifier_config=None if verifier_config is None else redact_secrets(verifier_config),
                    created_at=utcnow(),
                )
            )

    def finish_episode(
        self, trajectory: Trajectory, final_screenshot: bytes | np.ndarray | None = None
    ) -> None:
        """Record how an episode ended: termination, success per phase, step count, and
        optionally the screen after the last action (``final_screenshot``).

        Transitions of ``trajectory`` not yet recorded with :meth:`record_step` are recorded
        here (without screenshots) in the same transaction, so nothing completed is lost.
        """
        term = trajectory.termination
        if term is None:
            raise StoreError(
                f"cannot finish episode {trajectory.episode_id!r}: the trajectory has no termination yet"
            )
        final_path = None if final_screenshot is None else self.put_screenshot(final_screenshot)
        with self._write() as s:
            ep = s.get(EpisodeModel, trajectory.episode_id)
            if ep is None:
                raise StoreError(
                    f"cannot finish episode {trajectory.episode_id!r}: it does not exist; call start_episode first"
                )
            recorded = {
                (phase, step)
                for phase, step in s.execute(
                    select(StepModel.phase, StepModel.step).where(StepModel.episode_id == ep.id)
                )
            }
            missing = [t for t in trajectory.transitions if (t.phase.value, t.step) not in recorded]
            for t in missing:
                s.add(self._step_model(t, None))
            if missing:
                logger.debug("episode %s: recorded %d steps at finish", ep.id, len(missing))
            ep.ended_at = utcnow()
            ep.termination_reason = term.reason.value
            ep.termination_cause = _clean_text(term.cause, MAX_TEXT_CHARS) or ""
            ep.success = trajectory.success
            ep.num_steps = len(trajectory.transitions)
            ep.phase_success = {Phase(p).value: v for p, v in trajectory.phase_success.items()}
            if final_path is not None:
                ep.final_screenshot_path = final_path
            m = trajectory.metrics
            if m is not None:
                ep.progress_rate = m.progress_rate
                ep.side_effects = null() if m.side_effects is None else list(m.side_effects)  # SQL NULL, not JSON null
                ep.false_completion = m.false_completion
                ep.over_time_steps = m.over_time_steps
                ep.goal_first_met_step = m.goal_first_met_step

    # ----------------------------------------------------------------- queries

    def runs(self) -> list[RunRow]:
        """All runs, oldest first."""
        with self._read() as s:
            rows = s.scalars(select(RunModel).order_by(RunModel.created_at, RunModel.id)).all()
            return [
                RunRow(run_id=r.id, name=r.name, created_at=r.created_at, config=r.config)
                for r in rows
            ]

    def task(self, task_id: str) -> Task | None:
        """The stored definition of a task, or ``None``."""
        with self._read() as s:
            row = s.get(TaskModel, task_id)
            return None if row is None else Task.model_validate_json(row.task_json)

    def episodes(self, run_id: str) -> list[EpisodeRow]:
        """Episodes of a run in start order."""
        with self._read() as s:
            rows = s.scalars(
                select(EpisodeModel)
                .where(EpisodeModel.run_id == run_id)
                .order_by(EpisodeModel.started_at, EpisodeModel.id)
            ).all()
            return [
                EpisodeRow(
                    episode_id=r.id,
                    run_id=r.run_id,
                    task_id=r.task_id,
                    phone=r.phone,
                    seed=r.seed,
                    started_at=r.started_at,
                    ended_at=r.ended_at,
                    termination_reason=_enum_or_none(TerminationReason, r.termination_reason),
                    termination_cause=r.termination_cause,
                    success=r.success,
                    num_steps=r.num_steps,
                    phase_success={Phase(k): v for k, v in (r.phase_success or {}).items()},
                    device_size=None
                    if r.device_width is None or r.device_height is None
                    else (r.device_width, r.device_height),
                    final_screenshot_path=r.final_screenshot_path,
                    metrics=_episode_metrics(r),
                )
                for r in rows
            ]

    def steps(self, episode_id: str) -> list[StoredStep]:
        """Steps of an episode in the order they were recorded."""
        with self._read() as s:
            rows = s.scalars(
                select(StepModel).where(StepModel.episode_id == episode_id).order_by(StepModel.id)
            ).all()
            return [
                StoredStep(
                    episode_id=r.episode_id,
                    step=r.step,
                    phase=Phase(r.phase),
                    action_json=r.action_json,
                    parse_error=None
                    if r.parse_error_reason is None
                    else ParseError(reason=r.parse_error_reason, text=r.parse_error_text or ""),
                    response_text=r.response_text,
                    agent=r.agent,
                    message=r.message,
                    prompt_tokens=r.prompt_tokens,
                    response_tokens=r.response_tokens,
                    policy_version=r.policy_version,
                    reward=r.reward,
                    done=r.done,
                    termination_reason=_enum_or_none(TerminationReason, r.termination_reason),
                    termination_cause=r.termination_cause,
                    screenshot_path=r.screenshot_path,
                )
                for r in rows
            ]

    def record_phone_event(self, run_id: str, phone: str, kind: str, reason: str, episodes: int,
                           replacement: str | None = None) -> None:
        """Record what the fleet did to a phone (a hard reset, a replacement, a retirement)."""
        with self._write() as s:
            if s.get(RunModel, run_id) is None:
                raise StoreError(f"cannot record a phone event for run {run_id!r}: it does not exist; call start_run first")
            s.add(PhoneEventModel(run_id=run_id, phone=phone, kind=kind, reason=_clean_text(reason, 2000) or "",
                                  episodes=episodes, replacement=replacement, created_at=utcnow()))

    def phone_events(self, run_id: str) -> list[PhoneEventRow]:
        """The fleet's phone events of a run, in the order they happened."""
        with self._read() as s:
            rows = s.scalars(select(PhoneEventModel).where(PhoneEventModel.run_id == run_id).order_by(PhoneEventModel.id)).all()
            return [PhoneEventRow(r.phone, r.kind, r.reason, r.episodes, r.replacement, r.created_at) for r in rows]

    def verdicts(self, episode_id: str) -> list[VerdictRow]:
        """Verdicts of an episode in the order they were recorded."""
        with self._read() as s:
            rows = s.scalars(
                select(VerdictModel)
                .where(VerdictModel.episode_id == episode_id)
                .order_by(VerdictModel.id)
            ).all()
            return [
                VerdictRow(
                    episode_id=r.episode_id,
                    phase=Phase(r.phase),
                    verifier_kind=r.verifier_kind,
                    success=r.success,
                    reward=r.reward,
                    reason=r.reason,
                    created_at=r.created_at,
                    prompt_tokens=r.prompt_tokens,
                    completion_tokens=r.completion_tokens,
                    cost_usd=r.cost_usd,
                    requests=r.requests,
                    verifier_config=r.verifier_config,
                )
                for r in rows
            ]

    def success_by_task(self, run_id: str) -> dict[str, SuccessStats]:
        """Outcome counts per task id for a run (see :class:`SuccessStats` for the buckets)."""
        e = EpisodeModel
        reason = func.coalesce(e.termination_reason, "")
        infra = reason == TerminationReason.INFRA_TRUNCATED.value
        error = reason == TerminationReason.ERROR.value
        already = reason == TerminationReason.ALREADY_DONE.value
        unfinished = e.ended_at.is_(None)
        judged = ~infra & ~error & ~already & ~unfinished

        def count(cond: Any) -> Any:
            return func.coalesce(func.sum(case((cond, 1), else_=0)), 0)

        stmt = (
            select(
                e.task_id,
                func.count(),
                count(judged & (e.success.is_(True))),
                count(judged & (e.success.is_(False))),
                count(judged & e.success.is_(None)),
                count(infra & ~unfinished),
                count(error & ~unfinished),
                count(unfinished),
                count(already & ~unfinished),
            )
            .where(e.run_id == run_id)
            .group_by(e.task_id)
            .order_by(e.task_id)
        )
        with self._read() as s:
            return {
                task_id: SuccessStats(
                    episodes=int(n),
                    successes=int(ok),
                    failures=int(bad),
                    unverified=int(unv),
                    infra_truncated=int(inf),
                    errors=int(err),
                    unfinished=int(unf),
                    already_done=int(done),
                )
                for task_id, n, ok, bad, unv, inf, err, unf, done in s.execute(stmt)
            }


__all__ = [
    "DB_FILENAME",
    "Base",
    "EpisodeModel",
    "EpisodeRow",
    "PhoneEventModel",
    "PhoneEventRow",
    "RunModel",
    "RunRow",
    "RunStore",
    "SCHEMA_VERSION",
    "StepModel",
    "StoredStep",
    "StoreError",
    "StoreMeta",
    "StoreOpenError",
    "SuccessStats",
    "TaskModel",
    "VerdictModel",
    "VerdictRow",
    "create_database_engine",
    "encode_png",
    "is_secret_name",
    "is_secret_value",
    "redact_secrets",
    "resolve_database_url",
]
