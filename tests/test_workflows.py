import asyncio
import logging

import pytest

from darwin.actions import Click, Finished
from darwin.agents.base import Actor
from darwin.agents.scripted import OracleActor
from darwin.envs.base import InfraError
from darwin.envs.sim.env import SimPhoneEnv
from darwin.task_registry import get_task
from darwin.types import Decision, ParseError, Phase, TerminationReason
from darwin.workflows.step import LifecycleWorkflow, StepConfig, StepWorkflow


def run(workflow, env, task_id, actor, emitted=None):
    return asyncio.run(workflow.run(env, get_task(task_id), actor, emit=None if emitted is None else emitted.append))


class Scripted(Actor):
    def __init__(self, decisions):
        self.decisions = list(decisions)

    async def act(self, observation, history):
        return self.decisions.pop(0) if self.decisions else Decision(action=Click(x=5, y=1200))


class Boom(Actor):
    async def act(self, observation, history):
        raise RuntimeError("model server exploded")


def test_lifecycle_runs_setup_execution_teardown_in_order_with_per_phase_rewards():
    emitted = []
    traj = run(LifecycleWorkflow(), SimPhoneEnv(seed=2), "chrome_clear_tabs.cycle", OracleActor(), emitted)
    assert traj.phase_success == {Phase.SETUP: True, Phase.EXECUTION: True}
    phases = [t.phase for t in emitted]
    assert phases == sorted(phases, key=[Phase.SETUP, Phase.EXECUTION].index)
    assert [t.step for t in emitted] == list(range(len(emitted)))
    assert sum(t.reward for t in emitted) == 2.0  # one reward per verified phase
    traj = run(LifecycleWorkflow(), SimPhoneEnv(seed=2), "settings_dark_theme.cycle", OracleActor())
    assert traj.phase_success == {Phase.EXECUTION: True, Phase.TEARDOWN: True}


def test_teardown_restores_the_neutral_state():
    env = SimPhoneEnv(seed=4)
    run(LifecycleWorkflow(), env, "clock_1.cycle", OracleActor())
    assert not any(a["hour"] == 9 and a["minute"] == 0 for a in env.phone.app_data("clock")["alarms"])


def test_failed_phase_gates_the_next_one():
    env = SimPhoneEnv(seed=1)
    traj = run(LifecycleWorkflow(), env, "settings_dark_theme.cycle", Scripted([Decision(action=Finished())]))
    assert traj.phase_success == {Phase.EXECUTION: False}
    assert traj.termination.reason is TerminationReason.AGENT_FINISHED
    assert sum(t.reward for t in traj.transitions) == 0.0


def test_step_workflow_ignores_lifecycle_phases():
    traj = run(StepWorkflow(), SimPhoneEnv(seed=1), "settings_dark_theme.cycle", OracleActor())
    assert set(traj.phase_success) == {Phase.EXECUTION}


class DropsAfter(SimPhoneEnv):
    def __init__(self, n, **kw):
        super().__init__(**kw)
        self.n = n

    def execute(self, action):
        self.n -= 1
        if self.n < 0:
            raise InfraError("disconnect", "socket closed")
        super().execute(action)


def test_infra_failure_truncates_with_cause_and_no_reward():
    emitted = []
    traj = run(LifecycleWorkflow(), DropsAfter(2, seed=0), "settings_dark_theme", OracleActor(), emitted)
    assert traj.termination.reason is TerminationReason.INFRA_TRUNCATED and traj.termination.cause == "disconnect"
    assert traj.success is None
    assert all(t.reward == 0.0 for t in emitted)


def test_parse_errors_are_no_ops_and_the_workflow_shapes_no_reward():
    env = SimPhoneEnv(seed=0)
    before = env.phone.snapshot()
    bad = Decision(action=None, parse_error=ParseError(reason="no action", text="blah"))
    wf = StepWorkflow(config=StepConfig())
    traj = asyncio.run(wf.run(env, get_task("amazon_0"), Scripted([bad, Decision(action=Finished())])))
    assert env.phone.snapshot()["apps"] == before["apps"]
    assert [t.reward for t in traj.transitions] == [0.0, 0.0]  # the learner's parse_error_penalty shapes it


