"""Success predicates over a phone's JSON state, registered by name for task verifier specs.

A predicate reads a phone's JSON state, whoever produced it: a SimPhone in process, an
ADB phone's state probe, or a Ray phone host. It returns a :class:`Check`: whether the goal
holds and a lower bound on the number of actions still needed (the oracle's search uses it
as an admissible heuristic). Nothing here depends on the simulator, so rule verification
works the same for every phone kind.

The built-in predicates for the simulated apps register next to their apps
(``envs/sim/apps``) and are loaded on first lookup; ``answer.matches``, which reads only the
agent's answer, lives here.

    >>> from darwin.predicates import evaluate
    >>> from darwin.types import VerifierSpec
    >>> from darwin.envs.sim.phone import SimPhone
    >>> evaluate(VerifierSpec(predicate="settings.dark_theme", params={"enabled": True}), SimPhone().state).success
    False
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, overload

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from darwin.answers import AnswerKey, MatcherKind
from darwin.problems import validation_summary
from darwin.types import TaskDefinitionError, VerifierSpec

P = TypeVar("P", bound=BaseModel)
State = dict[str, Any]


class PredicateParams(BaseModel):
    """Base for predicate parameter models (frozen, unknown fields rejected)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def texts(self) -> list[str]:
        """Strings an agent may need to type to satisfy this predicate (used by the oracle)."""
        return []

    def answers(self) -> list[str]:
        """Answers (as shown on screen) an information task expects; the oracle answers one once it is visible."""
        return []


class NoParams(PredicateParams):
    """For predicates without parameters."""


@dataclass(frozen=True)
class Check:
    """Result of a predicate: ``unmet`` is 0 iff ``success``, else a lower bound on actions left."""

    success: bool
    unmet: int

    @staticmethod
    def of(conditions_unmet: int) -> Check:
        """The check for ``conditions_unmet`` conditions still to satisfy (0: success)."""
        return Check(success=conditions_unmet == 0, unmet=conditions_unmet)


@dataclass(frozen=True)
class Predicate(Generic[P]):
    """A registered predicate: its name, parameter model, function and description."""

    name: str
    params_model: type[P]
    fn: Callable[[State, P], Check]
    doc: str


PREDICATES: dict[str, Predicate] = {}


@overload
def predicate(name: str) -> Callable[[Callable[[State, NoParams], Check]], Callable[[State, NoParams], Check]]: ...


@overload
def predicate(
    name: str, params_model: type[P]
) -> Callable[[Callable[[State, P], Check]], Callable[[State, P], Check]]: ...


def predicate(
    name: str, params_model: type[BaseModel] = NoParams
) -> Callable[[Callable[[State, Any], Check]], Callable[[State, Any], Check]]:
    """Register ``fn(state, params) -> Check`` under ``name``."""

    def register(fn: Callable[[State, Any], Check]) -> Callable[[State, Any], Check]:
        if name in PREDICATES:
            raise ValueError(f"predicate {name!r} is registered twice")
        PREDICATES[name] = Predicate(name, params_model, fn, (fn.__doc__ or "").strip())
        return fn

    return register


def resolve(spec: VerifierSpec, task_id: str = "?", field: str = "verifier") -> tuple[Predicate, PredicateParams]:
    """Look up and validate a spec; raises :class:`TaskDefinitionError` naming task, field and fix."""
    _ensure_loaded()
    pred = PREDICATES.get(spec.predicate)
    if pred is None:
        close = difflib.get_close_matches(spec.predicate, PREDICATES, n=3)
        hint = f"did you mean {', '.join(map(repr, close))}?" if close else f"known: {', '.join(sorted(PREDICATES))}"
        raise TaskDefinitionError(
            f"task {task_id!r}: field '{field}.predicate' = {spec.predicate!r} is not a registered predicate; {hint}"
        )
    try:
        params = pred.params_model.model_validate(spec.params)
    except ValidationError as exc:
        problems = validation_summary(exc, "(root)")
        fields = ", ".join(pred.params_model.model_fields) or "none"
        raise TaskDefinitionError(
            f"task {task_id!r}: field '{field}.params' is invalid for predicate {spec.predicate!r}: {problems}. "
            f"Fix: give exactly the parameters {fields}."
        ) from None
    return pred, params


