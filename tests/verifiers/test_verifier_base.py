"""A Verifier subclass may write ``verify`` as a plain function, as a function verifier may."""

from __future__ import annotations

import asyncio

import pytest

from darwin.agents.scripted import OracleActor
from darwin.envs.sim.env import SimPhoneEnv
from darwin.task_registry import resolve_tasks
from darwin.types import Verdict
from darwin.verifiers.base import VerificationRequest, Verifier
from darwin.workflows.step import LifecycleWorkflow, StepConfig


class SyncVerifier(Verifier):
    def __init__(self) -> None:
        self.seen: list[int] = []

    def verify(self, request: VerificationRequest) -> Verdict:  # a plain def
        self.seen.append(len(request.transitions))
        return Verdict(success=False, reason="never satisfied")


class WrongType(Verifier):
    def verify(self, request):
        return True


def test_a_sync_verify_subclass_runs_in_the_workflow():
    verifier = SyncVerifier()
    (task,) = resolve_tasks(("clock_1",))
    workflow = LifecycleWorkflow(verifier=verifier, config=StepConfig(observation_size=(168, 364)))
    trajectory = asyncio.run(
        workflow.run(SimPhoneEnv(seed=1), task.model_copy(update={"step_budget": 3}), OracleActor())
    )
    assert verifier.seen and trajectory.success is False
    assert trajectory.phase_reasons[trajectory.transitions[-1].phase] == "never satisfied"


def test_a_sync_verify_that_returns_no_verdict_names_the_class():
    with pytest.raises(TypeError, match=r"WrongType.verify returned bool; return a darwin.types.Verdict"):
        asyncio.run(WrongType().verify(None))


def test_an_async_verify_is_left_alone():
    class Async(Verifier):
        async def verify(self, request):
            return Verdict(success=True)

    assert asyncio.iscoroutinefunction(Async.verify) and Async.verify.__qualname__.endswith("Async.verify")
