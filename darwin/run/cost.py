"""The cost of a success: phone time and learner time per successful training episode.

A run holds its phones for the whole rollout, busy or not, and its learner computes for the
time of its updates. :class:`RunCost` keeps those totals with the run's episode counts, and
turns them into the figures ``summary.json`` and ``darwin compare`` report:

- **phone-seconds per success**: phone-seconds held (phones x rollout wall time) over the
  successful training episodes;
- **learner-seconds per success**: seconds spent in learner updates over the same successes;
- **infrastructure share**: the part of the phone-seconds spent in episodes that ended as an
  infrastructure truncation (timeouts, disconnects, bad screenshots);
- **backpressure share**: the part spent waiting for the learner to drain the buffer.

    >>> cost = RunCost(phones=2, rollout_s=100.0, phone_s=200.0, episode_phone_s=150.0, infra_phone_s=30.0,
    ...                backpressure_phone_s=40.0, learner_s=25.0, episodes=10, successes=4)
    >>> cost.phone_s_per_success, cost.learner_s_per_success, cost.infra_share, cost.backpressure_share
    (50.0, 6.25, 0.15, 0.2)
    >>> round(cost.usd_per_success(phone_hour_usd=0.10, gpu_hour_usd=2.50), 5)
    0.00573
    >>> RunCost().phone_s_per_success is None  # no success: no figure, not a division by zero
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from pydantic import JsonValue

if TYPE_CHECKING:
    from darwin.rollout import RolloutStats

NO_SUCCESS = "no successful training episode, so no per-success figures"
"""What ``summary.json`` says in place of the per-success figures of a run without a success."""


@dataclass(frozen=True)
class RunCost:
    """Phone and learner time of a run's training rollout, and what a success cost in it.

    The fields are totals (a resumed run adds each process's, :meth:`__add__`); the figures
    are properties, ``None`` where their denominator is zero (no success, no phone time).
    Evaluations are not counted: their phones and time are the evaluation's.
    """

    phones: int = 0
    """Phones the rollout held (the latest process's, for a resumed run)."""
    rollout_s: float = 0.0
    """Wall seconds the training rollout ran, from its start to its stop."""
    phone_s: float = 0.0
    """Phone-seconds held: phones x ``rollout_s`` (summed over the processes of a resumed run)."""
    episode_phone_s: float = 0.0
    """Phone-seconds in finished episodes, from the workflow's start to the phone back home."""
    infra_phone_s: float = 0.0
    """Phone-seconds in episodes that ended as an infrastructure truncation."""
    backpressure_phone_s: float = 0.0
    """Phone-seconds spent waiting for the learner (``max_backlog_steps``)."""
    learner_s: float = 0.0
    """Seconds spent in learner updates."""
    episodes: int = 0
    """Finished training episodes (episodes cut off by the run's stop are not counted)."""
    successes: int = 0
    """Finished training episodes whose verifier said success."""

    @classmethod
    def of_rollout(cls, stats: RolloutStats, phones: int, learner_s: float) -> RunCost:
        """The cost of one rollout engine run on ``phones`` phones, with ``learner_s`` of updates."""
        return cls(
            phones=phones,
            rollout_s=stats.elapsed,
            phone_s=phones * stats.elapsed,
            episode_phone_s=stats.episode_phone_s,
            infra_phone_s=stats.infra_phone_s,
            backpressure_phone_s=stats.backpressure_s,
            learner_s=learner_s,
            episodes=stats.episodes,
            successes=stats.successes,
        )

    def __add__(self, other: RunCost) -> RunCost:
        """Two parts of one run (before and after a resume): totals add, ``phones`` is ``other``'s."""
        summed = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self) if f.name != "phones"}
        return RunCost(phones=other.phones, **summed)

    @property
    def phone_s_per_success(self) -> float | None:
        """Phone-seconds held per successful training episode (``None`` without a success)."""
        return self.phone_s / self.successes if self.successes else None

    @property
    def learner_s_per_success(self) -> float | None:
        """Learner-seconds per successful training episode (``None`` without a success)."""
        return self.learner_s / self.successes if self.successes else None

    @property
    def infra_share(self) -> float | None:
        """Share of the phone-seconds lost to infrastructure truncations (``None`` without phone time)."""
        return self.infra_phone_s / self.phone_s if self.phone_s > 0 else None

    @property
    def backpressure_share(self) -> float | None:
        """Share of the phone-seconds spent waiting for the learner (``None`` without phone time)."""
        return self.backpressure_phone_s / self.phone_s if self.phone_s > 0 else None

    def usd_per_success(self, phone_hour_usd: float, gpu_hour_usd: float, learner_gpus: int = 1) -> float | None:
        """Money per success: phone-hours at ``phone_hour_usd`` plus learner GPU-hours
        (``learner_s`` x ``learner_gpus``) at ``gpu_hour_usd``; ``None`` without a success.
        Only the learner's GPUs are priced: add an inference server's separately (it is held
        for the whole rollout, as the phones are)."""
        if not self.successes:
            return None
        return (self.phone_s * phone_hour_usd + self.learner_s * learner_gpus * gpu_hour_usd) / 3600 / self.successes

    def to_json(self, digits: int | None = None) -> dict[str, JsonValue]:
        """The totals and the figures, floats rounded to ``digits`` (``None``: exact, as a
        checkpoint keeps them), as ``summary.json``'s ``cost``; a note where there is no success."""

        def r(v: float | None) -> float | None:
            return v if v is None or digits is None else round(v, digits)

        data: dict[str, JsonValue] = {
            f.name: r(getattr(self, f.name)) if isinstance(getattr(self, f.name), float) else getattr(self, f.name)
            for f in fields(self)
        }
        data |= {
            "phone_s_per_success": r(self.phone_s_per_success),
            "learner_s_per_success": r(self.learner_s_per_success),
            "infra_share": r(self.infra_share),
            "backpressure_share": r(self.backpressure_share),
        }
        if not self.successes:
            data["note"] = NO_SUCCESS
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> RunCost:
        """The totals from :meth:`to_json`'s output (the figures are recomputed from them)."""
        return cls(**{f.name: (int if f.type == "int" else float)(data[f.name]) for f in fields(cls) if f.name in data})  # type: ignore[arg-type]  # each field is an int or a float, converted by its declared type

    def describe(self) -> str:
        """One line for the end of ``darwin run``.

        >>> print(RunCost(phone_s=200.0, infra_phone_s=30.0, backpressure_phone_s=40.0, learner_s=25.0, successes=4).describe())
        cost of a success: 50.0 phone-seconds and 6.2 learner-seconds (4 successful training episodes); phone time lost to infrastructure 15.0%, waiting for the learner 20.0%
        """

        def share(v: float | None) -> str:
            return "-" if v is None else f"{100 * v:.1f}%"

        lost = f"phone time lost to infrastructure {share(self.infra_share)}, waiting for the learner {share(self.backpressure_share)}"
        if self.phone_s_per_success is None or self.learner_s_per_success is None:
            return f"{NO_SUCCESS}; {lost}"
        return (
            f"cost of a success: {self.phone_s_per_success:.1f} phone-seconds and {self.learner_s_per_success:.1f} learner-seconds "
            f"({self.successes} successful training episodes); {lost}"
        )
