"""Planner, self-verification and reflection workflows on SimPhones: with an LLM agent served by
a local OpenAI-compatible server, with the tiny model, and what of them reaches the learner."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from darwin.agents.base import ModelActor
from darwin.agents.tiny import TinyAgent
from darwin.envs.sim.env import SimPhoneEnv
from darwin.learner.step_rows import collect_step_rows
from darwin.models.config import TinyVLMConfig
from darwin.models.factory import build_tiny_vlm
from darwin.policies.hf import HFPolicy, HFPolicyConfig
from darwin.policies.litellm import LiteLLMPolicy, LiteLLMPolicyConfig
from darwin.store import RunStore
from darwin.store_schema import SCHEMA_VERSION
from darwin.task_registry import get_task
from darwin.types import ACTOR, Phase, TerminationReason, Trajectory
from darwin.workflows.planner import PLANNER, PlannerWorkflow
from darwin.workflows.reflection import REFLECTOR, ReflectionWorkflow
from darwin.workflows.self_verify import VERIFIER, SelfVerifyWorkflow
from darwin.workflows.step import StepConfig

pytestmark = pytest.mark.timeout(120)


def openai_text(body: dict) -> str:
    """All text parts of a chat request (the same reading as the fixture's helper)."""
    return "\n".join(
        (c if isinstance(c, str) else "\n".join(p.get("text", "") for p in c if p.get("type") == "text"))
        for c in (m["content"] for m in body["messages"])
    )


def openai_images(body: dict) -> int:
    return sum(
        1
        for m in body["messages"]
        if isinstance(m["content"], list)
        for p in m["content"]
        if p.get("type") == "image_url"
    )


TASK = get_task("settings_dark_theme").model_copy(update={"step_budget": 6})


def llm_actor(server) -> ModelActor:
    """An LLM agent: the tiny agent's prompt format, answered by the local server."""
    return ModelActor(TinyAgent(), LiteLLMPolicy(LiteLLMPolicyConfig(**server.litellm_config())))


def role_of(body: dict) -> str:
    system = openai_text({"messages": body["messages"][:1]})
    if system.startswith("You plan"):
        return PLANNER
    if system.startswith("You check"):
        return VERIFIER
    if system.startswith("You review"):
        return REFLECTOR
    return ACTOR


def play(workflow, actor, task=TASK, seed=0, emitted=None) -> Trajectory:
    return asyncio.run(
        workflow.run(SimPhoneEnv(seed=seed), task, actor, emit=None if emitted is None else emitted.append)
    )


def test_planner_guides_the_executor_and_replans_when_a_subgoal_stalls(openai_server) -> None:
    plans = iter(["Plan:\n1. Open Settings\n2. Turn on dark theme", "1. Tap Display\n2. Turn on dark theme"])

    def reply(body: dict) -> str:
        if role_of(body) == PLANNER:
            return next(plans, "1. Give up")
        return "wait()"  # the screen never changes: the sub-goal stalls

    openai_server.reply = reply
    emitted: list = []
    workflow = PlannerWorkflow(
        planner=openai_server.litellm_config(),
        planner_config={"stall_steps": 2, "steps_per_subgoal": 10},
    )
    traj = play(workflow, llm_actor(openai_server), emitted=emitted)

    assert traj.termination.reason is TerminationReason.STEP_BUDGET and traj.success is False
    agents = [t.agent for t in traj.transitions]
    # first plan before step 0; wait, wait (3 equal screens) -> replan before step 2; again before step 4
    assert agents == [PLANNER, ACTOR, ACTOR, PLANNER, ACTOR, ACTOR, PLANNER, ACTOR, ACTOR]
    assert [t.step for t in emitted] == list(range(len(traj.transitions)))  # streamed in time order
    planner_turns = [t for t in traj.transitions if t.agent == PLANNER]
    assert planner_turns[0].decision.message.startswith("Plan:") and planner_turns[0].decision.action is None
    executor_goals = [t.observation.goal for t in traj.transitions if t.agent == ACTOR]
    assert executor_goals[0].endswith("\nSub-goal: Open Settings")
    assert executor_goals[2].endswith("\nSub-goal: Tap Display")
    assert executor_goals[4].endswith("\nSub-goal: Give up")
    planner_requests = [b for b in openai_server.requests if role_of(b) == PLANNER]
    assert "has not changed" in openai_text(planner_requests[1]) and openai_images(planner_requests[0]) == 1
    assert TASK.instruction in openai_text(planner_requests[0])


def test_self_verification_sends_the_agent_back_then_accepts(openai_server) -> None:
    checks = iter(["Answer: no\nReason: dark theme is still off", "Answer: no\nReason: still off"])

    def reply(body: dict) -> str:
        if role_of(body) == VERIFIER:
            return next(checks)
        return "finished('done')"

    openai_server.reply = reply
    workflow = SelfVerifyWorkflow(checker=openai_server.litellm_config(), check_config={"max_rejections": 2})
    traj = play(workflow, llm_actor(openai_server))

    agents = [t.agent for t in traj.transitions]
    assert agents == [VERIFIER, ACTOR, VERIFIER, ACTOR, ACTOR]  # the third 'finished' is accepted unchecked
    assert traj.termination.reason is TerminationReason.AGENT_FINISHED and traj.success is False
    actor_steps = [t for t in traj.transitions if t.agent == ACTOR]
    assert [t.done for t in actor_steps] == [False, False, True]
    assert actor_steps[1].observation.goal.endswith("\nNot finished yet: dark theme is still off")
    judgements = [t.decision.message for t in traj.transitions if t.agent == VERIFIER]
    assert judgements == ["complete: no; reason: dark theme is still off", "complete: no; reason: still off"]
    assert sum(t.reward for t in traj.transitions) == 0.0


def test_self_verification_accepts_a_confirmed_finish_and_unclear_answers(openai_server) -> None:
    openai_server.reply = lambda body: "I am not sure." if role_of(body) == VERIFIER else "finished('done')"
    traj = play(SelfVerifyWorkflow(checker=openai_server.litellm_config()), llm_actor(openai_server))
    assert [t.agent for t in traj.transitions] == [VERIFIER, ACTOR]
    assert traj.transitions[0].decision.message == "complete: unknown; reason: I am not sure."


def test_reflection_shows_before_and_after_and_passes_the_note(openai_server) -> None:
    def reply(body: dict) -> str:
        if role_of(body) == REFLECTOR:
            return "The tap did nothing.\nTry opening Settings."
        return "click(50,50)"

    openai_server.reply = reply
    task = TASK.model_copy(update={"step_budget": 3})
    traj = play(ReflectionWorkflow(reflector=openai_server.litellm_config()), llm_actor(openai_server), task=task)
    assert [t.agent for t in traj.transitions] == [ACTOR, REFLECTOR, ACTOR, REFLECTOR, ACTOR]
    actor_goals = [t.observation.goal for t in traj.transitions if t.agent == ACTOR]
    assert "Note:" not in actor_goals[0] and task.instruction in actor_goals[0]
    assert actor_goals[1].endswith("\nNote: The tap did nothing. Try opening Settings.")
    reflector_requests = [b for b in openai_server.requests if role_of(b) == REFLECTOR]
    assert len(reflector_requests) == 2 and all(openai_images(b) == 2 for b in reflector_requests)
    assert '"type":"click"' in openai_text(reflector_requests[0])


@pytest.mark.parametrize("status, reason", [(500, TerminationReason.INFRA_TRUNCATED), (401, TerminationReason.ERROR)])
def test_a_failing_adviser_ends_the_phase_with_its_role_in_the_cause(openai_server, status, reason) -> None:
    openai_server.reply = lambda body: status if role_of(body) == PLANNER else "wait()"
    traj = play(PlannerWorkflow(planner=openai_server.litellm_config()), llm_actor(openai_server))
    assert traj.termination.reason is reason and traj.termination.cause.startswith("planner:")
    assert traj.transitions == [] and traj.success is None


def test_a_missing_key_fails_at_once_naming_the_variable(openai_server, monkeypatch) -> None:
    monkeypatch.delenv("DARWIN_FAKE_LLM_KEY")
    monkeypatch.setenv("DARWIN_ACTOR_KEY", "sk-actor")
    openai_server.reply = lambda body: "wait()"
    actor_config = LiteLLMPolicyConfig(**openai_server.litellm_config(api_key_env="DARWIN_ACTOR_KEY"))
    actor = ModelActor(TinyAgent(), LiteLLMPolicy(actor_config))
    traj = play(ReflectionWorkflow(reflector=openai_server.litellm_config()), actor)
    assert traj.termination.reason is TerminationReason.ERROR
    assert "DARWIN_FAKE_LLM_KEY" in traj.termination.cause and "reflector" in traj.termination.cause


def test_bad_adviser_specs_say_what_to_write() -> None:
    with pytest.raises(ValueError, match="planner: 'me' is not a model spec; use 'self'"):
        PlannerWorkflow(planner="me")
    with pytest.raises(ValueError, match="reflector: invalid LiteLLM config"):
        ReflectionWorkflow(reflector={"model": "x", "api_key": "sk-inline"})


@pytest.fixture(scope="module")
def tiny_actor() -> ModelActor:
    vlm = build_tiny_vlm(TinyVLMConfig(screen_width=56, screen_height=112), seed=0)
    return ModelActor(TinyAgent(), HFPolicy(vlm, HFPolicyConfig(max_new_tokens=6, seed=3)))


@pytest.mark.parametrize(
    "make",
    [
        lambda: PlannerWorkflow(config=StepConfig(observation_size=(56, 112)), planner_config={"steps_per_subgoal": 2}),
        lambda: SelfVerifyWorkflow(config=StepConfig(observation_size=(56, 112))),
        lambda: ReflectionWorkflow(config=StepConfig(observation_size=(56, 112))),
    ],
    ids=["planner", "self_verify", "reflection"],
)
def test_each_workflow_runs_with_the_tiny_model_as_every_agent(tiny_actor: ModelActor, make) -> None:
    traj = play(make(), tiny_actor, task=TASK.model_copy(update={"step_budget": 3}))
    assert traj.termination is not None and traj.termination.reason in (
        TerminationReason.STEP_BUDGET,
        TerminationReason.AGENT_FINISHED,
        TerminationReason.SUCCESS,
    )
    assert [t.step for t in traj.transitions] == list(range(len(traj)))
    assert all(t.decision.generation is not None and t.decision.generation.response_ids for t in traj.transitions)


def test_only_the_named_agents_tokens_reach_the_learner(tiny_actor: ModelActor) -> None:
    workflow = ReflectionWorkflow(config=StepConfig(observation_size=(56, 112)))
    traj = play(workflow, tiny_actor, task=TASK.model_copy(update={"step_budget": 3}))
    actor_steps = [t for t in traj.transitions if t.agent == ACTOR]
    reflector_steps = [t for t in traj.transitions if t.agent == REFLECTOR]
    assert len(actor_steps) == 3 and len(reflector_steps) == 2

    rows = collect_step_rows([traj]).rows  # the learner's entry point; default: the acting agent
    assert [r.response_ids for r in rows] == [tuple(t.decision.generation.response_ids) for t in actor_steps]
    assert [r.prompt for r in rows] == [t.decision.prompt for t in actor_steps]
    assert [r.step for r in rows] == [0, 1, 2]

    reflector_rows = collect_step_rows([traj], agent=REFLECTOR).rows
    assert [r.response_ids for r in reflector_rows] == [
        tuple(t.decision.generation.response_ids) for t in reflector_steps
    ]
    # The episode's return is unchanged by the filter (others' rewards fold into the actor's steps).
    assert sum(r.reward for r in rows) == pytest.approx(sum(t.reward for t in traj.transitions))


def test_turns_of_every_agent_are_stored_with_their_words(tmp_path, openai_server) -> None:
    openai_server.reply = lambda body: "Answer: yes\nReason: on" if role_of(body) == VERIFIER else "finished('x')"
    traj = play(SelfVerifyWorkflow(checker=openai_server.litellm_config()), llm_actor(openai_server))
    with RunStore.for_run_dir(tmp_path) as store:
        run_id = store.start_run("r", config=None)
        store.start_episode(run_id, traj.episode_id, traj.task, phone="p")
        for t in traj.transitions:
            store.record_step(t)
        steps = store.steps(traj.episode_id)
    assert [(s.agent, s.message) for s in steps] == [(VERIFIER, "complete: yes; reason: on"), (ACTOR, None)]
    assert steps[1].action is not None and steps[1].action.type == "finished"
    assert steps[0].phase is Phase.EXECUTION


def test_a_version_1_database_is_migrated_in_place(tmp_path) -> None:
    with RunStore.for_run_dir(tmp_path) as store:
        run_id = store.start_run("old", config=None)
        store.start_episode(run_id, "ep", TASK, phone="p")
    db = sqlite3.connect(tmp_path / "run.db")
    db.execute(
        "INSERT INTO steps (episode_id, step, phase, reward, done, termination_cause, created_at) "
        "VALUES ('ep', 0, 'execution', 0.5, 0, '', '2026-01-01 00:00:00')"
    )
    db.execute("ALTER TABLE steps DROP COLUMN agent")
    db.execute("ALTER TABLE steps DROP COLUMN message")
    db.execute("UPDATE store_meta SET value='1' WHERE key='schema_version'")
    db.commit()
    db.close()
    with RunStore.for_run_dir(tmp_path) as store:
        (step,) = store.steps("ep")
    assert (step.agent, step.message, step.reward) == (ACTOR, None, 0.5)
    db = sqlite3.connect(tmp_path / "run.db")
    assert db.execute("SELECT value FROM store_meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    db.close()
