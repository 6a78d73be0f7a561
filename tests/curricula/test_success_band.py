"""SuccessBandCurriculum (MobileRL): hand-computed weights at the band's edges and outside it,
the prior, per-template estimates, sampling frequencies, resume, bad settings."""

from __future__ import annotations

import doctest
import importlib
import json
import math
from collections import Counter

import pytest

from darwin.components import ComponentSpec, build_component
from darwin.curricula.base import EpisodeOutcome
from darwin.curricula.success_band import MOBILERL_SIGMA, SuccessBandConfig, SuccessBandCurriculum, band_weight
from darwin.templates import templates
from darwin.types import Task, TerminationReason, VerifierSpec


def make_tasks(*ids: str) -> list[Task]:
    return [Task(id=i, instruction=f"Do {i}.", app="App", verifier=VerifierSpec(predicate="p")) for i in ids]


def feed(cur: SuccessBandCurriculum, task: Task, outcomes: str) -> None:
    """Apply outcomes written as a string: 'S' success, 'F' failure, 'U' unscored."""
    for c in outcomes:
        success = {"S": True, "F": False, "U": None}[c]
        reason = {
            True: TerminationReason.SUCCESS,
            False: TerminationReason.STEP_BUDGET,
            None: TerminationReason.ALREADY_DONE,
        }[success]
        cur.update(task, EpisodeOutcome(task.id, success, 5, reason))


def mobilerl(p: float) -> float:
    """MobileRL's Gaussian written out: 2 sigma^2 = 0.25 / ln 5, so exp(-d^2 / (2 sigma^2)) = 5^(-4 d^2)."""
    return 5 ** (-4 * (p - 0.5) ** 2)


def test_module_doctests() -> None:
    result = doctest.testmod(importlib.import_module("darwin.curricula.success_band"), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_mobilerl_sigma_gives_weight_0_2_at_the_extremes() -> None:
    assert abs(MOBILERL_SIGMA - 0.27869) < 1e-5
    cfg = SuccessBandConfig(floor=0.0)
    assert band_weight(0.0, cfg) == pytest.approx(0.2)
    assert band_weight(1.0, cfg) == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (0.2, 1.0),  # both edges belong to the band
        (0.8, 1.0),
        (0.5, 1.0),
        (0.19, 5 ** (-4 * 0.31**2)),  # just outside: 0.551 (the Gaussian is centred on 0.5, as in MobileRL)
        (0.81, 5 ** (-4 * 0.31**2)),
        (0.1, 5 ** (-4 * 0.16)),  # 0.357
        (0.95, 5 ** (-4 * 0.2025)),  # 0.272
    ],
)
def test_hand_computed_band_weights(p: float, expected: float) -> None:
    assert band_weight(p, SuccessBandConfig()) == pytest.approx(expected)


def test_floor_and_custom_band_and_width() -> None:
    assert band_weight(0.0, SuccessBandConfig(floor=0.3)) == 0.3  # 0.2 < floor
    cfg = SuccessBandConfig(low=0.4, high=0.6, sigma=0.1, floor=0.0)
    assert band_weight(0.3, cfg) == pytest.approx(math.exp(-2.0))  # d = 0.2 from the centre 0.5: e^(-0.04 / 0.02)
    assert band_weight(0.4, cfg) == 1.0
    assert band_weight(0.61, cfg) == pytest.approx(math.exp(-(0.11**2) / 0.02))


def test_weights_from_episodes_without_prior() -> None:
    a, b, c, d = make_tasks("a", "b", "c", "d")
    cur = SuccessBandCurriculum([a, b, c, d], prior_weight=0.0, floor=0.0)
    feed(cur, a, "FFFF")  # p = 0 -> 0.2
    feed(cur, b, "SFFFF")  # p = 0.2 -> 1 (edge)
    feed(cur, c, "SSSSSSSSSF")  # p = 0.9 -> 5^(-0.64)
    # d: no episodes -> the prior 0.5 -> 1
    assert cur.success_estimates() == pytest.approx({"a": 0.0, "b": 0.2, "c": 0.9, "d": 0.5})
    raw = {"a": 0.2, "b": 1.0, "c": mobilerl(0.9), "d": 1.0}
    assert cur.band_weights() == pytest.approx(raw)
    total = sum(raw.values())
    assert cur.weights() == pytest.approx({k: v / total for k, v in raw.items()})


