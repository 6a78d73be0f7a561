"""Count-based novelty for exploration: how new a screen is, and how new an action's outcome is
expected to be.

A screen visited ``n`` times has novelty ``1 / sqrt(n + 1)``: 1 for a screen never seen, 0.71
after one visit, 0.5 after three (the count-based exploration bonus of Strehl & Littman 2008 and
Bellemare et al. 2016, with the ``+ 1`` so a screen never seen is finite). An action tried from
a screen has led to some screens, each some number of times; its expected novelty is the
novelty of where it led, weighted by how often it led there. An action never tried from a
screen is scored as if it led to a screen never seen (:data:`UNTRIED`, the optimism that makes
an explorer try everything once).

    >>> novelty(0), novelty(3)
    (1.0, 0.5)
    >>> expected_novelty({"list": 3, "detail": 1}, {"list": 3, "detail": 0})  # (3 * 0.5 + 1 * 1.0) / 4
    0.625
    >>> expected_novelty({}, {"list": 3}) == UNTRIED
    True
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import TypeVar

__all__ = ["UNTRIED", "expected_novelty", "novelty"]

Screen = TypeVar("Screen", bound=Hashable)

UNTRIED = 1.0
"""The score of an action never tried from a screen: :func:`novelty` of a screen never seen."""


def novelty(visits: int) -> float:
    """``1 / sqrt(visits + 1)``: how new a screen visited ``visits`` times is (1 for a screen never seen)."""
    if visits < 0:
        raise ValueError(f"visits must be >= 0, got {visits}")
    return 1.0 / math.sqrt(visits + 1)


def expected_novelty(outcomes: Mapping[Screen, int], visits: Mapping[Screen, int]) -> float:
    """The novelty an action is expected to lead to: ``sum_s c(s) * novelty(visits[s]) / sum_s c(s)``.

    Args:
        outcomes: the screens the action led to from one screen, each with how many times it
            did (empty: never tried, scored :data:`UNTRIED`).
        visits: how many times each screen was visited (a screen missing: never).
    """
    tried = sum(outcomes.values())
    if tried == 0:
        return UNTRIED
    return sum(count * novelty(visits.get(screen, 0)) for screen, count in outcomes.items()) / tried
