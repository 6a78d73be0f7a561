"""Verifiers combined: rule where a predicate can be checked, a judge elsewhere; or two
verifiers side by side with their disagreements logged and counted.

Modes (``CompositeVerifier(verifiers, mode=...)``):

- ``"fallback"``: ask the verifiers in order; the first verified verdict (``success`` not
  ``None``) decides. ``["rule", "llm_judge"]`` uses the rule check wherever the phone has a
  state probe (SimPhone) and the judge on phones without one (real and cloud phones), and
  never pays for a judge where the rule decides.
- ``"audit"``: the first verifier decides; every other one is asked too, and each
  disagreement is logged (warning) and counted in :attr:`CompositeVerifier.stats` and in
  the verdict's reason: a judge calibrated on the fly against the rule during a run.
- ``"consensus"``: every verifier is asked; the verdict stands only when all are verified
  and agree, otherwise it is unverified (and counted): unverified phases are never trained
  on as successes or failures.

The composite is ``cheap`` (checked after every step) only when all its members are; with
an LLM judge inside, it is asked only when a phase ends.

    >>> import asyncio
    >>> from darwin.verifiers.base import Verdict, as_verifier
    >>> no_state = as_verifier(lambda r: Verdict(success=None, reason="no probe"), kind="rule")
    >>> judge = as_verifier(lambda r: Verdict(success=True, reason="looks done"), kind="judge")
    >>> both = CompositeVerifier([no_state, judge], mode="fallback")
    >>> verdict = asyncio.run(both.verify(None))
    >>> verdict.success, verdict.reason
    (True, '[judge] looks done')
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from PIL import Image

from darwin.types import Verdict, VerdictUsage
from darwin.verifiers.base import VerificationRequest, Verifier

if TYPE_CHECKING:
    from darwin.components import ComponentSpec

logger = logging.getLogger(__name__)

__all__ = ["AuditNote", "CompositeStats", "CompositeVerifier", "parse_audit"]

Mode = Literal["fallback", "audit", "consensus"]

LOUD_DISAGREEMENTS = 10
"""Disagreements logged as warnings before the rest go to info level."""


_AUDIT = re.compile(
    r"^\[(?P<primary>[\w.:-]+)\] .*\((?:disagreement; )?audit: (?P<auditor>[\w.:-]+): (?P<verdict>yes|no|unverified)\b"
)


@dataclass(frozen=True)
class AuditNote:
    """What an audit-mode composite's stored reason says: the deciding verifier's kind and the
    first auditor's kind and verdict (``None``: the auditor could not verify)."""

    primary: str
    auditor: str
    auditor_success: bool | None


def parse_audit(reason: str) -> AuditNote | None:
    """The audit in a verdict reason written by :class:`CompositeVerifier` in ``"audit"`` mode
    (``None`` for any other reason). A run database keeps only the composite's verdict, so this
    is how the auditor's verdict (e.g. the rule's, the ground truth on SimPhone) is read back:
    by ``darwin verifier audit`` and by ``darwin verifier data --from-run --verifier-kind rule``.

        >>> parse_audit("[learned] p=0.97 (disagreement; audit: rule: no (clock.alarm: not set))")
        AuditNote(primary='learned', auditor='rule', auditor_success=False)
        >>> parse_audit("[rule] met") is None
        True
    """
    match = _AUDIT.match(reason)
    if match is None:
        return None
    word = match["verdict"]
    return AuditNote(match["primary"], match["auditor"], None if word == "unverified" else word == "yes")


@dataclass
class CompositeStats:
    """Counts of a composite's verdicts (thread-safe to read; updated under a lock)."""

    verdicts: int = 0
    decided_by: Counter[str] = field(default_factory=Counter)
    """Which member gave each verified verdict (fallback, audit), by kind."""
    compared: int = 0
    """Phases on which at least two members gave a verified verdict."""
    disagreements: int = 0
    unverified: int = 0

    @property
    def agreement(self) -> float | None:
        """Share of compared phases on which every verified member agreed."""
        return None if self.compared == 0 else 1.0 - self.disagreements / self.compared


