"""LLMMemoryManager against a local OpenAI-compatible server: distillation, SQL storage and
deduplication, retrieval by app within a token budget, notes in the agents' prompts,
knowledge across runs, the running summary, failures that never break an episode."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from darwin.actions import Click, OpenApp, PressBack
from darwin.agents.base import ModelActor
from darwin.agents.qwen import QwenVLAgent
from darwin.agents.scripted import OracleActor
from darwin.agents.tiny import TinyAgent
from darwin.agents.uitars import UITarsAgent
from darwin.components import ComponentSpec, build_component
from darwin.database import DB_FILENAME
from darwin.envs.sim.env import SimPhoneEnv
from darwin.memory.base import format_notes
from darwin.memory.llm import LLMMemoryManager
from darwin.memory.llm_answers import parse_distillation, parse_summary
from darwin.memory.llm_store import MemoryStoreError
from darwin.memory.sliding_window import SlidingWindowMemory
from darwin.policies.base import Policy
from darwin.run.build import memory_factory
from darwin.store import RunStore
from darwin.task_registry import get_task
from darwin.types import (
    Decision,
    Generation,
    Observation,
    Phase,
    Prompt,
    Task,
    Trajectory,
    Transition,
)
from darwin.workflows.step import StepWorkflow

DISTILLED = {
    "summary": "Opened Settings, went to Display and switched Dark theme on.",
    "knowledge": [
        "The Dark theme switch is on the Display page of Settings.",
        "Display is the third entry in Settings.",
    ],
}


def answer(body: dict) -> str:
    """What the fake memory model says: a fenced JSON answer with prose around it."""
    return "Here is the memory:\n```json\n" + json.dumps(DISTILLED) + "\n```\nAnything else?"


class NoPolicy(Policy):
    async def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        raise AssertionError("the oracle chooses the actions")


class OracleModelActor(ModelActor):
    """A ModelActor whose choices come from the simulator's oracle: the agent builds every
    prompt (memory included) as it would for a model, and the workflow calls its hooks."""

    def __init__(self, agent: TinyAgent) -> None:
        super().__init__(agent, NoPolicy())
        self.oracle = OracleActor()

    async def start_phase(self, env, task, phase, instruction, verifier) -> None:  # noqa: ANN001
        await self.oracle.start_phase(env, task, phase, instruction, verifier)

    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        await self.agent.observe(history)
        prompt = self.agent.build_context(observation, history)
        action = (await self.oracle.act(observation, history)).action
        assert action is not None
        text = self.agent.format_action(action, observation)  # type: ignore[attr-defined]
        return Decision(action=action, generation=Generation(text=text), prompt=prompt)


class ScriptedPolicy(Policy):
    """Replies in turn, then finishes."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)

    async def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        return [Generation(text=self.texts.pop(0) if self.texts else "finished('done')") for _ in prompts]


def play(actor: ModelActor, task_id: str = "settings_dark_theme", seed: int = 0) -> Trajectory:
    return asyncio.run(StepWorkflow().run(SimPhoneEnv(seed=seed), get_task(task_id), actor))


def manager(openai_server, tmp_path: Path, **kwargs: object) -> LLMMemoryManager:  # noqa: ANN001
    kwargs.setdefault("url", str(tmp_path / "knowledge.db"))
    return LLMMemoryManager(llm=openai_server.litellm_config(), **kwargs)


def texts(prompt: Prompt) -> list[str]:
    return [m.text for m in prompt.messages]


def step(i: int, action: object = None, goal: str = "Turn on dark theme", phase: Phase = Phase.EXECUTION) -> Transition:
    obs = Observation(screenshot=np.full((560, 252, 3), i, np.uint8), goal=goal, device_size=(1080, 2400), step=i)
    decision = Decision(action=action or (Click(x=10 * i, y=20 * i) if i % 2 == 0 else PressBack()))
    return Transition(episode_id="e", task_id="t", step=i, phase=phase, observation=obs, decision=decision)


# --------------------------------------------------------------------------- distillation and storage


