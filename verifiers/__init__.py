"""Verifiers: rule checks over phone state, an LLM judge, and compositions of verifiers;
plug in your own as a subclass or a callable.

``LLMJudge``/``LLMJudgeConfig`` (:mod:`darwin.verifiers.judge.llm_judge`) and
``CompositeVerifier`` (:mod:`darwin.verifiers.composite`) are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from darwin.types import Verdict, VerdictUsage
from darwin.verifiers.base import VerificationRequest, Verifier, as_verifier
from darwin.verifiers.rule import RuleVerifier

if TYPE_CHECKING:
    from darwin.verifiers.composite import CompositeVerifier
    from darwin.verifiers.judge.llm_judge import LLMJudge, LLMJudgeConfig

_LAZY = {
    "CompositeVerifier": "darwin.verifiers.composite",
    "LLMJudge": "darwin.verifiers.judge.llm_judge",
    "LLMJudgeConfig": "darwin.verifiers.judge.llm_judge",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CompositeVerifier",
    "LLMJudge",
    "LLMJudgeConfig",
    "RuleVerifier",
    "Verdict",
    "VerdictUsage",
    "VerificationRequest",
    "Verifier",
    "as_verifier",
]
