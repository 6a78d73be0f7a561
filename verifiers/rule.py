"""Rule verification (self-evolution stage 1): programmatic predicates over phone state.

The predicates (:mod:`darwin.predicates`) read the phone's probed JSON state, so the rule
judges SimPhones and ADB or Ray phones with a state probe alike.
"""

from __future__ import annotations

from darwin.predicates import StateCannotDecide, resolve
from darwin.types import Verdict
from darwin.verifiers.base import VerificationRequest, Verifier


class RuleVerifier(Verifier):
    """Evaluates the phase's registered predicate on the phone's probed state.

    Phones without a state probe give ``success=None`` (unverified), never a failure; so does
    a goal the state cannot decide (``judge.goal``: a composite ``fallback`` then asks the judge).
    """

    kind = "rule"

    @property
    def cheap(self) -> bool:
        return True

    async def verify(self, request: VerificationRequest) -> Verdict:
        if request.final_state is None:
            return Verdict(success=None, reason="the phone has no state probe; use an LLM judge")
        pred, params = resolve(request.spec, request.task.id)
        try:
            check = pred.fn(request.final_state, params)
        except StateCannotDecide as exc:
            return Verdict(success=None, reason=f"unverified: {exc}")
        return Verdict(
            success=check.success, reason=f"{request.spec.predicate}: {'met' if check.success else 'not met'}"
        )
