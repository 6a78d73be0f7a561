"""Where the stage-2 curriculum keeps its calls and proposals (:class:`ProposalStore`), and the
replay of a stored run's proposals (:func:`load_replay`; part of :mod:`darwin.curricula.proposer`).
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Boolean, DateTime, Float, ForeignKey, Integer, String, Text, select
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from darwin.curricula._util import _check_int
from darwin.curricula.proposer_config import ProposerConfig
from darwin.curricula.proposer_results import CallResult
from darwin.curricula.proposer_validation import _json_text
from darwin.database import DB_FILENAME, Database, StoreOpenError, utcnow
from darwin.policies.base import Policy
from darwin.templates import templates
from darwin.types import Task

_MAX_RESPONSE_CHARS = 20_000


class ProposerStoreError(StoreOpenError, ValueError):
    """The proposals' database cannot be opened; the message names the URL and the fix.

    Also a ``ValueError``: the database is one of the curriculum's settings, so an
    experiment's check (``darwin run --dry-run``) reports it with the other bad settings.
    """


# --------------------------------------------------------------------------- storage


class _Base(DeclarativeBase):
    """Declarative base of the proposer's tables (kept apart from the run store's schema)."""


class ProposalCallModel(_Base):
    """One call to the proposing model (or its failure)."""

    __tablename__ = "curriculum_calls"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    call: Mapped[int] = mapped_column(Integer, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    model: Mapped[str] = mapped_column(String(256))
    outcome: Mapped[str] = mapped_column(String(16))
    error: Mapped[str] = mapped_column(Text, default="")
    response: Mapped[str | None] = mapped_column(Text, nullable=True)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    completion_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cost_usd: Mapped[float | None] = mapped_column(Float, nullable=True)


class ProposalModel(_Base):
    """One proposal of a call: accepted (with the task) or rejected (with the reason)."""

    __tablename__ = "curriculum_proposals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    call_id: Mapped[int] = mapped_column(ForeignKey("curriculum_calls.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    template: Mapped[str | None] = mapped_column(String(256), nullable=True)
    params_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    language: Mapped[str | None] = mapped_column(String(16), nullable=True)
    why: Mapped[str] = mapped_column(Text, default="")
    accepted: Mapped[bool] = mapped_column(Boolean)
    rejection: Mapped[str | None] = mapped_column(String(32), nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    task_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    task_json: Mapped[str | None] = mapped_column(Text, nullable=True)


@dataclass(frozen=True)
class StoredCall:
    """A stored call as :meth:`ProposalStore.calls` returns it."""

    call: int
    outcome: str
    model: str
    tasks: tuple[Task, ...]
    """Its accepted tasks, in the answer's order."""
    rejected: int


_STORE_FIX = "set url to another database (or leave it unset to use the run's SQLite database)"


class ProposalStore(Database):
    """The proposer's two tables (``curriculum_calls``, ``curriculum_proposals``) in any SQLAlchemy database.

    Opened (tables created) at construction; SQLite files are shared safely with the run
    store (WAL, busy timeout, writes take the lock up front). A call recorded twice under
    one index (a resumed run redoing a call that was in flight at its checkpoint) reads
    back as the later record.

    >>> store = ProposalStore(None)              # in memory
    >>> store.record(CallResult(0, "malformed", error="no JSON list"), model="m")
    >>> [(c.call, c.outcome, c.tasks) for c in store.calls()]
    [(0, 'malformed', ())]
    >>> store.close()
    """

    what = "proposals database"
    fix = _STORE_FIX
    error = ProposerStoreError
    metadata = _Base.metadata

    def record(self, result: CallResult, *, model: str) -> None:
        """Store one call and its proposals (one transaction)."""
        completion = result.completion
        response = None if completion is None else completion.text[:_MAX_RESPONSE_CHARS]
        with self._lock, self._write_sessions.begin() as s:
            row = ProposalCallModel(
                call=result.call,
                created_at=utcnow(naive=True),
                model=model,
                outcome=result.outcome,
                error=result.error[:2000],
                response=response,
                prompt_tokens=None if completion is None else completion.prompt_tokens,
                completion_tokens=None if completion is None else completion.completion_tokens,
                cost_usd=None if completion is None else completion.cost_usd,
            )
            s.add(row)
            s.flush()
            s.add_all(
                ProposalModel(
                    call_id=row.id,
                    position=p.position,
                    template=p.template,
                    params_json=_json_text(p.params),
                    language=p.language,
                    why=p.why,
                    accepted=p.accepted,
                    rejection=p.rejection,
                    reason=p.reason[:2000],
                    task_id=None if p.task is None else p.task.id,
                    task_json=None if p.task is None else p.task.model_dump_json(),
                )
                for p in result.proposals
            )

    def calls(self) -> list[StoredCall]:
        """The stored calls in call order (the later record of an index that was recorded twice)."""
        with self._lock, self._sessions.begin() as s:
            rows = s.scalars(select(ProposalCallModel).order_by(ProposalCallModel.call, ProposalCallModel.id)).all()
            latest = {r.call: r for r in rows}
            proposals = s.scalars(
                select(ProposalModel)
                .where(ProposalModel.call_id.in_([r.id for r in latest.values()]))
                .order_by(ProposalModel.call_id, ProposalModel.position)
            ).all()
            by_call: dict[int, list[ProposalModel]] = {}
            for p in proposals:
                by_call.setdefault(p.call_id, []).append(p)
            return [
                StoredCall(
                    call=index,
                    outcome=row.outcome,
                    model=row.model,
                    tasks=tuple(
                        Task.model_validate_json(p.task_json)
                        for p in by_call.get(row.id, [])
                        if p.accepted and p.task_json
                    ),
                    rejected=sum(not p.accepted for p in by_call.get(row.id, [])),
                )
                for index, row in sorted(latest.items())
            ]