def test_an_episode_is_distilled_into_a_summary_and_app_knowledge(openai_server, tmp_path):
    openai_server.reply = answer
    memory = manager(openai_server, tmp_path, distill_images=1)
    traj = play(OracleModelActor(TinyAgent(memory=memory)))
    assert traj.success is True

    (body,) = openai_server.requests
    text = openai_server.request_text(body)
    assert "App: Settings" in text and "Goal: Go to display settings. Turn on Dark Theme." in text
    assert "Outcome: succeeded" in text
    assert f"Steps ({len(traj)}):" in text
    first = traj.transitions[0].decision.action
    assert f"1. click(x={first.x}, y={first.y})" in text  # the actions as text, in order
    assert '"knowledge"' in text  # the JSON answer it asks for
    assert openai_server.request_images(body) == 1  # the last screen, within distill_images
    assert "sk-fake-test-key" not in text

    entries = memory.store.entries("Settings")
    assert {(e.kind, e.text) for e in entries} == {("summary", DISTILLED["summary"])} | {
        ("knowledge", k) for k in DISTILLED["knowledge"]
    }
    assert all(e.task_id == "settings_dark_theme" and e.success is True and e.times_seen == 1 for e in entries)
    assert all(e.goal == "Go to display settings. Turn on Dark Theme." and e.created_at for e in entries)
    assert memory.stats.as_dict() == {
        "calls": 1,
        "failures": 0,
        "malformed": 0,
        "stored": 3,
        "deduplicated": 0,
        "retrieved": 0,
        "skipped": 0,
        "summary_updates": 0,
        "database_errors": 0,
    }
    memory.close()


def test_known_texts_bump_their_count_instead_of_a_new_row(openai_server, tmp_path):
    replies = iter(
        [
            json.dumps(DISTILLED),
            # the same facts in other words of case and punctuation, plus one new fact for Clock
            json.dumps(
                {
                    "summary": DISTILLED["summary"].upper(),
                    "knowledge": [
                        "the dark theme switch is on the display page of settings",
                        {"fact": "The + button on the Alarm tab adds an alarm.", "app": "Clock"},
                    ],
                }
            ),
        ]
    )
    openai_server.reply = lambda body: next(replies)
    memory = manager(openai_server, tmp_path)
    task = get_task("settings_dark_theme")
    for episode in ("e1", "e2"):
        asyncio.run(memory.end_episode(Trajectory(episode_id=episode, task=task, transitions=[step(0), step(1)])))
    assert (memory.stats.stored, memory.stats.deduplicated) == (4, 2)
    settings = {e.text: e.times_seen for e in memory.store.entries("Settings")}
    assert settings[DISTILLED["knowledge"][0]] == 2 and settings[DISTILLED["summary"]] == 2
    assert settings[DISTILLED["knowledge"][1]] == 1 and len(settings) == 3
    assert [e.text for e in memory.store.entries("clock")] == ["The + button on the Alarm tab adds an alarm."]
    with sqlite3.connect(tmp_path / "knowledge.db") as db:  # one row per (app, kind, text)
        assert db.execute("SELECT COUNT(*) FROM memory_entries").fetchone() == (4,)
    memory.close()


@pytest.mark.parametrize(
    ("text", "summary", "facts"),
    [
        ('{"summary": "s", "knowledge": ["a", "b"]}', "s", ["a", "b"]),
        ('Sure. {"summary": "s", "knowledge": "a"} Let me know!', "s", ["a"]),
        ('```\n["a", {"fact": "b"}, {"kind": "summary", "text": "s"}]\n```', "s", ["a", "b"]),
        ('{"summary": "", "knowledge": []}', None, []),
        ('{"episode_summary": "s", "facts": [{"text": "a"}]}', "s", ["a"]),
    ],
)
def test_answers_are_read_robustly(text, summary, facts):
    distilled = parse_distillation(text)
    assert distilled is not None
    assert distilled.summary == summary and [k.text for k in distilled.knowledge] == facts


@pytest.mark.parametrize("text", ["no json at all", '{"answer": 42}', '{"summary": 3}', "[1, 2]", '{"summary": "s"'])
def test_malformed_answers_are_rejected(text):
    assert parse_distillation(text) is None
    assert parse_summary(text) is None


# --------------------------------------------------------------------------- retrieval


def seed(memory: LLMMemoryManager) -> None:
    store = memory.store
    store.add("Settings", "knowledge", "Wi-Fi is under Network and internet.")
    store.add("Settings", "knowledge", "The Dark theme switch is on the Display page.")
    store.add("Settings", "knowledge", "Display holds brightness, dark theme and font size settings.")
    store.add("Settings", "summary", "Opened Display, switched Dark theme on.", goal="Turn on Dark Theme", success=True)
    store.add("Clock", "knowledge", "The Dark mode of Clock is in its own menu.")


