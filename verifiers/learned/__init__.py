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