def test_actor_errors_end_the_episode_as_error_and_are_logged(caplog):
    with caplog.at_level(logging.ERROR):
        traj = run(StepWorkflow(), SimPhoneEnv(seed=0), "amazon_0", Boom())
    assert traj.termination.reason is TerminationReason.ERROR
    assert "model server exploded" in traj.termination.cause
    assert "actor failed" in caplog.text


def test_step_budget_ends_the_phase():
    task = get_task("amazon_0").model_copy(update={"step_budget": 3})
    traj = asyncio.run(StepWorkflow().run(SimPhoneEnv(seed=0), task, Scripted([])))
    assert len(traj) == 3 and traj.termination.reason is TerminationReason.STEP_BUDGET and traj.success is False


def test_success_ends_the_phase_early_when_configured():
    early = run(StepWorkflow(), SimPhoneEnv(seed=0), "settings_dark_theme", OracleActor())
    late = run(
        StepWorkflow(config=StepConfig(end_on_success=False)), SimPhoneEnv(seed=0), "settings_dark_theme", OracleActor()
    )
    assert early.termination.reason is TerminationReason.SUCCESS
    assert late.termination.reason is TerminationReason.AGENT_FINISHED  # the oracle says finished
    assert len(late) == len(early) + 1 and early.success and late.success


@pytest.mark.parametrize("task_id", ["amazon_0", "x_3"])
def test_observations_have_the_configured_size_and_goal(task_id):
    traj = run(
        StepWorkflow(config=StepConfig(observation_size=(126, 280))), SimPhoneEnv(seed=0), task_id, OracleActor()
    )
    obs = traj.transitions[0].observation
    assert obs.screenshot.shape == (280, 126, 3)
    assert obs.goal.startswith(get_task(task_id).app + ": ")


def test_a_goal_left_over_from_an_earlier_episode_is_neither_played_nor_scored():
    env = SimPhoneEnv(seed=3)
    first = run(StepWorkflow(), env, "settings_dark_theme", OracleActor())
    assert first.success is True and len(first) > 0
    env.go_home()  # state persists: the theme stays dark
    emitted = []
    again = run(StepWorkflow(), env, "settings_dark_theme", Scripted([]), emitted)
    assert again.termination.reason is TerminationReason.ALREADY_DONE
    assert again.success is None and len(again) == 0 and emitted == []  # no free success, nothing to train on
    # Switched off, the leftover goal is a free success for whatever the actor did first.
    free = run(StepWorkflow(config=StepConfig(skip_already_done=False)), env, "settings_dark_theme", Scripted([]))
    assert free.success is True and len(free) == 1


def test_sim_phones_can_start_every_episode_fresh():
    env = SimPhoneEnv(seed=3, reset_between_episodes=True)
    assert run(StepWorkflow(), env, "settings_dark_theme", OracleActor()).success is True
    env.go_home()
    second = run(StepWorkflow(), env, "settings_dark_theme", OracleActor())
    assert second.success is True and len(second) > 0  # played again from the initial state


def test_a_teardown_goal_that_already_holds_keeps_the_execution_verdict():
    from darwin.types import Verdict
    from darwin.verifiers.rule import RuleVerifier

    class NeutralAlready(RuleVerifier):  # the teardown's goal holds as soon as it is asked
        async def verify(self, request):
            if request.phase is Phase.TEARDOWN:
                return Verdict(success=True, reason="neutral already")
            return await super().verify(request)

    traj = run(
        LifecycleWorkflow(verifier=NeutralAlready()), SimPhoneEnv(seed=2), "settings_dark_theme.cycle", OracleActor()
    )
    assert traj.phase_success == {Phase.EXECUTION: True, Phase.TEARDOWN: True}
    assert traj.termination.reason is TerminationReason.SUCCESS and traj.success is True
    assert all(t.phase is Phase.EXECUTION for t in traj.transitions)  # the teardown was not played
