"""Verifiers: rule checks over phone state; plug in your own as a subclass or a callable."""

from darwin.verifiers.base import Verdict, VerificationRequest, Verifier, as_verifier
from darwin.verifiers.rule import RuleVerifier

__all__ = ["RuleVerifier", "Verdict", "VerificationRequest", "Verifier", "as_verifier"]
