"""The LLM judge (self-evolution stage 2): the verifier, its calibration, its CLI.

- :mod:`~darwin.verifiers.judge.llm_judge`: :class:`LLMJudge`, a verifier that asks a
  multimodal model through LiteLLM whether a goal was met (presets, prompts, answers);
- :mod:`~darwin.verifiers.judge.calibration`: labelled episodes, resumable judging of them,
  and the metrics with intervals (``darwin judge calibrate`` / ``review``);
- :mod:`~darwin.cli.judge`: the ``darwin judge`` command group.

``from darwin.verifiers.judge import LLMJudge`` imports the verifier on first use (LiteLLM is
heavy), as ``darwin.verifiers`` does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from darwin.verifiers.judge.llm_judge import LLMJudge, LLMJudgeConfig

__all__ = ["LLMJudge", "LLMJudgeConfig"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("darwin.verifiers.judge.llm_judge"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
