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