def test_start_episode_retrieves_the_apps_entries_ranked_by_the_goal(tmp_path):
    memory = LLMMemoryManager(distill=False, url=str(tmp_path / "k.db"))
    seed(memory)
    memory.start_episode(get_task("settings_dark_theme"))
    # goal words (stop words aside): display, settings, dark, theme
    assert memory.window([]).notes == (
        "Display holds brightness, dark theme and font size settings.",  # all four words
        'Earlier attempt at "Turn on Dark Theme" (succeeded): Opened Display, switched Dark theme on.',  # 3, newest
        "The Dark theme switch is on the Display page.",  # 3, older
        "Wi-Fi is under Network and internet.",  # none; never another app's entries
    )
    assert memory.stats.retrieved == 4

    memory.start_episode(Task.model_validate({**get_task("settings_dark_theme").model_dump(), "app": "Clock"}))
    assert memory.window([]).notes == ("The Dark mode of Clock is in its own menu.",)
    memory.start_episode(None)
    assert memory.window([]).notes == ()


def test_retrieval_stays_within_the_token_budget(tmp_path):
    url = str(tmp_path / "k.db")
    seed(LLMMemoryManager(distill=False, url=url))
    counts = []
    for budget in (0, 20, 40, 80, 10_000):
        memory = LLMMemoryManager(distill=False, url=url, max_knowledge_tokens=budget)
        memory.start_episode(get_task("settings_dark_theme"))
        notes = memory.window([]).notes
        assert memory.count_tokens(format_notes(notes)) <= budget
        counts.append(len(notes))
        memory.close()
    assert counts[0] == 0 and counts == sorted(counts) and counts[-1] == 4 and len(set(counts)) >= 3
    few = LLMMemoryManager(distill=False, url=url, max_notes=2)
    few.start_episode(get_task("settings_dark_theme"))
    assert len(few.window([]).notes) == 2


def test_notes_reach_the_agents_prompts_and_count_against_the_budget(tmp_path):
    history = [step(i) for i in range(6)]
    obs = step(6).observation

    plain = TinyAgent(memory=SlidingWindowMemory(max_interactions=8, max_prompt_tokens=1200))
    memory = LLMMemoryManager(distill=False, url=str(tmp_path / "k.db"), max_interactions=8, max_prompt_tokens=1200)
    agent = TinyAgent(memory=memory)
    memory.start_episode(get_task("settings_dark_theme"))  # nothing stored yet: the same prompt as a window
    assert texts(agent.build_context(obs, history)) == texts(plain.build_context(obs, history))

    seed(memory)
    memory.start_episode(get_task("settings_dark_theme"))
    prompt, plain_prompt = agent.build_context(obs, history), plain.build_context(obs, history)
    notes = format_notes(memory.window([]).notes)
    assert notes.startswith("Notes:\n- Display holds") and "Earlier attempt" in notes
    assert prompt.messages[-1].text == plain_prompt.messages[-1].text.replace("\nDone: ", f"\n{notes}\nDone: ", 1)
    assert prompt.messages[-1].text.startswith("Goal: Turn on dark theme\nNotes:\n- ")
    assert len(prompt.images) == len(plain_prompt.images)

    # Tight budget: the notes' tokens are reserved, so older steps drop first.
    window_without = SlidingWindowMemory(max_interactions=8, max_prompt_tokens=1200).window(
        history, agent.render, reserved_tokens=1100
    )
    window_with = memory.window(history, agent.render, reserved_tokens=1100)
    assert window_with.notes_tokens > 0 and window_with.dropped > window_without.dropped
    assert window_with.tokens <= 100

    for other in (QwenVLAgent(memory=memory), QwenVLAgent(version="3", memory=memory), UITarsAgent(memory=memory)):
        prompt = other.build_context(obs, history)
        text = "\n".join(m.text for m in prompt.messages)
        assert "Notes:\n- Display holds" in text and "The Dark theme switch is on the Display page." in text
        memory_free = type(other)(config=other.config, memory=SlidingWindowMemory())
        assert "Notes:" not in "\n".join(texts(memory_free.build_context(obs, history)))


# --------------------------------------------------------------------------- across runs


def test_knowledge_written_in_one_run_is_retrieved_in_the_next(openai_server, tmp_path):
    openai_server.reply = answer
    shared = str(tmp_path / "shared" / "knowledge.db")
    (tmp_path / "shared").mkdir()

    first = manager(openai_server, tmp_path, url=shared)
    run1 = play(OracleModelActor(TinyAgent(memory=first)))
    assert run1.success and first.stats.stored == 3
    first_prompt = run1.transitions[0].decision.prompt.messages[-1].text
    assert "Notes:" not in first_prompt  # nothing known yet in the first run
    first.close()

    # A second run: a new manager, without a model, on the same database.
    second = LLMMemoryManager(distill=False, url=shared)
    run2 = play(OracleModelActor(TinyAgent(memory=second)), seed=1)
    prompt = run2.transitions[0].decision.prompt.messages[-1].text
    goal, notes = prompt.split("\n", 1)
    assert goal.startswith("Goal: ") and goal.endswith("Go to display settings. Turn on Dark Theme.")
    assert notes.startswith("Notes:\n- ")
    for text in (*DISTILLED["knowledge"], DISTILLED["summary"]):
        assert text in prompt
    assert second.stats.retrieved == 3 and len(openai_server.requests) == 1
    second.close()