class CompositeVerifier(Verifier):
    """Several verifiers as one (see the module docs for the modes).

    Args:
        verifiers: two or more :class:`~darwin.verifiers.base.Verifier` objects, built-in
            names (``"rule"``, ``"llm_judge"``), or component specs as dicts
            (``{"name": "llm_judge", "kwargs": {"preset": "marked", "llm": {...}}}``).
        mode: ``"fallback"``, ``"audit"`` or ``"consensus"``.
    """

    kind = "composite"

    def __init__(self, verifiers: Sequence[Verifier | str | Mapping[str, Any]], mode: Mode = "fallback") -> None:
        _check_shape(verifiers, mode)
        self.verifiers = [_build(v) for v in verifiers]
        self.mode: Mode = mode
        self.stats = CompositeStats()
        self._lock = threading.Lock()

    @classmethod
    def check_arguments(cls, verifiers: Sequence[Verifier | str | Mapping[str, Any]], mode: Mode = "fallback") -> None:
        """The mode and every member, each checked as its own component, none built (``--dry-run``)."""
        from darwin.components import check_component

        _check_shape(verifiers, mode)
        for spec in verifiers:
            if not isinstance(spec, Verifier):
                check_component("verifier", _spec(spec))

    def close(self) -> None:
        """Close every member."""
        for verifier in self.verifiers:
            verifier.close()

    @property
    def cheap(self) -> bool:
        return all(v.cheap for v in self.verifiers)

    @property
    def reads_screen(self) -> bool:
        return any(v.reads_screen for v in self.verifiers)

    @property
    def screen_size(self) -> tuple[int, int] | None:
        """The members' common screen size; ``None`` (full resolution) when they differ
        (each member then gets the screen scaled to its own size)."""
        sizes = {v.screen_size for v in self.verifiers if v.reads_screen}
        return sizes.pop() if len(sizes) == 1 else None

    async def verify(self, request: VerificationRequest) -> Verdict:
        if self.mode == "fallback":
            return await self._fallback(request)
        verdicts = list(await asyncio.gather(*(self._ask(v, request) for v in self.verifiers)))
        return self._audit(verdicts) if self.mode == "audit" else self._consensus(verdicts)

    async def _ask(self, verifier: Verifier, request: VerificationRequest) -> Verdict:
        size = verifier.screen_size
        shot = None if request is None else request.final_screenshot
        if shot is not None and size is not None and (shot.shape[1], shot.shape[0]) != tuple(size):
            resized = np.asarray(Image.fromarray(shot).resize(size, Image.Resampling.BILINEAR), dtype=np.uint8)
            request = VerificationRequest(
                task=request.task,
                phase=request.phase,
                instruction=request.instruction,
                spec=request.spec,
                transitions=request.transitions,
                final_state=request.final_state,
                final_screenshot=resized,
            )
        return await verifier.verify(request)

    async def _fallback(self, request: VerificationRequest) -> Verdict:
        usage: VerdictUsage | None = None
        causes: list[str] = []
        for verifier in self.verifiers:
            verdict = await self._ask(verifier, request)
            usage = _add(usage, verdict.usage)
            if verdict.success is not None:
                self._count(decided=verifier.kind)
                return Verdict(
                    success=verdict.success,
                    reward=verdict.reward,
                    reason=f"[{verifier.kind}] {verdict.reason}",
                    usage=usage,
                )
            causes.append(f"[{verifier.kind}] {verdict.reason}")
        self._count(unverified=True)
        return Verdict(success=None, reason="unverified by every verifier: " + "; ".join(causes), usage=usage)

    def _audit(self, verdicts: list[Verdict]) -> Verdict:
        primary, kinds = verdicts[0], [v.kind for v in self.verifiers]
        usage = _sum_usage(verdicts)
        notes = [f"{kind}: {_word(v.success)} ({v.reason})" for kind, v in zip(kinds[1:], verdicts[1:], strict=True)]
        disagree = _disagree(verdicts)
        if disagree:
            self._log_disagreement("; ".join(f"{k}={_word(v.success)}" for k, v in zip(kinds, verdicts, strict=True)))
        self._count(
            decided=kinds[0] if primary.success is not None else None,
            unverified=primary.success is None,
            compared=sum(v.success is not None for v in verdicts) >= 2,
            disagreement=disagree,
        )
        audit = ("disagreement; " if disagree else "") + "audit: " + "; ".join(notes)
        return Verdict(
            success=primary.success,
            reward=primary.reward,
            reason=f"[{kinds[0]}] {primary.reason} ({audit})",
            usage=usage,
        )

    def _consensus(self, verdicts: list[Verdict]) -> Verdict:
        kinds = [v.kind for v in self.verifiers]
        usage = _sum_usage(verdicts)
        summary = "; ".join(f"{k}: {_word(v.success)} ({v.reason})" for k, v in zip(kinds, verdicts, strict=True))
        disagree = _disagree(verdicts)
        if disagree:
            self._log_disagreement(summary)
        verified = all(v.success is not None for v in verdicts)
        self._count(
            compared=sum(v.success is not None for v in verdicts) >= 2,
            disagreement=disagree,
            unverified=disagree or not verified,
        )
        if verified and not disagree:
            return Verdict(success=verdicts[0].success, reason=f"all agree: {summary}", usage=usage)
        why = "the verifiers disagree" if disagree else "not every verifier could decide"
        return Verdict(success=None, reason=f"unverified: {why}: {summary}", usage=usage)

    def _log_disagreement(self, summary: str) -> None:
        """The first :data:`LOUD_DISAGREEMENTS` disagreements as warnings, the rest at info
        level (a cheap composite is asked after every step: a run would print hundreds);
        :attr:`stats` counts every one."""
        with self._lock:
            seen = self.stats.disagreements  # counted after this call
        if seen < LOUD_DISAGREEMENTS:
            logger.warning("verifiers disagree: %s", summary)
            if seen == LOUD_DISAGREEMENTS - 1:
                logger.warning(
                    "further disagreements are logged at info level; CompositeVerifier.stats counts them all"
                )
        else:
            logger.info("verifiers disagree: %s", summary)

    def _count(
        self,
        *,
        decided: str | None = None,
        unverified: bool = False,
        compared: bool = False,
        disagreement: bool = False,
    ) -> None:
        with self._lock:
            self.stats.verdicts += 1
            if decided is not None:
                self.stats.decided_by[decided] += 1
            self.stats.unverified += unverified
            self.stats.compared += compared
            self.stats.disagreements += disagreement


