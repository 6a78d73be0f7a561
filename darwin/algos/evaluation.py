"""What an evaluation measures beyond a success rate: pass@k and paired differences.

Pure functions of success arrays; no state, the bootstrap's generator is passed in.

- :func:`pass_at_k`: the unbiased pass@k estimator (Chen et al. 2021, HumanEval): with ``n``
  samples of one task instance of which ``c`` succeed, ``1 - C(n - c, k) / C(n, k)``. RL that
  only sharpens a policy raises pass@1 and leaves pass@k at large k flat.
- :func:`success_summary`: greedy success, sampled success and pass@k over task instances.
- :func:`wilson_interval`: the 95% Wilson score interval of one success rate.
- :func:`paired_difference`: the mean difference of two variants measured on the same
  initial states, with a stratified percentile-bootstrap interval (strata: tasks, resampled
  within each, as in rliable's stratified bootstrap), and whether it is separated from zero.
- :func:`seed_mean_difference`: the mean over training seeds of each seed's paired difference,
  with a two-stage bootstrap interval (seeds resampled, then each drawn seed's pairs within its
  strata), so the interval holds the seed-to-seed spread as well as the evaluation's noise.

    >>> round(pass_at_k(n=4, c=1, k=2), 3)
    0.5
    >>> import numpy as np
    >>> d = paired_difference(np.array([1, 1, 0, 1]), np.array([0, 1, 0, 0]), np.random.default_rng(0))
    >>> d.difference.value, d.separated
    (0.5, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb, sqrt

import numpy as np

from darwin.algos.classification import Interval

__all__ = [
    "PairedDifference",
    "SuccessSummary",
    "paired_difference",
    "pass_at_k",
    "seed_mean_difference",
    "success_summary",
    "wilson_interval",
]

PASS_AT_K = (1, 2, 4, 8)
"""The k of every reported pass@k (MobileRL reports pass@1/2/4/8)."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """The probability that at least one of ``k`` samples, drawn without replacement from ``n``
    samples of which ``c`` succeeded, succeeds: ``1 - C(n - c, k) / C(n, k)``.

    Raises ``ValueError`` unless ``0 <= c <= n`` and ``1 <= k <= n``."""
    if not 0 <= c <= n:
        raise ValueError(f"successes c={c} must lie in 0..n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must lie in 1..n={n}: pass@{k} needs at least {k} samples per instance")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


@dataclass(frozen=True)
class PairedDifference:
    """Variant A against variant B on the same initial states."""

    mean_a: float
    mean_b: float
    difference: Interval
    """``mean_a - mean_b`` and its bootstrap interval."""
    pairs: int

    @property
    def separated(self) -> bool:
        """The interval excludes zero."""
        return self.difference.low > 0.0 or self.difference.high < 0.0


def paired_difference(
    a: np.ndarray,
    b: np.ndarray,
    rng: np.random.Generator,
    *,
    strata: np.ndarray | None = None,
    resamples: int = 2000,
    level: float = 0.95,
) -> PairedDifference:
    """The mean of ``a - b`` over pairs, with a percentile-bootstrap interval.

    Args:
        a, b: ``(N,)`` outcomes (success 0/1, or a per-instance rate such as pass@k) of the two
            variants; pair ``i`` is the same initial state (task, phone seed, sampling seed).
        rng: the bootstrap's generator.
        strata: ``(N,)`` labels (task ids): pairs are resampled within each stratum, so every
            resample keeps each task's share of the pairs.
        resamples: bootstrap resamples.
        level: the interval's coverage.
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size == 0:
        raise ValueError(f"a {x.shape} and b {y.shape} must be equal, non-empty 1-D shapes (one entry per pair)")
    diff = x - y
    means = _stratified_means(diff, _stratum_labels(strata, diff.shape), rng, resamples)
    return PairedDifference(
        float(x.mean()), float(y.mean()), _percentile_interval(float(diff.mean()), means, level), int(diff.size)
    )


