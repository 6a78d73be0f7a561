"""A training run, from its config to its report: everything ``darwin run`` does.

One module per job, each importing only the ones before it:

- :mod:`darwin.run.config`: the experiment's schemas (:class:`~darwin.run.config.ExperimentConfig`);
  nothing in it builds or runs;
- :mod:`darwin.run.load`: experiment files and ``--set`` overrides;
- :mod:`darwin.run.build`: the one place that picks and makes implementations from a config;
- :mod:`darwin.run.recipe`: :class:`~darwin.run.recipe.TrainingRecipe`, ``run_experiment`` and
  the experiment's paired evaluation;
- :mod:`darwin.run.report`, :mod:`darwin.run.cost`, :mod:`darwin.run.verification_watch`,
  :mod:`darwin.run.preflight`, :mod:`darwin.run.figures`: what a run writes, costs, watches,
  checks before it starts, and draws.

Nothing below ``darwin.run`` imports it (``tests/test_import_graph.py``).
"""
