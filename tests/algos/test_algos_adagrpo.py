"""MobileRL's shortest-path reward adjustment and negative pruning, with hand-computed values."""

from __future__ import annotations

import doctest
import importlib
import math
import random

import pytest

from darwin.algos.adagrpo import negative_pruning_keep, shortest_path_adjusted_rewards

# --------------------------------------------------------------------------------------------
# Shortest-path adjustment by hand: r' = r - max(L - L_min, 0) / (2 L) for successes.
#   group "g": successes of length 3, 5, 6 (L_min = 3), a failure of length 2 (shorter than
#              L_min: failures never set L_min nor get a penalty), a success with reward 0.9
#              and length 4.
#     L=3: 1 - 0 = 1;  L=5: 1 - 2/10 = 0.8;  L=6: 1 - 3/12 = 0.75;  L=4: 0.9 - 1/8 = 0.775
#   group "h": no success -> unchanged (0, -0.1).
#   group "k": one success of length 7 -> it is the shortest -> unchanged (1).
# --------------------------------------------------------------------------------------------


def test_shortest_path_adjustment_by_hand():
    adjusted = shortest_path_adjusted_rewards(
        rewards=[1.0, 0.0, 1.0, 0.0, 1.0, -0.1, 0.9, 1.0, 1.0],
        lengths=[5, 2, 3, 4, 6, 9, 4, 7, 3],
        successes=[True, False, True, False, True, False, True, True, True],
        group_ids=["g", "g", "g", "h", "g", "h", "g", "k", "g"],
    )
    expected = [0.8, 0.0, 1.0, 0.0, 0.75, -0.1, 0.775, 1.0, 1.0]
    assert adjusted == pytest.approx(expected, abs=1e-12)


def test_shortest_path_penalty_stays_below_one_half():
    # The longest possible success against L_min = 1: penalty (L - 1) / (2L) < 1/2.
    adjusted = shortest_path_adjusted_rewards([1.0, 1.0], [1, 1000], [True, True], ["g", "g"])
    assert adjusted == pytest.approx([1.0, 1.0 - 999 / 2000])
    assert adjusted[1] > 0.5


def test_shortest_path_returns_floats_and_accepts_any_hashable_group():
    adjusted = shortest_path_adjusted_rewards([1, 0], [2, 4], [True, False], [(1, "task"), (1, "task")])
    assert adjusted == [1.0, 0.0] and all(isinstance(r, float) for r in adjusted)
    assert shortest_path_adjusted_rewards([], [], [], []) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lengths": [2]}, "one entry per trajectory.*lengths=1"),
        (
            {"lengths": [2, 0]},
            r"lengths\[1\] is 0; every trajectory length must be an integer >= 1",
        ),
        ({"lengths": [2, 2.5]}, r"lengths\[1\] is 2.5"),
        ({"group_ids": ["g"]}, "group_ids=1"),
    ],
)
def test_shortest_path_errors(kwargs, message):
    args = {
        "rewards": [1.0, 0.0],
        "lengths": [2, 3],
        "successes": [True, False],
        "group_ids": ["g", "g"],
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        shortest_path_adjusted_rewards(**args)


# --------------------------------------------------------------------------------------------
# Negative pruning.
# --------------------------------------------------------------------------------------------


def test_all_negative_groups_are_muted_and_positives_kept():
    successes = [False, True, False, False, False]
    groups = ["dead", "ok", "dead", "ok", "dead"]
    keep = negative_pruning_keep(successes, groups, rng=random.Random(0))
    # "dead": no success -> muted; "ok": 1 positive, 1 negative <= cap 2 -> kept
    assert keep == [False, True, False, True, False]
    keep = negative_pruning_keep(successes, groups, mute_all_negative_groups=False, rng=random.Random(0))
    assert keep == [True] * 5


def test_cap_on_negatives_per_positive():
    # one positive (row 0) and five negatives (rows 1-5): cap floor(2 * 1) = 2
    successes = [True, False, False, False, False, False]
    keep = negative_pruning_keep(successes, ["g"] * 6, rng=random.Random(3))
    assert keep[0] is True
    assert sum(keep[1:]) == 2
    # the kept negatives are rng.sample(negatives, cap) with the given rng
    chosen = set(random.Random(3).sample([1, 2, 3, 4, 5], 2))
    assert keep == [True] + [i in chosen for i in range(1, 6)]


@pytest.mark.parametrize(
    ("ratio", "positives", "negatives", "kept_negatives"),
    [
        (2.0, 1, 5, 2),
        (1.5, 3, 6, 4),  # floor(4.5)
        (1.5, 3, 4, 4),  # under the cap: all kept
        (0.0, 2, 3, 0),
        (math.inf, 1, 9, 9),
        (0.5, 1, 3, 0),  # floor(0.5)
    ],
)
def test_cap_counts(ratio, positives, negatives, kept_negatives):
    successes = [True] * positives + [False] * negatives
    keep = negative_pruning_keep(
        successes, ["g"] * len(successes), max_negatives_per_positive=ratio, rng=random.Random(1)
    )
    assert keep[:positives] == [True] * positives
    assert sum(keep[positives:]) == kept_negatives


def test_groups_are_independent_and_rng_drawn_only_when_pruning():
    # group a: 1 positive, 2 negatives (at the cap, no draw); group b: 2 positives, 1 negative
    successes = [True, False, False, True, True, False]
    groups = ["a", "a", "a", "b", "b", "b"]
    rng = random.Random(5)
    before = rng.getstate()
    assert negative_pruning_keep(successes, groups, rng=rng) == [True] * 6
    assert rng.getstate() == before


def test_pruning_is_deterministic_given_the_rng_and_every_negative_can_be_kept():
    successes = [True] + [False] * 6
    groups = ["g"] * 7
    first = negative_pruning_keep(successes, groups, rng=random.Random(11))
    assert negative_pruning_keep(successes, groups, rng=random.Random(11)) == first
    ever_kept = [False] * 7
    for seed in range(200):
        for i, kept in enumerate(negative_pruning_keep(successes, groups, rng=random.Random(seed))):
            ever_kept[i] = ever_kept[i] or kept
    assert all(ever_kept)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"group_ids": ["g"]}, "one entry per trajectory.*successes=2, group_ids=1"),
        ({"max_negatives_per_positive": -1.0}, "max_negatives_per_positive must be >= 0"),
        ({"max_negatives_per_positive": math.nan}, "max_negatives_per_positive must be >= 0"),
    ],
)
def test_pruning_errors(kwargs, message):
    args = {"successes": [True, False], "group_ids": ["g", "g"], "rng": random.Random(0)}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        negative_pruning_keep(**args)


def test_module_doctest():
    module = importlib.import_module("darwin.algos.adagrpo")
    assert doctest.testmod(module).failed == 0
