"""Cross-app templates (envs/sim/templates/cross_app.py): their metadata, both languages, an
oracle that solves them from any seed, checks over both apps' state, and held-out-app splits
that keep a template out of training when any app it needs is held out.

tests/envs/sim/test_all_templates.py runs its all-templates checks on them too (perturbed
phones, the random agent, side effects in tests/test_episode_metrics.py)."""

from __future__ import annotations

import asyncio
import random

import pytest

from darwin.agents.scripted import OracleActor, RandomActor
from darwin.envs.sim.apps import default_apps
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.oracle import shortest_plan
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import SimPhone
from darwin.envs.sim.setups import apply_setup
from darwin.predicates import evaluate, resolve
from darwin.task_registry import get_task, task_set, validate_task
from darwin.templates import SplitConfig, split_templates, task_apps, templates
from darwin.types import TaskDefinitionError, VerifierSpec
from darwin.workflows.step import LifecycleWorkflow

CROSS = sorted(t.id for t in templates().values() if t.cross_app)
LABELS = {app.label for app in default_apps()}


def _apps_read(spec: VerifierSpec) -> set[str]:
    """The apps (ids) whose state a verifier reads."""
    if spec.predicate == "all.of":
        return set().union(*(_apps_read(VerifierSpec.model_validate(c)) for c in spec.params["checks"]))
    if spec.predicate == "data.has":
        return {str(spec.params["app"])}
    return {spec.predicate.split(".")[0]}


def test_there_are_enough_cross_app_templates_declaring_their_apps() -> None:
    assert len(CROSS) >= 25, CROSS
    for template_id in CROSS:
        tpl = templates()[template_id]
        assert template_id.startswith("cross.") and len(set(tpl.apps)) == len(tpl.apps) >= 2
        assert tpl.app == tpl.apps[0] and set(tpl.apps) <= LABELS, (template_id, tpl.apps)
        assert set(tpl.phrasings) == {"ENG", "CHN"} and tpl.description
    # Most read both apps' state (the rest check a target against a source's fixed content).
    both = [t for t in CROSS if len(_apps_read(templates()[t].instance(0).verifier)) >= 2]
    assert len(both) >= 25, sorted(set(CROSS) - set(both))
    pairs = {frozenset(templates()[t].apps) for t in CROSS}
    assert len(pairs) >= 15 and len(set().union(*pairs)) == 12  # every app takes part


@pytest.mark.parametrize("template_id", CROSS)
def test_instances_are_deterministic_and_false_before_the_agent_acts(template_id: str) -> None:
    tpl = templates()[template_id]
    for seed in range(16):
        for language in ("ENG", "CHN"):
            task = validate_task(tpl.instance(seed, language))
            assert tpl.instance(seed, language) == task and get_task(task.id) == task
            assert task_apps(task) == tpl.apps
            phone = SimPhone(seed=seed)
            state = apply_setup(phone.snapshot(), task.setup)
            assert not evaluate(task.verifier, state).success, (task.id, "holds before the agent acts")


@pytest.mark.parametrize("template_id", CROSS)
def test_the_oracle_plans_every_instance_in_both_languages(template_id: str) -> None:
    tpl = templates()[template_id]
    for seed in range(3):
        for language in ("ENG", "CHN"):
            task = tpl.instance(seed, language)
            phone = SimPhone(seed=seed, perturbation=PerturbationConfig(enabled=False))
            phone.restore(apply_setup(phone.snapshot(), task.setup))
            plan = shortest_plan(phone, task.verifier, apps=list(tpl.apps))
            assert 1 <= len(plan) <= task.step_budget
            for action in plan:
                phone.execute(action)
            assert evaluate(task.verifier, phone.state).success, task.id


def test_the_oracle_actor_opens_every_app_a_task_needs() -> None:
    task = templates()["cross.definition_to_x_draft"].instance(2, "CHN")
    env = SimPhoneEnv(seed=9, perturbation=PerturbationConfig(popup_rate=1.0), reset_between_episodes=True)
    traj = asyncio.run(LifecycleWorkflow().run(env, task, OracleActor()))
    assert traj.success is True


def test_a_random_agent_rarely_solves_them() -> None:
    rng = random.Random(1)
    wins = 0
    for i, template_id in enumerate(CROSS):
        task = templates()[template_id].instance(rng.randrange(1000), rng.choice(("ENG", "CHN")))
        env = SimPhoneEnv(seed=i, reset_between_episodes=True)
        wins += asyncio.run(LifecycleWorkflow().run(env, task, RandomActor(seed=i))).success is True
    assert wins <= 1, f"random agent solved {wins} of {len(CROSS)}"


