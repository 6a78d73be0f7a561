"""FailureFilterCurriculum (MobileRL): hand-computed weights, cool-down, resume, bad arguments."""

from __future__ import annotations

import doctest
import importlib
import json
import math
from collections import Counter

import pytest

from darwin.curricula.base import EpisodeOutcome
from darwin.curricula.failure_filter import FailureFilterCurriculum
from darwin.types import Task, TerminationReason, VerifierSpec


def make_tasks(*ids: str) -> list[Task]:
    return [Task(id=i, instruction=f"Do {i}.", app="App", verifier=VerifierSpec(predicate="p")) for i in ids]


def feed(cur: FailureFilterCurriculum, task_id: str, outcomes: str) -> None:
    """Apply outcomes written as a string: 'S' success, 'F' failure, 'U' unscored."""
    task = next(t for t in cur.tasks if t.id == task_id)
    for c in outcomes:
        success = {"S": True, "F": False, "U": None}[c]
        reason = {
            True: TerminationReason.SUCCESS,
            False: TerminationReason.STEP_BUDGET,
            None: TerminationReason.ALREADY_DONE,
        }[success]
        cur.update(task, EpisodeOutcome(task_id, success, 5, reason))


def normalised(raw: dict[str, float]) -> dict[str, float]:
    total = sum(raw.values())
    return {k: v / total for k, v in raw.items()}