def test_by_default_knowledge_lives_in_the_run_database(openai_server, tmp_path):
    openai_server.reply = answer
    run_dir = tmp_path / "run"
    spec = ComponentSpec(name="llm", kwargs={"llm": openai_server.litellm_config(), "max_interactions": 4})
    memory = build_component("memory", spec, named_context={"run_dir": run_dir})
    assert isinstance(memory, LLMMemoryManager) and memory.raw_window.config.max_interactions == 4
    store = RunStore.for_run_dir(run_dir)  # the run store opens the same file, its schema untouched
    run_id = store.start_run("r", config=None)
    play(OracleModelActor(TinyAgent(memory=memory)))
    with sqlite3.connect(run_dir / DB_FILENAME) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"memory_entries", "runs", "episodes"} <= tables
        assert db.execute("SELECT COUNT(*) FROM memory_entries").fetchone() == (3,)
    assert [r.run_id for r in store.runs()] == [run_id]
    store.close()
    memory.close()
    # A memory that does not name run_dir is built as before (the context is not forced on it).
    assert isinstance(
        build_component("memory", ComponentSpec(name="sliding_window"), named_context={"run_dir": run_dir}),
        SlidingWindowMemory,
    )


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("reply", "counter"), [(500, "failures"), (401, "failures"), ("no JSON here, sorry", "malformed")]
)
def test_a_failing_memory_model_leaves_episodes_running(openai_server, tmp_path, caplog, reply, counter):
    openai_server.reply = lambda body: reply
    memory = manager(openai_server, tmp_path, in_episode_summary=True, summary_every=1, summary_keep_recent=0)
    seed(memory)  # stored knowledge still reaches the prompt while the model fails
    with caplog.at_level(logging.WARNING, logger="darwin.memory.llm"):
        trajs = [
            play(
                ModelActor(
                    TinyAgent(memory=memory),
                    ScriptedPolicy(["open_app('Settings')", "press_back()", "finished('done')"]),
                )
            )
            for _ in range(2)
        ]
    for traj in trajs:
        assert traj.completed and len(traj) == 3 and traj.termination.reason.value == "agent_finished"
        assert "Notes:\n- " in traj.transitions[-1].decision.prompt.messages[-1].text
        # the running summary failed, so the plain window shows every step
        assert "Done: open_app('Settings'); press_back()" in traj.transitions[-1].decision.prompt.messages[-1].text
    stats = memory.stats
    assert getattr(stats, counter) >= 1 and stats.stored == 0 and stats.summary_updates == 0
    # per episode: two running-summary requests (steps 1 and 2) and one distillation
    if reply == 401:  # an auth error pauses the model at once: one call, the rest skipped
        assert (stats.calls, stats.failures, stats.skipped) == (1, 1, 5)
    elif reply == 500:  # three failures in a row pause it too
        assert (stats.calls, stats.failures, stats.skipped) == (3, 3, 3)
        assert len(openai_server.requests) == 3 * 2  # two attempts per call (max_attempts=2)
    else:
        assert stats.calls == stats.malformed == 6 and stats.failures == 0
    warnings = [
        r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == "darwin.memory.llm"
    ]
    if counter == "malformed":  # once per kind of failure, however often it happens
        assert len(warnings) == 1 and "could not read the model's" in warnings[0]
    else:
        assert len(warnings) == 2, warnings  # the failure, then the pause
        assert ("PolicyAuthError" if reply == 401 else "PolicyRequestError") in warnings[0]
        assert "the plain window" in warnings[0] and "pause" in warnings[1]
    assert "sk-fake-test-key" not in caplog.text
    memory.close()


