"""Verifiers: rule checks over phone state, an LLM judge, and compositions of verifiers;
plug in your own as a subclass or a callable.

The interface is :class:`~darwin.verifiers.base.Verifier`; the rule checks are
:class:`~darwin.verifiers.rule.RuleVerifier`, the judge :class:`~darwin.verifiers.judge.llm_judge.LLMJudge`,
the composition :class:`~darwin.verifiers.composite.CompositeVerifier`. Import each name from
the module that holds it.
"""