def test_changing_the_source_app_fails_the_goal() -> None:
    """The check reads the source app too: the target done but the source changed is no success."""
    task = templates()["cross.contact_phone_to_message"].instance(4)
    phone = SimPhone(seed=4, perturbation=PerturbationConfig(enabled=False))
    phone.restore(apply_setup(phone.snapshot(), task.setup))
    for action in shortest_plan(phone, task.verifier, apps=list(task_apps(task))):
        phone.execute(action)
    state = phone.snapshot()
    assert evaluate(task.verifier, state).success
    for contact in state["apps"]["contacts"]["data"]["contacts"]:
        if f"{contact['first']} {contact['last']}" == task.params["name"]:
            contact["phone"] = "+1 555-0000"
    assert not evaluate(task.verifier, state).success


def test_all_of_and_data_has_validate_and_combine() -> None:
    spec = VerifierSpec(
        predicate="all.of",
        params={
            "checks": [
                {"predicate": "x.draft", "params": {"content": "hello"}},
                {
                    "predicate": "data.has",
                    "params": {"app": "contacts", "key": "contacts", "match": {"first": "Nobody"}},
                },
            ]
        },
    )
    _, params = resolve(spec)
    assert params.texts() == ["hello"]
    check = evaluate(spec, SimPhone(seed=0).state)
    assert not check.success and check.unmet >= 2
    with pytest.raises(TaskDefinitionError, match="'checks.0.predicate' = 'x.drafts' is not a registered predicate"):
        resolve(
            VerifierSpec(
                predicate="all.of", params={"checks": [{"predicate": "x.drafts"}, {"predicate": "chrome.no_tabs"}]}
            )
        )
    with pytest.raises(TaskDefinitionError, match="nest no 'all.of'"):
        resolve(
            VerifierSpec(predicate="all.of", params={"checks": [spec.model_dump(), {"predicate": "chrome.no_tabs"}]})
        )
    with pytest.raises(TaskDefinitionError, match="at least 2 items"):
        resolve(VerifierSpec(predicate="all.of", params={"checks": [{"predicate": "chrome.no_tabs"}]}))


def test_a_held_out_app_takes_every_cross_app_template_that_needs_it_out_of_training() -> None:
    for held in (("Contacts",), ("Messages", "X")):
        split = split_templates(SplitConfig(held_out_apps=held, train_instances=1, eval_instances=1, cross_app=True))
        needs_held = {t for t in CROSS if set(templates()[t].apps) & set(held)}
        assert needs_held
        trained = {t.template for name in ("train", "unseen_instances", "unseen_templates") for t in split.sets[name]}
        assert not needs_held & trained and not needs_held & set(split.train_templates + split.held_out_templates)
        assert {t.template for t in split.sets["unseen_apps"]} >= needs_held
        # No training or in-distribution evaluation task opens a held-out app.
        for name in ("train", "unseen_instances", "unseen_templates"):
            assert not any(set(task_apps(t)) & set(held) for t in split.sets[name]), name
        # The other cross-app templates are split like a training app's: most train, some held out.
        others = set(CROSS) - needs_held
        assert others <= set(split.train_templates) | set(split.held_out_templates)
        assert others & set(split.held_out_templates) and others & set(split.train_templates)


def test_cross_app_templates_leave_the_single_app_split_as_it_was() -> None:
    """They are drawn after the single-app templates, from their own stream: the single-app part is unchanged.
    The default leaves them out, so the recorded splits (gen.*, examples/generalization.py) are as they were."""
    assert not any(
        templates()[t.template].cross_app for name in ("gen.train", "gen.unseen_apps") for t in task_set(name)
    )
    for seed in (0, 3):
        with_cross = split_templates(SplitConfig(seed=seed, train_instances=1, eval_instances=1, cross_app=True))
        without = split_templates(SplitConfig(seed=seed, train_instances=1, eval_instances=1))
        assert with_cross.held_out_apps == without.held_out_apps
        for name, tasks in without.sets.items():
            assert [t.id for t in with_cross.sets[name][: len(tasks)]] == [t.id for t in tasks]
            assert not any(templates()[t.template].cross_app for t in tasks)
        assert any(templates()[t].cross_app for t in with_cross.train_templates)
