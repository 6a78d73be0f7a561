"""scripts/typed_text_source.py: whether a policy types its goal's string or a trained goal's."""

from __future__ import annotations

import numpy as np
import pytest

from darwin.actions import Click, Type
from darwin.store import RunStore
from darwin.task_registry import get_task
from darwin.types import (
    Decision,
    Observation,
    Phase,
    Task,
    Termination,
    TerminationReason,
    Trajectory,
    Transition,
    Verdict,
)


def _record(store: RunStore, run_id: str, episode_id: str, task: Task, typed: list[str]) -> None:
    store.start_episode(run_id, episode_id, task, phone="sim-0", seed=0)
    actions = [Click(x=540, y=200), *(Type(content=text) for text in typed)]
    transitions = [
        Transition(
            episode_id=episode_id,
            task_id=task.id,
            step=i,
            phase=Phase.EXECUTION,
            observation=Observation(
                screenshot=np.zeros((8, 6, 3), np.uint8), goal=task.instruction, device_size=(1080, 2400), step=i
            ),
            decision=Decision(action=action),
            done=i == len(actions) - 1,
        )
        for i, action in enumerate(actions)
    ]
    for t in transitions:
        store.record_step(t, t.observation.screenshot)
    store.finish_episode(
        Trajectory(
            episode_id=episode_id,
            task=task,
            transitions=transitions,
            termination=Termination(TerminationReason.STEP_BUDGET),
            verdicts={Phase.EXECUTION: Verdict(False)},
        )
    )


def test_typed_texts_are_sorted_by_where_they_come_from(tmp_path, capsys, load_script) -> None:
    evaluated, trained = get_task("chrome.search.s100000"), get_task("chrome.search.s3")
    goal_text = evaluated.params["query"]
    assert isinstance(goal_text, str) and goal_text in evaluated.instruction
    trained_text = trained.params["query"]
    assert isinstance(trained_text, str) and trained_text not in evaluated.instruction
    store = RunStore.for_run_dir(tmp_path / "eval")
    run_id = store.start_run("eval", config=None)
    # one copy of its own goal (upper-cased, submitted), two of a trained goal's, one garbled
    _record(store, run_id, "e1", evaluated, [goal_text.upper() + "\n", trained_text])
    _record(store, run_id, "e2", evaluated, [trained_text + "\n", "t hiking hiking"])
    store.close()

    script = load_script("typed_text_source")
    script.main([str(tmp_path / "eval"), "--trained", trained.id])
    rows = capsys.readouterr().out.splitlines()
    assert rows[1].split() == ["chrome.search", "4", "1", "2", "1", "25.0%"]
    assert rows[2].split() == ["all", "4", "1", "2", "1", "25.0%"]

    # without the trained task, its string counts as "other"
    store = RunStore.for_run_dir(tmp_path / "eval")
    try:
        report = script.typed_text_report(store, [])
    finally:
        store.close()
    assert report.total == {"goal": 1, "other": 3}


def test_a_directory_without_a_run_database_is_refused(tmp_path, capsys, load_script) -> None:
    with pytest.raises(SystemExit):
        load_script("typed_text_source").main([str(tmp_path)])
    assert "has no run.db" in capsys.readouterr().err
