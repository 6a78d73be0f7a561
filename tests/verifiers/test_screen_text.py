"""Verification from what a reader sees (issue 72 item 6): the screen-text predicate and
grounded answers, on SimPhone episodes read by the real OCR model."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from darwin.actions import Answer
from darwin.agents.base import Actor
from darwin.agents.scripted import OracleActor
from darwin.envs.sim.env import SimPhoneEnv
from darwin.predicates import StateCannotDecide, evaluate, resolve
from darwin.task_registry import get_task, task_set
from darwin.types import Decision, Mark, Observation, Phase, TaskDefinitionError, Transition, VerifierSpec
from darwin.verifiers import RuleVerifier, ScreenTextVerifier
from darwin.verifiers.base import VerificationRequest
from darwin.workflows.step import StepWorkflow

UNSEEN = {t.id: t for t in task_set("gen.unseen_apps")}


def screen(*texts: str) -> Observation:
    marks = tuple(Mark(t, (0, 40 * i, 500, 40 * i + 30)) for i, t in enumerate(texts))
    return Observation(np.zeros((56, 25, 3), np.uint8), "g", (1080, 2400), marks=marks)


def request(spec: VerifierSpec, observations, answer: str | None = None, final=None) -> VerificationRequest:
    steps = [
        Transition("e", "t", i, Phase.EXECUTION, o, Decision(action=None, message="looked"))
        for i, o in enumerate(observations)
    ]
    if answer is not None:
        steps.append(
            Transition("e", "t", len(steps), Phase.EXECUTION, observations[-1], Decision(action=Answer(content=answer)))
        )
    task = get_task("clock_1")
    return VerificationRequest(task, Phase.EXECUTION, task.instruction, spec, steps, None, final)


def verdict(verifier, req):
    return asyncio.run(verifier.verify(req))


def text_spec(text: str, **kw) -> VerifierSpec:
    return VerifierSpec(predicate="screen.text", params={"text": text, **kw})


@pytest.fixture(scope="module")
def ocr_verifier() -> ScreenTextVerifier:
    return ScreenTextVerifier()


def test_screen_text_on_the_last_screen_read_by_ocr(ocr_verifier):
    env = SimPhoneEnv(seed=0)
    final = env.screenshot((504, 1120))  # the launcher, read by the verifier's OCR
    before = [screen("Inbox", "Berlin trip")]
    assert verdict(ocr_verifier, request(text_spec("booking.com"), before, final=final)).success is True
    assert verdict(ocr_verifier, request(text_spec("Berlin trip"), before, final=final)).success is False
    assert verdict(ocr_verifier, request(text_spec("Berlin trip", where="any"), before, final=final)).success is True
    assert verdict(ocr_verifier, request(text_spec("Berlin trip", shown=False), before, final=final)).success is True
    gone_everywhere = text_spec("Berlin trip", shown=False, where="any")
    assert verdict(ocr_verifier, request(gone_everywhere, before, final=final)).success is False


def test_the_phones_state_alone_cannot_decide_a_screen_text():
    with pytest.raises(StateCannotDecide, match="screen_text verifier"):
        evaluate(text_spec("Berlin"), {"foreground": None})
    rule = verdict(RuleVerifier(), request(text_spec("Berlin"), [screen("Berlin")]))
    assert rule.success is None  # no state probe in this request; with one, StateCannotDecide: unverified


def test_a_blank_screen_text_is_refused_when_the_task_is_defined():
    with pytest.raises(TaskDefinitionError, match="blank"):
        resolve(text_spec("   "))


def test_answers_count_only_when_read_on_a_screen_the_agent_saw(ocr_verifier):
    spec = VerifierSpec(predicate="answer.matches", params={"kind": "number", "expected": "4 events"})
    seen = [screen("Saturday", "4 events")]
    assert verdict(ocr_verifier, request(spec, seen, answer="4")).success is True
    guess = verdict(ocr_verifier, request(spec, [screen("Home", "Clock")], answer="4"))
    assert guess.success is False and "a guess" in guess.reason
    assert verdict(ocr_verifier, request(spec, seen, answer="5")).success is False
    assert verdict(ocr_verifier, request(spec, seen)).success is False  # never answered
    ungrounded = ScreenTextVerifier(grounded_answers=False)
    assert verdict(ungrounded, request(spec, [screen("Home")], answer="4")).success is True


class Guesser(Actor):
    """Answers at once, from the launcher, without looking."""

    def __init__(self, answer: str) -> None:
        self.answer = answer

    async def act(self, observation, history):
        return Decision(action=Answer(content=self.answer))


def test_on_simphone_the_oracles_answers_are_grounded_and_a_lucky_guess_is_not(ocr_verifier):
    task = UNSEEN["calendar.count_day.s100000"]  # expected "4 events"
    workflow = StepWorkflow(ocr_verifier)
    read = asyncio.run(workflow.run(SimPhoneEnv(seed=3), task, OracleActor()))
    assert read.success is True
    rule_guess = asyncio.run(StepWorkflow().run(SimPhoneEnv(seed=3), task, Guesser("4")))
    assert rule_guess.success is True  # the rule checks the value only: the guess counts
    guess = asyncio.run(workflow.run(SimPhoneEnv(seed=3), task, Guesser("4")))
    assert guess.success is False


def test_only_pixel_readers_can_read_stored_screens():
    with pytest.raises(ValueError, match="reader='ocr'"):
        ScreenTextVerifier(reader="elements")


def test_every_other_predicate_goes_to_the_rule():
    env = SimPhoneEnv(seed=0)
    spec = get_task("clock_1").verifier
    req = VerificationRequest(get_task("clock_1"), Phase.EXECUTION, "", spec, [], env.probe_state(), None)
    assert verdict(ScreenTextVerifier(), req) == verdict(RuleVerifier(), req)
