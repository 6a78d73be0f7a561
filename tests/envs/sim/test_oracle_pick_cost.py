"""The oracle's ``pick_cost``: plans that type a task's words rather than tap a row showing them."""

from __future__ import annotations

import pytest

from darwin.actions import Action, Click, Type
from darwin.envs.sim.oracle import TYPING_PICK_COST, shortest_plan
from darwin.envs.sim.phone import SimPhone
from darwin.predicates import evaluate
from darwin.sft.config import SFTConfig
from darwin.task_registry import get_task


def _tapped_texts(seed: int, plan: list[Action]) -> list[str]:
    """Replays ``plan`` on a fresh phone: the text of every widget a tap hit, and checks the goal."""
    task = get_task("booking.com_0")
    phone = SimPhone(seed=seed)
    hit: list[str] = []
    for action in plan:
        if isinstance(action, Click):
            widget = phone.layout().hit(action.x, action.y)
            hit.append(widget.text if widget is not None else "")
        phone.execute(action)
    assert evaluate(task.verifier, phone.state).success, plan
    return hit


@pytest.mark.parametrize("seed", [0, 3])
def test_a_pick_cost_types_the_destination_instead_of_reading_it_off_the_list(seed: int) -> None:
    task = get_task("booking.com_0")  # stays in Berlin: the destination screen has a field and a shuffled list
    shortest = shortest_plan(SimPhone(seed=seed), task.verifier, apps=[task.app])
    typing = shortest_plan(SimPhone(seed=seed), task.verifier, apps=[task.app], pick_cost=TYPING_PICK_COST)
    assert "Berlin" in _tapped_texts(seed, shortest) and not any(isinstance(a, Type) for a in shortest)
    assert "Berlin" not in _tapped_texts(seed, typing) and Type(content="Berlin\n") in typing
    # a tap on the field and the typing replace the one tap on the row: cheapest, one step longer
    assert len(typing) == len(shortest) + 1


def test_a_pick_cost_leaves_plans_without_task_words_alone() -> None:
    task = get_task("settings_dark_theme")  # no words to type or pick
    plans = [shortest_plan(SimPhone(seed=1), task.verifier, apps=[task.app], pick_cost=c) for c in (1, 3)]
    assert plans[0] == plans[1]


def test_a_costed_search_out_of_expansions_falls_back_to_the_shortest_plan(caplog) -> None:
    task = get_task("booking.com_0")
    # 64 states suffice for the shortest plan (it taps "Berlin"); the typing plan needs more
    shortest = shortest_plan(SimPhone(seed=0), task.verifier, apps=[task.app], max_expansions=64)
    with caplog.at_level("WARNING", logger="darwin.envs.sim.oracle"):
        fallback = shortest_plan(
            SimPhone(seed=0), task.verifier, apps=[task.app], max_expansions=64, pick_cost=TYPING_PICK_COST
        )
    assert fallback == shortest and "Berlin" in _tapped_texts(0, fallback)
    assert "no plan cheaper than the shortest" in caplog.text and "raise max_expansions" in caplog.text
    # with room to search, the same call types the destination
    typing = shortest_plan(SimPhone(seed=0), task.verifier, apps=[task.app], pick_cost=TYPING_PICK_COST)
    assert Type(content="Berlin\n") in typing


def test_a_pick_cost_below_one_is_refused() -> None:
    task = get_task("booking.com_0")
    with pytest.raises(ValueError, match="pick_cost=0 must be at least 1"):
        shortest_plan(SimPhone(seed=0), task.verifier, apps=[task.app], pick_cost=0)


def test_prefer_typing_sets_the_demonstrating_oracles_pick_cost() -> None:
    assert SFTConfig().pick_cost == 1
    typing = SFTConfig(prefer_typing=True)
    assert typing.pick_cost == TYPING_PICK_COST > 2
    assert typing.config_hash() != SFTConfig().config_hash()  # other demonstrations: other weights
