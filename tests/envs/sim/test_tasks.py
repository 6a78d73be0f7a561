import asyncio
import textwrap

import pytest

from darwin.agents.scripted import OracleActor, RandomActor
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.oracle import OracleError, shortest_plan
from darwin.envs.sim.phone import SimPhone
from darwin.evaluate import evaluate as run_eval
from darwin.predicates import evaluate, resolve
from darwin.task_registry import TASK_SETS, get_task, load_task_file, registry, resolve_tasks, task_set
from darwin.types import Phase, TaskDefinitionError, VerifierSpec

ALL_TASKS = list(registry().values())


def test_registry_has_the_papers_tasks():
    assert len(task_set("base8")) == 8
    assert len(task_set("paper16")) == 15  # dark theme is listed in both subsets
    cycle = task_set("cycle8")
    assert sum(1 for t in cycle if t.lifecycle and t.lifecycle.setup) == 1
    assert sum(1 for t in cycle if t.lifecycle and t.lifecycle.teardown) == 4
    assert sum(1 for t in cycle if t.lifecycle is None) == 3
    assert get_task("clock_1").golden_steps == 9 and get_task("clock_1").source == "spa-bench"


def test_fresh_phones_do_not_satisfy_any_goal():
    for seed in range(5):
        state = SimPhone(seed=seed).state
        for task in ALL_TASKS:
            for phase, _, spec, _ in task.phases():
                if phase is not Phase.TEARDOWN:
                    assert not evaluate(spec, state).success, (task.id, phase, seed)


@pytest.mark.parametrize("seed", range(12))
def test_oracle_solves_every_task_and_lifecycle_on_every_seed(seed):
    env = SimPhoneEnv(seed=seed, reset_between_episodes=True)  # every task from the initial state
    report = asyncio.run(run_eval(ALL_TASKS, [env], lambda i: OracleActor()))
    failed = {
        t.task.id: (t.termination, t.phase_success)
        for t in report.trajectories
        if not all(v is True for v in t.phase_success.values()) or len(t.phase_success) != len(t.task.phases())
    }
    assert not failed
    assert report.overall.successes == len(ALL_TASKS)


def test_oracle_plans_are_shortest_against_breadth_first_search():
    # A plain BFS (zero heuristic) finds the same length as A* with the predicate bound.
    from darwin import predicates

    for task_id in ("settings_dark_theme", "booking.com_3", "x_0", "chrome_clear_tabs"):
        task = get_task(task_id)
        phone = SimPhone(seed=3)
        astar = shortest_plan(phone, task.verifier, apps=[task.app])
        pred, _ = resolve(task.verifier)
        original = pred.fn
        predicates.PREDICATES[task.verifier.predicate] = predicates.Predicate(
            pred.name,
            pred.params_model,
            lambda s, p, f=original: predicates.Check.of(0 if f(s, p).success else 1),
            pred.doc,
        )
        try:
            bfs = shortest_plan(phone, task.verifier, apps=[task.app], max_expansions=200_000)
        finally:
            predicates.PREDICATES[task.verifier.predicate] = pred
        assert len(astar) == len(bfs), task_id


def test_random_agent_stays_under_ten_percent():
    tasks = task_set("paper16")
    envs = [SimPhoneEnv(seed=100 + i) for i in range(4)]
    report = asyncio.run(run_eval(tasks, envs, lambda i: RandomActor(seed=i), episodes_per_task=4))
    assert report.overall.episodes == 60
    assert report.overall.success_rate < 0.10


def test_oracle_raises_when_budget_is_too_small():
    with pytest.raises(OracleError, match="expanded"):
        shortest_plan(SimPhone(seed=0), get_task("booking.com_0").verifier, apps=["Booking.com"], max_expansions=2)


def test_unknown_predicate_names_task_field_and_fix():
    from darwin.task_registry import validate_task
    from darwin.types import Task

    bad = Task(id="my_task", instruction="x", app="Settings", verifier=VerifierSpec(predicate="settings.dark_thme"))
    with pytest.raises(TaskDefinitionError, match=r"my_task.*verifier\.predicate.*did you mean 'settings.dark_theme'"):
        validate_task(bad)


def test_bad_predicate_params_name_the_fields_to_give():
    from darwin.task_registry import validate_task
    from darwin.types import Task

    bad = Task(
        id="alarm_task",
        instruction="x",
        app="Clock",
        verifier=VerifierSpec(predicate="clock.alarm", params={"hour": 25, "colour": "red"}),
    )
    with pytest.raises(TaskDefinitionError) as info:
        validate_task(bad)
    msg = str(info.value)
    assert "alarm_task" in msg and "verifier.params" in msg and "hour" in msg and "colour" in msg and "Fix:" in msg


def test_task_file_errors_name_file_line_and_field(tmp_path):
    path = tmp_path / "tasks.yaml"
    path.write_text(
        textwrap.dedent("""\
        - id: good_task
          instruction: Turn on dark theme.
          app: Settings
          verifier: {predicate: settings.dark_theme, params: {enabled: true}}
        - id: bad_task
          instruction: Turn on dark theme.
          app: Settings
          difficulty: 7
          verifier: {predicate: settings.dark_theme}
        """)
    )
    with pytest.raises(TaskDefinitionError) as info:
        load_task_file(path)
    assert f"{path}:8: task 'bad_task': field 'difficulty'" in str(info.value)
    path.write_text("- id: t\n  instruction: x\n  app: Settings\n  verifier: {predicate: nope}\n")
    with pytest.raises(TaskDefinitionError, match=r"tasks.yaml:1: task 't': field 'verifier.predicate'"):
        load_task_file(path)
    path.write_text("id: not-a-list\n")
    with pytest.raises(TaskDefinitionError, match="must be a list"):
        load_task_file(path)


def test_task_files_load_and_resolve(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(
        '[{"id": "mine", "instruction": "Search for shoes.", "app": "Amazon", "verifier": {"predicate": "amazon.search_results", "params": {"query": "shoes"}}}]'
    )
    tasks = resolve_tasks(["base8", str(path), "amazon_0"])
    assert [t.id for t in tasks] == [*TASK_SETS["base8"], "mine"]
    plan = shortest_plan(SimPhone(seed=1), tasks[-1].verifier, apps=["Amazon"])
    assert len(plan) >= 3


def test_unknown_task_suggests_close_names():
    with pytest.raises(KeyError, match="clock_1"):
        get_task("clock1")