def evaluate(spec: VerifierSpec, state: State) -> Check:
    """Evaluate a verifier spec against a phone state."""
    pred, params = resolve(spec)
    return pred.fn(state, params)


def oracle_texts(spec: VerifierSpec) -> list[str]:
    """Strings the oracle may need to type to satisfy ``spec`` (its params' :meth:`PredicateParams.texts`)."""
    _, params = resolve(spec)
    return params.texts()


def norm(text: str) -> str:
    """Case- and space-insensitive comparison key (``"  Taylor  SWIFT "`` -> ``"taylor swift"``)."""
    return " ".join(text.lower().split())


def on_screen(state: State, app: str, screen: str) -> bool:
    """Whether ``app`` is in front, uncovered by a pop-up, showing ``screen``."""
    return state["foreground"] == app and state["popup"] is None and state["apps"][app]["stack"][-1]["name"] == screen


def nav_cost(state: State, app: str, path: tuple[str, ...]) -> int:
    """Lower bound on the actions needed to show screen ``path[-1]`` of ``app``.

    ``path`` lists the screens a user must pass through, each entered by at least one
    action; one more action is needed if the app is not in front (or a pop-up covers it).
    """
    cost = 0 if state["foreground"] == app and state["popup"] is None else 1
    name = state["apps"][app]["stack"][-1]["name"]
    if name in path:
        return cost + len(path) - 1 - path.index(name)
    return cost + len(path)


def top(state: State, app: str) -> dict[str, Any]:
    """The screen on top of ``app``'s back stack."""
    return state["apps"][app]["stack"][-1]


def data(state: State, app: str) -> dict[str, Any]:
    """``app``'s data (its notes, alarms, settings...)."""
    return state["apps"][app]["data"]


class AnswerParams(PredicateParams):
    """An information task's answer key, and where the answer is shown (for the oracle's heuristic)."""

    kind: MatcherKind = "exact"
    expected: str
    tolerance: float = 0.0
    accepted: tuple[str, ...] = ()
    app: str | None = None
    """The app (id) whose screens show the answer."""
    via: tuple[str, ...] = ()
    """Screens of ``app`` a user must pass through, the last one showing the answer."""
    inputs: tuple[str, ...] = ()
    """Strings a user types on the way to the answer (a search query); the oracle may type them."""

    def key(self) -> AnswerKey:
        """The answer key the agent's answer is matched against."""
        return AnswerKey(kind=self.kind, expected=self.expected, tolerance=self.tolerance, accepted=self.accepted)

    def answers(self) -> list[str]:
        return [self.expected]

    def texts(self) -> list[str]:
        return list(self.inputs)


@predicate("answer.matches", AnswerParams)
def _answer_matches(state: State, p: AnswerParams) -> Check:
    """The agent answered, and its answer matches the key (see darwin.answers)."""
    if p.key().matches(state.get("answer")):
        return Check.of(0)
    if p.app is None or not p.via:
        return Check.of(1)
    return Check.of(nav_cost(state, p.app, p.via) + 1)


class AllOfParams(PredicateParams):
    """Several checks that must all hold (a cross-app goal: the source app's data intact, the target app's done)."""

    checks: tuple[VerifierSpec, ...] = Field(min_length=2)
    _resolved: list[tuple[Predicate, PredicateParams]] | None = PrivateAttr(default=None)

    @field_validator("checks")
    @classmethod
    def _known(cls, checks: tuple[VerifierSpec, ...]) -> tuple[VerifierSpec, ...]:
        for i, spec in enumerate(checks):
            if spec.predicate == "all.of":
                raise ValueError(f"checks.{i}: nest no 'all.of' in another; list its checks instead")
            try:
                resolve(spec, "?", f"checks.{i}")
            except TaskDefinitionError as exc:
                raise ValueError(str(exc).removeprefix("task '?': ")) from None
        return checks

    def resolved(self) -> list[tuple[Predicate, PredicateParams]]:
        """Each check's predicate and validated parameters (resolved once per parameter object)."""
        if self._resolved is None:
            self._resolved = [resolve(spec) for spec in self.checks]
        return self._resolved

    def texts(self) -> list[str]:
        return list(dict.fromkeys(t for _, params in self.resolved() for t in params.texts()))

    def answers(self) -> list[str]:
        return list(dict.fromkeys(a for _, params in self.resolved() for a in params.answers()))


