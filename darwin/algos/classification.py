"""Binary classification metrics with bootstrap confidence intervals (verifier calibration).

Pure functions of ``(predicted, actual)`` boolean arrays of shape ``(N,)``.

    >>> import numpy as np
    >>> pred = np.array([True, True, False, False, True])
    >>> gold = np.array([True, False, False, True, True])
    >>> m = binary_metrics(pred, gold)
    >>> (m.tp, m.fp, m.fn, m.tn), round(m.precision, 3), round(m.recall, 3), round(m.f1, 3)
    ((2, 1, 1, 1), 0.667, 0.667, 0.667)
    >>> best_threshold(np.array([0.9, 0.8, 0.3, 0.2]), np.array([True, True, False, True]))
    0.2
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BinaryMetrics", "Interval", "MetricsWithIntervals", "best_threshold", "binary_metrics", "bootstrap_metrics"]


@dataclass(frozen=True)
class BinaryMetrics:
    """Counts and rates; a rate with an empty denominator is ``nan``."""

    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def accuracy(self) -> float:
        return (self.tp + self.tn) / self.n if self.n else float("nan")

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else float("nan")

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else float("nan")

    @property
    def f1(self) -> float:
        denom = 2 * self.tp + self.fp + self.fn
        return 2 * self.tp / denom if denom else float("nan")


def binary_metrics(predicted: np.ndarray, actual: np.ndarray) -> BinaryMetrics:
    """Confusion counts of ``predicted`` against ``actual`` (both ``(N,)`` bool)."""
    p = np.asarray(predicted, dtype=bool)
    a = np.asarray(actual, dtype=bool)
    if p.shape != a.shape or p.ndim != 1:
        raise ValueError(f"predicted {p.shape} and actual {a.shape} must be equal 1-D shapes")
    return BinaryMetrics(tp=int(np.sum(p & a)), fp=int(np.sum(p & ~a)), fn=int(np.sum(~p & a)), tn=int(np.sum(~p & ~a)))


@dataclass(frozen=True)
class Interval:
    """A point estimate and its percentile-bootstrap interval."""

    value: float
    low: float
    high: float


@dataclass(frozen=True)
class MetricsWithIntervals:
    """Accuracy, precision, recall and F1 of one evaluation, each with a 95 % interval."""

    counts: BinaryMetrics
    accuracy: Interval
    precision: Interval
    recall: Interval
    f1: Interval


def bootstrap_metrics(
    predicted: np.ndarray,
    actual: np.ndarray,
    rng: np.random.Generator,
    *,
    resamples: int = 1000,
    level: float = 0.95,
    groups: np.ndarray | None = None,
) -> MetricsWithIntervals:
    """Metrics with percentile-bootstrap intervals over ``resamples`` resamples of the N examples
    (resamples where a rate is undefined are left out of that rate's interval).

    ``groups`` (shape ``(N,)``, any hashable labels, e.g. episode ids): resample whole groups
    instead of single examples (the cluster bootstrap). Screens of one episode are correlated
    (a verifier that misses one success screen of an episode tends to miss its neighbours), so
    resampling them independently makes the interval too narrow."""
    p = np.asarray(predicted, dtype=bool)
    a = np.asarray(actual, dtype=bool)
    point = binary_metrics(p, a)
    n = len(p)
    if groups is None:
        member = np.arange(n)
    else:
        g = np.asarray(groups)
        if g.shape != p.shape:
            raise ValueError(f"groups {g.shape} must have the shape of predicted {p.shape}")
        _, member = np.unique(g, return_inverse=True)
    n_groups = int(member.max()) + 1 if n else 0
    # confusion counts per group (G,), then per resample the sum over the drawn groups
    per_group = {
        name: np.bincount(member, weights=mask.astype(float), minlength=n_groups)
        for name, mask in (("tp", p & a), ("fp", p & ~a), ("fn", ~p & a), ("tn", ~p & ~a))
    }
    idx = rng.integers(0, n_groups, size=(resamples, n_groups)) if n else np.zeros((0, 0), dtype=int)
    tp, fp, fn, tn = (per_group[k][idx].sum(axis=1) for k in ("tp", "fp", "fn", "tn"))
    with np.errstate(invalid="ignore", divide="ignore"):
        samples = {
            "accuracy": (tp + tn) / (tp + fp + fn + tn),
            "precision": tp / (tp + fp),
            "recall": tp / (tp + fn),
            "f1": 2 * tp / (2 * tp + fp + fn),
        }
    lo_q, hi_q = 100 * (1 - level) / 2, 100 * (1 + level) / 2

    def interval(name: str) -> Interval:
        values = samples[name][np.isfinite(samples[name])] if n else np.array([])
        value = float(getattr(point, name))
        if values.size == 0:
            return Interval(value, float("nan"), float("nan"))
        return Interval(value, float(np.percentile(values, lo_q)), float(np.percentile(values, hi_q)))

    return MetricsWithIntervals(point, interval("accuracy"), interval("precision"), interval("recall"), interval("f1"))


def best_threshold(probabilities: np.ndarray, actual: np.ndarray, *, midpoint: bool = False) -> float:
    """The threshold ``t`` (one of the probabilities) whose decision ``p >= t`` has the best F1;
    ties go to the highest ``t`` (fewer false positives). ``0.5`` when there is no positive.

    ``midpoint``: instead of ``t`` itself, the middle (in log-odds) of the gap between ``t`` and
    the next lower probability. Every threshold in that gap makes the same decisions on these
    examples; ``t`` sits on its edge, so an unseen positive scored a hair below the lowest
    accepted one would be rejected, while the middle leaves a margin on both sides.

        >>> round(best_threshold(np.array([0.9, 0.7, 0.6]), np.array([True, True, False]), midpoint=True), 4)
        0.6517
    """
    probs = np.asarray(probabilities, dtype=float)
    a = np.asarray(actual, dtype=bool)
    if not a.any():
        return 0.5
    best, best_f1 = 0.5, -1.0
    candidates = np.unique(probs)[::-1]
    for t in candidates:
        f1 = binary_metrics(probs >= t, a).f1
        if f1 > best_f1:
            best, best_f1 = float(t), f1
    below = candidates[candidates < best]
    if not midpoint or below.size == 0:
        return best
    return float(_sigmoid((_logit(best) + _logit(float(below[0]))) / 2))


def _logit(p: float) -> float:
    q = min(max(p, 1e-12), 1 - 1e-12)  # probabilities of exactly 0 or 1 come from saturated sigmoids
    return float(np.log(q / (1 - q)))


def _sigmoid(x: float) -> float:
    return float(1 / (1 + np.exp(-x)))
