"""The oracle: shortest action sequences computed from the simulator itself.

An A* search over SimPhone states. Successors come from what is on screen (tap every
interactive widget at its centre, scroll every scrollable list, type the task's strings
into a focused field, system back, open the task's app); states are deduplicated by
their canonical JSON; the predicate's ``unmet`` count is an admissible heuristic, so the
first plan found is a shortest one over that action set. Coordinates come from the
current layout, so plans follow perturbations (icon order, list order, pop-ups).

    >>> from darwin.envs.sim.phone import SimPhone
    >>> from darwin.envs.sim.oracle import shortest_plan
    >>> from darwin.types import VerifierSpec
    >>> phone = SimPhone(seed=0)
    >>> plan = shortest_plan(phone, VerifierSpec(predicate="settings.dark_theme", params={"enabled": True}), apps=["Settings"])
    >>> len(plan), plan[-1].type   # open Settings (a launcher tap or open_app), then two taps
    (3, 'click')
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import logging
from collections.abc import Iterator, Sequence

import orjson

from darwin.actions import Action, Answer, Click, Direction, OpenApp, PressBack, Scroll, Type
from darwin.envs.sim.phone import SimPhone
from darwin.predicates import resolve
from darwin.types import VerifierSpec

logger = logging.getLogger(__name__)

DEFAULT_MAX_EXPANSIONS = 20_000

TYPING_PICK_COST = 3
"""The ``pick_cost`` that makes plans type a task's words rather than tap them: more than a
tap on the field plus the typing (2)."""


def pick_cost_for(prefer_typing: bool) -> int:
    """The ``pick_cost`` of a demonstrating oracle: :data:`TYPING_PICK_COST` with ``prefer_typing``
    (``SFTConfig.prefer_typing``), else 1 (the shortest plan).

    >>> pick_cost_for(True), pick_cost_for(False)
    (3, 1)
    """
    return TYPING_PICK_COST if prefer_typing else 1


class OracleError(RuntimeError):
    """The search found no plan within its budget (the task is unsolvable or too deep)."""


def _key(state: dict) -> bytes:
    return hashlib.blake2b(orjson.dumps(state, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


def candidate_actions(
    phone: SimPhone, texts: Sequence[str], apps: Sequence[str], answers: Sequence[str] = ()
) -> Iterator[Action]:
    """Actions worth trying on the current screen (keyboard keys are covered by ``type``).

    An expected answer is tried only where it is on screen: a demonstration answers what it
    has read, never from the launcher.
    """
    screen = phone.layout()
    if answers and not screen.modal:
        # The English texts: expected answers are written as the app states them (a Chinese UI shows the same values).
        shown = " ".join(f"{w.text} {w.subtitle}".lower() for w in phone.untranslated_layout().widgets)
        for answer in answers:
            if answer.lower() in shown:
                yield Answer(content=answer)
    for w in phone.interactive_widgets():
        if w.kind in ("key", "navbutton"):
            continue
        x, y = w.center
        yield Click(x=x, y=y)
    if not screen.modal:
        for w in screen.widgets:
            if w.scroll_key is None or w.scroll_max <= 0:
                continue
            offset = int(w.text or 0)
            x, y = w.center
            if offset < w.scroll_max:
                yield Scroll(x=x, y=y, direction=Direction.DOWN)
            if offset > 0:
                yield Scroll(x=x, y=y, direction=Direction.UP)
    field = screen.focused_field()
    if field is not None and not screen.modal:
        # Type only into empty fields (clear first otherwise): appending repeats never helps.
        if not field.text:
            for t in texts:
                yield Type(content=t)
                if not field.multiline:
                    yield Type(content=t + "\n")
        elif not field.multiline:
            yield Type(content="\n")
    yield PressBack()
    for app in apps:
        if phone.foreground != phone.resolve_app(app).id:
            yield OpenApp(app=app)


def shortest_plan(
    phone: SimPhone,
    spec: VerifierSpec,
    apps: Sequence[str],
    max_expansions: int = DEFAULT_MAX_EXPANSIONS,
    pick_cost: int = 1,
) -> list[Action]:
    """A shortest action list that makes ``spec`` hold, starting from ``phone``'s state.

    ``phone`` is not modified. ``apps`` are the app names the plan may open.
    ``pick_cost`` is what a tap on a widget showing one of the task's strings costs (a list
    row reading "Berlin"; every other action costs 1). Above 2 the plan types the string
    into a field instead wherever the app offers one (a tap on the field and the typing cost
    2): the typed text is copied from the goal, while the tapped row has to be read off the
    screen. The plan is then the cheapest, not the shortest.
    Raises :class:`OracleError` if no plan exists within ``max_expansions`` states. With a pick
    cost, a costed search that runs out of them falls back to the shortest plan (logged), which
    exists: the episode is demonstrated by tapping rather than lost.
    """
    if pick_cost < 1:
        raise ValueError(f"pick_cost={pick_cost} must be at least 1 (1 = every action costs the same)")
    pred, params = resolve(spec)
    texts = params.texts()
    if pick_cost > 1:
        # A shortest plan without a pick costs its length, which no plan undercuts: it is the
        # cheapest, and the unit-cost search finds it far sooner than the costed one.
        shortest = shortest_plan(phone, spec, apps, max_expansions)
        if not _picks_any(phone, shortest, texts):
            return shortest
    answers = params.answers()
    scratch = phone.fork()
    start = scratch.snapshot()
    h0 = pred.fn(start, params)
    if h0.success:
        return []
    start_key = _key(start)
    parents: dict[bytes, tuple[bytes, Action] | None] = {start_key: None}
    best_g: dict[bytes, int] = {start_key: 0}
    tie = itertools.count()
    # Entries: (f, -g, tie, g, key, state bytes); deeper nodes first among equal f.
    frontier: list[tuple[int, int, int, int, bytes, bytes]] = [
        (h0.unmet, 0, next(tie), 0, start_key, orjson.dumps(start))
    ]
    goals: set[bytes] = set()
    expansions = 0
    while frontier:
        _, _, _, g, key, blob = heapq.heappop(frontier)
        if g > best_g.get(key, g):
            continue
        if key in goals:
            return _unwind(parents, key)
        expansions += 1
        if expansions > max_expansions:
            break
        state = orjson.loads(blob)
        scratch.restore(state)
        picks = _picks(scratch, texts) if pick_cost > 1 else frozenset()
        for action in list(candidate_actions(scratch, texts, apps, answers)):
            cost = g + (pick_cost if isinstance(action, Click) and (action.x, action.y) in picks else 1)
            scratch.restore(state)
            scratch.execute(action)
            child = scratch.state
            child_key = _key(child)
            if best_g.get(child_key, 1 << 30) <= cost:
                continue
            best_g[child_key] = cost
            parents[child_key] = (key, action)
            check = pred.fn(child, params)
            # With unit costs the first goal state generated is a shortest plan. With a pick
            # cost a cheaper plan may still be queued, so goal states wait their turn.
            if check.success:
                if pick_cost == 1:
                    return _unwind(parents, child_key)
                goals.add(child_key)
            heapq.heappush(frontier, (cost + check.unmet, -cost, next(tie), cost, child_key, orjson.dumps(child)))
    if pick_cost > 1:
        logger.warning(
            "no plan cheaper than the shortest for %s %s within %d expanded states: the shortest (%d actions, "
            "tapping the task's words) instead; raise max_expansions for the typing plan",
            spec.predicate,
            spec.params,
            max_expansions,
            len(shortest),
        )
        return shortest
    raise OracleError(
        f"no plan for {spec.predicate} {spec.params} within {max_expansions} expanded states "
        f"({expansions} expanded, {len(best_g)} seen); raise max_expansions or check the task"
    )


def _picks(phone: SimPhone, texts: Sequence[str]) -> frozenset[tuple[int, int]]:
    """Centres of the tappable widgets on screen that show one of ``texts`` (read in English)."""
    wanted = [t.lower() for t in texts if t]
    if not wanted:
        return frozenset()
    centres = {w.center for w in phone.interactive_widgets()}
    return frozenset(
        w.center
        for w in phone.untranslated_layout().widgets
        if w.center in centres and any(t in f"{w.text} {w.subtitle}".lower() for t in wanted)
    )


def _picks_any(phone: SimPhone, plan: Sequence[Action], texts: Sequence[str]) -> bool:
    """Whether ``plan``, played from ``phone``'s state, taps a widget showing one of ``texts``."""
    scratch = phone.fork()
    for action in plan:
        if isinstance(action, Click) and (action.x, action.y) in _picks(scratch, texts):
            return True
        scratch.execute(action)
    return False


def _unwind(parents: dict[bytes, tuple[bytes, Action] | None], key: bytes) -> list[Action]:
    plan: list[Action] = []
    link = parents[key]
    while link is not None:
        parent, action = link
        plan.append(action)
        link = parents[parent]
    plan.reverse()
    return plan
