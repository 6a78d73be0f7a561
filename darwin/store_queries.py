"""The run database's reads: every query of :class:`~darwin.store.RunStore`, each in one read
session, returning frozen rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import case, exists, func, select
from sqlalchemy.orm import Session

from darwin.database import Database
from darwin.store_rows import (
    EpisodeFacets,
    EpisodeFilter,
    EpisodePage,
    EpisodeRow,
    LabelRow,
    PhoneEventRow,
    RunRow,
    StoredStep,
    SuccessStats,
    VerdictRow,
    _enum_or_none,
    _episode_row,
)
from darwin.store_schema import (
    EpisodeModel,
    LabelModel,
    PhoneEventModel,
    RunModel,
    StepModel,
    StepScoreModel,
    TaskModel,
    VerdictModel,
)
from darwin.types import ParseError, Phase, StepScore, Task, TerminationReason


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
            return [_episode_row(r) for r in rows]

    def episode(self, episode_id: str) -> EpisodeRow | None:
        """One episode, or ``None`` when the database has no episode of that id."""
        with self._read() as s:
            row = s.get(EpisodeModel, episode_id)
            return None if row is None else _episode_row(row)

    def episode_page(
        self,
        run_id: str,
        where: EpisodeFilter | None = None,
        *,
        sort: str = "started_at",
        descending: bool = False,
        offset: int = 0,
        limit: int = 50,
    ) -> EpisodePage:
        """One page of a run's episodes matching ``where``, ordered by ``sort`` (an
        :data:`EPISODE_SORTS` column; ties by start time and id). Two indexed queries (the count
        and the page), so a page of a run of any size costs about the same."""
        if sort not in EPISODE_SORTS:
            raise ValueError(f"cannot sort episodes by {sort!r}. Fix: sort by one of {', '.join(EPISODE_SORTS)}")
        e = EpisodeModel
        conditions = [e.run_id == run_id, *_episode_conditions(where or EpisodeFilter())]
        column = getattr(e, sort)
        order = [column.desc() if descending else column.asc(), e.started_at, e.id]
        with self._read() as s:
            total = s.scalar(select(func.count()).select_from(e).where(*conditions)) or 0
            rows = s.scalars(select(e).where(*conditions).order_by(*order).offset(offset).limit(limit)).all()
            return EpisodePage([_episode_row(r) for r in rows], int(total), offset, limit)

    def episode_facets(self, run_id: str) -> EpisodeFacets:
        """The tasks, phones, verifier kinds and termination reasons a run's episodes have."""
        e, v = EpisodeModel, VerdictModel

        def distinct(column: Any) -> list[str]:
            stmt = select(column).select_from(e).where(e.run_id == run_id).distinct()
            if column.class_ is v:
                stmt = stmt.join(v, v.episode_id == e.id)
            return sorted(str(x) for x in s.scalars(stmt) if x is not None)

        with self._read() as s:
            return EpisodeFacets(
                task_ids=distinct(e.task_id),
                phones=distinct(e.phone),
                verifier_kinds=distinct(v.verifier_kind),
                termination_reasons=distinct(e.termination_reason),
            )

    def labels(self, *, episode_id: str | None = None, run_id: str | None = None) -> list[LabelRow]:
        """Labels of one episode or of a run's episodes, in the order they were given."""
        stmt = select(LabelModel).order_by(LabelModel.id)
        if episode_id is not None:
            stmt = stmt.where(LabelModel.episode_id == episode_id)
        if run_id is not None:
            stmt = stmt.join(EpisodeModel, EpisodeModel.id == LabelModel.episode_id).where(
                EpisodeModel.run_id == run_id
            )
        with self._read() as s:
            return [
                LabelRow(r.episode_id, Phase(r.phase), r.success, r.note, r.labeller, r.created_at)
                for r in s.scalars(stmt)
            ]

    def step_scores(self, episode_id: str) -> list[StepScore]:
        """The learner's value, advantage and log-prob of an episode's steps, by update."""
        m = StepScoreModel
        with self._read() as s:
            rows = s.scalars(select(m).where(m.episode_id == episode_id).order_by(m.update, m.phase, m.step)).all()
            return [
                StepScore(r.episode_id, Phase(r.phase), r.step, r.update, r.value, r.advantage, r.logprob) for r in rows
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
                    state_after=r.state_after,
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


EPISODE_SORTS = ("started_at", "task_id", "phone", "num_steps", "success", "termination_reason")
"""Columns :meth:`RunQueries.episode_page` sorts by."""

_OUTCOMES = ("success", "failure", "unverified", "unfinished")


def _episode_conditions(where: EpisodeFilter) -> list[Any]:
    e = EpisodeModel
    out: list[Any] = []
    if where.task_id is not None:
        out.append(e.task_id == where.task_id)
    if where.phone is not None:
        out.append(e.phone == where.phone)
    if where.termination_reason is not None:
        out.append(e.termination_reason == where.termination_reason)
    if where.episode_ids is not None:
        out.append(e.id.in_(sorted(where.episode_ids)))
    if where.verifier_kind is not None:
        v = VerdictModel
        out.append(exists().where(v.episode_id == e.id, v.verifier_kind == where.verifier_kind))
    if where.labelled is not None:
        labelled = exists().where(LabelModel.episode_id == e.id)
        out.append(labelled if where.labelled else ~labelled)
    if where.outcome is not None:
        if where.outcome not in _OUTCOMES:
            raise ValueError(f"unknown outcome {where.outcome!r}. Fix: use one of {', '.join(_OUTCOMES)}")
        finished = e.ended_at.is_not(None)
        out.append(
            {
                "success": finished & e.success.is_(True),
                "failure": finished & e.success.is_(False),
                "unverified": finished & e.success.is_(None),
                "unfinished": e.ended_at.is_(None),
            }[where.outcome]
        )
    return out
