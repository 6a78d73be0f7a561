"""The LLM judge (self-evolution stage 2): the verifier, its calibration, its CLI.

- :mod:`~darwin.verifiers.judge.llm_judge`: :class:`LLMJudge`, a verifier that asks a
  multimodal model through LiteLLM whether a goal was met (presets, prompts, answers);
- :mod:`~darwin.verifiers.judge.calibration`: labelled episodes, resumable judging of them,
  and the metrics with intervals (``darwin judge calibrate`` / ``review``);
- :mod:`~darwin.cli.judge`: the ``darwin judge`` command group.

"""
