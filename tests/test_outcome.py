"""One outcome per episode, read the same way by the rollout's statistics, evaluations and the
run database's per-task counts."""

from __future__ import annotations

import dataclasses

import pytest

from darwin.evaluate import STATS_FIELD, summarize
from darwin.rollout import RolloutStats
from darwin.store import RunStore
from darwin.task_registry import get_task
from darwin.types import Outcome, Phase, Termination, TerminationReason, Trajectory, Verdict

TASK = get_task("amazon_0")

CASES = [  # (termination reason, execution verdict, outcome)
    (TerminationReason.SUCCESS, True, Outcome.SUCCESS),
    (TerminationReason.AGENT_FINISHED, True, Outcome.SUCCESS),
    (TerminationReason.AGENT_FINISHED, False, Outcome.FAILURE),
    (TerminationReason.STEP_BUDGET, False, Outcome.FAILURE),
    (TerminationReason.AGENT_FINISHED, None, Outcome.UNVERIFIED),
    (TerminationReason.STEP_BUDGET, None, Outcome.UNVERIFIED),
    (TerminationReason.INFRA_TRUNCATED, True, Outcome.INFRASTRUCTURE),  # a verdict, then the phone failed
    (TerminationReason.INFRA_TRUNCATED, None, Outcome.INFRASTRUCTURE),
    (TerminationReason.ERROR, None, Outcome.ERROR),
    (TerminationReason.ALREADY_DONE, True, Outcome.ALREADY_DONE),
    (None, None, Outcome.UNFINISHED),
]


def _trajectory(i: int, reason: TerminationReason | None, verdict: bool | None) -> Trajectory:
    cause = "x" if reason in (TerminationReason.INFRA_TRUNCATED, TerminationReason.ERROR) else ""
    t = Trajectory(f"e{i}", TASK, termination=None if reason is None else Termination(reason, cause))
    if reason is not None:
        t.verdicts[Phase.EXECUTION] = Verdict(verdict)
    return t


@pytest.mark.parametrize(("reason", "verdict", "outcome"), CASES)
def test_each_ending_has_one_outcome(reason, verdict, outcome) -> None:
    assert _trajectory(0, reason, verdict).outcome is outcome
    assert outcome.scored == {Outcome.SUCCESS: True, Outcome.FAILURE: False}.get(outcome)


def test_rollout_stats_evaluation_and_the_run_database_count_alike() -> None:
    trajectories = [_trajectory(i, reason, verdict) for i, (reason, verdict, _) in enumerate(CASES)]
    evaluated = summarize(trajectories)
    assert evaluated.episodes == len(CASES)
    expected = {field: 0 for field in STATS_FIELD.values()}
    for _, _, outcome in CASES:
        expected[STATS_FIELD[outcome]] += 1
    assert {f: getattr(evaluated, f) for f in expected} == expected

    store = RunStore("sqlite://")
    try:
        run = store.start_run("outcomes", config=None)
        for t in trajectories:
            store.start_episode(run, t.episode_id, TASK, phone="p")
            if t.termination is not None:
                store.finish_episode(t)
        stored = store.success_by_task(run)[TASK.id]
    finally:
        store.close()
    assert dataclasses.asdict(stored) == dataclasses.asdict(evaluated)

    stats = RolloutStats()
    for t in trajectories:
        if t.termination is not None:  # the rollout counts finished episodes
            stats.record(t)
    assert (stats.successes, stats.unverified) == (expected["successes"], expected["unverified"])
