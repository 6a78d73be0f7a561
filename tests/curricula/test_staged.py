"""DifficultyStagedCurriculum (AndroidWorld-Generalization's easy -> easy + medium -> all):
stages, advancing by success and by episodes, uniform draws within a stage, resume, bad settings."""

from __future__ import annotations

import doctest
import importlib
import json
import logging
import random
from collections import Counter

import pytest

from darwin.components import ComponentSpec, build_component
from darwin.curricula.base import EpisodeOutcome
from darwin.curricula.staged import DifficultyStagedCurriculum, StagedConfig
from darwin.templates import templates
from darwin.types import Task, TerminationReason, VerifierSpec


def make_tasks(*spec: tuple[str, int]) -> list[Task]:
    return [
        Task(id=i, instruction=f"Do {i}.", app="App", difficulty=d, verifier=VerifierSpec(predicate="p"))
        for i, d in spec
    ]


TASKS = make_tasks(("e1", 1), ("e2", 1), ("m1", 2), ("h1", 3))


def feed(cur: DifficultyStagedCurriculum, task_id: str, outcomes: str) -> None:
    """Apply outcomes written as a string: 'S' success, 'F' failure, 'U' unscored."""
    task = next(t for t in cur.tasks if t.id == task_id)
    for c in outcomes:
        success = {"S": True, "F": False, "U": None}[c]
        reason = {
            True: TerminationReason.SUCCESS,
            False: TerminationReason.STEP_BUDGET,
            None: TerminationReason.ALREADY_DONE,
        }[success]
        cur.update(task, EpisodeOutcome(task_id, success, 5, reason))


def ids(tasks: list[Task]) -> list[str]:
    return [t.id for t in tasks]


