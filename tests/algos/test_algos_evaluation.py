"""pass@k and the paired bootstrap against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from darwin.algos.evaluation import paired_difference, pass_at_k, seed_mean_difference


def test_pass_at_k_hand_computed() -> None:
    assert pass_at_k(n=4, c=1, k=2) == pytest.approx(1 - 3 / 6)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(n=5, c=2, k=3) == pytest.approx(1 - 1 / 10)  # 1 - C(3,3)/C(5,3)
    assert pass_at_k(n=8, c=3, k=1) == pytest.approx(3 / 8)  # pass@1 is the success rate
    assert pass_at_k(n=8, c=1, k=8) == 1.0 and pass_at_k(n=8, c=0, k=8) == 0.0
    assert pass_at_k(n=8, c=6, k=4) == 1.0  # fewer failures than k: some sample succeeds


def test_pass_at_k_rises_with_k_and_refuses_bad_counts() -> None:
    values = [pass_at_k(8, 2, k) for k in (1, 2, 4, 8)]
    assert values == sorted(values) and values[0] == pytest.approx(0.25)
    assert values[1] == pytest.approx(1 - 15 / 28)  # 1 - C(6,2)/C(8,2)
    with pytest.raises(ValueError, match="k=9 must lie in 1..n=8"):
        pass_at_k(8, 2, 9)
    with pytest.raises(ValueError, match="successes c=9"):
        pass_at_k(8, 9, 1)


def test_paired_difference_hand_computed() -> None:
    rng = np.random.default_rng(0)
    same = paired_difference(np.array([1, 0, 1]), np.array([1, 0, 1]), rng)
    assert (same.difference.value, same.difference.low, same.difference.high, same.separated) == (0.0, 0.0, 0.0, False)
    better = paired_difference(np.ones(4), np.zeros(4), rng)
    assert (better.difference.low, better.difference.high, better.separated) == (1.0, 1.0, True)
    assert (better.mean_a, better.mean_b, better.pairs) == (1.0, 0.0, 4)
    # differences [1, 0, 0, 0]: mean 0.25; a resample that draws no 1 has mean 0, and one of all
    # four 1s is the upper bound, so the interval is [0, x] with x <= 1: not separated
    one = paired_difference(np.array([1, 0, 0, 0]), np.zeros(4), rng)
    assert one.difference.value == 0.25 and one.difference.low == 0.0 and one.difference.high <= 1.0
    assert not one.separated


def test_strata_keep_each_tasks_share() -> None:
    # Task "x": A always wins by 1; task "y": no difference. Resampling within tasks keeps two
    # pairs of x in every resample, so every resampled mean is exactly (1 + 1 + 0 + 0) / 4.
    a, b = np.array([1, 1, 0, 0]), np.array([0, 0, 0, 0])
    d = paired_difference(a, b, np.random.default_rng(1), strata=np.array(["x", "x", "y", "y"]))
    assert (d.difference.value, d.difference.low, d.difference.high) == (0.5, 0.5, 0.5) and d.separated
    unstratified = paired_difference(a, b, np.random.default_rng(1))
    assert unstratified.difference.low < 0.5 < unstratified.difference.high


def test_paired_difference_refuses_unpaired_input() -> None:
    with pytest.raises(ValueError, match="one entry per pair"):
        paired_difference(np.ones(3), np.ones(4), np.random.default_rng(0))
    with pytest.raises(ValueError, match="strata"):
        paired_difference(np.ones(3), np.ones(3), np.random.default_rng(0), strata=np.array([1, 2]))


def test_success_summary_hand_computed() -> None:
    from darwin.algos.evaluation import success_summary

    # two instances: 1 of 4 and 4 of 4 sampled successes; greedy fails on the first
    s = success_summary([False, True], [(4, 1), (4, 4), (0, 0)])
    assert (s.greedy, s.sampled, s.instances) == (0.5, 0.625, 2)
    assert s.pass_at == pytest.approx({1: 0.625, 2: (0.5 + 1) / 2, 4: 1.0})  # n = 4: no pass@8
    empty = success_summary([], [])
    assert (empty.greedy, empty.sampled, empty.pass_at) == (None, None, {})


def test_seed_mean_difference_hand_computed() -> None:
    # One seed: the point estimate and interval are paired_difference's (same draws from the same rng state).
    a, b, strata = np.array([1, 1, 0, 0]), np.array([0, 0, 0, 1]), np.array(["x", "x", "y", "y"])
    alone = paired_difference(a, b, np.random.default_rng(3), strata=strata)
    one = seed_mean_difference([(a, b, strata)], np.random.default_rng(3))
    assert one.difference == alone.difference and one.difference.value == 0.25
    assert (one.mean_a, one.mean_b, one.pairs) == (0.5, 0.25, 4)
    # Two seeds that each measure without noise: seed 1 wins every pair (+1), seed 2 none (0).
    # Resampled seeds are {1,1}, {1,2}, {2,1} or {2,2} with means 1, 0.5, 0.5, 0: the 2.5th
    # percentile is 0 and the 97.5th is 1, where pooling the 8 pairs within tasks alone would
    # give the point interval [0.5, 0.5].
    seeds = [(np.ones(4), np.zeros(4), None), (np.zeros(4), np.zeros(4), None)]
    two = seed_mean_difference(seeds, np.random.default_rng(0))
    assert (two.difference.value, two.difference.low, two.difference.high) == (0.5, 0.0, 1.0)
    assert (two.mean_a, two.mean_b, two.pairs, two.separated) == (0.5, 0.0, 8, False)
    # Seeds that agree: the interval stays a point, and seeds of unequal sizes weigh the same.
    agree = seed_mean_difference(
        [(np.ones(2), np.zeros(2), None), (np.ones(6), np.zeros(6), None)], np.random.default_rng(0)
    )
    assert (agree.difference.low, agree.difference.high, agree.separated) == (1.0, 1.0, True)
    uneven = seed_mean_difference(
        [(np.ones(2), np.zeros(2), None), (np.zeros(6), np.zeros(6), None)], np.random.default_rng(0)
    )
    assert uneven.difference.value == 0.5


def test_seed_mean_difference_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="no seed given"):
        seed_mean_difference([], np.random.default_rng(0))
    with pytest.raises(ValueError, match="seed 1: a"):
        seed_mean_difference([(np.ones(2), np.ones(2), None), (np.ones(2), np.ones(3), None)], np.random.default_rng(0))
    with pytest.raises(ValueError, match="strata"):
        seed_mean_difference([(np.ones(2), np.ones(2), np.array([1]))], np.random.default_rng(0))
