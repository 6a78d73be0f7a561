import math

import numpy as np
import pytest

from darwin.algos.classification import best_threshold, binary_metrics, bootstrap_metrics


def test_counts_and_rates_by_hand() -> None:
    pred = np.array([1, 1, 1, 0, 0, 0, 1, 0], bool)
    gold = np.array([1, 1, 0, 1, 0, 0, 1, 0], bool)
    m = binary_metrics(pred, gold)
    assert (m.tp, m.fp, m.fn, m.tn) == (3, 1, 1, 3)
    assert m.accuracy == 6 / 8 and m.precision == 3 / 4 and m.recall == 3 / 4 and m.f1 == 6 / 8


def test_undefined_rates_are_nan_not_zero() -> None:
    m = binary_metrics(np.zeros(3, bool), np.zeros(3, bool))
    assert m.accuracy == 1.0 and math.isnan(m.precision) and math.isnan(m.recall) and math.isnan(m.f1)


def test_shapes_must_match() -> None:
    with pytest.raises(ValueError, match="equal 1-D shapes"):
        binary_metrics(np.zeros(3, bool), np.zeros(4, bool))


def test_bootstrap_interval_brackets_the_point_and_shrinks_with_n() -> None:
    rng = np.random.default_rng(0)
    gold = rng.random(400) < 0.3
    pred = gold ^ (rng.random(400) < 0.1)  # 10 % of decisions flipped
    small = bootstrap_metrics(pred[:40], gold[:40], np.random.default_rng(1))
    large = bootstrap_metrics(pred, gold, np.random.default_rng(1))
    for m in (small, large):
        for interval in (m.accuracy, m.precision, m.recall, m.f1):
            assert interval.low <= interval.value <= interval.high
    assert (large.f1.high - large.f1.low) < (small.f1.high - small.f1.low)
    again = bootstrap_metrics(pred, gold, np.random.default_rng(1))
    assert again == large  # the caller's generator decides the resamples


def test_perfect_classifier_has_a_degenerate_interval() -> None:
    gold = np.array([True, False] * 10)
    m = bootstrap_metrics(gold, gold, np.random.default_rng(0), resamples=200)
    assert (m.f1.value, m.f1.low, m.f1.high) == (1.0, 1.0, 1.0)


def test_best_threshold_maximises_f1_and_prefers_precision_on_ties() -> None:
    probs = np.array([0.9, 0.7, 0.6, 0.4, 0.1])
    gold = np.array([True, True, False, False, False])
    assert best_threshold(probs, gold) == 0.7  # F1 1.0 at 0.7; 0.6 adds a false positive
    # 0.9 -> 1 tp, 1 fn: F1 2/3; 0.5 -> 2 tp, 2 fp: F1 2/3; the higher threshold wins the tie
    tie_probs = np.array([0.9, 0.5, 0.5, 0.5])
    tie_gold = np.array([True, True, False, False])
    f1_high = binary_metrics(tie_probs >= 0.9, tie_gold).f1
    f1_low = binary_metrics(tie_probs >= 0.5, tie_gold).f1
    assert f1_high == f1_low == pytest.approx(2 / 3)
    assert best_threshold(tie_probs, tie_gold) == 0.9
    assert best_threshold(np.array([0.2, 0.3]), np.array([False, False])) == 0.5


def test_one_group_resamples_to_itself_and_clustered_errors_widen_the_interval() -> None:
    pred = np.array([True, False, True, True])
    gold = np.array([True, True, False, True])
    # one episode: every group resample is the whole data, so the interval is the point
    single = bootstrap_metrics(pred, gold, np.random.default_rng(0), resamples=50, groups=np.zeros(4, int))
    assert single.f1.value == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    assert (single.f1.low, single.f1.high) == (single.f1.value, single.f1.value)
    # 20 episodes of 10 screens; 4 episodes are missed whole: errors come in clusters
    gold = np.ones(200, bool)
    pred = np.ones(200, bool)
    pred[:40] = False
    episodes = np.repeat(np.arange(20), 10)
    by_screen = bootstrap_metrics(pred, gold, np.random.default_rng(1))
    by_episode = bootstrap_metrics(pred, gold, np.random.default_rng(1), groups=episodes)
    assert by_screen.recall.value == by_episode.recall.value == 0.8
    assert (by_episode.recall.high - by_episode.recall.low) > 2 * (by_screen.recall.high - by_screen.recall.low)
    with pytest.raises(ValueError, match="groups"):
        bootstrap_metrics(pred, gold, np.random.default_rng(1), groups=episodes[:5])


def test_midpoint_threshold_sits_in_the_middle_of_the_gap_in_log_odds() -> None:
    probs = np.array([0.9, 0.7, 0.6, 0.1])
    gold = np.array([True, True, False, False])
    # F1 is best at t = 0.7; the next lower score is 0.6: logit 0.8473 and 0.4055, middle 0.6264
    t = best_threshold(probs, gold, midpoint=True)
    assert t == pytest.approx(1 / (1 + math.exp(-(math.log(0.7 / 0.3) + math.log(0.6 / 0.4)) / 2)))
    assert 0.6 < t < 0.7 and t == pytest.approx(0.6517, abs=1e-4)
    assert binary_metrics(probs >= t, gold) == binary_metrics(probs >= 0.7, gold)  # same decisions
    # nothing below the chosen threshold: it stays
    assert best_threshold(np.array([0.8, 0.9]), np.array([True, True]), midpoint=True) == 0.8
