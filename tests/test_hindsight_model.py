"""Issue 45 on any phone: a model describer (through LiteLLM) writes goals from an exploration's
screenshots, and the LLM judge's majority vote verifies the tasks (``judge.goal``).

Every model here is the local fake OpenAI-compatible server (``openai_server``, tests/conftest.py):
real HTTP, real LiteLLM, scripted answers. No hosted model is called.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import io
import json
import re
import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from PIL import Image

from darwin.actions import Finished, OpenApp
from darwin.agents.base import Actor
from darwin.components import ComponentSpec, build_component, check_component
from darwin.envs.sim.env import SimPhoneEnv
from darwin.hindsight.base import SynthesisedTask, filter_tasks
from darwin.hindsight.exploration import Exploration, ExplorationError, explore
from darwin.hindsight.model_describer import (
    DESCRIBER_SYSTEM,
    DescriberConfigError,
    ModelDescriber,
    parse_description,
)
from darwin.hindsight.model_synthesizer import ModelHindsightSynthesizer, cut_points
from darwin.png import decode_png
from darwin.policies.litellm import PolicyAuthError
from darwin.predicates import StateCannotDecide, evaluate
from darwin.task_registry import load_task_file, validate_task
from darwin.types import Decision, Phase, Task, TaskDefinitionError, VerifierSpec
from darwin.verifiers.base import VerificationRequest
from darwin.verifiers.rule import RuleVerifier
from darwin.workflows.step import LifecycleWorkflow, StepConfig

SIZE = (84, 182)  # small screens: the requests stay small, the tests fast
ALARM = "In Clock, turn on the 07:30 alarm."
TIMER = "In Clock, start a 5-minute timer."
JUDGE_SYSTEM = "You evaluate mobile phone agents."


@pytest.fixture(scope="module")
def clock_run() -> Exploration:
    return asyncio.run(
        explore(SimPhoneEnv(seed=0), "Clock", steps=25, seed=0, observation_size=SIZE, keep_screenshots=True)
    )


def _images(body: dict) -> list[np.ndarray]:
    out = []
    for message in body["messages"]:
        if isinstance(message["content"], list):
            for part in message["content"]:
                if part.get("type") == "image_url":
                    data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
                    out.append(np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))
    return out


def _actions_listed(text: str) -> int:
    found = re.search(r"The actions, in order \((\d+)\):", text)
    assert found is not None, text
    return int(found.group(1))


# the describer ---------------------------------------------------------------------------------


def test_the_describers_request_carries_both_screens_the_app_and_the_actions(openai_server, clock_run) -> None:
    openai_server.reply = lambda body: f'```json\n{{"changed": true, "goal": "{ALARM[:-1]}"}}\n```'
    llm = openai_server.litellm_config(temperature=0.3, max_tokens=96)
    describer = ModelDescriber(llm=llm)
    after = clock_run.steps[11].screenshot
    assert clock_run.start_screenshot is not None and after is not None
    described = asyncio.run(describer.describe("Clock", clock_run.start_screenshot, after, clock_run.actions(12)))
    assert (described.kind, described.goal) == ("goal", ALARM)  # a missing full stop is added
    assert described.completion is not None and described.completion.prompt_tokens == 10
    (body,) = openai_server.requests
    before_sent, after_sent = _images(body)
    assert np.array_equal(before_sent, decode_png(clock_run.start_screenshot))
    assert np.array_equal(after_sent, decode_png(after))
    assert body["messages"][0] == {"role": "system", "content": DESCRIBER_SYSTEM}
    text = openai_server.request_text(body)
    assert "App: Clock" in text and _actions_listed(text) == 12 and "1. open app Clock" in text
    assert (body["temperature"], body["max_tokens"]) == (0.3, 96)


def test_a_long_exploration_lists_its_latest_actions_and_large_screens_are_scaled(openai_server) -> None:
    openai_server.reply = lambda body: '{"changed": false, "reason": "only scrolled"}'
    run = asyncio.run(explore(SimPhoneEnv(seed=0), "Clock", steps=6, seed=0, keep_screenshots=True))
    describer = ModelDescriber(llm=openai_server.litellm_config(), max_actions=4, max_side=200)
    assert run.start_screenshot is not None and run.steps[-1].screenshot is not None
    described = asyncio.run(describer.describe("Clock", run.start_screenshot, run.steps[-1].screenshot, run.actions(6)))
    assert (described.kind, described.text) == ("unchanged", "only scrolled")
    (body,) = openai_server.requests
    text = openai_server.request_text(body)
    assert "(the first 2 are left out)" in text and "\n3. " in text and "\n2. " not in text
    assert [image.shape for image in _images(body)] == [(200, 90, 3), (200, 90, 3)]  # 252x560 fitted to 200


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("The alarm at 07:30 is now on.", "no JSON object in the reply"),
        ('{"changed": true, "goal": "Turn it on."} {"changed": false}', "2 JSON objects in the reply"),
        ('{"goal": "Turn on the alarm."}', "'changed' is not true or false"),
        ('{"changed": "yes", "goal": "Turn on the alarm."}', "'changed' is not true or false"),
        ('{"changed": true}', "there is no 'goal' sentence"),
        ('{"changed": true, "goal": "   "}', "there is no 'goal' sentence"),
        ('{"changed": false, "goal": "Turn on the alarm."}', "'changed' is false but the reply gives a goal"),
        ('{"changed": true, "goal": "In Clock, open Alarms. Turn on the alarm."}', "more than one sentence"),
        ('{"changed": true, "goal": "Is the alarm on?"}', "a question"),
        ('{"changed": true, "goal": "In Clock, the agent turned on the alarm."}', "reads as a report"),
        ('{"changed": true, "goal": "I turned on the alarm."}', "reads as a report"),
        ('{"changed": true, "goal": "Turn on ' + "the alarm and " * 20 + 'more."}', "more than max_goal_chars=200"),
    ],
)
def test_an_unusable_reply_is_refused_with_the_reason(reply: str, reason: str) -> None:
    described = parse_description(reply)
    assert described.kind == "refused" and described.goal is None
    assert reason in described.text
    assert repr(" ".join(reply.split())[:40])[1:-1] in described.text  # the reply is quoted


def test_a_refused_reply_keeps_its_cost_and_a_failed_request_says_so(openai_server, clock_run) -> None:
    start, after = clock_run.start_screenshot, clock_run.steps[4].screenshot
    assert start is not None and after is not None
    describer = ModelDescriber(llm=openai_server.litellm_config())
    openai_server.reply = lambda body: "Sure! The alarm is on."
    refused = asyncio.run(describer.describe("Clock", start, after))
    assert refused.kind == "refused" and refused.completion is not None and refused.completion.completion_tokens == 5
    openai_server.reply = lambda body: 503
    failed = asyncio.run(describer.describe("Clock", start, after))
    assert failed.kind == "refused" and failed.completion is None
    assert failed.text.startswith("the describer could not be reached") and "giving up after 2 attempts" in failed.text
    openai_server.reply = lambda body: 401
    with pytest.raises(PolicyAuthError, match="DARWIN_FAKE_LLM_KEY"):
        asyncio.run(describer.describe("Clock", start, after))


def test_the_describers_config_is_checked_at_build_time(openai_server) -> None:
    llm = openai_server.litellm_config()
    with pytest.raises(DescriberConfigError, match="max_side"):
        ModelDescriber(llm=llm, max_side=10)
    with pytest.raises(DescriberConfigError, match="show_action"):
        ModelDescriber(llm=llm, show_action=False)
    with pytest.raises(DescriberConfigError, match="api_key_env"):
        ModelDescriber(llm={"model": "openai/x", "api_key": "sk-secret"})
    with pytest.raises(DescriberConfigError, match="describer model 'gemini/gemini-25-flash' is not known to LiteLLM"):
        ModelDescriber(llm={"model": "gemini/gemini-25-flash"})
    # a synthesiser's settings fail when an experiment is checked, before any model is reached
    with pytest.raises(DescriberConfigError, match="stride"):
        check_component("task_synthesizer", ComponentSpec(name="model_hindsight", kwargs={"stride": 0}))
    with pytest.raises(DescriberConfigError, match="max_steps"):
        check_component(
            "task_synthesizer",
            ComponentSpec(name="model_hindsight", kwargs={"describer": {"llm": llm}, "min_steps": 5, "max_steps": 2}),
        )
    assert openai_server.requests == []


# judge.goal: the verifier of a model-described task ------------------------------------------------


def test_a_judged_goal_is_validated_and_never_decided_by_the_state() -> None:
    spec = VerifierSpec(predicate="judge.goal", params={"goal": "  In Clock,\n turn on the alarm. ", "samples": 3})
    task = Task(id="judged", instruction="In Clock, turn on the alarm.", app="Clock", verifier=spec)
    validate_task(task)
    for bad, fix in (({"goal": " "}, "blank"), ({"goal": "x", "samples": 0}, "samples"), ({"samples": 3}, "goal")):
        with pytest.raises(TaskDefinitionError, match=fix):
            validate_task(task.model_copy(update={"verifier": VerifierSpec(predicate="judge.goal", params=bad)}))
    state = SimPhoneEnv(seed=0).probe_state()
    with pytest.raises(StateCannotDecide, match="llm_judge"):
        evaluate(spec, state)
    request = VerificationRequest(task, Phase.EXECUTION, task.instruction, spec, (), state, None)
    verdict = asyncio.run(RuleVerifier().verify(request))
    assert verdict.success is None and "decided by an LLM judge" in verdict.reason
    candidate = SynthesisedTask(task, (OpenApp(app="Clock"),), state)
    kept = filter_tasks([candidate, candidate])
    assert len(kept.kept) == 1 and [r.reason for r in kept.rejected] == ["duplicate"]  # never "already_true"


# the synthesiser -----------------------------------------------------------------------------------


def _describer(server) -> Callable[[dict], str]:
    """Replies by cut (the number of actions listed): unchanged, a goal, the same goal, another, garbage."""
    replies = {
        5: '{"changed": false, "reason": "only the alarm list was opened"}',
        10: f'{{"changed": true, "goal": "{ALARM}"}}',
        15: f'{{"changed": true, "goal": "{ALARM}"}}',
        20: f'{{"changed": true, "goal": "{TIMER}"}}',
        25: "I think a timer was started?",
    }
    return lambda body: replies[_actions_listed(server.request_text(body))]


def _synthesizer(server, **kwargs) -> ModelHindsightSynthesizer:
    spec = ComponentSpec(name="model_hindsight", kwargs={"describer": {"llm": server.litellm_config()}, **kwargs})
    synthesizer = build_component("task_synthesizer", spec)
    assert isinstance(synthesizer, ModelHindsightSynthesizer)
    return synthesizer


def test_the_synthesizer_makes_judge_verified_tasks_from_the_screens(openai_server, clock_run, tmp_path) -> None:
    openai_server.reply = _describer(openai_server)
    result = _synthesizer(openai_server, stride=5, samples=3).synthesize(clock_run)
    assert [c.steps for c in result.cuts] == cut_points(25, 5) == [5, 10, 15, 20, 25]
    assert [(c.task.instruction, c.steps) for c in result.kept] == [(ALARM, 10), (TIMER, 20)]
    assert [(r.candidate.steps, r.reason) for r in result.rejected] == [(15, "duplicate")]  # the earliest cut is kept
    assert [(c.steps, c.description.kind) for c in result.undescribed] == [(5, "unchanged"), (25, "refused")]
    assert result.undescribed[1].description.text.startswith("no JSON object in the reply")
    assert (result.prompt_tokens, result.completion_tokens, result.cost_usd) == (50, 25, None)  # 5 replies, unpriced
    alarm = result.kept[0]
    assert alarm.demonstration == clock_run.actions(10) and alarm.start_state == clock_run.start_state
    task = alarm.task
    assert task.verifier == VerifierSpec(predicate="judge.goal", params={"goal": ALARM, "samples": 3})
    assert (task.app, task.source, task.template) == ("Clock", "model_hindsight", None)
    assert re.fullmatch(r"model_hindsight\.clock\.[0-9a-f]{10}", task.id)
    validate_task(task)
    tasks_file = tmp_path / "synthesised.json"  # a task file, as `darwin eval --tasks` reads one
    tasks_file.write_text(json.dumps([c.task.model_dump(mode="json") for c in result.kept]))
    assert load_task_file(tasks_file) == [c.task for c in result.kept]
    # each request showed the start screen and the screen at its cut
    assert len(openai_server.requests) == 5
    for body in openai_server.requests:
        n = _actions_listed(openai_server.request_text(body))
        before, after = _images(body)
        assert np.array_equal(before, decode_png(clock_run.start_screenshot or b""))
        assert np.array_equal(after, decode_png(clock_run.steps[n - 1].screenshot or b""))
    # a goal kept from an earlier exploration is a duplicate now
    again = _synthesizer(openai_server, stride=5, samples=3).synthesize(clock_run, seen=[task.verifier])
    assert [c.task.instruction for c in again.kept] == [TIMER]


def test_the_synthesizer_never_reads_the_json_state(openai_server, clock_run) -> None:
    openai_server.reply = _describer(openai_server)
    with_state = _synthesizer(openai_server, stride=5).synthesize(clock_run)
    blind = dataclasses.replace(
        clock_run, start_state={}, steps=tuple(dataclasses.replace(s, state={}) for s in clock_run.steps)
    )
    without = _synthesizer(openai_server, stride=5).synthesize(blind)
    assert [(c.task, c.demonstration) for c in without.kept] == [(c.task, c.demonstration) for c in with_state.kept]


def test_the_synthesizer_needs_screenshots_and_says_how_to_keep_them(openai_server) -> None:
    plain = asyncio.run(explore(SimPhoneEnv(seed=0), "Clock", steps=5, seed=0))
    with pytest.raises(ExplorationError, match="keep_screenshots=True"):
        _synthesizer(openai_server).synthesize(plain)
    assert openai_server.requests == []

    async def inside_a_loop(run: Exploration) -> None:
        _synthesizer(openai_server).synthesize(run)

    with pytest.raises(RuntimeError, match="await asynthesize"):
        asyncio.run(inside_a_loop(plain))


# the judge's majority vote decides a synthesised task ------------------------------------------------


class Replay(Actor):
    """Plays the demonstration, then says finished."""

    def __init__(self, actions) -> None:
        self.actions = list(actions)

    async def act(self, observation, history):
        return Decision(action=self.actions.pop(0) if self.actions else Finished())


def test_the_judges_majority_of_three_decides_a_synthesised_task(openai_server, clock_run) -> None:
    openai_server.reply = _describer(openai_server)
    (alarm, _) = _synthesizer(openai_server, stride=5, samples=3).synthesize(clock_run).kept
    openai_server.requests.clear()
    lock = threading.Lock()
    votes: Iterator[str] = iter(())

    def reply(body: dict) -> str:
        assert JUDGE_SYSTEM in openai_server.request_text(body)
        with lock:
            return next(votes)

    openai_server.reply = reply
    judge = {"name": "llm_judge", "kwargs": {"preset": "marked", "llm": openai_server.litellm_config(), "cache": False}}
    verifier = build_component(
        "verifier", ComponentSpec(name="composite", kwargs={"verifiers": ["rule", judge], "mode": "fallback"})
    )
    workflow = LifecycleWorkflow(verifier=verifier, config=StepConfig(observation_size=SIZE))
    outcomes = []
    for answers in (["yes", "no", "yes"], ["no", "yes", "no"]):
        votes = iter([f'{{"reason": "r", "answer": "{a}"}}' for a in answers])
        trajectory = asyncio.run(workflow.run(SimPhoneEnv(seed=0), alarm.task, Replay(alarm.demonstration)))
        outcomes.append((trajectory.success, trajectory.verdicts[Phase.EXECUTION].reason))
    assert outcomes[0][0] is True and outcomes[1][0] is False
    assert outcomes[0][1].startswith("[llm_judge] r") and "2 of 3 answers agree" in outcomes[0][1]
    assert len(openai_server.requests) == 6  # the judge config says 1 sample; the task's verifier says 3
    for body in openai_server.requests:
        assert f"Task: Clock: {ALARM}" in openai_server.request_text(body)
