"""Learned verification (self-evolution stage 3): the model, its data, its training, its CLI.

- :mod:`~darwin.verifiers.learned.model`: :class:`SuccessClassifier` (the agent's backbone with
  a scalar head) and :class:`LearnedVerifier`, the verifier that serves it;
- :mod:`~darwin.verifiers.learned.data`: labelled screens from run databases, the judge's
  results and the SimPhone oracle, with splits;
- :mod:`~darwin.verifiers.learned.training`: fitting, the decision threshold, the metrics;
- :mod:`~darwin.cli.verifier`: the ``darwin verifier`` command group.

The metrics' maths (intervals, bootstrap) is :mod:`darwin.algos.classification`, shared with
the judge's calibration.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from darwin.verifiers.learned.model import LearnedVerifier, SuccessClassifier, load_classifier

__all__ = ["LearnedVerifier", "SuccessClassifier", "load_classifier"]


def __getattr__(name: str) -> Any:  # torch and transformers load on first use
    if name in __all__:
        return getattr(importlib.import_module("darwin.verifiers.learned.model"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
