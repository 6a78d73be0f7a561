"""MobileGym's episode metrics and strata, each against values computed by hand."""

from __future__ import annotations

import pytest

from darwin.algos.task_metrics import (
    TaskMetrics,
    difficulty_stratum,
    false_completion,
    measure_episode,
    over_time,
    path_allowed,
    progress_rate,
    side_effects,
    state_diff,
    strata,
    stratum_counts,
    summarize_task,
)
from darwin.envs.sim.phone import SimPhone
from darwin.types import EpisodeMetrics, Task, VerifierSpec


def _apps(**data: dict) -> dict:
    return {"foreground": None, "apps": {app: {"stack": [{"name": "main"}], "data": d} for app, d in data.items()}}


BEFORE = _apps(
    settings={"dark_theme": False, "notification_history": False, "app_notifications": {"Chrome": True, "X": True}},
    clock={"alarms": [{"id": 1, "hour": 7}], "next_id": 2},
)


# ----------------------------------------------------------------------------- state_diff


def test_diff_of_equal_states_is_empty_and_ignores_everything_outside_app_data():
    after = {**BEFORE, "foreground": "settings", "answer": "42"}  # screens, the answer: not app data
    after["apps"] = {**BEFORE["apps"], "settings": {**BEFORE["apps"]["settings"], "stack": [{"name": "display"}]}}
    assert state_diff(BEFORE, BEFORE) == ()
    assert state_diff(BEFORE, after) == ()


def test_diff_names_changed_added_and_removed_keys_and_whole_lists():
    after = _apps(
        settings={
            "dark_theme": True,
            "notification_history": False,
            "app_notifications": {"Chrome": False, "X": True, "Netflix": True},
        },
        clock={"alarms": [{"id": 1, "hour": 7}, {"id": 2, "hour": 9}], "next_id": 3},
    )
    assert state_diff(BEFORE, after) == (
        "apps.clock.data.alarms",  # a list that grew compares as a whole: no index in the path
        "apps.clock.data.next_id",
        "apps.settings.data.app_notifications.Chrome",
        "apps.settings.data.app_notifications.Netflix",  # added key
        "apps.settings.data.dark_theme",
    )
    removed = _apps(
        settings={"dark_theme": False, "notification_history": False, "app_notifications": {"Chrome": True}},
        clock=BEFORE["apps"]["clock"]["data"],
    )
    assert state_diff(BEFORE, removed) == ("apps.settings.data.app_notifications.X",)


def test_a_list_of_the_same_length_is_compared_index_by_index():
    starred = _apps(contacts={"contacts": [{"name": "Ann", "starred": False}, {"name": "Bob", "starred": False}]})
    after = _apps(contacts={"contacts": [{"name": "Ann", "starred": False}, {"name": "Bob", "starred": True}]})
    assert state_diff(starred, after) == ("apps.contacts.data.contacts.1.starred",)
    assert side_effects(state_diff(starred, after), ["apps.contacts.data.contacts.*.starred"]) == ()
    renamed = _apps(contacts={"contacts": [{"name": "Ann", "starred": False}, {"name": "Rob", "starred": True}]})
    assert side_effects(state_diff(starred, renamed), ["apps.contacts.data.contacts.*.starred"]) == (
        "apps.contacts.data.contacts.1.name",
    )
    deleted = _apps(contacts={"contacts": [{"name": "Ann", "starred": False}]})
    assert side_effects(state_diff(starred, deleted), ["apps.contacts.data.contacts.*.starred"]) == (
        "apps.contacts.data.contacts",
    )
    assert side_effects(state_diff(starred, deleted), ["apps.contacts.data.contacts"]) == ()
    assert state_diff(_apps(x={"tags": ["a", "b"]}), _apps(x={"tags": ["b", "a"]})) == (
        "apps.x.data.tags.0",
        "apps.x.data.tags.1",
    )


def test_diff_reports_a_type_change_and_an_app_present_on_one_side_only():
    after = _apps(
        settings={**BEFORE["apps"]["settings"]["data"], "dark_theme": 0},
        clock=BEFORE["apps"]["clock"]["data"],
        notes={"notes": []},
    )
    assert state_diff(BEFORE, after) == ("apps.notes", "apps.settings.data.dark_theme")  # False -> 0 is a change


