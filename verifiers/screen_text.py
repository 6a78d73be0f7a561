"""Verification from what a reader sees (self-evolution on any phone, issue 72).

:class:`ScreenTextVerifier` decides two kinds of goal from the episode's screens, read by a
reader (:mod:`darwin.readers`), so it needs no JSON state probe:

- ``screen.text`` (:class:`~darwin.predicates.ScreenTextParams`): a text shown or gone on the
  last screen or on any screen of the episode. Rules and hindsight synthesis can then name
  goals on phones that only give screenshots.
- ``answer.matches``, **grounded**: the agent's answer must match the key *and* its value must
  be read on a screen the agent saw (:func:`darwin.answers.grounded`). A guessed number that
  happens to match, with no screen showing it, fails.

Every other predicate goes to ``otherwise`` (the rule verifier by default), so
``verifier = screen_text`` is a drop-in for ``rule``. The screens are the marks each step's
observation carries (the agent's own reader read them) or, where a step has none, its
screenshot read by this verifier's reader; the last screen is the final screenshot.

    >>> from darwin.verifiers import ScreenTextVerifier
    >>> verifier = ScreenTextVerifier()
    >>> verifier.kind, verifier.otherwise.kind, verifier.grounded_answers
    ('screen_text', 'rule', True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from darwin.actions import Answer
from darwin.answers import grounded
from darwin.components import ComponentSpec, build_component
from darwin.predicates import SCREEN_TEXT, SCREEN_TEXTS, AnswerParams, resolve
from darwin.readers.base import Reader, read_marks
from darwin.types import Verdict
from darwin.verifiers.base import VerificationRequest, Verifier

ANSWER = "answer.matches"


class ScreenTextVerifier(Verifier):
    """``screen.text`` goals and grounded answers from the screens; the rest by ``otherwise``.

    ``reader``: the pixel reader for screens whose step carries no marks, and the final screen
    (a spec or a name; default ``ocr``). ``grounded_answers``: an answer counts only if its
    value is on a screen the agent saw (default on; off: the key alone decides, as the rule
    does). ``otherwise``: the verifier of every other predicate (default ``rule``).
    """

    kind = "screen_text"

    def __init__(
        self,
        reader: str | Mapping[str, Any] | ComponentSpec = "ocr",
        grounded_answers: bool = True,
        otherwise: str | Mapping[str, Any] | ComponentSpec = "rule",
    ) -> None:
        built = build_component("reader", ComponentSpec.model_validate(reader))
        assert isinstance(built, Reader)  # checked by build_component
        if built.needs_phone or not built.reads:
            raise ValueError(
                f"the screen_text verifier reads stored screenshots; reader {ComponentSpec.model_validate(reader).name!r} cannot "
                "(it reads a phone, or nothing): use reader='ocr' or a Reader of pixels"
            )
        self.reader = built
        self.grounded_answers = grounded_answers
        inner = build_component("verifier", ComponentSpec.model_validate(otherwise))
        assert isinstance(inner, Verifier)
        self.otherwise = inner

    @property
    def cheap(self) -> bool:
        return False  # reading a screen costs an OCR pass: asked when a phase ends

    @property
    def reads_screen(self) -> bool:
        return True

    async def screens(self, request: VerificationRequest, final: bool = True) -> list[tuple[str, ...]]:
        """The texts of each screen of the phase, in order; with ``final``, the final screenshot last."""
        out: list[tuple[str, ...]] = []
        for t in request.transitions:
            obs = t.observation
            marks = obs.marks or await read_marks(self.reader, obs.screenshot, obs.device_size)
            out.append(tuple(m.text for m in marks))
        if final and request.final_screenshot is not None:
            size = request.transitions[-1].observation.device_size if request.transitions else None
            shot = request.final_screenshot
            marks = await read_marks(self.reader, shot, size or (shot.shape[1], shot.shape[0]))
            out.append(tuple(m.text for m in marks))
        return out

    async def verify(self, request: VerificationRequest) -> Verdict:
        spec = request.spec
        if spec.predicate == SCREEN_TEXT:
            pred, params = resolve(spec, request.task.id)
            screens = await self.screens(request)
            check = pred.fn({SCREEN_TEXTS: screens}, params)
            where = f"{len(screens)} screen(s) read"
            return Verdict(
                success=check.success, reason=f"{SCREEN_TEXT}: {'met' if check.success else 'not met'} ({where})"
            )
        if spec.predicate == ANSWER:
            _, params = resolve(spec, request.task.id)
            assert isinstance(params, AnswerParams)
            answer = _answer(request)
            if answer is None:
                return Verdict(success=False, reason=f"{ANSWER}: the agent never answered")
            if not params.key().matches(answer):
                return Verdict(success=False, reason=f"{ANSWER}: {answer!r} does not match")
            if not self.grounded_answers:
                return Verdict(success=True, reason=f"{ANSWER}: met")
            seen = await self.screens(request, final=False)
            if grounded(answer, params.kind, seen):
                return Verdict(success=True, reason=f"{ANSWER}: met, and read on a screen the agent saw")
            return Verdict(
                success=False,
                reason=f"{ANSWER}: {answer!r} matches but is on none of the {len(seen)} screens the agent saw (a guess)",
            )
        return await self.otherwise.verify(request)

    def close(self) -> None:
        self.otherwise.close()


def _answer(request: VerificationRequest) -> str | None:
    """The agent's last answer in the phase (the transitions), else the probed state's."""
    for t in reversed(request.transitions):
        if isinstance(t.decision.action, Answer):
            return t.decision.action.content
    if request.final_state is not None and isinstance(request.final_state.get("answer"), str):
        return str(request.final_state["answer"])
    return None


__all__ = ["ScreenTextVerifier"]
