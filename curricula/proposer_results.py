"""What the stage-2 curriculum shows the model and keeps: per-template results, proposals, the
model's calls and the proposer's counters (part of :mod:`darwin.curricula.proposer`).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import JsonValue

from darwin.curricula.base import EpisodeOutcome
from darwin.policies.litellm import Completion
from darwin.types import Task, TerminationReason

RejectionKind = Literal[
    "malformed", "unknown_template", "not_allowed", "language", "invalid_params", "duplicate", "too_many"
]
"""Why a proposal was rejected."""

CallOutcome = Literal["ok", "failed", "malformed"]
"""How a call to the model ended: an answer that was read, an exception, an unreadable answer."""


# --------------------------------------------------------------------------- results and proposals


@dataclass(frozen=True)
class TemplateResults:
    """The agent's recent episodes of one template, as the model reads them."""

    template: str
    episodes: int = 0
    """Finished episodes (scored or not)."""
    successes: int = 0
    failures: int = 0
    false_completions: int = 0
    """Episodes the agent ended itself (``finished``/``answer``) that were not successes."""
    mean_steps: float | None = None
    endings: Mapping[str, int] = field(default_factory=dict)
    """How episodes ended, by :class:`~darwin.types.TerminationReason` value."""

    @property
    def success_rate(self) -> float | None:
        scored = self.successes + self.failures
        return self.successes / scored if scored else None

    def text(self) -> str:
        """One line: ``12 episodes: 25% success (3/12 scored), mean 18.3 steps; ended by ...``."""
        if not self.episodes:
            return "not tried yet"
        scored = self.successes + self.failures
        rate = (
            "no verdict yet"
            if self.success_rate is None
            else f"{self.success_rate:.0%} success ({self.successes}/{scored} scored)"
        )
        steps = "" if self.mean_steps is None else f", mean {self.mean_steps:.1f} steps"
        endings = ", ".join(f"{k} {v}" for k, v in sorted(self.endings.items(), key=lambda kv: (-kv[1], kv[0])))
        false = f" ({self.false_completions} false completions)" if self.false_completions else ""
        return f"{self.episodes} episodes: {rate}{steps}; ended by {endings}{false}"


def summarise_results(outcomes: Iterable[tuple[str, EpisodeOutcome]], window: int) -> dict[str, TemplateResults]:
    """Per template, the last ``window`` of ``(template, outcome)`` pairs (oldest first) summarised.

    >>> from darwin.types import TerminationReason as R
    >>> rows = [("t", EpisodeOutcome("t.s0", True, 6, R.SUCCESS)), ("t", EpisodeOutcome("t.s1", False, 9, R.AGENT_FINISHED)),
    ...         ("t", EpisodeOutcome("t.s1", False, 24, R.STEP_BUDGET))]
    >>> summarise_results(rows, window=2)["t"].text()
    '2 episodes: 0% success (0/2 scored), mean 16.5 steps; ended by agent_finished 1, step_budget 1 (1 false completions)'
    """
    recent: dict[str, deque[EpisodeOutcome]] = {}
    for template, outcome in outcomes:
        recent.setdefault(template, deque(maxlen=window)).append(outcome)
    out = {}
    for template, rows in recent.items():
        out[template] = TemplateResults(
            template=template,
            episodes=len(rows),
            successes=sum(o.success is True for o in rows),
            failures=sum(o.success is False for o in rows),
            false_completions=sum(
                o.success is False and o.termination == TerminationReason.AGENT_FINISHED for o in rows
            ),
            mean_steps=sum(o.steps for o in rows) / len(rows),
            endings=dict(Counter(o.termination.value for o in rows)),
        )
    return out


@dataclass(frozen=True)
class Proposal:
    """One proposal of an answer, validated: ``task`` when accepted, else ``rejection`` and ``reason``."""

    position: int
    template: str | None
    params: JsonValue
    language: str | None
    why: str
    task: Task | None = None
    rejection: RejectionKind | None = None
    reason: str = ""

    @property
    def accepted(self) -> bool:
        return self.task is not None


@dataclass(frozen=True)
class CallResult:
    """What one call (or one replayed call) produced."""

    call: int
    """The call's index in this proposer's sequence (0, 1, ...)."""
    outcome: CallOutcome | Literal["replayed"]
    proposals: tuple[Proposal, ...] = ()
    error: str = ""
    completion: Completion | None = None

    @property
    def tasks(self) -> list[Task]:
        return [p.task for p in self.proposals if p.task is not None]


@dataclass
class ProposerStats:
    """Counters of one :class:`LLMTaskProposer` (restored on resume)."""

    calls: int = 0
    """Calls to the model whose answer (or failure) was applied."""
    failures: int = 0
    """Calls that raised (server, network and authentication errors, anything else)."""
    malformed: int = 0
    """Answers with no readable list of proposals."""
    proposals: int = 0
    accepted: int = 0
    rejected: int = 0
    rejected_by_reason: dict[str, int] = field(default_factory=dict)
    """Rejections by :data:`RejectionKind`."""
    replayed_calls: int = 0
    proposed_episodes: int = 0
    """Tasks handed out from the proposal queue."""
    base_episodes: int = 0
    """Tasks handed out from the base tasks."""
    database_errors: int = 0
    """Reads of the run database or writes of proposals that failed (the run went on)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