def seed_mean_difference(
    seeds: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray | None]],
    rng: np.random.Generator,
    *,
    resamples: int = 2000,
    level: float = 0.95,
) -> PairedDifference:
    """The mean over training seeds of each seed's mean ``a - b``, with a two-stage
    percentile-bootstrap interval.

    A seed is one trained policy (and its baseline), measured on pairs of initial states as in
    :func:`paired_difference`. Each resample draws ``S`` seeds with replacement, then, for each
    drawn seed independently, its pairs within their strata; the statistic is the mean over the
    drawn seeds of their resampled mean differences. With one seed this is
    :func:`paired_difference`'s interval; with several it widens by how much the seeds disagree,
    which an interval over the pooled pairs alone would leave out.

    Args:
        seeds: ``S`` triples ``(a, b, strata)``: ``(N_s,)`` outcomes of the two variants in seed
            ``s`` (``N_s`` may differ between seeds) and ``(N_s,)`` labels (tasks) or ``None``.
        rng: the bootstrap's generator.
        resamples: bootstrap resamples.
        level: the interval's coverage.

    Returns the seeds' mean of ``mean(a)``, of ``mean(b)`` and of the difference (each seed
    weighs the same), and ``pairs`` summed over seeds.
    """
    if not seeds:
        raise ValueError("no seed given: pass one (a, b, strata) triple per trained seed")
    diffs, labels = [], []
    mean_a, mean_b, pairs = [], [], 0
    for number, (a, b, strata) in enumerate(seeds):
        x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if x.shape != y.shape or x.ndim != 1 or x.size == 0:
            raise ValueError(
                f"seed {number}: a {x.shape} and b {y.shape} must be equal, non-empty 1-D shapes (one entry per pair)"
            )
        diffs.append(x - y)
        labels.append(_stratum_labels(strata, x.shape))
        mean_a.append(float(x.mean()))
        mean_b.append(float(y.mean()))
        pairs += x.size
    count = len(diffs)
    # within[j, s]: seed s's resampled means for draw slot j, independent across slots, so a seed
    # drawn twice in one resample gets two independent resamples of its pairs
    within = np.stack(
        [
            np.stack([_stratified_means(d, lab, rng, resamples) for d, lab in zip(diffs, labels, strict=True)])
            for _ in range(count)
        ]
    )
    drawn = rng.integers(0, count, size=(resamples, count))
    columns = np.arange(resamples)
    means = np.mean([within[j, drawn[:, j], columns] for j in range(count)], axis=0)
    value = float(np.mean([d.mean() for d in diffs]))
    return PairedDifference(
        float(np.mean(mean_a)), float(np.mean(mean_b)), _percentile_interval(value, means, level), pairs
    )


def _stratum_labels(strata: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    """``strata`` as integer labels ``(N,)``, all zero for ``None``."""
    if strata is None:
        return np.zeros(shape, dtype=int)
    s = np.asarray(strata)
    if s.shape != shape:
        raise ValueError(f"strata {s.shape} must have the shape of a {shape}")
    _, labels = np.unique(s, return_inverse=True)
    return labels.reshape(shape)


def _stratified_means(diff: np.ndarray, labels: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """``(resamples,)`` means of ``diff`` ``(N,)``, each resampled with replacement within every
    stratum of ``labels`` ``(N,)`` (each stratum keeps its share of the pairs)."""
    totals = np.zeros(resamples)
    for stratum in np.unique(labels):
        members = diff[labels == stratum]
        drawn = rng.integers(0, members.size, size=(resamples, members.size))
        totals += members[drawn].sum(axis=1)
    return totals / diff.size


def _percentile_interval(value: float, means: np.ndarray, level: float) -> Interval:
    lo_q, hi_q = 100 * (1 - level) / 2, 100 * (1 + level) / 2
    return Interval(value, float(np.percentile(means, lo_q)), float(np.percentile(means, hi_q)))


@dataclass(frozen=True)
class SuccessSummary:
    """A policy's success over task instances (a task on one initial state).

    ``greedy``: the share of instances whose greedy episode succeeded; ``sampled``: the mean
    over instances of their sampled success rate (pass@1); ``pass_at[k]``: the mean over
    instances with at least ``k`` verified samples of the unbiased pass@k. ``None`` (or a
    missing k) where nothing was measured."""

    greedy: float | None
    sampled: float | None
    pass_at: dict[int, float]
    instances: int


def success_summary(
    greedy: Sequence[bool], samples: Sequence[tuple[int, int]], ks: Sequence[int] = PASS_AT_K
) -> SuccessSummary:
    """Greedy success, sampled success and pass@k.

    Args:
        greedy: one verified greedy outcome per instance that has one.
        samples: ``(n, c)`` per instance: verified sampled episodes and their successes
            (instances with ``n = 0`` are left out).
        ks: the pass@k to report; a k is reported where some instance has ``n >= k``.

    >>> s = success_summary([True, False], [(4, 1), (4, 4)])
    >>> s.greedy, s.sampled, s.pass_at[2], 8 in s.pass_at
    (0.5, 0.625, 0.75, False)
    """
    measured = [(n, c) for n, c in samples if n > 0]
    pass_at = {}
    for k in ks:
        rates = [pass_at_k(n, c, k) for n, c in measured if n >= k]
        if rates:
            pass_at[k] = float(np.mean(rates))
    return SuccessSummary(
        greedy=float(np.mean(greedy)) if len(greedy) else None,
        sampled=float(np.mean([c / n for n, c in measured])) if measured else None,
        pass_at=pass_at,
        instances=max(len(greedy), len(measured)),
    )


def wilson_interval(successes: int, episodes: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a success rate.

    >>> tuple(round(v, 3) for v in wilson_interval(5, 10))
    (0.237, 0.763)
    """
    if episodes < 1:
        raise ValueError("episodes must be >= 1")
    p = successes / episodes
    denom = 1 + z * z / episodes
    centre = (p + z * z / (2 * episodes)) / denom
    half = z * sqrt(p * (1 - p) / episodes + z * z / (4 * episodes * episodes)) / denom
    return centre - half, centre + half
