"""Self-evolution on apps never shown (issue 45): explore an app with no task, then turn the
states reached into tasks (hindsight).

- :mod:`darwin.hindsight.exploration`: an actor (the random agent by default) plays an app
  with no goal; every state it reached is recorded (:func:`~darwin.hindsight.exploration.explore`).
- :mod:`darwin.hindsight.novelty`: :class:`~darwin.hindsight.novelty.NoveltyExplorer`, any actor's
  proposals picked by a count-based novelty bonus over the screens seen.
- :mod:`darwin.hindsight.records`: explorations stored in the run database as episodes, and read back.
- :mod:`darwin.hindsight.base`: the ``task_synthesizer`` component kind
  (:class:`~darwin.hindsight.base.TaskSynthesizer`) and its output, a task with the explorer's
  actions as its demonstration, and the filters any synthesiser's output may pass through.
- :mod:`darwin.hindsight.synthesizer`: the built-in ``hindsight`` synthesiser: one
  ``state.equals`` rule task per state path the explorer changed.
- :mod:`darwin.hindsight.describer`: goal text from phrase rules per state path, the stand-in
  for a model describer; it never reads the templates' wording.
- :mod:`darwin.hindsight.model_describer`: goal text from the screens before and after, by a
  model through LiteLLM, its reply read strictly.
- :mod:`darwin.hindsight.model_synthesizer`: the built-in ``model_hindsight`` synthesiser, for
  phones without a JSON state: the exploration cut every ``stride`` actions, each cut described
  by the model, each task verified by the LLM judge's majority vote (``judge.goal``).
- :mod:`darwin.hindsight.leakage`: refuses training data from a split's held-out templates and apps.
- :mod:`darwin.hindsight.coverage`: the share of human-written goals (a split's held-out
  templates) whose verifier held in some explored state.

See docs/self-evolution.md.
"""