def test_module_doctests() -> None:
    result = doctest.testmod(importlib.import_module("darwin.curricula.staged"), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_stages_are_cumulative_by_difficulty() -> None:
    cur = DifficultyStagedCurriculum(TASKS, advance_after=1, advance_success=None)
    assert cur.caps == [1, 2, 3]
    seen = [ids(cur.stage_tasks())]
    for _ in range(2):
        feed(cur, "e1", "F")
        seen.append(ids(cur.stage_tasks()))
    assert seen == [["e1", "e2"], ["e1", "e2", "m1"], ["e1", "e2", "m1", "h1"]]
    feed(cur, "h1", "FFF")  # the last stage is final
    assert cur.stage == 2


def test_advances_when_a_full_window_reaches_the_threshold() -> None:
    cur = DifficultyStagedCurriculum(TASKS, window=4, advance_success=0.75, advance_after=None)
    feed(cur, "e1", "SSS")  # 3 of 3, but the window (4) is not full yet
    assert cur.stage == 0 and cur.stage_success() is None
    feed(cur, "e2", "U")  # unscored: counts as an episode, not in the window
    assert cur.stage == 0 and cur.stage_episodes == 4
    feed(cur, "e2", "F")  # window S S S F: 3/4 = 0.75 >= 0.75
    assert cur.stage == 1 and cur.stage_episodes == 0 and cur.stage_success() is None
    feed(cur, "m1", "SSFF")  # 2/4 = 0.5 < 0.75: stays
    assert cur.stage == 1 and cur.stage_success() == 0.5
    feed(cur, "m1", "SS")  # last four: F F S S = 0.5
    assert cur.stage == 1
    feed(cur, "m1", "S")  # last four: F S S S = 0.75
    assert cur.stage == 2


def test_advances_after_a_number_of_episodes_whatever_the_success() -> None:
    cur = DifficultyStagedCurriculum(TASKS, window=2, advance_success=0.9, advance_after=5)
    feed(cur, "e1", "FFUF")
    assert cur.stage == 0
    feed(cur, "e1", "U")  # the fifth episode, unscored ones included
    assert cur.stage == 1


def test_stages_without_new_tasks_are_skipped() -> None:
    no_easy = make_tasks(("m1", 2), ("m2", 2), ("h1", 3))
    cur = DifficultyStagedCurriculum(no_easy)
    assert cur.caps == [2, 3] and ids(cur.stage_tasks()) == ["m1", "m2"]
    only_easy = DifficultyStagedCurriculum(make_tasks(("e1", 1)))
    assert only_easy.caps == [1]


def test_tasks_harder_than_the_last_stage_are_refused() -> None:
    with pytest.raises(ValueError, match="h1 are harder than the last stage.*add 3 to stages"):
        DifficultyStagedCurriculum(TASKS, stages=(1, 2))


def test_uniform_within_the_stage_and_never_outside() -> None:
    cur = DifficultyStagedCurriculum(TASKS, seed=4, advance_after=None)
    assert cur.weights() == {"e1": 0.5, "e2": 0.5, "m1": 0.0, "h1": 0.0}
    counts = Counter(cur.next_task().id for _ in range(4000))
    assert set(counts) == {"e1", "e2"}
    assert counts["e1"] / 4000 == pytest.approx(0.5, abs=0.04)


def test_template_instances_stage_by_their_templates_difficulty() -> None:
    registry = templates()
    easy = [t for t in registry.values() if t.difficulty == 1][:2]
    harder = [t for t in registry.values() if t.difficulty > 1][:2]
    assert easy and harder, "the registry should hold easy and harder templates"
    tasks = [tpl.instance(s) for tpl in easy + harder for s in range(2)]
    cur = DifficultyStagedCurriculum(tasks, seed=1, advance_after=None)
    first = {cur.next_task().template for _ in range(200)}
    assert first == {t.id for t in easy}


def test_same_seed_same_draws_and_global_rng_untouched() -> None:
    a = DifficultyStagedCurriculum(TASKS, seed=5)
    b = DifficultyStagedCurriculum(TASKS, seed=5)
    before = random.getstate()
    draws = [a.next_task().id for _ in range(50)]
    assert random.getstate() == before
    random.seed(123)
    assert draws == [b.next_task().id for _ in range(50)]


def test_state_dict_round_trip_continues_the_same_draws() -> None:
    cur = DifficultyStagedCurriculum(TASKS, window=3, advance_success=1.0, advance_after=None, seed=9)
    feed(cur, "e1", "SSS")  # -> stage 2 (difficulty <= 2)
    feed(cur, "m1", "SF")
    for _ in range(5):
        cur.next_task()
    state = json.loads(json.dumps(cur.state_dict()))
    assert state["max_difficulty"] == 2 and state["stage_episodes"] == 2 and state["window"] == [1, 0]
    resumed = DifficultyStagedCurriculum(TASKS, window=3, advance_success=1.0, advance_after=None, seed=0)
    resumed.load_state_dict(state)
    assert resumed.stage == 1 and resumed.weights() == cur.weights()
    assert [resumed.next_task().id for _ in range(60)] == [cur.next_task().id for _ in range(60)]
    feed(cur, "m1", "S")
    feed(resumed, "m1", "S")
    assert resumed.state_dict() == json.loads(json.dumps(cur.state_dict()))
    with pytest.raises(ValueError, match="difficulty <= 2, which this curriculum lacks"):
        DifficultyStagedCurriculum(make_tasks(("e1", 1)), stages=(1,)).load_state_dict(state)


def test_stage_changes_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    cur = DifficultyStagedCurriculum(TASKS, window=1, advance_success=1.0)
    with caplog.at_level(logging.INFO, logger="darwin.curricula.staged"):
        feed(cur, "e1", "S")
    assert "stage 2/3 (difficulty <= 2, 3 tasks) starts after success 100%" in caplog.text


def test_update_rejects_unknown_tasks() -> None:
    cur = DifficultyStagedCurriculum(TASKS)
    stranger = make_tasks(("zzz", 1))[0]
    with pytest.raises(ValueError, match="'zzz'.*not built with"):
        cur.update(stranger, EpisodeOutcome("zzz", True, 1, TerminationReason.SUCCESS))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"stages": (2, 1)}, "stages must increase"),
        ({"stages": (1, 4)}, "difficulties 1, 2 or 3"),
        ({"advance_success": None, "advance_after": None}, "never leave its first stage"),
        ({"advance_success": 1.5}, "advance_success"),
        ({"window": 0}, "window"),
        ({"stagez": (1,)}, "stagez"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        DifficultyStagedCurriculum(TASKS, **kwargs)


def test_built_by_name_with_a_typed_config() -> None:
    cur = build_component("curriculum", ComponentSpec(name="staged", kwargs={"window": 8}), tasks=TASKS, seed=3)
    assert isinstance(cur, DifficultyStagedCurriculum) and cur.config == StagedConfig(window=8)
    with pytest.raises(TypeError, match="not both"):
        DifficultyStagedCurriculum(TASKS, StagedConfig(), window=3)
