"""scripts/probe_forced_prefix.py's departures: where an agent leaves the simulator's shortest plans."""

from __future__ import annotations

import contextlib
import io

from darwin.actions import Click, PressBack
from darwin.envs.sim.oracle import shortest_plan
from darwin.envs.sim.phone import SimPhone
from darwin.task_registry import get_task
from darwin.templates import task_apps


def test_the_departure_is_the_first_action_that_does_not_shorten_the_plan(load_script) -> None:
    script = load_script("probe_forced_prefix")
    task = get_task("booking.com_0")
    start = SimPhone(seed=10_000).snapshot()
    phone = SimPhone(seed=0)
    phone.restore(start)
    plan = shortest_plan(phone, task.verifier, apps=list(task_apps(task)))
    assert len(plan) >= 4
    assert script.departure(task, start, [], list(plan)) is None  # the plan itself never leaves
    assert script.departure(task, start, plan[:2], list(plan[2:])) is None  # nor after its forced prefix
    wrong = PressBack()
    left = script.departure(task, start, [], [*plan[:2], wrong, *plan[2:]])
    assert left == ("booking.com_0", 2, script.action_text(plan[2]), "press_back()")
    # After a forced prefix the step counts from the start of the plan; a step without an action departs too.
    assert script.departure(task, start, plan[:1], [plan[1], None]) == (
        "booking.com_0",
        2,
        script.action_text(plan[2]),
        "(no action)",
    )
    assert script.action_text(Click(x=540, y=696)) == "click(540, 696)"


def test_the_table_counts_departures_and_the_different_needs(load_script) -> None:
    script = load_script("probe_forced_prefix")
    found = [
        (0, "greedy", ("booking.com_0", 2, "click(540, 2044)", "click(545, 708)")),
        (0, "greedy", ("booking.com_0", 2, "click(540, 532)", "click(545, 708)")),
        (0, "sampled", None),
    ]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        script.print_departures(found)
    text = out.getvalue()
    assert "| booking.com_0 | greedy | 2 | 2 | 2 | click(545, 708) x2 |" in text
    assert "episodes that never left the shortest plans: {'sampled': 1}" in text
