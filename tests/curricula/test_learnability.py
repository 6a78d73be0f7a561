"""LearnabilityCurriculum: hand-computed weights, sampling frequencies, resume, bad arguments."""

from __future__ import annotations

import asyncio
import doctest
import importlib
import json
from collections import Counter

import pytest

from darwin.curricula.base import EpisodeOutcome
from darwin.curricula.learnability import LearnabilityCurriculum
from darwin.types import Task, TerminationReason, VerifierSpec


def make_tasks(*ids: str) -> list[Task]:
    return [Task(id=i, instruction=f"Do {i}.", app="App", verifier=VerifierSpec(predicate="p")) for i in ids]


def feed(cur: LearnabilityCurriculum, task_id: str, outcomes: str) -> None:
    """Apply outcomes written as a string: 'S' success, 'F' failure, 'U' unscored."""
    task = next(t for t in cur.tasks if t.id == task_id)
    for c in outcomes:
        success = {"S": True, "F": False, "U": None}[c]
        reason = TerminationReason.SUCCESS if success else TerminationReason.STEP_BUDGET
        cur.update(task, EpisodeOutcome(task_id, success, 5, reason))


def test_module_doctests() -> None:
    result = doctest.testmod(importlib.import_module("darwin.curricula.learnability"), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_fresh_tasks_use_the_prior_and_are_uniform() -> None:
    cur = LearnabilityCurriculum(make_tasks("a", "b", "c"))
    assert cur.success_estimates() == {"a": 0.5, "b": 0.5, "c": 0.5}
    assert cur.weights() == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})


def test_hand_computed_weights_without_prior() -> None:
    cur = LearnabilityCurriculum(make_tasks("half", "solved", "hopeless"), prior_weight=0.0)
    feed(cur, "half", "SF")  # p = 0.5 -> 0.25
    feed(cur, "solved", "SSS")  # p = 1 -> floor 0.05 * 0.25 = 0.0125
    feed(cur, "hopeless", "FFFF")  # p = 0 -> floor 0.0125
    assert cur.success_estimates() == {"half": 0.5, "solved": 1.0, "hopeless": 0.0}
    total = 0.25 + 0.0125 + 0.0125
    assert cur.weights() == pytest.approx({"half": 0.25 / total, "solved": 0.0125 / total, "hopeless": 0.0125 / total})


def test_hand_computed_weights_with_default_prior() -> None:
    cur = LearnabilityCurriculum(make_tasks("a", "b"))
    feed(cur, "a", "FFF")  # p = (0 + 1) / (3 + 2) = 0.2 -> 0.16
    feed(cur, "b", "SSFF")  # p = (2 + 1) / (4 + 2) = 0.5 -> 0.25
    assert cur.success_estimates() == pytest.approx({"a": 0.2, "b": 0.5})
    assert cur.weights() == pytest.approx({"a": 0.16 / 0.41, "b": 0.25 / 0.41})


def test_window_keeps_only_recent_scored_episodes_and_ignores_unscored() -> None:
    cur = LearnabilityCurriculum(make_tasks("a", "b"), prior_weight=0.0, window=3)
    feed(cur, "a", "FFFSUSUS")  # last three scored: S S S
    assert cur.success_estimates()["a"] == 1.0
    feed(cur, "b", "UUU")  # nothing scored: the prior
    assert cur.success_estimates()["b"] == 0.5


def test_sampling_frequencies_follow_weights() -> None:
    cur = LearnabilityCurriculum(make_tasks("a", "b", "c"), prior_weight=0.0, floor=0.2, seed=3)
    feed(cur, "a", "SF")  # 0.25
    feed(cur, "b", "SSSF")  # p = 0.75 -> 0.1875
    feed(cur, "c", "S")  # p = 1 -> 0.2 * 0.25 = 0.05
    expected = cur.weights()
    assert expected == pytest.approx({"a": 0.25 / 0.4875, "b": 0.1875 / 0.4875, "c": 0.05 / 0.4875})
    n = 20_000
    counts = Counter(cur.next_task().id for _ in range(n))
    for tid, p in expected.items():
        assert counts[tid] / n == pytest.approx(p, abs=0.02)


def test_all_zero_weights_fall_back_to_uniform() -> None:
    cur = LearnabilityCurriculum(make_tasks("a", "b"), floor=0.0, prior_weight=0.0, seed=1)
    feed(cur, "a", "SS")
    feed(cur, "b", "FF")
    assert cur.weights() == {"a": 0.5, "b": 0.5}
    counts = Counter(cur.next_task().id for _ in range(4000))
    assert counts["a"] / 4000 == pytest.approx(0.5, abs=0.05)


