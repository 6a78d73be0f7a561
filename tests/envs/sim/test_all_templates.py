"""Every registered template: solvable by the oracle under any perturbation, not by chance,
its instances well-formed, and its predicate false before and true after the oracle's plan."""

from __future__ import annotations

import asyncio
import random

import pytest

from darwin.agents.scripted import OracleActor, RandomActor
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.oracle import shortest_plan
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import SimPhone
from darwin.envs.sim.setups import apply_setup
from darwin.predicates import evaluate
from darwin.task_registry import get_task, validate_task
from darwin.templates import TaskTemplate, task_apps, templates
from darwin.types import Task
from darwin.workflows.step import LifecycleWorkflow

TEMPLATES = sorted(templates())
CANONICAL = PerturbationConfig(enabled=False)
ADVERSE = PerturbationConfig(popup_rate=1.0)  # every launch shows a pop-up; shuffled icons and lists


def _run(task: Task, env: SimPhoneEnv, actor) -> bool | None:
    return asyncio.run(LifecycleWorkflow().run(env, task, actor)).success


def test_the_world_is_big_enough() -> None:
    apps = {t.app for t in templates().values()}
    assert len(TEMPLATES) >= 60, f"{len(TEMPLATES)} templates"
    assert len(apps) >= 12, sorted(apps)
    kinds = [t.kind for t in templates().values()]
    assert kinds.count("answer") >= 10
    assert {t.difficulty for t in templates().values()} == {1, 2, 3}


@pytest.mark.parametrize("template_id", TEMPLATES)
def test_instances_are_well_formed(template_id: str) -> None:
    tpl: TaskTemplate = templates()[template_id]
    assert tpl.description and set(tpl.phrasings) == {"ENG", "CHN"}
    seen_params = set()
    for seed in range(12):
        for language in ("ENG", "CHN"):
            task = validate_task(tpl.instance(seed, language))
            assert get_task(task.id) == task  # ids rebuild the instance
            assert task.template == template_id and task.language == language and "{" not in task.instruction
            assert task.allowed_changes is not None
            # Explicit parameters (a proposer's path) give the same goal and setup.
            explicit = tpl.task(task.params, language)
            assert (explicit.verifier, explicit.setup) == (task.verifier, task.setup)
            seen_params.add(repr(sorted(task.params.items())))
    assert len(seen_params) >= 2, "sampling gives one instance only"


@pytest.mark.parametrize("template_id", TEMPLATES)
def test_predicate_false_before_and_true_after_the_plan(template_id: str) -> None:
    """No phone env: the predicate on the instance's start state and on the plan's end state."""
    task = templates()[template_id].instance(7)
    phone = SimPhone(seed=7, perturbation=CANONICAL)
    phone.restore(apply_setup(phone.snapshot(), task.setup))
    assert not evaluate(task.verifier, phone.state).success, "the goal holds before the agent acts"
    plan = shortest_plan(phone, task.verifier, apps=list(task_apps(task)))  # a cross-app task opens each of its apps
    assert 1 <= len(plan) <= task.step_budget
    for action in plan:
        phone.execute(action)
    assert evaluate(task.verifier, phone.state).success


@pytest.mark.parametrize("template_id", TEMPLATES)
def test_oracle_solves_every_instance_under_any_perturbation(template_id: str) -> None:
    tpl = templates()[template_id]
    for seed in range(4):
        for perturbation in (CANONICAL, ADVERSE):
            task = tpl.instance(seed, "CHN" if seed % 2 else "ENG")
            # locale auto: the Chinese instances play on a Chinese UI (phones.locale's default)
            env = SimPhoneEnv(seed=100 + seed, perturbation=perturbation, reset_between_episodes=True, locale="auto")
            assert _run(task, env, OracleActor()) is True, (task.id, perturbation)
            assert env.phone.locale == ("zh" if task.language == "CHN" else "en")


def test_random_agent_stays_low() -> None:
    rng = random.Random(0)
    results = []
    for i, template_id in enumerate(TEMPLATES):
        task = templates()[template_id].instance(rng.randrange(1000))
        env = SimPhoneEnv(seed=i, reset_between_episodes=True)
        results.append(_run(task, env, RandomActor(seed=i)) is True)
    assert sum(results) / len(results) <= 0.1, f"random agent solved {sum(results)} of {len(results)}"


def test_an_answer_does_not_outlive_its_episode() -> None:
    """State persists between episodes, but an answer belongs to the episode that gave it."""
    task = templates()["clock.zone_offset"].instance(1)
    env = SimPhoneEnv(seed=3)  # keeps its state between episodes
    first = asyncio.run(LifecycleWorkflow().run(env, task, OracleActor()))
    assert first.success is True and env.probe_state()["answer"] is not None
    env.go_home()
    assert env.probe_state()["answer"] is None
    again = asyncio.run(LifecycleWorkflow().run(env, task, OracleActor()))
    assert again.success is True and again.transitions, "the second episode was skipped as already done"
