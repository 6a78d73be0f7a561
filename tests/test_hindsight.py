"""Self-evolution's first pieces (issue 45): exploration with no task, hindsight tasks from the
states reached, the phrase-rule describer, the filters, and the leakage guard."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import darwin.templates
from darwin.actions import Click, OpenApp
from darwin.algos.task_metrics import state_diff
from darwin.components import ComponentSpec, build_component
from darwin.envs.sim.env import SimPhoneEnv
from darwin.hindsight.base import DifficultyBand, SynthesisedTask, filter_tasks
from darwin.hindsight.exploration import Exploration, ExplorationError, explore
from darwin.hindsight.leakage import LeakageError, refuse_held_out
from darwin.hindsight.synthesizer import HindsightSynthesizer
from darwin.png import encode_png
from darwin.predicates import evaluate
from darwin.templates import default_split, templates
from darwin.types import Phase, Task, TaskDefinitionError, Trajectory, VerifierSpec
from darwin.verifiers.base import VerificationRequest
from darwin.verifiers.rule import RuleVerifier

# (app, seed) explorations that change app data within 100 steps (found by trying seeds).
EXPLORED = (("Settings", 1), ("Clock", 0), ("Merriam-Webster", 0), ("Tasks", 0))


@pytest.fixture(scope="module")
def explorations() -> dict[str, Exploration]:
    return {app: asyncio.run(explore(SimPhoneEnv(seed=0), app, steps=100, seed=seed)) for app, seed in EXPLORED}


def _verdict(task: Task, state: dict) -> bool | None:
    request = VerificationRequest(
        task=task,
        phase=Phase.EXECUTION,
        instruction=task.instruction,
        spec=task.verifier,
        transitions=(),
        final_state=state,
        final_screenshot=None,
    )
    return asyncio.run(RuleVerifier().verify(request)).success


# (e) the explorer ---------------------------------------------------------------------------


def test_the_explorer_plays_n_steps_with_no_task_and_changes_app_data(explorations) -> None:
    for app, run in explorations.items():
        assert len(run.steps) == 100 and run.app == app
        assert run.steps[0].action == OpenApp(app=app)
        assert any(state_diff(run.start_state, step.state) for step in run.steps), app


def test_an_exploration_is_deterministic_for_its_seed() -> None:
    first = asyncio.run(explore(SimPhoneEnv(seed=0), "Settings", steps=40, seed=1))
    again = asyncio.run(explore(SimPhoneEnv(seed=0), "Settings", steps=40, seed=1))
    assert [s.action for s in first.steps] == [s.action for s in again.steps]
    assert [s.state for s in first.steps] == [s.state for s in again.steps]


def test_kept_screenshots_are_the_screens_before_and_after_each_action() -> None:
    env = SimPhoneEnv(seed=0)
    plain = asyncio.run(explore(SimPhoneEnv(seed=0), "Clock", steps=5, seed=3))
    run = asyncio.run(explore(env, "Clock", steps=5, seed=3, observation_size=(84, 182), keep_screenshots=True))
    assert plain.start_screenshot is None and all(step.screenshot is None for step in plain.steps)
    assert [s.action for s in run.steps] == [s.action for s in plain.steps]  # keeping them changes no play
    assert run.start_screenshot is not None and run.start_screenshot.startswith(b"\x89PNG")
    assert all(step.screenshot is not None for step in run.steps)
    assert run.steps[-1].screenshot == encode_png(env.screenshot((84, 182)))  # the screen after the last action
    assert run.start_screenshot != run.steps[0].screenshot  # opening the app changed the screen


def test_the_explorer_keeps_to_its_app_and_plays_no_finish() -> None:
    run = asyncio.run(explore(SimPhoneEnv(seed=0), "Clock", steps=60, seed=3))
    assert all(step.action.type not in ("finished", "answer") for step in run.steps)
    # whenever an action left the app, the next one opened it again
    for step, following in zip(run.steps, run.steps[1:], strict=False):
        if step.state["foreground"] != "clock":
            assert following.action == OpenApp(app="Clock")


def test_the_explorer_names_an_unknown_app_and_a_phone_without_a_probe() -> None:
    with pytest.raises(ExplorationError, match="no SimPhone app is labelled 'Clok'"):
        asyncio.run(explore(SimPhoneEnv(seed=0), "Clok", steps=3))

    class Blind(SimPhoneEnv):
        async def aprobe_state(self) -> None:  # type: ignore[override]  # a phone without a state probe
            return None

    with pytest.raises(ExplorationError, match="no state probe"):
        asyncio.run(explore(Blind(seed=0), "Clock", steps=3))


# (a) the synthesised predicate, checked by the rule verifier on real states -------------------


def test_a_synthesised_task_holds_where_the_explorer_reached_it_and_not_at_the_start(explorations) -> None:
    checked = 0
    for run in explorations.values():
        found = HindsightSynthesizer().synthesize(run).kept
        assert found, run.app
        for candidate in found:
            reached = run.steps[candidate.steps - 1].state
            assert candidate.task.verifier.predicate == "state.equals"
            assert _verdict(candidate.task, reached) is True
            assert _verdict(candidate.task, run.start_state) is False
            checked += 1
    assert checked >= 8


def test_the_demonstration_replayed_on_a_fresh_phone_reaches_the_goal(explorations) -> None:
    for run in explorations.values():
        for candidate in HindsightSynthesizer().synthesize(run).kept:
            env = SimPhoneEnv(seed=0)
            assert env.probe_state() == candidate.start_state
            for action in candidate.demonstration:
                env.execute(action)
            assert _verdict(candidate.task, env.probe_state()) is True, candidate.task.instruction


def test_a_synthesised_task_is_an_ordinary_task_and_a_component(explorations) -> None:
    synthesizer = build_component("task_synthesizer", ComponentSpec(name="hindsight", kwargs={"max_steps": 50}))
    assert isinstance(synthesizer, HindsightSynthesizer) and synthesizer.band == DifficultyBand(1, 50)
    task = synthesizer.synthesize(explorations["Settings"]).kept[0].task
    assert Task.model_validate(task.model_dump()) == task and task.source == "hindsight" and task.template is None
    assert task.app == "Settings" and task.instruction.startswith("In Settings, turn ")


def test_state_equals_params_are_validated_at_build_time() -> None:
    from darwin.task_registry import validate_task

    bad = Task(id="t", instruction="x", app="Clock", verifier=VerifierSpec(predicate="state.equals", params={}))
    with pytest.raises(TaskDefinitionError, match="state.equals"):
        validate_task(bad)
    star = VerifierSpec(predicate="state.equals", params={"values": {"apps.*.data.x": 1}})
    with pytest.raises(TaskDefinitionError, match="no '\\*'"):
        validate_task(bad.model_copy(update={"verifier": star}))
    state = {"a": {"b": [True, 1]}}
    assert not evaluate(VerifierSpec(predicate="state.equals", params={"values": {"a.b.1": True}}), state).success
    assert evaluate(VerifierSpec(predicate="state.equals", params={"values": {"a.b.0": True}}), state).success
    assert not evaluate(VerifierSpec(predicate="state.equals", params={"values": {"a.c": None}}), state).success


# (b) the describer never reads the templates' wording ----------------------------------------


class _NoReading(Mapping[str, tuple[str, ...]]):
    """Phrasings that fail when read."""

    def __getitem__(self, key: str) -> tuple[str, ...]:
        raise AssertionError("the describer read a template's wording")

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the describer read a template's wording")

    def __len__(self) -> int:
        return 1


def _goals(runs: Mapping[str, Exploration]) -> list[str]:
    return [c.task.instruction for run in runs.values() for c in HindsightSynthesizer().synthesize(run).kept]


def test_goals_are_unchanged_when_the_templates_are_reworded(explorations, monkeypatch) -> None:
    before = _goals(explorations)
    registered = templates()
    for template_id, template in registered.items():
        reworded = {lang: tuple("REWORDED " + p for p in ps) for lang, ps in template.phrasings.items()}
        monkeypatch.setitem(registered, template_id, dataclasses.replace(template, phrasings=reworded))
    assert templates()["clock.set_alarm"].instance(0).instruction.startswith("REWORDED")
    assert _goals(explorations) == before
    for template_id, template in registered.items():
        monkeypatch.setitem(registered, template_id, dataclasses.replace(template, phrasings=_NoReading()))
    assert _goals(explorations) == before


def test_the_hindsight_modules_do_not_import_the_templates() -> None:
    folder = Path(darwin.templates.__file__).parent / "hindsight"
    for name in (
        "describer.py",
        "synthesizer.py",
        "exploration.py",
        "base.py",
        "model_describer.py",
        "model_synthesizer.py",
    ):
        tree = ast.parse((folder / name).read_text(encoding="utf-8"))
        modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not {m for m in modules if m and "templates" in m}, name


# (d) the filters -----------------------------------------------------------------------------


def _candidate(path: str, value: object, steps: int, start: dict) -> SynthesisedTask:
    task = Task(
        id=f"c.{steps}",
        instruction="x",
        app="Settings",
        verifier=VerifierSpec(predicate="state.equals", params={"values": {path: value}}),
    )
    return SynthesisedTask(task, tuple(Click(x=1, y=1) for _ in range(steps)), start)


def test_the_filters_drop_already_true_duplicates_and_the_band() -> None:
    start = SimPhoneEnv(seed=0).probe_state()
    dark, wifi = "apps.settings.data.dark_theme", "apps.settings.data.toggles.network:Wi-Fi"
    candidates = [
        _candidate(dark, False, 3, start),  # already true: dark theme starts off
        _candidate(dark, True, 3, start),
        _candidate(dark, True, 4, start),  # the same check again
        _candidate(wifi, True, 1, start),  # too easy for min 2
        _candidate("apps.settings.data.hide_silent", False, 12, start),  # too hard for max 10
        _candidate("apps.settings.data.notification_dots", False, 10, start),
    ]
    result = filter_tasks(candidates, DifficultyBand(min_steps=2, max_steps=10))
    assert [c.steps for c in result.kept] == [3, 10]
    assert [r.reason for r in result.rejected] == ["already_true", "duplicate", "too_easy", "too_hard"]
    # tasks from earlier explorations count as duplicates too
    again = filter_tasks(candidates[1:2], seen=[candidates[1].task.verifier])
    assert not again.kept and again.rejected[0].reason == "duplicate"


def test_the_synthesizer_applies_its_band(explorations) -> None:
    run = explorations["Merriam-Webster"]
    every = HindsightSynthesizer().synthesize(run).kept
    banded = HindsightSynthesizer(min_steps=10, max_steps=50).synthesize(run)
    assert banded.kept and all(10 <= c.steps <= 50 for c in banded.kept)
    assert len(banded.kept) < len(every)
    assert {r.reason for r in banded.rejected} <= {"too_easy", "too_hard"}
    with pytest.raises(ValueError, match="below min_steps"):
        HindsightSynthesizer(min_steps=5, max_steps=2)


# (c) the leakage guard ------------------------------------------------------------------------


def test_the_leakage_guard_refuses_a_held_out_template_and_names_it() -> None:
    split = default_split()
    held = split.sets["unseen_templates"][0]
    with pytest.raises(LeakageError, match=f"task '{held.id}' \\(template '{held.template}': a held-out template\\)"):
        refuse_held_out([*split.sets["train"][:3], held], split)
    app_task = split.sets["unseen_apps"][0]
    episode = Trajectory(episode_id="e", task=app_task)
    with pytest.raises(LeakageError, match=f"episode of task '{app_task.id}'.*held-out app.*Fix: train on"):
        refuse_held_out([episode], split)


def test_the_leakage_guard_lets_synthesised_tasks_on_held_out_apps_through() -> None:
    split = default_split()
    app = split.held_out_apps[0]
    run = Exploration(app=app, phone="p", start_state={}, steps=())
    task = Task(id="hindsight.x", instruction="x", app=app, verifier=VerifierSpec(predicate="chrome.no_tabs"))
    refuse_held_out([SynthesisedTask(task, (), run.start_state), *split.sets["train"]], split)