def test_same_seed_same_draws_and_global_rng_untouched() -> None:
    import random

    a = LearnabilityCurriculum(make_tasks("a", "b", "c"), seed=5)
    b = LearnabilityCurriculum(make_tasks("a", "b", "c"), seed=5)
    before = random.getstate()
    draws = [a.next_task().id for _ in range(50)]
    assert random.getstate() == before
    random.seed(999)  # reseeding the global generator changes nothing
    assert draws == [b.next_task().id for _ in range(50)]


def test_state_dict_round_trip_continues_the_same_draws() -> None:
    tasks = make_tasks("a", "b", "c")
    cur = LearnabilityCurriculum(tasks, window=4, seed=11)
    feed(cur, "a", "SSSSS")
    feed(cur, "b", "SFU")
    for _ in range(7):
        cur.next_task()
    state = json.loads(json.dumps(cur.state_dict()))  # checkpoints store JSON
    assert state["history"]["a"] == [1, 1, 1, 1]  # window 4
    resumed = LearnabilityCurriculum(tasks, window=4, seed=0)
    resumed.load_state_dict(state)
    assert resumed.success_estimates() == cur.success_estimates()
    assert resumed.weights() == cur.weights()
    assert [resumed.next_task().id for _ in range(100)] == [cur.next_task().id for _ in range(100)]
    feed(cur, "c", "F")
    feed(resumed, "c", "F")
    assert resumed.state_dict() == json.loads(json.dumps(cur.state_dict()))


def test_load_state_dict_rejects_unknown_tasks_and_fills_missing_ones() -> None:
    cur = LearnabilityCurriculum(make_tasks("a", "b"))
    feed(cur, "a", "S")
    state = cur.state_dict()
    with pytest.raises(ValueError, match="lacks: a"):
        LearnabilityCurriculum(make_tasks("b", "c")).load_state_dict(state)
    bigger = LearnabilityCurriculum(make_tasks("a", "b", "c"))
    bigger.load_state_dict(state)
    assert bigger.success_estimates() == pytest.approx({"a": 2 / 3, "b": 0.5, "c": 0.5})


async def test_concurrent_asyncio_workers_update_consistently() -> None:
    cur = LearnabilityCurriculum(make_tasks("a", "b", "c"), window=1000, seed=2)

    async def worker() -> int:
        for _ in range(25):
            task = cur.next_task()
            await asyncio.sleep(0)
            cur.update(task, EpisodeOutcome(task.id, True, 3, TerminationReason.SUCCESS))
        return 25

    done = sum(await asyncio.gather(*(worker() for _ in range(4))))
    assert sum(len(h) for h in cur.state_dict()["history"].values()) == done == 100


def test_update_rejects_unknown_tasks_and_mismatched_outcomes() -> None:
    cur = LearnabilityCurriculum(make_tasks("a"))
    other = make_tasks("zzz")[0]
    with pytest.raises(ValueError, match="'zzz'.*not built with"):
        cur.update(other, EpisodeOutcome("zzz", True, 1, TerminationReason.SUCCESS))
    with pytest.raises(ValueError, match="outcome for 'b'"):
        cur.update(cur.tasks[0], EpisodeOutcome("b", True, 1, TerminationReason.SUCCESS))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"floor": 1.5}, "floor must be a number in \\[0, 1\\]"),
        ({"floor": -0.1}, "floor"),
        ({"floor": "0.1"}, "floor"),
        ({"prior_success": 2.0}, "prior_success"),
        ({"prior_weight": -1.0}, "prior_weight must be a finite number >= 0"),
        ({"prior_weight": float("nan")}, "prior_weight"),
        ({"window": 0}, "window must be an integer >= 1"),
        ({"window": 2.5}, "window"),
        ({"window": True}, "window"),
        ({"seed": "x"}, "seed must be an integer"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LearnabilityCurriculum(make_tasks("a"), **kwargs)


def test_bad_task_lists() -> None:
    with pytest.raises(ValueError, match="at least one task"):
        LearnabilityCurriculum([])
    with pytest.raises(ValueError, match="'a' appears more than once"):
        LearnabilityCurriculum(make_tasks("a", "a"))
    with pytest.raises(ValueError, match="Task objects"):
        LearnabilityCurriculum(["a"])  # type: ignore[list-item]
