"""The run database's reads: every query of :class:`~darwin.store.RunStore`, each in one read
session, returning frozen rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from darwin.database import Database
from darwin.store_rows import (
    EpisodeRow,
    PhoneEventRow,
    RunRow,
    StoredStep,
    SuccessStats,
    VerdictRow,
    _enum_or_none,
    _episode_metrics,
)
from darwin.store_schema import (
    EpisodeModel,
    PhoneEventModel,
    RunModel,
    StepModel,
    TaskModel,
    VerdictModel,
)
from darwin.types import ParseError, Phase, Task, TerminationReason


class RunQueries(Database):
    """The queries of the run database (:class:`~darwin.store.RunStore` adds the writes)."""

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

    # ----------------------------------------------------------------- queries

    def runs(self) -> list[RunRow]:
        """All runs, oldest first."""
        with self._read() as s:
            rows = s.scalars(select(RunModel).order_by(RunModel.created_at, RunModel.id)).all()
            return [RunRow(run_id=r.id, name=r.name, created_at=r.created_at, config=r.config) for r in rows]

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
            rows = s.scalars(select(StepModel).where(StepModel.episode_id == episode_id).order_by(StepModel.id)).all()
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

    def phone_events(self, run_id: str) -> list[PhoneEventRow]:
        """The fleet's phone events of a run, in the order they happened."""
        with self._read() as s:
            rows = s.scalars(
                select(PhoneEventModel).where(PhoneEventModel.run_id == run_id).order_by(PhoneEventModel.id)
            ).all()
            return [PhoneEventRow(r.phone, r.kind, r.reason, r.episodes, r.replacement, r.created_at) for r in rows]

    def verdicts(self, episode_id: str) -> list[VerdictRow]:
        """Verdicts of an episode in the order they were recorded."""
        with self._read() as s:
            rows = s.scalars(
                select(VerdictModel).where(VerdictModel.episode_id == episode_id).order_by(VerdictModel.id)
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