def test_diff_roots_restrict_what_is_compared():
    after = _apps(
        settings={**BEFORE["apps"]["settings"]["data"], "dark_theme": True}, clock={"alarms": [], "next_id": 2}
    )
    assert state_diff(BEFORE, after, roots=("apps.clock.data",)) == ("apps.clock.data.alarms",)
    assert state_diff(BEFORE, after, roots=("apps.*.data.dark_theme",)) == ("apps.settings.data.dark_theme",)
    with pytest.raises(ValueError, match="empty segment"):
        state_diff(BEFORE, after, roots=("apps..data",))


def test_diff_of_a_real_simphone_after_turning_dark_theme_on():
    phone = SimPhone(seed=0)
    before = phone.snapshot()
    phone.state["apps"]["settings"]["data"]["dark_theme"] = True
    assert state_diff(before, phone.snapshot()) == ("apps.settings.data.dark_theme",)


# ----------------------------------------------------------------------------- side effects


def test_patterns_star_matches_one_key_and_allow_everything_below():
    assert path_allowed("apps.clock.data.alarms", ["apps.clock.data.alarms"])
    assert path_allowed("apps.settings.data.app_notifications.Chrome", ["apps.settings.data.app_notifications"])
    assert path_allowed("apps.settings.data.app_notifications.Chrome", ["apps.settings.data.app_notifications.*"])
    assert path_allowed("apps.clock.data.alarms", ["apps.*.data.alarms"])
    assert not path_allowed("apps.clock.data.alarms", ["apps.*.alarms"])  # * is one key, not several
    assert not path_allowed("apps.clock.data", ["apps.clock.data.alarms"])  # above a pattern: not allowed
    assert not path_allowed("apps.clock.data.alarms", [])


def test_a_side_effect_the_task_did_not_ask_for():
    # The task: turn dark theme on. The agent also turned notification history on.
    changed = ("apps.settings.data.dark_theme", "apps.settings.data.notification_history")
    assert side_effects(changed, ["apps.settings.data.dark_theme"]) == ("apps.settings.data.notification_history",)
    assert side_effects(changed, ["apps.settings.data.*"]) == ()
    assert side_effects(changed, []) == changed  # a task that may change nothing (an answer task)
    with pytest.raises(ValueError, match="pattern"):
        side_effects((), ["apps.settings..dark_theme"])


# ----------------------------------------------------------------------------- progress


def test_progress_with_subgoals_is_the_share_met_and_success_is_one():
    assert progress_rate(success=False, subgoals_met=[True, False, False]) == pytest.approx(1 / 3)
    assert progress_rate(success=False, subgoals_met=[False, False]) == 0.0
    assert progress_rate(success=True, subgoals_met=[False, False]) == 1.0


def test_progress_without_subgoals_is_the_distance_closed_clipped():
    assert progress_rate(success=False, unmet_start=3, unmet_end=1) == pytest.approx(2 / 3)
    assert progress_rate(success=False, unmet_start=3, unmet_end=3) == 0.0
    assert progress_rate(success=False, unmet_start=2, unmet_end=5) == 0.0  # moved away: clipped at 0
    assert progress_rate(success=False, unmet_start=0, unmet_end=2) == 0.0  # held at the start, undone
    assert progress_rate(success=True, unmet_start=3, unmet_end=0) == 1.0
    with pytest.raises(ValueError, match="subgoals_met, or both"):
        progress_rate(success=False)
    with pytest.raises(ValueError, match=">= 0"):
        progress_rate(success=False, unmet_start=-1, unmet_end=0)


DARK = VerifierSpec(predicate="settings.dark_theme", params={"enabled": True})
HISTORY = VerifierSpec(predicate="settings.notification_history", params={"enabled": True})


def _settings_state(foreground: str | None, screen: str, dark: bool, history: bool) -> dict:
    state = SimPhone(seed=0).snapshot()
    state["foreground"] = foreground
    state["apps"]["settings"]["stack"] = [{"name": "main"}] + ([{"name": screen}] if screen != "main" else [])
    state["apps"]["settings"]["data"].update(dark_theme=dark, notification_history=history)
    return state


