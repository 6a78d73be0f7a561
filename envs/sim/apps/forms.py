"""Helpers shared by apps with edit forms (Contacts, Calendar, Messages, Notes).

Two halves: callbacks a form's fields use (the keyboard's "next" action moves focus to the
following field, as Android's IME action does), and the admissible lower bounds the apps'
predicates give the oracle for filling a form.

The bounds count the oracle's own actions (:func:`darwin.envs.sim.oracle.candidate_actions`):
it types a whole value into an *empty* focused field (optionally followed by a newline), so a
field holding the wrong text costs a clear tap (which also focuses it) and a type, an empty
one a type, and nothing is needed for a field that already holds its value::

    >>> typing_cost([("", "Ana"), ("Lopes", "Lopez"), ("555", "555")], focused=False)
    3
    >>> typing_cost([("", "Ana")], focused=False)   # a tap to focus the field, then the type
    2
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from darwin.envs.sim.apps.base import AppContext
from darwin.predicates import norm


def focus_next(ctx: AppContext, next_key: str | None) -> Callable[[str], None]:
    """A field's submit action: focus ``next_key`` (``None``: hide the keyboard)."""

    def submit(_text: str) -> None:
        ctx.phone.state["focus"] = next_key

    return submit


def same(current: str, target: str) -> bool:
    """Whether a field holds its target value (case and spacing aside)."""
    return norm(current) == norm(target)


def typing_cost(fields: Sequence[tuple[str, str]], focused: bool) -> int:
    """Lower bound on the actions that make each ``(current, target)`` field hold its target.

    ``focused``: whether some field of the form has focus (then the first type needs no tap).
    """
    wrong = [current for current, target in fields if not same(current, target)]
    cost = sum(2 if current else 1 for current in wrong)
    # Only empty fields need a tap to focus; clearing a filled field focuses it already.
    if wrong and not focused and all(not current for current in wrong):
        cost += 1
    return cost
