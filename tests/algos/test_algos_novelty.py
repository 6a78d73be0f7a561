"""Count-based novelty (darwin.algos.novelty) against values computed by hand."""

from __future__ import annotations

import math

import pytest

from darwin.algos.novelty import UNTRIED, expected_novelty, novelty


def test_novelty_is_one_over_the_root_of_visits_plus_one() -> None:
    assert novelty(0) == 1.0  # a screen never seen
    assert novelty(1) == pytest.approx(1 / math.sqrt(2))
    assert novelty(3) == 0.5
    assert novelty(8) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="visits must be >= 0"):
        novelty(-1)


def test_expected_novelty_weights_each_outcome_by_how_often_it_followed() -> None:
    # led to "a" twice (seen 3 times: 1/2), to "b" once (seen 8 times: 1/3), to "c" once (never counted: 1)
    outcomes = {"a": 2, "b": 1, "c": 1}
    visits = {"a": 3, "b": 8}
    assert expected_novelty(outcomes, visits) == pytest.approx((2 * 0.5 + 1 / 3 + 1.0) / 4)  # 0.58333...
    assert expected_novelty({"a": 1}, {"a": 3}) == 0.5


def test_an_action_never_tried_scores_as_a_screen_never_seen() -> None:
    assert expected_novelty({}, {"a": 5}) == UNTRIED == novelty(0)
    # anything tried and seen scores below it: the explorer tries what it has not tried first
    assert expected_novelty({"a": 1}, {"a": 1}) < UNTRIED