@predicate("all.of", AllOfParams)
def _all_of(state: State, p: AllOfParams) -> Check:
    """Every check of ``checks`` holds; the actions left are their sum (the checks of a
    cross-app goal need actions in different apps)."""
    return Check.of(sum(pred.fn(state, params).unmet for pred, params in p.resolved()))


class DataHasParams(PredicateParams):
    """An item of one app's data list: ``app`` (its id), ``key`` (the list) and the fields the item must have."""

    app: str = Field(min_length=1)
    key: str = Field(min_length=1)
    match: dict[str, JsonValue] = Field(
        min_length=1, description="fields the item must have (strings compare by norm())"
    )


def _same(a: Any, b: Any) -> bool:
    return norm(a) == norm(b) if isinstance(a, str) and isinstance(b, str) else a == b


@predicate("data.has", DataHasParams)
def _data_has(state: State, p: DataHasParams) -> Check:
    """``app``'s data list ``key`` holds an item with every field of ``match`` (a cross-app goal's source kept intact)."""
    items = state["apps"].get(p.app, {}).get("data", {}).get(p.key) or []
    found = any(isinstance(item, dict) and all(_same(item.get(k), v) for k, v in p.match.items()) for item in items)
    return Check.of(0 if found else 1)


class StateEqualsParams(PredicateParams):
    """Dotted state paths (``apps.clock.data.alarms.0.enabled``) and the value each must hold.

    A path is what :func:`darwin.algos.task_metrics.state_diff` reports: dict keys and list
    indices joined by dots, no ``*``. Hindsight tasks (:mod:`darwin.hindsight`) use it to check
    "the phone is in the state the explorer reached" without a predicate written per app.
    """

    values: dict[str, JsonValue] = Field(min_length=1, description="dotted state path -> the value it must hold")

    @field_validator("values")
    @classmethod
    def _paths(cls, values: dict[str, JsonValue]) -> dict[str, JsonValue]:
        for path in values:
            segments = path.split(".")
            if any(not s for s in segments) or "*" in segments:
                raise ValueError(
                    f"{path!r} is not a dotted state path such as 'apps.clock.data.alarms.0.enabled' "
                    "(no empty segment, no '*')"
                )
        return values


def lookup(state: State, path: str) -> tuple[bool, Any]:
    """``(True, value)`` at dotted ``path`` of ``state`` (dict keys, list indices), or ``(False, None)``
    where the path does not exist.

    >>> lookup({"apps": {"clock": {"data": {"alarms": [{"enabled": True}]}}}}, "apps.clock.data.alarms.0.enabled")
    (True, True)
    >>> lookup({"apps": {}}, "apps.clock")
    (False, None)
    """
    node: Any = state
    for segment in path.split("."):
        if isinstance(node, dict) and segment in node:
            node = node[segment]
        elif isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
            node = node[int(segment)]
        else:
            return False, None
    return True, node


@predicate("state.equals", StateEqualsParams)
def _state_equals(state: State, p: StateEqualsParams) -> Check:
    """Every path of ``values`` exists in the state and holds its value (``1 == 1.0``, and a missing
    path never matches, even a ``None`` value)."""
    wrong = 0
    for path, expected in p.values.items():
        found, value = lookup(state, path)
        wrong += not found or value != expected or isinstance(value, bool) is not isinstance(expected, bool)
    # One action may set several paths at once (a toggle and its record's timestamp), so the
    # admissible bound on the actions left is 1, not the count of paths still wrong.
    return Check.of(min(wrong, 1))


class StateCannotDecide(Exception):
    """A goal the phone's JSON state cannot decide (``judge.goal``): a judge reading the screens
    decides it. The rule verifier turns it into an unverified verdict; elsewhere it propagates,
    naming the verifier to use."""


