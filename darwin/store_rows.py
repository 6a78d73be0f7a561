"""What the run database's queries return: frozen rows (no ORM objects or open sessions leak
out), and the value conversions between them and the tables.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import JsonValue

from darwin.actions import Action, parse_action
from darwin.store_schema import EpisodeModel
from darwin.types import EpisodeMetrics, ParseError, Phase, TerminationReason

logger = logging.getLogger("darwin.store")  # records keep the logger name of darwin.store

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
    start_state: JsonValue | None = None
    """The phone's JSON state before the first action (``None``: not recorded; explorations record it)."""

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
    state_after: JsonValue | None = None
    """The phone's JSON state right after the action (``None``: not recorded; explorations record it)."""

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
class LabelRow:
    """A person's label of one phase of an episode (:meth:`RunStore.record_label`)."""

    episode_id: str
    phase: Phase
    success: bool
    note: str
    labeller: str
    created_at: datetime


@dataclass(frozen=True)
class EpisodeFilter:
    """Which episodes of a run :meth:`RunStore.episode_page` lists; ``None`` leaves a field open.

    ``outcome``: ``success``, ``failure`` (verified), ``unverified`` (finished, no verdict) or
    ``unfinished``. ``episode_ids``: only these (an update's episodes, from ``updates.jsonl``).
    ``verifier_kind``: episodes with a verdict of that kind. ``termination_reason``: how it ended.
    """

    task_id: str | None = None
    outcome: str | None = None
    phone: str | None = None
    verifier_kind: str | None = None
    termination_reason: str | None = None
    episode_ids: frozenset[str] | None = None
    labelled: bool | None = None


@dataclass(frozen=True)
class EpisodePage:
    """One page of a run's episodes: ``rows`` in order, ``total`` matching the filter."""

    rows: list[EpisodeRow]
    total: int
    offset: int
    limit: int


@dataclass(frozen=True)
class EpisodeFacets:
    """The values a run's episode filters can take (each sorted)."""

    task_ids: list[str]
    phones: list[str]
    verifier_kinds: list[str]
    termination_reasons: list[str]


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


def _episode_row(r: EpisodeModel) -> EpisodeRow:
    return EpisodeRow(
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
        device_size=None if r.device_width is None or r.device_height is None else (r.device_width, r.device_height),
        final_screenshot_path=r.final_screenshot_path,
        metrics=_episode_metrics(r),
        start_state=r.start_state,
    )


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