def test_a_missing_key_is_a_warning_at_build_and_a_counted_failure(openai_server, tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("DARWIN_FAKE_LLM_KEY")
    with caplog.at_level(logging.WARNING, logger="darwin.memory.llm"):
        memory = manager(openai_server, tmp_path)
    assert "DARWIN_FAKE_LLM_KEY is not set" in caplog.text
    traj = play(ModelActor(TinyAgent(memory=memory), ScriptedPolicy(["finished('done')"])))
    assert traj.completed and memory.stats.failures == 1 and openai_server.requests == []
    memory.close()


# --------------------------------------------------------------------------- running summary


def test_the_running_summary_replaces_the_older_steps(openai_server, tmp_path):
    summaries = iter(['{"summary": "Opened Settings and went back once."}', '{"summary": "Two more clicks."}'])
    openai_server.reply = lambda body: next(summaries)
    memory = manager(
        openai_server,
        tmp_path,
        distill=False,
        in_episode_summary=True,
        summary_every=2,
        summary_keep_recent=1,
        max_interactions=8,
    )
    memory.start_episode(get_task("settings_dark_theme"))
    history = [step(0, OpenApp(app="Settings")), step(1), step(2)]
    asyncio.run(memory.observe(history[:2]))  # one foldable step (one kept raw): not yet
    assert openai_server.requests == []
    asyncio.run(memory.observe(history))  # steps 0 and 1 folded, step 2 kept raw
    request = openai_server.texts()[0]
    assert (
        "Goal: Turn on dark theme" in request
        and "1. open_app(app='Settings')" in request
        and "2. press_back()" in request
    )
    window = memory.window(history)
    assert [e.step for e in window.entries] == [2] and window.omitted == 2
    assert window.notes[-1] == "Earlier in this episode: Opened Settings and went back once."

    history += [step(3), step(4)]
    asyncio.run(memory.observe(history))
    assert "Summary so far: Opened Settings and went back once." in openai_server.texts()[1]
    assert [e.step for e in memory.window(history).entries] == [4]
    assert memory.stats.summary_updates == 2

    asyncio.run(memory.observe([step(0, phase=Phase.TEARDOWN)]))  # a new phase starts afresh
    assert memory.window([step(0, phase=Phase.TEARDOWN)]).notes == ()


# --------------------------------------------------------------------------- configuration


def test_configuration_errors_are_clear(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="needs a memory model.*llm=.*or set distill=False"):
        LLMMemoryManager(url=str(tmp_path / "k.db"))
    with pytest.raises(ValidationError, match="max_knowledge_token"):
        LLMMemoryManager(distill=False, max_knowledge_token=100)
    with pytest.raises(ValidationError, match="API keys are never part of a config"):
        LLMMemoryManager(llm={"model": "openai/x", "api_key": "sk-oops-123456789"})
    with pytest.raises(ValidationError) as info:
        LLMMemoryManager(llm={"model": "openai/x", "api_key_env": "sk-oops-123456789"})
    assert "sk-oops" not in str(info.value)
    with pytest.raises(ValidationError, match="summary_every"):
        LLMMemoryManager(distill=False, summary_every=0)
    with pytest.raises(MemoryStoreError, match=r"directory .*missing.* does not exist.*mkdir -p"):
        LLMMemoryManager(distill=False, url=str(tmp_path / "missing" / "k.db"))
    with pytest.raises(MemoryStoreError, match="driver is not installed"):
        LLMMemoryManager(distill=False, url="nosuchdb+nodriver://u@h/db")
    with pytest.raises(MemoryStoreError, match="it is a directory"):
        LLMMemoryManager(distill=False, url=str(tmp_path))
    with pytest.raises(TypeError, match="not both"):
        LLMMemoryManager(LLMMemoryManager(distill=False).config, distill=False)


def test_the_experiment_passes_its_run_directory(openai_server, tmp_path):
    from darwin.problems import ExperimentError
    from darwin.run.config import ExperimentConfig

    spec = ComponentSpec(name="llm", kwargs={"llm": openai_server.litellm_config(), "max_knowledge_tokens": 256})
    config = ExperimentConfig(name="mem", memory=spec)
    make = memory_factory(config, tmp_path / "run")
    assert make is not None
    memory = make()
    assert (
        isinstance(memory, LLMMemoryManager) and Path(str(memory.store.url.database)) == tmp_path / "run" / DB_FILENAME
    )
    memory.close()
    bad = ExperimentConfig(name="mem", memory=ComponentSpec(name="llm", kwargs={"distill": False, "max_notes": 0}))
    with pytest.raises(ExperimentError, match="max_notes"):
        bad.check_components()
    nowhere = ComponentSpec(name="llm", kwargs={"distill": False, "url": str(tmp_path / "nope" / "k.db")})
    with pytest.raises(ExperimentError, match="cannot open the memory database .*nope.*mkdir -p"):
        ExperimentConfig(name="mem", memory=nowhere).check_components()
