"""The run database's tables (SQLAlchemy ORM models), their schema version and the migrations
that bring an older database up to it.
"""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import JsonValue
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
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from darwin.database import UTCDateTime, utcnow

SCHEMA_VERSION = 7
"""Bumped whenever the tables change; opening an older database migrates it where a
migration exists (:data:`_MIGRATIONS`) and says so otherwise."""

# version -> statements that bring a database of that version to the next one. Version 2
# records which agent produced each step and the words of turns that do not act. Version 3
# records what a model judge's verdict cost (tokens, dollars, requests) and its settings,
# and each episode's phone size and final screen (what a judge reviewing the run looks at).
# Version 4 records each episode's metrics (progress rate, side effects, false completion,
# over-time; darwin.types.EpisodeMetrics). Version 5 adds the phone_events table (hard
# resets and replacements of the fleet's phones), which create_all makes on its own; version 6
# the labels table (a person's verdicts from `darwin view`) and the step_scores table (the
# learner's value, advantage and log-prob of each trained step), made the same way. Version 7
# records the phone's JSON state where the writer has it: an episode's before its first action
# and a step's right after its action (an exploration's, for hindsight tasks; darwin.hindsight.records).
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
    5: (),
    6: (
        "ALTER TABLE episodes ADD COLUMN start_state JSON",
        "ALTER TABLE steps ADD COLUMN state_after JSON",
    ),
}
_ADD_COLUMN = re.compile(r"^ALTER TABLE (\w+) ADD COLUMN (\w+) ")


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
    # The phone's JSON state before the first action; NULL where the writer has none (a rollout).
    start_state: Mapped[JsonValue | None] = mapped_column(_JSON, nullable=True)


class StepModel(Base):
    """One transition: the action (or parse error), the response, tokens and reward."""

    __tablename__ = "steps"
    __table_args__ = (UniqueConstraint("episode_id", "phase", "step", name="uq_steps_episode_phase_step"),)

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
    # The phone's JSON state right after the step's action; NULL where the writer has none (a rollout).
    state_after: Mapped[JsonValue | None] = mapped_column(_JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class VerdictModel(Base):
    """A verifier's verdict on one phase of an episode; ``success`` NULL means unverified."""

    __tablename__ = "verdicts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    episode_id: Mapped[str] = mapped_column(ForeignKey("episodes.id", ondelete="CASCADE"), index=True)
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


class LabelModel(Base):
    """A person's verdict on one phase of an episode (``darwin view``): the ground truth a judge
    is calibrated against. One per episode and phase; labelling again replaces it."""

    __tablename__ = "labels"
    __table_args__ = (UniqueConstraint("episode_id", "phase", name="uq_labels_episode_phase"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    episode_id: Mapped[str] = mapped_column(ForeignKey("episodes.id", ondelete="CASCADE"), index=True)
    phase: Mapped[str] = mapped_column(String(16))
    success: Mapped[bool] = mapped_column(Boolean)
    note: Mapped[str] = mapped_column(Text, default="")
    labeller: Mapped[str] = mapped_column(String(128), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class StepScoreModel(Base):
    """The learner's numbers for one step in one update (:class:`darwin.types.StepScore`); a
    step replayed in a later update has a row per update."""

    __tablename__ = "step_scores"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    episode_id: Mapped[str] = mapped_column(ForeignKey("episodes.id", ondelete="CASCADE"), index=True)
    phase: Mapped[str] = mapped_column(String(16))
    step: Mapped[int] = mapped_column(Integer)
    update: Mapped[int] = mapped_column(Integer)
    value: Mapped[float | None] = mapped_column(Float, nullable=True)
    advantage: Mapped[float] = mapped_column(Float)
    logprob: Mapped[float] = mapped_column(Float)
