"""No silent runs: how many of a run's recent episodes were verified, a warning when too few
were, and a stop when updates keep coming without any.

An episode is *verified* when its verifier gave its last played phase a verdict (success or
failure). The others are *unverified* (the verifier could not decide:
:func:`darwin.learner.step_rows.unverified`, e.g. a phone without a state probe under the rule
verifier, a judge that is unreachable), *errors* (a bug, a refusing model server) or
*infrastructure truncations* (the phone failed). Only verified episodes teach the actor
anything, so a run whose episodes mostly go unverified spends its phones on nothing.

:class:`VerificationWatch` looks at each update's batch (the recipe calls it after the update
is saved): it warns once when the verified share of the last ``window_episodes`` episodes falls
below ``warn_below_verified_share``, naming the causes, and stops the run with a
:class:`~darwin.types.RunAbort` after ``stop_after_updates_without_verified`` updates in a row
without a verified episode::

    >>> from darwin.types import Task, Termination, TerminationReason, Trajectory, VerifierSpec
    >>> task = Task(id="t", instruction="i", app="a", verifier=VerifierSpec(predicate="p"))
    >>> def cut(eid):  # a phone that failed before the first step
    ...     return Trajectory(episode_id=eid, task=task, termination=Termination(TerminationReason.INFRA_TRUNCATED, "disconnect"))
    >>> watch = VerificationWatch(VerificationWatchConfig(warn_below_verified_share=0, stop_after_updates_without_verified=2))
    >>> watch.observe([cut("e1"), cut("e2")]).as_dict()
    {'episodes': 2, 'verified': 0, 'unverified': 0, 'errors': 0, 'infra_truncated': 2, 'verified_share': 0.0}
    >>> watch.stop_message() is None  # one update without a verified episode
    True
    >>> _ = watch.observe([cut("e3")])
    >>> print(watch.stop_message())  # doctest: +ELLIPSIS
    no episode of the last 2 updates (3 episodes) was verified, so the actor learns nothing. 3 infrastructure truncations ...
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from darwin.learner.step_rows import unverified
from darwin.types import TerminationReason, Trajectory

__all__ = ["BatchVerification", "VerificationWatch", "VerificationWatchConfig", "verification_status"]

logger = logging.getLogger(__name__)

Status = Literal["verified", "unverified", "error", "infra_truncated"]


class VerificationWatchConfig(BaseModel):
    """When a run warns that few of its episodes are verified, and when it stops because none
    are (docs/verification.md, "No silent runs"). The third rule, that an update without a
    verdict does not move the actor, is the learner's: ``learner.infra_only_updates``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    warn_below_verified_share: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="warn once (with the causes) when fewer than this share of the last `window_episodes` "
        "episodes were verified; 0 never warns",
    )
    window_episodes: int = Field(
        64,
        ge=1,
        le=100_000,
        description="how many of the latest trained episodes the verified share is measured over (from the first "
        "update on, over those there are)",
    )
    stop_after_updates_without_verified: int | None = Field(
        3,
        ge=1,
        le=100_000,
        description="stop the run with an error after this many updates in a row whose batches hold no verified "
        "episode; None never stops",
    )


def verification_status(trajectory: Trajectory) -> Status | None:
    """How an episode ended for verification; None when it played nothing (the goal already
    held, a phone that failed before the first step counts as an infrastructure truncation)."""
    termination = trajectory.termination
    if termination is None:
        return None
    if termination.reason == TerminationReason.INFRA_TRUNCATED:
        return "infra_truncated"
    if termination.reason == TerminationReason.ERROR:
        return "error"
    if not trajectory.transitions or termination.reason == TerminationReason.ALREADY_DONE:
        return None
    if unverified(trajectory) or not trajectory.phase_success:
        return "unverified"
    return "verified"


@dataclass(frozen=True)
class BatchVerification:
    """What one update's batch held (metrics.jsonl group ``verification``)."""

    episodes: int
    """Played episodes (those whose goal already held are left out)."""
    verified: int
    unverified: int
    errors: int
    infra_truncated: int

    @property
    def verified_share(self) -> float | None:
        return self.verified / self.episodes if self.episodes else None

    def as_dict(self) -> dict[str, float | int]:
        share = self.verified_share
        return {**asdict(self), **({} if share is None else {"verified_share": share})}