class JudgedGoalParams(PredicateParams):
    """A goal in words that an LLM judge decides from the screens, by a strict majority of
    ``samples`` answers (:class:`~darwin.verifiers.judge.llm_judge.LLMJudge`).

    Tasks a model described from screenshots (:mod:`darwin.hindsight.model_synthesizer`) carry
    it: their goal is a sentence, not a state path, so only a judge can check it. The goal is
    part of the spec, as ``state.equals``' values are, so two tasks with the same goal have the
    same verifier (and a duplicate is found by comparing verifiers).
    """

    goal: str = Field(min_length=1, max_length=2000, description="the goal the judge decides, one sentence")
    samples: int = Field(default=3, ge=1, le=15, description="judge answers per verdict; the strict majority decides")

    @field_validator("goal")
    @classmethod
    def _one_line(cls, goal: str) -> str:
        squashed = " ".join(goal.split())
        if not squashed:
            raise ValueError("the goal is blank")
        return squashed


JUDGED_GOAL = "judge.goal"
"""The predicate of goals an LLM judge decides (:class:`JudgedGoalParams`)."""


@predicate(JUDGED_GOAL, JudgedGoalParams)
def _judged_goal(state: State, p: JudgedGoalParams) -> Check:
    """A goal in words, decided by an LLM judge from the screens; the phone's state cannot tell
    (checking it raises :class:`StateCannotDecide`)."""
    raise StateCannotDecide(
        f"{JUDGED_GOAL} ({p.goal!r}) is decided by an LLM judge reading the screens, not by the phone's state: "
        "verify with the llm_judge verifier, or with composite fallback ['rule', 'llm_judge']"
    )


SCREEN_TEXT = "screen.text"
"""The predicate of goals a reader decides from the screens (:class:`ScreenTextParams`)."""
SCREEN_TEXTS = "screen_texts"
"""The key of the state :class:`~darwin.verifiers.screen_text.ScreenTextVerifier` builds for
:data:`SCREEN_TEXT`: the texts a reader read off each screen of the episode, the last screen last."""


class ScreenTextParams(PredicateParams):
    """A text shown (``shown=True``) or gone (``False``) on the episode's last screen
    (``where="last"``) or on any of its screens (``"any"``: shown on at least one; gone: on none).
    Matching ignores case and spacing, and a text within a longer line counts ("Berlin" is shown
    by "Stays in Berlin"). A reader decides it from the screenshots, so it works on phones
    without a JSON state probe."""

    text: str = Field(min_length=1, max_length=200)
    shown: bool = True
    where: Literal["last", "any"] = "last"

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("the text is blank: name the text that must be shown or gone")
        return text

    def texts(self) -> list[str]:
        return [self.text] if self.shown else []


def screen_has(texts: Sequence[str], text: str) -> bool:
    """Whether ``text`` is within one of a screen's ``texts`` or their joined line (case and spacing aside)."""
    want = norm(text)
    return any(want in norm(t) for t in (*texts, " ".join(texts)))


@predicate(SCREEN_TEXT, ScreenTextParams)
def _screen_text(state: State, p: ScreenTextParams) -> Check:
    """A text shown or gone on the last screen or any screen, as a reader read them; a phone's
    JSON state alone cannot tell (checking it raises :class:`StateCannotDecide`)."""
    screens = state.get(SCREEN_TEXTS)
    if screens is None:
        raise StateCannotDecide(
            f"{SCREEN_TEXT} ({p.text!r}) is decided by a reader from the episode's screens, not by the phone's "
            "state: verify with the screen_text verifier (darwin.verifiers.ScreenTextVerifier)"
        )
    if not screens:
        return Check.of(1)
    considered = screens[-1:] if p.where == "last" else screens
    found = [screen_has(texts, p.text) for texts in considered]
    if p.shown:
        return Check.of(0 if any(found) else 1)
    return Check.of(0 if not any(found) else 1)


@predicate("no_goal")
def _no_goal(state: State, p: NoParams) -> Check:
    """Nothing to reach: the task of an exploration (darwin.hindsight.records), which has no
    goal. It never holds, so such an episode is never a success."""
    return Check.of(1)


def _ensure_loaded() -> None:
    # The built-in predicate pack: the simulated apps' predicates register next to their
    # apps, so importing the apps registers them. The import is deferred to the first
    # lookup so that this module (and the rule verifier) never pulls in the simulator at
    # import time, and so that the app modules, which import this one, do not form a cycle.
    import darwin.envs.sim.apps  # noqa: F401