def test_measure_episode_by_hand():
    home = _settings_state(None, "main", dark=False, history=False)
    # settings.dark_theme's distance: 1 (open the app) + 1 (reach Display) + 1 (the toggle) = 3 at home;
    # on the Display screen with the theme still off it is 1: progress 1 - 1/3.
    on_display = _settings_state("settings", "display", dark=False, history=True)
    task = Task(
        id="dark",
        instruction="Turn on dark theme.",
        app="Settings",
        verifier=DARK,
        allowed_changes=("apps.settings.data.dark_theme",),
    )
    m = measure_episode(task, home, on_display, success=False, agent_finished=True, goal_met=[False, False, False])
    assert m == EpisodeMetrics(
        progress_rate=pytest.approx(2 / 3),
        side_effects=("apps.settings.data.notification_history",),
        false_completion=True,
        over_time_steps=0,
        goal_first_met_step=None,
    )
    # With sub-goals the progress is their share; without allowed_changes side effects are not measured.
    task2 = task.model_copy(update={"subgoals": (HISTORY, DARK), "allowed_changes": None})
    m2 = measure_episode(task2, home, on_display, success=False, agent_finished=False, goal_met=None)
    assert (m2.progress_rate, m2.side_effects, m2.false_completion, m2.over_time_steps) == (0.5, None, False, None)


# ----------------------------------------------------------------------------- false completion, over-time


def test_false_completion():
    assert false_completion(agent_finished=True, success=False)
    assert not false_completion(agent_finished=True, success=True)
    assert not false_completion(agent_finished=False, success=False)  # the budget ran out: a failure, not a false claim
    assert not false_completion(agent_finished=True, success=None)  # unverified: nobody knows it was false


def test_over_time_by_hand():
    assert over_time([False, False, True, True, True], agent_finished=False) == (2, 2)  # met after step 2, acted 2 more
    assert over_time([False, False, True, True, True, True], agent_finished=True) == (2, 2)  # ... then finished
    assert over_time([False, True, True], agent_finished=True) == (1, 0)  # met, then finished: on time
    assert over_time([False, False, True], agent_finished=True) == (2, 0)  # an answer meets the goal itself
    assert over_time([False, True, False, False], agent_finished=False) == (1, 2)  # met, then undone: still over time
    assert over_time([False, False], agent_finished=False) == (None, 0)
    assert over_time([], agent_finished=False) == (None, 0)


# ----------------------------------------------------------------------------- strata


@pytest.mark.parametrize(
    ("sr", "pr", "level"),
    [
        (0.75, 0.75, "L1"),
        (1.0, 1.0, "L1"),
        (0.75, 0.7499, "L2"),
        (0.7499, 0.9, "L2"),
        (0.25, 0.5, "L2"),
        (0.2499, 0.9, "L3"),
        (0.25, 0.4999, "L3"),
        (0.01, 0.25, "L3"),
        (0.01, 0.2499, "L4"),
        (0.0, 1.0, "L4"),
        (0.0, 0.0, "L4"),
    ],
)
def test_strata_boundaries(sr, pr, level):
    assert difficulty_stratum(sr, pr) == level


def test_stratum_rejects_rates_outside_zero_one():
    with pytest.raises(ValueError, match="progress_rate must be in"):
        difficulty_stratum(0.5, 1.5)


def test_task_summary_and_strata_by_hand():
    clean = EpisodeMetrics(progress_rate=1.0, side_effects=())
    messy = EpisodeMetrics(
        progress_rate=1.0, side_effects=("apps.x.data.posts",), over_time_steps=2, goal_first_met_step=3
    )
    false_claim = EpisodeMetrics(progress_rate=0.25, side_effects=None, false_completion=True)
    summary = summarize_task([(True, clean), (True, messy), (False, false_claim), (None, clean), (False, None)])
    # scored: 4 (the unverified episode is left out); measured: 3; PR (1 + 1 + 0.25) / 3 = 0.75;
    # SE: 1 of the 2 episodes whose task declares what it may change
    assert summary == TaskMetrics(
        episodes=4,
        successes=2,
        measured=3,
        progress_rate=0.75,
        side_effect_episodes=1,
        side_effect_measured=2,
        false_completions=1,
        over_time=1,
    )
    assert (summary.success_rate, summary.side_effect_rate, summary.stratum) == (0.5, 0.5, "L2")
    assert TaskMetrics.from_json(summary.to_json()) == summary
    assert summary.to_json()["stratum"] == "L2"
    per_task = {
        "a": summary,
        "b": summarize_task([(True, clean)] * 4),
        "c": summarize_task([(False, false_claim)]),
        "d": summarize_task([(None, None)]),
    }
    assert strata(per_task) == {"a": "L2", "b": "L1", "c": "L4"}  # d: no score, no stratum
    assert stratum_counts(strata(per_task)) == {"L1": 1, "L2": 1, "L3": 0, "L4": 1}