def _replay_location(replay: str) -> str | Path:
    """A run directory, database file or URL holding stored proposals."""
    if "://" in replay:
        return replay
    path = Path(replay).expanduser()
    if path.is_dir():
        path = path / DB_FILENAME
    if not path.is_file():
        raise ValueError(
            f"replay: {replay!r} is neither a run directory with a {DB_FILENAME}, a database file nor a URL; "
            "pass the run directory of the run whose proposals to replay"
        )
    return path


def _checked_config(
    config: ProposerConfig | None, seed: int, policy: Policy | None, overrides: Mapping[str, Any]
) -> ProposerConfig:
    if config is not None and overrides:
        raise TypeError("pass either a ProposerConfig or keyword overrides, not both")
    cfg = config if config is not None else ProposerConfig.model_validate(overrides)
    _check_int("seed", seed, minimum=None, hint="an integer such as 0")
    if policy is not None and cfg.replay is not None:
        raise ValueError("replay replays stored proposals without a model: drop policy, or drop replay")
    if policy is None and cfg.llm is None and cfg.replay is None:
        raise ValueError(
            "LLMTaskProposer needs a model: set llm to LiteLLMPolicyConfig fields, e.g. llm={'model': "
            "'gemini/gemini-2.5-flash', 'api_key_env': 'GEMINI_API_KEY'}, or replay to the run directory "
            "of a run whose proposals to replay"
        )
    return cfg


def _allowed_templates(config: ProposerConfig, tasks: Sequence[Task]) -> tuple[str, ...]:
    """The templates the proposer may instantiate: ``config.templates`` or those of the base tasks."""
    registry = templates()
    patterns = config.templates
    if patterns is None:
        found = tuple(dict.fromkeys(t.template for t in tasks if t.template is not None))
        if not found:
            raise ValueError(
                "LLMTaskProposer has no templates to propose from: the base tasks are no template "
                "instances; set templates=[...] (ids or patterns such as 'clock.*'), or use tasks such as 'gen.train'"
            )
        return found
    out: list[str] = []
    for pattern in patterns:
        matched = sorted(t for t in registry if fnmatch.fnmatchcase(t, pattern))
        if not matched:
            close = difflib.get_close_matches(pattern, list(registry), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else "; `darwin tasks list --templates` lists them"
            raise ValueError(f"templates: {pattern!r} matches no registered template{hint}")
        out += [t for t in matched if t not in out]
    return tuple(out)


def load_replay(replay: str) -> list[list[Task]]:
    """The accepted tasks of every stored call, by call index (a call that stored none: an empty list)."""
    store = ProposalStore(_replay_location(replay))
    try:
        stored = store.calls()
    finally:
        store.close()
    if not stored:
        raise ValueError(
            f"replay: {replay!r} holds no stored proposals (its curriculum_calls table is empty); "
            "was that run's curriculum an llm_proposer?"
        )
    out: list[list[Task]] = [[] for _ in range(stored[-1].call + 1)]
    for call in stored:
        out[call.call] = list(call.tasks)
    return out