class VerificationWatch:
    """Follows the verified share of a run's trained episodes (module docstring). One per
    process: a resumed run starts counting afresh (the cause was fixed, or it stops again
    after the same number of updates)."""

    def __init__(self, config: VerificationWatchConfig | None = None) -> None:
        self.config = config if config is not None else VerificationWatchConfig()
        self._window: deque[tuple[Status, str]] = deque(maxlen=self.config.window_episodes)
        # The latest batches without a verified episode since the last one that had one.
        self._dry: deque[BatchVerification] = deque(maxlen=self.config.stop_after_updates_without_verified or 1)
        self.warned = False

    def observe(self, batch: Sequence[Trajectory]) -> BatchVerification:
        """Count one update's batch; warns (once per run) when the recent verified share is
        below the threshold. Call :meth:`stop_message` afterwards."""
        seen: Counter[Status] = Counter()
        for trajectory in batch:
            status = verification_status(trajectory)
            if status is None:
                continue
            seen[status] += 1
            self._window.append((status, _cause(trajectory, status)))
        counts = BatchVerification(
            episodes=seen.total(),
            verified=seen["verified"],
            unverified=seen["unverified"],
            errors=seen["error"],
            infra_truncated=seen["infra_truncated"],
        )
        if counts.verified:
            self._dry.clear()
        elif counts.episodes:
            self._dry.append(counts)
        self._maybe_warn()
        return counts

    @property
    def recent_verified_share(self) -> float | None:
        """Verified share of the last ``window_episodes`` played episodes (None before any)."""
        if not self._window:
            return None
        return sum(status == "verified" for status, _ in self._window) / len(self._window)

    def stop_message(self) -> str | None:
        """Why the run must stop (what is wrong, the most common causes and the fix), or None."""
        limit = self.config.stop_after_updates_without_verified
        if limit is None or len(self._dry) < limit:
            return None
        episodes = sum(c.episodes for c in self._dry)
        return (
            f"no episode of the last {limit} update{'s' if limit > 1 else ''} ({episodes} episodes) was verified, so the "
            f"actor learns nothing. "
            f"{self._causes()} Fix the cause, then continue with --resume (verification_watch."
            "stop_after_updates_without_verified sets how many such updates a run takes)"
        )

    def _maybe_warn(self) -> None:
        share, threshold = self.recent_verified_share, self.config.warn_below_verified_share
        if self.warned or share is None or share >= threshold:
            return
        self.warned = True
        logger.warning(
            "only %.0f%% of the last %d episodes were verified (verification_watch.warn_below_verified_share = %g); "
            "the others teach the actor nothing. %s",
            100 * share,
            len(self._window),
            threshold,
            self._causes(),
        )

    def _causes(self) -> str:
        """Each kind of episode without a verdict in the window, most frequent first, with its
        most common cause and what usually fixes it."""
        by_status: dict[Status, Counter[str]] = {}
        for status, cause in self._window:
            if status != "verified":
                by_status.setdefault(status, Counter())[cause] += 1
        parts = []
        for status, causes in sorted(by_status.items(), key=lambda kv: -kv[1].total()):
            cause, count = causes.most_common(1)[0]
            parts.append(
                f"{causes.total()} {_LABELS[status]}, most often ({count}) {cause[:300]!r}: {_fix(status, cause)}"
            )
        return "; ".join(parts) + "." if parts else ""


_LABELS: dict[Status, str] = {
    "unverified": "unverified (the verifier could not decide)",
    "error": "ended in an error",
    "infra_truncated": "infrastructure truncations (the phone failed)",
}


def _cause(trajectory: Trajectory, status: Status) -> str:
    """The text that says why ``trajectory`` has no verdict: the verifier's reason for its last
    phase, or the termination's cause."""
    if status == "unverified" and trajectory.phase_reasons:
        return list(trajectory.phase_reasons.values())[-1] or "no reason given"
    termination = trajectory.termination
    return (termination.cause if termination is not None else "") or "no reason given"


def _fix(status: Status, cause: str) -> str:
    if status == "unverified":
        if "state probe" in cause:
            return (
                "the rule verifier reads the phone's state: give the phones a state probe (SimPhones served over adb: "
                "phones.sim_state_probe = true, or phones.provider = 'sim_farm') or use an LLM judge"
            )
        return "check the verifier (a judge's endpoint, key and model: docs/verification.md)"
    if status == "error":
        return "an exception in the workflow, agent or verifier, or a model server refusing requests: see the run's log"
    return "check the phones' connection and health (adb devices), or the fault injection settings"
