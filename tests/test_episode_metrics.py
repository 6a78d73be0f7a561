"""Episode metrics end to end: measured by the step loop on SimPhones, stored, summarised by
`darwin eval`. Each episode is a scripted action list whose metrics are worked out by hand."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest
from click.testing import CliRunner
from rich.console import Console

from darwin.actions import Finished, PressBack
from darwin.agents.base import Actor
from darwin.agents.scripted import OracleActor
from darwin.envs.base import InfraError
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.oracle import shortest_plan
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.evaluate import evaluate
from darwin.store import RunStore
from darwin.store_schema import SCHEMA_VERSION
from darwin.task_registry import validate_task
from darwin.templates import get_template, templates
from darwin.types import Decision, EpisodeMetrics, Task, TerminationReason, VerifierSpec
from darwin.workflows.step import LifecycleWorkflow, StepConfig, StepWorkflow

DARK = VerifierSpec(predicate="settings.dark_theme", params={"enabled": True})
HISTORY = VerifierSpec(predicate="settings.notification_history", params={"enabled": True})
DARK_TASK = Task(
    id="metrics_dark",
    instruction="Turn on dark theme.",
    app="Settings",
    verifier=DARK,
    allowed_changes=("apps.settings.data.dark_theme",),
)
CANONICAL = PerturbationConfig(enabled=False)  # no pop-ups: a planned action list plays back exactly


class Scripted(Actor):
    """Plays a fixed action list, then says finished."""

    def __init__(self, actions) -> None:
        self.actions = list(actions)

    async def act(self, observation, history):
        return Decision(action=self.actions.pop(0) if self.actions else Finished())


def _env() -> SimPhoneEnv:
    return SimPhoneEnv(seed=0, perturbation=CANONICAL)


def _plan(env: SimPhoneEnv, *goals: VerifierSpec, app: str = "Settings") -> list:
    """The oracle's shortest actions reaching each goal in turn, from the phone's current state."""
    sim, actions = env.phone.fork(), []
    for goal in goals:
        for action in shortest_plan(sim, goal, apps=[app]):
            sim.execute(action)
            actions.append(action)
    return actions


def _run(task: Task, actions, config: StepConfig | None = None, env: SimPhoneEnv | None = None, workflow=StepWorkflow):
    env = env or _env()
    return asyncio.run(workflow(config=config).run(env, task, Scripted(actions)))


def test_the_dark_theme_plan_is_three_actions():
    # The hand computations below rely on it: open Settings, tap Display, tap the toggle.
    assert len(_plan(_env(), DARK)) == 3


def test_an_unrequested_side_effect_is_named():
    env = _env()
    actions = _plan(env, HISTORY, DARK)  # the agent also turns notification history on
    traj = _run(DARK_TASK, actions, env=env)
    assert traj.success is True and traj.termination.reason is TerminationReason.SUCCESS
    assert traj.metrics == EpisodeMetrics(
        progress_rate=1.0,
        side_effects=("apps.settings.data.notification_history",),
        false_completion=False,
        over_time_steps=0,
        goal_first_met_step=len(actions) - 1,
    )


def test_a_false_completion_with_the_distance_based_progress():
    # Finished at once: distance 3 -> 3, progress 0.
    traj = _run(DARK_TASK, [])
    assert traj.termination.reason is TerminationReason.AGENT_FINISHED and traj.success is False
    assert traj.metrics == EpisodeMetrics(
        progress_rate=0.0, side_effects=(), false_completion=True, over_time_steps=0, goal_first_met_step=None
    )
    # Open Settings, tap Display, then finished: distance 3 -> 1, progress 1 - 1/3.
    traj = _run(DARK_TASK, _plan(_env(), DARK)[:2])
    assert traj.metrics.false_completion and traj.metrics.progress_rate == pytest.approx(2 / 3)


def test_an_over_time_episode_counts_the_steps_after_the_goal():
    actions = [*_plan(_env(), DARK), PressBack(), PressBack()]  # goal met after step 2, then two more steps
    traj = _run(DARK_TASK, actions, StepConfig(end_on_success=False))
    assert traj.success is True and traj.termination.reason is TerminationReason.AGENT_FINISHED
    assert traj.metrics == EpisodeMetrics(
        progress_rate=1.0, side_effects=(), false_completion=False, over_time_steps=2, goal_first_met_step=2
    )
    assert len(traj) == 6  # the final `finished` is not an extra step
    # The same agent cut off by the step budget: still two steps over time.
    budget = DARK_TASK.model_copy(update={"step_budget": 5})
    traj = _run(budget, actions, StepConfig(end_on_success=False))
    assert (
        len(traj) == 5 and traj.termination.reason is TerminationReason.SUCCESS
    )  # the budget's last step, the goal holding
    assert (traj.metrics.over_time_steps, traj.metrics.goal_first_met_step) == (2, 2)
    # Without per-step checks over-time is unknown, not zero.
    traj = _run(DARK_TASK, actions, StepConfig(end_on_success=False, metrics_every_step=False))
    assert (traj.metrics.over_time_steps, traj.metrics.goal_first_met_step, traj.metrics.progress_rate) == (
        None,
        None,
        1.0,
    )


def test_a_clean_successful_template_episode_and_sub_goal_progress():
    task = get_template("clock.set_alarm").instance(
        0
    )  # 6:00 AM on Wed and Fri; sub-goals: the alarm exists, then its days
    traj = asyncio.run(StepWorkflow().run(_env(), task, OracleActor()))
    assert traj.success is True
    assert traj.metrics.side_effects == () and traj.metrics.progress_rate == 1.0 and not traj.metrics.false_completion
    # An alarm at the right time on no days, then finished: one of two sub-goals -> progress 0.5.
    env = _env()
    actions = _plan(env, VerifierSpec(predicate="clock.alarm_exists", params={"hour": 6, "minute": 0}), app="Clock")
    traj = _run(task, actions, env=env)
    assert traj.success is False
    assert traj.metrics.progress_rate == 0.5 and traj.metrics.false_completion and traj.metrics.side_effects == ()


def test_setup_changes_are_not_side_effects_and_an_answer_is_on_time():
    delete = get_template("clock.delete_alarm").instance(1)  # its setup adds the alarm the task deletes
    traj = asyncio.run(LifecycleWorkflow().run(_env(), delete, OracleActor()))
    assert traj.success is True and traj.metrics.side_effects == ()
    answer = get_template("clock.zone_offset").instance(0)  # may change nothing; the answer ends it
    traj = asyncio.run(LifecycleWorkflow(config=StepConfig(end_on_success=False)).run(_env(), answer, OracleActor()))
    assert traj.success is True and traj.termination.reason is TerminationReason.AGENT_FINISHED
    assert traj.metrics == EpisodeMetrics(1.0, (), False, 0, len(traj) - 1)


def test_metrics_change_no_reward_verdict_or_step():
    actions = [*_plan(_env(), HISTORY, DARK), PressBack()]
    for config in (StepConfig(), StepConfig(end_on_success=False)):
        measured = _run(DARK_TASK, actions, config)
        plain = _run(DARK_TASK, actions, config.model_copy(update={"episode_metrics": False}))
        assert measured.metrics is not None and plain.metrics is None
        assert [(t.step, t.reward, t.done, t.termination, t.decision.action) for t in measured.transitions] == [
            (t.step, t.reward, t.done, t.termination, t.decision.action) for t in plain.transitions
        ]
        assert (measured.phase_success, measured.phase_reasons, measured.termination) == (
            plain.phase_success,
            plain.phase_reasons,
            plain.termination,
        )


class NoProbe(SimPhoneEnv):
    def probe_state(self):
        return None

    async def aprobe_state(self):
        return None


class ProbeFailsAfter(SimPhoneEnv):
    """The state probe fails for good after ``n`` calls (a phone that dropped off)."""

    def __init__(self, n: int, **kw) -> None:
        super().__init__(**kw)
        self.n = n

    async def aprobe_state(self):
        self.n -= 1
        if self.n < 0:
            raise InfraError("adb: device offline")
        return self.probe_state()


class ProbeFailsOnce(SimPhoneEnv):
    """The ``k``-th state probe fails (a transient drop); the others answer."""

    def __init__(self, k: int, **kw) -> None:
        super().__init__(**kw)
        self.k = k

    async def aprobe_state(self):
        self.k -= 1
        if self.k == 0:
            raise InfraError("adb: connection reset")
        return self.probe_state()


@pytest.mark.parametrize("k", [1, 2, 3, 4])  # the start, then after each of the 3 steps
def test_a_transient_probe_failure_ends_the_episode_as_it_would_without_metrics(k):
    # The metrics share the verifier's probes: measuring adds no call that could fail on its own.
    outcomes = []
    for metrics in (True, False):
        traj = _run(
            DARK_TASK,
            _plan(_env(), DARK),
            StepConfig(episode_metrics=metrics),
            env=ProbeFailsOnce(k, seed=0, perturbation=CANONICAL),
        )
        outcomes.append((traj.termination, traj.success, [(t.reward, t.done) for t in traj.transitions]))
    assert outcomes[0] == outcomes[1] and outcomes[0][0].reason is TerminationReason.INFRA_TRUNCATED


def test_no_probe_means_no_metrics_and_a_failing_probe_ends_the_episode_as_it_would():
    traj = _run(DARK_TASK, _plan(_env(), DARK), env=NoProbe(seed=0, perturbation=CANONICAL))
    assert traj.metrics is None and traj.success is None
    for metrics in (True, False):
        traj = _run(
            DARK_TASK,
            _plan(_env(), DARK),
            StepConfig(episode_metrics=metrics),
            env=ProbeFailsAfter(2, seed=0, perturbation=CANONICAL),
        )
        assert traj.termination.reason is TerminationReason.INFRA_TRUNCATED and traj.metrics is None


def test_a_model_judge_is_not_measured():
    from darwin.types import Verdict
    from darwin.verifiers.base import as_verifier

    judge = as_verifier(lambda request: Verdict(success=True, reason="looks done"), kind="judge")
    traj = asyncio.run(StepWorkflow(verifier=judge).run(_env(), DARK_TASK, Scripted([])))
    assert traj.success is True and traj.metrics is None


@pytest.mark.parametrize("template_id", sorted(templates()))
def test_the_oracle_causes_no_side_effect_on_any_template(template_id):
    # allowed_changes must name everything a correct solution changes (counters included).
    # Solvability itself is tests/envs/sim/test_all_templates.py's to check.
    task = validate_task(templates()[template_id].instance(0))
    env = SimPhoneEnv(seed=0, reset_between_episodes=True)
    traj = asyncio.run(LifecycleWorkflow(config=StepConfig(end_on_success=False)).run(env, task, OracleActor()))
    if traj.success is not True:
        pytest.skip(f"the oracle does not solve {task.id}: {traj.phase_reasons}")
    assert traj.metrics.side_effects == (), (task.id, traj.metrics.side_effects)
    assert (traj.metrics.progress_rate, traj.metrics.over_time_steps, traj.metrics.false_completion) == (1.0, 0, False)


# ----------------------------------------------------------------------------- the run store


def _episodes_through_the_store(tmp_path):
    env = _env()
    trajectories = [
        _run(DARK_TASK, _plan(env, HISTORY, DARK), env=env),
        _run(DARK_TASK, [], StepConfig(episode_metrics=False)),
    ]
    with RunStore.for_run_dir(tmp_path) as store:
        run_id = store.start_run("metrics", config=None)
        for traj in trajectories:
            store.start_episode(run_id, traj.episode_id, traj.task, phone="sim-0")
            store.finish_episode(traj)
        rows = {row.episode_id: row for row in store.episodes(run_id)}
    return trajectories, rows


def test_the_store_keeps_the_metrics(tmp_path):
    trajectories, rows = _episodes_through_the_store(tmp_path)
    assert [rows[t.episode_id].metrics for t in trajectories] == [trajectories[0].metrics, None]
    assert rows[trajectories[0].episode_id].metrics.side_effects == ("apps.settings.data.notification_history",)
    db = sqlite3.connect(tmp_path / "run.db")
    stored = db.execute(
        "SELECT progress_rate, side_effects, false_completion, over_time_steps FROM episodes ORDER BY progress_rate"
    ).fetchall()
    db.close()
    assert stored == [(None, None, None, None), (1.0, '["apps.settings.data.notification_history"]', 0, 0)]


def test_a_version_3_database_is_migrated_to_the_current_version(tmp_path):
    trajectories, _ = _episodes_through_the_store(tmp_path)
    db = sqlite3.connect(tmp_path / "run.db")
    for column in ("progress_rate", "side_effects", "false_completion", "over_time_steps", "goal_first_met_step"):
        db.execute(f"ALTER TABLE episodes DROP COLUMN {column}")
    db.execute("DROP TABLE phone_events")  # version 5's table
    db.execute("DROP TABLE labels")  # version 6's tables
    db.execute("DROP TABLE step_scores")
    db.execute("ALTER TABLE episodes DROP COLUMN start_state")  # version 7's columns
    db.execute("ALTER TABLE steps DROP COLUMN state_after")
    db.execute("UPDATE store_meta SET value='3' WHERE key='schema_version'")
    db.commit()
    db.close()
    with RunStore.for_run_dir(tmp_path) as store:  # opening migrates in place
        (run,) = store.runs()
        rows = store.episodes(run.run_id)
        assert [row.metrics for row in rows] == [None, None] and {row.success for row in rows} == {True, False}
        store.start_episode(run.run_id, "new", DARK_TASK, phone="sim-0")
        store.finish_episode(
            trajectories[0].__class__(**{**trajectories[0].__dict__, "episode_id": "new", "transitions": []})
        )
        assert {row.episode_id: row.metrics for row in store.episodes(run.run_id)}["new"] == trajectories[0].metrics
    db = sqlite3.connect(tmp_path / "run.db")
    assert (
        db.execute("SELECT value FROM store_meta WHERE key='schema_version'").fetchone()
        == (str(SCHEMA_VERSION),)
        == ("7",)
    )
    assert {"phone_events", "labels", "step_scores"} <= {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    assert db.execute("SELECT count(*) FROM phone_events").fetchone() == (0,)  # made on opening
    db.close()


# ----------------------------------------------------------------------------- evaluation


def test_eval_report_per_task_metrics():
    tasks = [DARK_TASK, get_template("clock.zone_offset").instance(0)]
    report = asyncio.run(
        evaluate(
            tasks,
            [SimPhoneEnv(seed=i, perturbation=CANONICAL, reset_between_episodes=True) for i in range(2)],
            lambda i: Scripted([]),
            episodes_per_task=2,
        )
    )
    dark, offset = (report.task_metrics[t.id] for t in tasks)
    # finished at once every time: two false completions, no progress, nothing changed
    assert (dark.episodes, dark.successes, dark.progress_rate, dark.false_completions, dark.side_effect_rate) == (
        2,
        0,
        0.0,
        2,
        0.0,
    )
    assert offset.false_completions == 2 and dark.stratum == offset.stratum == "L4"
    assert report.strata == {DARK_TASK.id: "L4", tasks[1].id: "L4"}
    data = report.to_json()
    assert data["per_task"][DARK_TASK.id]["metrics"]["false_completions"] == 2
    assert data["strata_counts"] == {"L1": 0, "L2": 0, "L3": 0, "L4": 2}


def test_darwin_eval_prints_the_metrics_in_80_columns_and_writes_json(tmp_path, monkeypatch):
    import darwin.cli.eval
    import darwin.cli.main

    wide = Console(width=200, force_terminal=False)  # so the table's own width is what is measured
    monkeypatch.setattr(darwin.cli.eval, "console", wide)
    out = tmp_path / "eval.json"
    with wide.capture() as captured:
        result = CliRunner().invoke(
            darwin.cli.main.main,
            [
                "eval",
                "--agent",
                "oracle",
                "--phones",
                "2",
                "--tasks",
                "settings_dark_theme,clock.set_alarm.s0",
                "--samples",
                "1",
                "--no-greedy",
                "--no-perturb",
                "--play-until-finished",
                "--run-dir",
                str(tmp_path / "run"),
                "--json",
                str(out),
            ],
        )
    assert result.exit_code == 0, result.output
    text = captured.get()
    table = text[text.index("episode metrics per task") : text.index(" steps in ")]
    table = table[: table.rindex("\n")]  # up to the line before the timing line
    rows = [line for line in table.splitlines() if line.strip()]
    assert max(len(line) for line in rows) <= 80, table
    (row,) = [line for line in rows if "clock.set_alarm.s0" in line]
    assert row.split()[1:] == ["2", "100%", "100%", "0%", "0", "0", "L1"]
    assert "Strata: L1 2, L2 0, L3 0, L4 0" in " ".join(table.split())
    data = json.loads(out.read_text())
    assert data["per_task"]["clock.set_alarm.s0"]["metrics"]["stratum"] == "L1"
    assert data["overall"]["metrics"]["measured"] == 4 and data["strata"] == {
        "settings_dark_theme": "L1",
        "clock.set_alarm.s0": "L1",
    }


def test_a_runs_evaluation_and_report_carry_the_per_task_metrics(tmp_path):
    from darwin.algos.task_metrics import TaskMetrics
    from darwin.evaluate import EvalResult
    from darwin.run.report import compare_runs, summarize_run
    from darwin.run.report import load_evaluations as _load_evaluations
    from darwin.run.report import save_evaluations as _save_evaluations

    metrics = {
        "clock.set_alarm.s0": TaskMetrics(
            episodes=4,
            successes=3,
            measured=4,
            progress_rate=0.875,
            side_effect_episodes=1,
            side_effect_measured=4,
            false_completions=1,
            over_time=2,
        )
    }
    final = EvalResult("final", 3, 2, 3, 4, {"clock.set_alarm.s0": 0.75}, 1.0, {}, metrics)
    _save_evaluations(tmp_path, {"final": final})
    saved = json.loads((tmp_path / "eval.json").read_text())["final"]["task_metrics"]["clock.set_alarm.s0"]
    assert (saved["success_rate"], saved["side_effect_rate"], saved["stratum"]) == (0.75, 0.25, "L1")
    assert _load_evaluations(tmp_path) == {"final": final}
    (tmp_path / "success_points.json").write_text("[[1, 0.0], [2, 1.0]]")
    assert summarize_run(tmp_path).eval_task_metrics == {"final": metrics}
    _, markdown = compare_runs([tmp_path], tmp_path / "cmp.png")
    assert "strata: L1 1, L2 0, L3 0, L4 0" in markdown
    assert "| clock.set_alarm.s0 | 4 | 75% | 88% | 25% | 1 | 2 | L1 |" in markdown
