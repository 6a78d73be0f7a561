"""Checks every SimPhone app's templates share (``test_new_apps.py``, ``test_more_apps.py``).

Tests run with ``--import-mode=importlib``, so the helpers travel on a fixture, not by import.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from darwin.agents.scripted import OracleActor, RandomActor
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.oracle import shortest_plan
from darwin.envs.sim.phone import SimPhone
from darwin.envs.sim.setups import apply_setup
from darwin.predicates import evaluate
from darwin.task_registry import validate_task
from darwin.templates import templates
from darwin.workflows.step import LifecycleWorkflow


class TemplateChecks:
    """The oracle's and the random agent's checks of a template, in one place."""

    @staticmethod
    def bounds_are_admissible(template_id: str, seeds: int = 3) -> None:
        """``unmet`` never exceeds the actions the oracle still takes (so its plans are shortest),
        and every sub-goal holds once the goal does."""
        tpl = templates()[template_id]
        for seed in range(seeds):
            task = tpl.instance(seed)
            phone = SimPhone(seed=seed)
            phone.restore(apply_setup(phone.snapshot(), task.setup))
            plan = shortest_plan(phone, task.verifier, apps=[task.app])
            for i, action in enumerate(plan):
                assert evaluate(task.verifier, phone.state).unmet <= len(plan) - i, (task.id, i, action)
                phone.execute(action)
            assert evaluate(task.verifier, phone.state).success, task.id
            for sub in task.subgoals:
                assert evaluate(sub, phone.state).success, (task.id, sub)

    @staticmethod
    def oracle_solves_every_instance(template_id: str, seeds: int) -> None:
        """``seeds`` seeds, English and Chinese, each on its own perturbed phone (episodes start from its initial state)."""
        tpl = templates()[template_id]
        workflow = LifecycleWorkflow()
        failed = []
        for seed in range(seeds):
            for language in ("ENG", "CHN"):
                task = validate_task(tpl.instance(seed, language))
                env = SimPhoneEnv(seed=seed, reset_between_episodes=True)
                trajectory = asyncio.run(workflow.run(env, task, OracleActor()))
                if trajectory.success is not True:
                    failed.append((task.id, trajectory.termination))
        assert not failed

    @staticmethod
    def random_successes(template_ids: Sequence[str]) -> list[str]:
        """The templates a random agent solved, one instance each."""
        solved = []
        for i, template_id in enumerate(template_ids):
            task = templates()[template_id].instance(i)
            env = SimPhoneEnv(seed=i, reset_between_episodes=True)
            if asyncio.run(LifecycleWorkflow().run(env, task, RandomActor(seed=i))).success is True:
                solved.append(template_id)
        return solved


@pytest.fixture
def template_checks() -> TemplateChecks:
    return TemplateChecks()