def test_module_doctests() -> None:
    result = doctest.testmod(importlib.import_module("darwin.curricula.failure_filter"), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_hand_computed_weights_exp_minus_f_and_zero_past_the_cap() -> None:
    cur = FailureFilterCurriculum(make_tasks("f0", "f1", "f2", "f3", "f4"))  # max_failures = 3
    feed(cur, "f1", "F")
    feed(cur, "f2", "FF")
    feed(cur, "f3", "FFF")
    feed(cur, "f4", "FFFF")
    assert cur.failure_counts() == {"f0": 0, "f1": 1, "f2": 2, "f3": 3, "f4": 4}
    expected = normalised({"f0": 1.0, "f1": math.exp(-1), "f2": math.exp(-2), "f3": math.exp(-3), "f4": 0.0})
    assert cur.weights() == pytest.approx(expected)
    assert cur.weights()["f4"] == 0.0


def test_success_resets_the_count_and_unscored_changes_nothing() -> None:
    cur = FailureFilterCurriculum(make_tasks("a", "b"))
    feed(cur, "a", "FFS")
    assert cur.failure_counts()["a"] == 0
    feed(cur, "a", "FUUF")
    assert cur.failure_counts()["a"] == 2
    assert cur.weights() == pytest.approx(normalised({"a": math.exp(-2), "b": 1.0}))


def test_sampling_frequencies_follow_weights() -> None:
    cur = FailureFilterCurriculum(make_tasks("a", "b", "c", "d"), seed=7)
    feed(cur, "b", "F")
    feed(cur, "c", "FF")
    feed(cur, "d", "FFFF")  # filtered
    expected = cur.weights()
    n = 20_000
    counts = Counter(cur.next_task().id for _ in range(n))
    assert counts["d"] == 0
    for tid, p in expected.items():
        assert counts[tid] / n == pytest.approx(p, abs=0.02)


def test_filtered_task_returns_after_cooldown_at_max_failures() -> None:
    cur = FailureFilterCurriculum(make_tasks("a", "b"), max_failures=2, cooldown_episodes=3)
    feed(cur, "a", "FFF")  # f = 3 > 2: filtered
    assert cur.weights() == {"a": 0.0, "b": 1.0}
    feed(cur, "b", "SU")  # one scored episode of another task; unscored ones do not count
    feed(cur, "a", "F")  # its own in-flight failure neither counts nor restarts the clock
    feed(cur, "b", "F")
    assert cur.weights()["a"] == 0.0  # two of three
    feed(cur, "b", "S")  # three: back, with f = max_failures
    assert cur.failure_counts()["a"] == 2
    assert cur.weights() == pytest.approx(normalised({"a": math.exp(-2), "b": 1.0}))
    feed(cur, "a", "F")  # one more failure filters it again, with a fresh clock
    assert cur.weights()["a"] == 0.0
    feed(cur, "b", "SS")
    assert cur.weights()["a"] == 0.0
    feed(cur, "b", "S")
    assert cur.weights()["a"] > 0.0


def test_success_while_filtered_unfilters_at_once() -> None:
    cur = FailureFilterCurriculum(make_tasks("a", "b"), max_failures=0, cooldown_episodes=100)
    feed(cur, "a", "F")
    assert cur.weights()["a"] == 0.0
    feed(cur, "a", "S")  # an episode started before it was filtered
    assert cur.weights() == {"a": 0.5, "b": 0.5}
    assert cur.state_dict()["cooldown"] == {}


def test_all_filtered_samples_uniformly() -> None:
    cur = FailureFilterCurriculum(make_tasks("a", "b", "c"), max_failures=0, cooldown_episodes=1000, seed=4)
    for tid in ("a", "b", "c"):
        feed(cur, tid, "F")
    assert cur.weights() == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    n = 9000
    counts = Counter(cur.next_task().id for _ in range(n))
    for tid in ("a", "b", "c"):
        assert counts[tid] / n == pytest.approx(1 / 3, abs=0.03)


def test_state_dict_round_trip_continues_the_same_draws() -> None:
    tasks = make_tasks("a", "b", "c")
    cur = FailureFilterCurriculum(tasks, max_failures=1, cooldown_episodes=4, seed=9)
    feed(cur, "a", "FF")  # filtered, clock 0
    feed(cur, "b", "FS")
    feed(cur, "c", "F")  # three episodes of other tasks
    for _ in range(5):
        cur.next_task()
    state = json.loads(json.dumps(cur.state_dict()))
    assert state["failures"] == {"a": 2, "b": 0, "c": 1}
    assert state["cooldown"] == {"a": 3}
    resumed = FailureFilterCurriculum(tasks, max_failures=1, cooldown_episodes=4, seed=0)
    resumed.load_state_dict(state)
    assert resumed.weights() == cur.weights()
    assert [resumed.next_task().id for _ in range(100)] == [cur.next_task().id for _ in range(100)]
    for c in (cur, resumed):  # the cool-down carries over: one more episode brings 'a' back
        feed(c, "b", "S")
    assert resumed.failure_counts() == cur.failure_counts() == {"a": 1, "b": 0, "c": 1}


def test_load_state_dict_rejects_unknown_tasks() -> None:
    state = FailureFilterCurriculum(make_tasks("a", "b")).state_dict()
    with pytest.raises(ValueError, match="lacks: a"):
        FailureFilterCurriculum(make_tasks("b", "c")).load_state_dict(state)


def test_update_rejects_unknown_tasks() -> None:
    cur = FailureFilterCurriculum(make_tasks("a"))
    other = make_tasks("zzz")[0]
    with pytest.raises(ValueError, match="'zzz'.*not built with"):
        cur.update(other, EpisodeOutcome("zzz", False, 1, TerminationReason.STEP_BUDGET))
    with pytest.raises(ValueError, match="not built with"):  # even unscored outcomes
        cur.update(other, EpisodeOutcome("zzz", None, 1, TerminationReason.ALREADY_DONE))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_failures": -1}, "max_failures must be an integer >= 0"),
        ({"max_failures": 1.5}, "max_failures"),
        ({"cooldown_episodes": 0}, "cooldown_episodes must be an integer >= 1"),
        ({"cooldown_episodes": None}, "cooldown_episodes"),
        ({"seed": 0.5}, "seed must be an integer"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        FailureFilterCurriculum(make_tasks("a"), **kwargs)


def test_bad_task_lists() -> None:
    with pytest.raises(ValueError, match="at least one task"):
        FailureFilterCurriculum([])
    with pytest.raises(ValueError, match="'a' appears more than once"):
        FailureFilterCurriculum(make_tasks("a", "a"))
