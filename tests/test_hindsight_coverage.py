"""Coverage (issue 45, item 5): the share of human-written goals that exploration reached, checked
with each task's own rule verifier on the states the explorer recorded."""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner

from darwin.cli.main import main
from darwin.envs.sim.env import SimPhoneEnv
from darwin.hindsight.coverage import (
    CoverageCount,
    CoverageReport,
    explore_task_starts,
    held_out_tasks,
    is_answer_task,
    measure_coverage,
    task_start_state,
)
from darwin.hindsight.exploration import Exploration, explore
from darwin.hindsight.synthesizer import HindsightSynthesizer
from darwin.templates import default_split
from darwin.types import Task, VerifierSpec


@pytest.fixture(scope="module")
def settings_run() -> Exploration:
    return asyncio.run(explore(SimPhoneEnv(seed=0), "Settings", steps=30, seed=1))


def _never(app: str = "Settings") -> Task:
    return Task(
        id="never",
        instruction="Set dark theme to a word.",
        app=app,
        verifier=VerifierSpec(predicate="state.equals", params={"values": {"apps.settings.data.dark_theme": "never"}}),
    )


def _added_up(counts: CoverageCount) -> None:
    parts = counts.reached + counts.not_reached + counts.needs_setup + counts.unexplored + counts.answer
    assert parts == counts.tasks
    assert counts.share == (counts.reached / counts.tasks if counts.tasks else 0.0)


def _every_count_adds_up(report: CoverageReport) -> None:
    _added_up(report.counts)
    assert sum(app.counts.tasks for app in report.apps) == report.counts.tasks
    assert sum(app.counts.reached for app in report.apps) == report.counts.reached
    for app in report.apps:
        _added_up(app.counts)
        assert sum(t.counts.tasks for t in app.templates) == app.counts.tasks
        for template in app.templates:
            _added_up(template.counts)


def test_a_goal_the_explorer_reached_is_covered_at_the_step_it_was_reached(settings_run) -> None:
    found = HindsightSynthesizer().synthesize(settings_run).kept
    assert found
    initial = SimPhoneEnv(seed=0).probe_state()
    report = measure_coverage([settings_run], [c.task for c in found], initial)
    covered = [t for app in report.apps for tp in app.templates for t in tp.tasks]
    assert [t.status for t in covered] == ["reached"] * len(found)
    for candidate, task in zip(found, covered, strict=True):
        # the synthesiser's demonstration ends at the first step where its goal held
        assert [(r.exploration, r.explorer_seed, r.step) for r in task.reached_at] == [(0, 1, candidate.steps)]
    assert report.counts.share == 1.0 and report.counts.checked_share == 1.0
    _every_count_adds_up(report)


def test_a_goal_never_reached_is_not_covered_and_the_shares_add_up(settings_run) -> None:
    reached = HindsightSynthesizer().synthesize(settings_run).kept[0].task
    report = measure_coverage([settings_run], [reached, _never()], SimPhoneEnv(seed=0).probe_state())
    statuses = {t.task_id: t.status for app in report.apps for tp in app.templates for t in tp.tasks}
    assert statuses == {reached.id: "reached", "never": "not_reached"}
    assert report.counts.reached == 1 and report.counts.not_reached == 1 and report.counts.share == 0.5
    _every_count_adds_up(report)


def test_setup_answer_and_unexplored_tasks_are_reported_apart(settings_run) -> None:
    split = default_split()
    initial = SimPhoneEnv(seed=0).probe_state()
    # (a setup that leaves the phone as it was starts where the plain exploration started: that one is checked)
    with_setup = next(
        t
        for t in split.sets["unseen_templates"]
        if t.app == "Settings" and t.setup and task_start_state(t, initial) != initial
    )
    answer = next(t for t in split.sets["unseen_apps"] if is_answer_task(t))
    report = measure_coverage([settings_run], [with_setup, answer, _never("Clock")], initial)
    statuses = {t.task_id: t.status for app in report.apps for tp in app.templates for t in tp.tasks}
    assert statuses == {with_setup.id: "needs_setup", answer.id: "answer", "never": "unexplored"}
    assert report.counts.share == 0.0 and report.counts.checked_share is None
    _every_count_adds_up(report)


def test_explorations_from_each_setup_start_where_their_tasks_start() -> None:
    split = default_split()
    goals = [t for t in held_out_tasks(split, ["Chrome"]) if not is_answer_task(t)][:4]
    assert any(t.setup for t in goals) and all(t.app == "Chrome" for t in goals)
    runs = asyncio.run(explore_task_starts(goals, steps=5, explorer_seeds=(0, 1)))
    initial = SimPhoneEnv(seed=0).probe_state()
    starts = {json.dumps(r.start_state, sort_keys=True) for r in runs}
    for task in goals:
        assert json.dumps(task_start_state(task, initial), sort_keys=True) in starts
    report = measure_coverage(runs, goals, initial)
    assert all(t.explorations == 2 for app in report.apps for tp in app.templates for t in tp.tasks)
    assert report.counts.needs_setup == 0 and report.counts.unexplored == 0
    # without setups, the tasks that have one are reported as needing it
    plain = asyncio.run(explore_task_starts(goals, steps=5, explorer_seeds=(0,), with_setups=False))
    moved = sum(task_start_state(t, initial) != initial for t in goals)
    assert moved and measure_coverage(plain, goals, initial).counts.needs_setup == moved


def test_held_out_tasks_are_a_held_out_apps_every_template_and_a_training_apps_held_out_ones() -> None:
    split = default_split()
    held_app = split.held_out_apps[0]
    assert held_out_tasks(split, [held_app]) == [t for t in split.sets["unseen_apps"] if t.app == held_app]
    assert {t.template for t in held_out_tasks(split, ["Clock"])} <= set(split.held_out_templates)


def test_the_cli_prints_a_table_and_json_on_a_tiny_setting() -> None:
    args = ["tasks", "coverage", "--apps", "Chrome", "--steps", "3", "--explorer-seeds", "0"]
    table = CliRunner().invoke(main, args, env={"COLUMNS": "80"}, terminal_width=80)
    assert table.exit_code == 0, table.output
    assert "Chrome (held-out app)" in table.output and "all" in table.output
    as_json = CliRunner().invoke(main, [*args, "--json", "--no-setups"])
    assert as_json.exit_code == 0, as_json.output
    report = json.loads(as_json.output)
    counts = report["counts"]
    assert counts["tasks"] == len(held_out_tasks(default_split(), ["Chrome"])) and report["explorations"] == 1
    assert counts["needs_setup"] > 0
    assert sum(counts[k] for k in ("reached", "not_reached", "needs_setup", "unexplored", "answer")) == counts["tasks"]
    bad = CliRunner().invoke(main, ["tasks", "coverage", "--apps", "Nope", "--steps", "1"])
    assert bad.exit_code == 2 and "Nope" in bad.output