def _check_shape(verifiers: Sequence[object], mode: str) -> None:
    if mode not in ("fallback", "audit", "consensus"):
        raise ValueError(f"composite mode {mode!r} is not one of 'fallback', 'audit', 'consensus'")
    if len(verifiers) < 2:
        raise ValueError(f"a composite verifier needs at least two verifiers, got {len(verifiers)}")


def _spec(spec: str | Mapping[str, Any]) -> ComponentSpec:
    from darwin.components import ComponentSpec

    return ComponentSpec(name=spec) if isinstance(spec, str) else ComponentSpec.model_validate(dict(spec))


def _build(spec: Verifier | str | Mapping[str, Any]) -> Verifier:
    if isinstance(spec, Verifier):
        return spec
    from darwin.components import build_component

    built = build_component("verifier", _spec(spec))
    assert isinstance(built, Verifier)
    return built


def _word(success: bool | None) -> str:
    return "unverified" if success is None else ("yes" if success else "no")


def _disagree(verdicts: Sequence[Verdict]) -> bool:
    return len({v.success for v in verdicts if v.success is not None}) > 1


def _add(total: VerdictUsage | None, more: VerdictUsage | None) -> VerdictUsage | None:
    if more is None:
        return total
    return more if total is None else total + more


def _sum_usage(verdicts: Sequence[Verdict]) -> VerdictUsage | None:
    total: VerdictUsage | None = None
    for v in verdicts:
        total = _add(total, v.usage)
    return total