def test_the_prior_shrinks_few_episodes_towards_the_band() -> None:
    a, b = make_tasks("a", "b")
    cur = SuccessBandCurriculum([a, b])  # prior 0.5 weighing 2 episodes
    feed(cur, a, "FFF")  # (0 + 1) / (3 + 2) = 0.2: still in the band
    assert cur.band_weights()["a"] == 1.0
    feed(cur, a, "F")  # 1 / 6
    assert cur.band_weights()["a"] == pytest.approx(mobilerl(1 / 6))  # 5^(-4/9) = 0.489


def test_window_and_unscored_episodes() -> None:
    a, b = make_tasks("a", "b")
    cur = SuccessBandCurriculum([a, b], prior_weight=0.0, window=3)
    feed(cur, a, "SSSFUFUF")  # last three scored: F F F
    assert cur.success_estimates()["a"] == 0.0
    feed(cur, b, "UUU")
    assert cur.success_estimates()["b"] == 0.5


def test_template_instances_share_one_estimate_and_split_its_weight() -> None:
    first, second = sorted(templates())[:2]
    tasks = [templates()[first].instance(s) for s in range(3)] + [templates()[second].instance(0)]
    cur = SuccessBandCurriculum(tasks, prior_weight=0.0, floor=0.0)
    feed(cur, tasks[0], "FF")  # the first template: p = 0 -> 0.2, shared by its three instances
    assert cur.success_estimates() == {first: 0.0, second: 0.5}
    total = 0.2 + 1.0
    expected = {t.id: 0.2 / 3 / total for t in tasks[:3]} | {tasks[3].id: 1.0 / total}
    assert cur.weights() == pytest.approx(expected)
    per_task = SuccessBandCurriculum(tasks, prior_weight=0.0, floor=0.0, group_by="task")
    feed(per_task, tasks[0], "FF")
    assert per_task.band_weights() == pytest.approx(
        {tasks[0].id: 0.2, tasks[1].id: 1.0, tasks[2].id: 1.0, tasks[3].id: 1.0}
    )


def test_sampling_frequencies_follow_weights() -> None:
    a, b, c = make_tasks("a", "b", "c")
    cur = SuccessBandCurriculum([a, b, c], prior_weight=0.0, seed=3)
    feed(cur, a, "F")  # 0.2
    feed(cur, b, "S")  # 0.2
    expected = cur.weights()
    assert expected == pytest.approx({"a": 0.2 / 1.4, "b": 0.2 / 1.4, "c": 1 / 1.4})
    n = 20_000
    counts = Counter(cur.next_task().id for _ in range(n))
    for tid, p in expected.items():
        assert counts[tid] / n == pytest.approx(p, abs=0.02)


def test_state_dict_round_trip_continues_the_same_draws() -> None:
    tasks = make_tasks("a", "b", "c")
    cur = SuccessBandCurriculum(tasks, window=4, seed=11)
    feed(cur, tasks[0], "SSSSS")
    feed(cur, tasks[1], "FU")
    for _ in range(7):
        cur.next_task()
    state = json.loads(json.dumps(cur.state_dict()))
    assert state["history"] == {"a": [1, 1, 1, 1], "b": [0], "c": []}
    resumed = SuccessBandCurriculum(tasks, window=4, seed=0)
    resumed.load_state_dict(state)
    assert resumed.weights() == cur.weights()
    assert [resumed.next_task().id for _ in range(100)] == [cur.next_task().id for _ in range(100)]
    with pytest.raises(ValueError, match="lacks: a"):
        SuccessBandCurriculum(make_tasks("b", "c"), group_by="task").load_state_dict(state)


def test_update_rejects_unknown_tasks() -> None:
    cur = SuccessBandCurriculum(make_tasks("a"))
    with pytest.raises(ValueError, match="'zzz'.*not built with"):
        cur.update(make_tasks("zzz")[0], EpisodeOutcome("zzz", True, 1, TerminationReason.SUCCESS))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"low": 0.9, "high": 0.1}, "low = 0.9 is above high = 0.1"),
        ({"sigma": 0.0}, "sigma"),
        ({"floor": 2.0}, "floor"),
        ({"group_by": "app"}, "group_by"),
        ({"bandwidth": 0.1}, "bandwidth"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SuccessBandCurriculum(make_tasks("a"), **kwargs)


def test_built_by_name() -> None:
    cur = build_component(
        "curriculum", ComponentSpec(name="success_band", kwargs={"low": 0.3}), tasks=make_tasks("a"), seed=0
    )
    assert isinstance(cur, SuccessBandCurriculum) and cur.config.low == 0.3
