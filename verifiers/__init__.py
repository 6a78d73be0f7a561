"""Verifiers: rule checks over phone state, an LLM judge, a learned verifier, and compositions of
verifiers; plug in your own as a subclass or a callable.

The interface is :class:`Verifier`; the rule checks are :class:`RuleVerifier`, the judge
:class:`LLMJudge`, the learned verifier :class:`LearnedVerifier`, the composition
:class:`CompositeVerifier`, step-level rewards from demonstrations :class:`DemoStepVerifier`.
The judge's litellm and the learned verifier's torch load only when their names are used:

    >>> from darwin.verifiers import RuleVerifier, Verifier
    >>> issubclass(RuleVerifier, Verifier), RuleVerifier().kind
    (True, 'rule')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from darwin.lazy_exports import lazy_exports

__all__ = [
    "CompositeVerifier",
    "DemoStepConfig",
    "DemoStepVerifier",
    "LLMJudge",
    "LLMJudgeConfig",
    "LearnedVerifier",
    "RuleVerifier",
    "ScreenTextVerifier",
    "VerificationRequest",
    "Verifier",
    "as_verifier",
]

if TYPE_CHECKING:
    from darwin.verifiers.base import VerificationRequest, Verifier, as_verifier
    from darwin.verifiers.composite import CompositeVerifier
    from darwin.verifiers.demo_steps import DemoStepConfig, DemoStepVerifier
    from darwin.verifiers.judge.llm_judge import LLMJudge, LLMJudgeConfig
    from darwin.verifiers.learned.model import LearnedVerifier
    from darwin.verifiers.rule import RuleVerifier
    from darwin.verifiers.screen_text import ScreenTextVerifier
else:  # hidden from type checkers, so that a misspelt name is their error
    # public name -> the module that holds it, imported on first use (darwin.lazy_exports)
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "CompositeVerifier": "darwin.verifiers.composite",
            "DemoStepConfig": "darwin.verifiers.demo_steps",
            "DemoStepVerifier": "darwin.verifiers.demo_steps",
            "LLMJudge": "darwin.verifiers.judge.llm_judge",
            "LLMJudgeConfig": "darwin.verifiers.judge.llm_judge",
            "LearnedVerifier": "darwin.verifiers.learned.model",
            "RuleVerifier": "darwin.verifiers.rule",
            "ScreenTextVerifier": "darwin.verifiers.screen_text",
            "VerificationRequest": "darwin.verifiers.base",
            "Verifier": "darwin.verifiers.base",
            "as_verifier": "darwin.verifiers.base",
        },
    )
