"""LLMJudge against a local OpenAI-compatible server that records every request.

Golden files (tests/verifiers/golden/<preset>.json) hold, for each of the paper's input
configurations, the text the judge sends and the count and sizes of its images. They are
checked here; regenerate them after a deliberate prompt change with

    DARWIN_REGEN_GOLDEN=1 .venv/bin/pytest -q tests/verifiers/test_llm_judge.py -k golden
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from darwin.actions import Answer, Click, Finished, Scroll, Type
from darwin.agents.scripted import OracleActor
from darwin.envs.sim.env import SimPhoneEnv
from darwin.evaluate import evaluate
from darwin.policies.litellm import PolicyAuthError
from darwin.store import RunStore
from darwin.task_registry import get_task
from darwin.types import Decision, Generation, Observation, Phase, Task, Transition, VerifierSpec
from darwin.verifiers.base import VerificationRequest
from darwin.verifiers.judge.llm_judge import (
    PRESETS,
    JudgeCase,
    JudgeConfigError,
    JudgeStep,
    LLMJudge,
    LLMJudgeConfig,
    parse_answer,
)
from darwin.verifiers.marks import MARK_COLORS, scale_point
from darwin.workflows.step import LifecycleWorkflow, StepConfig

GOLDEN = Path(__file__).parent / "golden"
DEVICE = (1080, 2400)
KEY = "sk-fake-test-key"  # what the openai_server fixture puts in DARWIN_FAKE_LLM_KEY
YES = '{"reason": "the goal is visible on the final screen", "answer": "yes"}'


def judge_for(server, preset: str = "marked", **fields) -> LLMJudge:
    llm = server.litellm_config(**fields.pop("llm", {}))
    return LLMJudge(preset=preset, llm=llm, **fields)


def shot(w: int, h: int, seed: int) -> np.ndarray:
    """A deterministic screen: a gradient whose tint depends on ``seed`` (no red, magenta...)."""
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([(x * 3 + seed * 40) % 90, (y * 2 + seed * 30) % 90 + 60, np.full_like(x, 100 + seed)], axis=-1)
    return img.astype(np.uint8)


def case(language: str = "ENG", answer: str | None = None) -> JudgeCase:
    steps = [
        JudgeStep(shot(126, 280, 1), Click(x=540, y=1200), DEVICE, reasoning="I tap the search bar."),
        JudgeStep(shot(126, 280, 2), Type(content="milk"), DEVICE, reasoning="Now I type the item."),
        JudgeStep(shot(126, 280, 3), Scroll(x=540, y=1800, direction="down"), DEVICE, reasoning="Scroll to see more."),
    ]
    goal = "Shopping: add milk to the cart." if language == "ENG" else "购物:把牛奶加入购物车。"
    return JudgeCase(goal=goal, language=language, steps=steps, final_screenshot=shot(540, 1200, 4), answer=answer)


def decode_images(body: dict) -> list[np.ndarray]:
    out = []
    for message in body["messages"]:
        if isinstance(message["content"], list):
            for part in message["content"]:
                if part.get("type") == "image_url":
                    data = part["image_url"]["url"].split(",", 1)[1]
                    with Image.open(io.BytesIO(base64.b64decode(data))) as im:
                        out.append(np.asarray(im.convert("RGB")))
    return out


def request_record(server, body: dict) -> dict:
    return {
        "messages": [{"role": m["role"], "text": server.request_text({"messages": [m]})} for m in body["messages"]],
        "images": [[int(i.shape[1]), int(i.shape[0])] for i in decode_images(body)],
    }


# --------------------------------------------------------------------------- golden requests


@pytest.mark.parametrize("preset", list(PRESETS))
def test_golden_requests_for_each_input_configuration(openai_server, preset):
    openai_server.reply = lambda body: YES
    judge = judge_for(openai_server, preset)
    verdict = asyncio.run(judge.judge(case()))
    assert verdict.success is True
    (body,) = openai_server.requests
    record = request_record(openai_server, body)
    path = GOLDEN / f"{preset}.json"
    if os.environ.get("DARWIN_REGEN_GOLDEN"):
        path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    assert path.is_file(), f"no golden file {path}; run with DARWIN_REGEN_GOLDEN=1 to write it"
    assert record == json.loads(path.read_text(encoding="utf-8")), f"the {preset} request changed; see {path}"


def test_the_documented_images_are_sent():
    # final state: the final screen only, scaled to max_side; trajectory: every step + final
    for preset, sizes in (("final_state", [[346, 768]]), ("trajectory", [[126, 280]] * 3 + [[346, 768]])):
        record = json.loads((GOLDEN / f"{preset}.json").read_text(encoding="utf-8"))
        assert record["images"] == sizes
    text = json.loads((GOLDEN / "all.json").read_text(encoding="utf-8"))["messages"][1]["text"]
    for part in ('"purpose"', '"summary"', '"reason"', '"answer"', "red dot is a tap", 'type "milk"', "Task: Shopping"):
        assert part in text


def test_markers_are_drawn_at_the_action_pixels(openai_server):
    openai_server.reply = lambda body: YES
    asyncio.run(judge_for(openai_server, "marked").judge(case()))
    images = decode_images(openai_server.requests[0])
    x, y = scale_point(540, 1200, DEVICE, (126, 280))
    assert tuple(images[0][y, x]) == MARK_COLORS["click"]  # step 1: the tap
    assert tuple(images[1][279, 0]) == MARK_COLORS["type_background"]  # step 2: the typed text
    sx, sy = scale_point(540, 1800, DEVICE, (126, 280))
    assert tuple(images[2][sy, sx]) == MARK_COLORS["scroll"]  # step 3: the swipe starts there
    # unmarked trajectories send the screens as they were
    openai_server.requests.clear()
    asyncio.run(judge_for(openai_server, "trajectory").judge(case()))
    assert np.array_equal(decode_images(openai_server.requests[0])[0], shot(126, 280, 1))


def test_the_image_budget_keeps_the_latest_steps(openai_server):
    openai_server.reply = lambda body: YES
    asyncio.run(judge_for(openai_server, "trajectory", max_images=2, max_side=200).judge(case()))
    body = openai_server.requests[0]
    images = decode_images(body)
    assert [i.shape[:2] for i in images] == [(200, 90), (200, 90)]  # step 3 and the final screen, at most 200 px
    text = openai_server.request_text(body)
    assert "Images 1 to 1 are the screens before steps 3 to 3" in text
    assert "Screens before steps 1 to 2 are left out" in text
    assert "1. tap" in text and '2. type "milk"' in text  # every action is still listed


def test_the_language_follows_the_task(openai_server):
    openai_server.reply = lambda body: '{"reason": "购物车里有牛奶", "answer": "是"}'
    verdict = asyncio.run(judge_for(openai_server).judge(case("CHN")))
    assert (verdict.success, verdict.reason) == (True, "购物车里有牛奶")
    text = openai_server.request_text(openai_server.requests[0])
    assert "你负责评估手机智能体" in text and "任务:购物" in text and "红点表示点击" in text
    assert "You evaluate" not in text


def test_the_agents_reasoning_is_hidden_unless_asked(openai_server):
    openai_server.reply = lambda body: YES
    asyncio.run(judge_for(openai_server).judge(case()))
    asyncio.run(judge_for(openai_server, show_reasoning=True).judge(case()))
    hidden, shown = (openai_server.request_text(b) for b in openai_server.requests)
    assert "I tap the search bar" not in hidden
    assert "the agent's words: I tap the search bar." in shown


def test_the_agents_answer_is_shown(openai_server):
    openai_server.reply = lambda body: YES
    asyncio.run(judge_for(openai_server, "final_state").judge(case(answer="3 items")))
    assert "The agent's answer: 3 items" in openai_server.request_text(openai_server.requests[0])


# --------------------------------------------------------------------------- failures


def test_server_errors_are_retried_then_unverified(openai_server, caplog):
    openai_server.reply = lambda body: 500
    verdict = asyncio.run(judge_for(openai_server, llm={"max_attempts": 3}).judge(case()))
    assert verdict.success is None and verdict.reward is None
    assert "could not be reached" in verdict.reason and "3 attempts" in verdict.reason
    assert len(openai_server.requests) == 3
    assert verdict.usage is not None and verdict.usage.requests == 1


def test_timeouts_are_retried_then_unverified(openai_server):
    def slow(body):
        time.sleep(1.5)
        return YES

    openai_server.reply = slow
    started = time.perf_counter()
    verdict = asyncio.run(judge_for(openai_server, llm={"timeout_s": 0.3, "max_attempts": 2}).judge(case()))
    assert verdict.success is None and "could not be reached" in verdict.reason
    assert len(openai_server.requests) == 2
    assert time.perf_counter() - started < 5


def test_a_rejected_key_fails_at_once_naming_the_variable(openai_server):
    openai_server.reply = lambda body: 401
    with pytest.raises(PolicyAuthError, match="DARWIN_FAKE_LLM_KEY") as info:
        asyncio.run(judge_for(openai_server, llm={"max_attempts": 4}).judge(case()))
    assert len(openai_server.requests) == 1  # not retried
    assert KEY not in str(info.value)


def test_a_missing_key_fails_at_once_naming_the_variable(openai_server, monkeypatch):
    monkeypatch.delenv("DARWIN_FAKE_LLM_KEY")
    judge = judge_for(openai_server)
    with pytest.raises(PolicyAuthError, match="DARWIN_FAKE_LLM_KEY"):
        judge.preflight()
    with pytest.raises(PolicyAuthError, match="DARWIN_FAKE_LLM_KEY"):
        asyncio.run(judge.judge(case()))
    assert openai_server.requests == []


def test_a_missing_provider_key_is_named_before_any_request(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judge = LLMJudge(preset="marked", llm={"model": "gpt-4o-mini"})
    with pytest.raises(PolicyAuthError, match="OPENAI_API_KEY"):
        judge.preflight()


def test_an_unknown_model_name_is_refused_with_the_fix():
    with pytest.raises(JudgeConfigError, match=r"not known to LiteLLM \(did you mean 'gpt-4o-mini'.*api_base"):
        LLMJudge(llm={"model": "gpt-4o-mni"})
    LLMJudge(llm={"model": "gpt-4o-mni", "api_base": "http://127.0.0.1:1/v1"})  # a local server: its own names
    LLMJudge(llm={"model": "gpt-4o-mni"}, check_model=False)


def test_bad_configurations_are_refused():
    with pytest.raises(JudgeConfigError, match="did you mean 'marked'"):
        LLMJudge(preset="markd", llm={"model": "openai/x", "api_base": "http://h/v1"})
    with pytest.raises(JudgeConfigError, match="samples"):
        LLMJudge(preset="marked", samples=0, llm={"model": "openai/x", "api_base": "http://h/v1"})
    with pytest.raises(JudgeConfigError, match="execution_summary needs inputs='trajectory'"):
        LLMJudge(
            inputs="final_state",
            marked_interactions=False,
            execution_summary=True,
            llm={"model": "openai/x", "api_base": "http://h/v1"},
        )
    with pytest.raises(JudgeConfigError, match="never part of a config"):
        LLMJudge(llm={"model": "openai/x", "api_key": KEY})


def test_an_unclear_answer_is_unverified(openai_server):
    openai_server.reply = lambda body: "Hard to say from these screens."
    verdict = asyncio.run(judge_for(openai_server).judge(case()))
    assert verdict.success is None and "neither yes nor no" in verdict.reason


def test_no_final_screen_is_unverified_without_a_request(openai_server):
    empty = JudgeCase(goal="x", language="ENG", steps=[], final_screenshot=None)
    verdict = asyncio.run(judge_for(openai_server).judge(empty))
    assert verdict.success is None and openai_server.requests == []


def test_the_majority_of_samples_decides(openai_server):
    answers = iter(["Answer: yes", "Answer: no", '{"answer": "yes", "reason": "r"}'])
    openai_server.reply = lambda body: next(answers)
    verdict = asyncio.run(judge_for(openai_server, samples=3).judge(case()))
    assert verdict.success is True and "2 of 3" in verdict.reason
    assert len(openai_server.requests) == 3
    answers = iter(["Answer: yes", "Answer: no", "unsure"])
    verdict = asyncio.run(judge_for(openai_server, samples=3, cache=False).judge(case("CHN")))
    assert verdict.success is None and "no majority" in verdict.reason


def test_answers_are_cached_by_the_exact_input(openai_server, tmp_path):
    openai_server.reply = lambda body: YES
    cache_file = tmp_path / "judge-cache.jsonl"
    judge = judge_for(openai_server, cache_file=str(cache_file))
    first = asyncio.run(judge.judge(case()))
    again = asyncio.run(judge.judge(case()))
    assert len(openai_server.requests) == 1
    assert (first.usage.requests, first.usage.cached, again.usage.requests, again.usage.cached) == (1, 0, 0, 1)
    assert again.usage.prompt_tokens == 0 and again.usage.cost_usd is None  # a cached answer costs nothing
    asyncio.run(judge.judge(case("CHN")))  # another input: asked
    assert len(openai_server.requests) == 2
    # a new judge with the same file answers from it; a different model does not
    asyncio.run(judge_for(openai_server, cache_file=str(cache_file)).judge(case()))
    assert len(openai_server.requests) == 2
    asyncio.run(judge_for(openai_server, cache_file=str(cache_file), llm={"model": "openai/other"}).judge(case()))
    assert len(openai_server.requests) == 3
    assert KEY not in cache_file.read_text()


def test_tokens_and_cost_are_counted(openai_server):
    openai_server.reply = lambda body: YES
    verdict = asyncio.run(
        judge_for(openai_server, samples=3, input_cost_per_mtok=2.0, output_cost_per_mtok=8.0).judge(case())
    )
    usage = verdict.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.requests) == (
        30,
        15,
        3,
    )  # the fake reports 10 + 5 per answer
    assert usage.cost_usd == pytest.approx((30 * 2.0 + 15 * 8.0) / 1e6)
    assert usage.config["preset"] == "marked" and usage.config["llm"]["api_key_env"] == "DARWIN_FAKE_LLM_KEY"
    unpriced = asyncio.run(judge_for(openai_server, cache=False).judge(case()))
    assert unpriced.usage.cost_usd is None  # openai/fake-llm is in no price map


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"purpose": "p", "summary": "s", "reason": "cart has milk", "answer": "yes"}', (True, "cart has milk")),
        ('Sure.\n```json\n{"reason": "nothing added", "answer": "NO"}\n```', (False, "nothing added")),
        ('{"reason": "ok", "answer": true}', (True, "ok")),
        ("Reason: the list is empty\nAnswer: no", (False, "the list is empty")),
        ("Final answer: **Yes**", (True, "Final answer: **Yes**")),
        ("答案:否\n理由:购物车是空的", (False, "购物车是空的")),
        ('{"理由": "已完成", "答案": "是"}', (True, "已完成")),
        ("是的,任务已完成。", (True, "是的,任务已完成。")),
        ("No, the alarm is not set.", (False, "No, the alarm is not set.")),
        ('{"reason": "unclear", "answer": "maybe"}', (None, '{"reason": "unclear", "answer": "maybe"}')),
        ("", (None, "")),
    ],
)
def test_answers_are_parsed_robustly(text, expected):
    assert parse_answer(text) == expected


# --------------------------------------------------------------------------- in a run


def request_for(task: Task, transitions, final) -> VerificationRequest:
    return VerificationRequest(
        task=task,
        phase=Phase.EXECUTION,
        instruction=task.instruction,
        spec=task.verifier,
        transitions=transitions,
        final_state=None,
        final_screenshot=final,
    )


def test_a_request_becomes_the_actors_steps_of_its_phase(openai_server):
    task = Task(id="t", instruction="Say hi.", app="Chat", language="CHN", verifier=VerifierSpec(predicate="x.y"))
    obs = Observation(screenshot=shot(126, 280, 1), goal="g", device_size=DEVICE)

    def step(i, decision, agent="actor", phase=Phase.EXECUTION):
        return Transition(
            episode_id="e", task_id="t", step=i, phase=phase, observation=obs, decision=decision, agent=agent
        )

    transitions = [
        step(0, Decision(action=Click(x=1, y=1)), phase=Phase.SETUP),
        step(1, Decision(action=Click(x=2, y=2), generation=Generation(text="thinking"))),
        step(2, Decision(action=None, message="a plan"), agent="planner"),
        step(3, Decision(action=Answer(content="hi"))),
    ]
    built = JudgeCase.from_request(request_for(task, transitions, shot(20, 40, 2)))
    assert (built.goal, built.language, built.answer) == ("Chat: Say hi.", "CHN", "hi")
    assert [s.action for s in built.steps] == [Click(x=2, y=2), Answer(content="hi")]
    assert built.steps[0].reasoning == "thinking"


def test_the_judge_as_a_runs_reward_stores_its_cost_and_never_the_key(openai_server, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    openai_server.reply = lambda body: YES
    judge = judge_for(openai_server)
    store = RunStore.for_run_dir(tmp_path / "run")
    run_id = store.start_run("judged", config=judge.config)
    task = get_task("amazon_0")
    workflow = LifecycleWorkflow(verifier=judge, config=StepConfig(observation_size=(126, 280)))
    report = asyncio.run(evaluate([task], [SimPhoneEnv(seed=0)], lambda i: OracleActor(), 1, workflow, store, run_id))
    (trajectory,) = report.trajectories
    assert trajectory.success is True and isinstance(trajectory.transitions[-1].decision.action, Finished)
    (body,) = openai_server.requests
    # every step's screen (the finished step included) and the final one, at most max_side
    assert len(decode_images(body)) == len(trajectory.transitions) + 1
    assert decode_images(body)[-1].shape[:2] == (768, 346)
    (episode,) = store.episodes(run_id)
    (verdict,) = store.verdicts(episode.episode_id)
    assert (
        verdict.verifier_kind,
        verdict.success,
        verdict.prompt_tokens,
        verdict.completion_tokens,
        verdict.requests,
    ) == ("llm_judge", True, 10, 5, 1)
    assert verdict.cost_usd is None and verdict.verifier_config["preset"] == "marked"
    assert episode.device_size == DEVICE and episode.final_screenshot_path is not None
    store.close()
    for path in (tmp_path / "run").glob("run.db*"):
        assert KEY.encode() not in path.read_bytes()
    assert KEY not in caplog.text
    assert KEY not in json.dumps(judge.describe()) and KEY not in LLMJudgeConfig.model_dump_json(judge.config)
