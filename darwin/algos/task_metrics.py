"""MobileGym's episode metrics and difficulty strata, as pure functions on phone states and verdicts.

Success rate says whether an agent finished a task; these say how it failed or succeeded
(MobileGym, "Benchmarking mobile agents with verifiable tasks"; docs/evaluation.md):

- :func:`progress_rate`: the share of a task's sub-goals met at the end (``Task.subgoals``);
  a task without sub-goals falls back to the fraction of the goal predicate's distance
  (``Check.unmet``, an admissible action count) closed between the start and the end of the
  episode. The fallback is a distance-based proxy, not MobileGym's sub-goal count.
- :func:`state_diff` + :func:`side_effects`: app data changed outside what the task allows
  (``Task.allowed_changes``): an unexpected side effect.
- :func:`false_completion`: the agent said ``finished``/``answer`` and the verdict is a failure.
- :func:`over_time`: the goal held after some step and the agent kept acting.
- :func:`difficulty_stratum`, :func:`strata`: MobileGym's L1-L4 strata of tasks from one
  agent's success rate (SR) and mean progress rate (PR) on each.

States are SimPhone's JSON state (``probe_state()``); paths are dotted (``apps.clock.data.alarms``).

    >>> before = {"apps": {"settings": {"data": {"dark_theme": False, "notification_history": False}}}}
    >>> after = {"apps": {"settings": {"data": {"dark_theme": True, "notification_history": True}}}}
    >>> changed = state_diff(before, after)
    >>> changed
    ('apps.settings.data.dark_theme', 'apps.settings.data.notification_history')
    >>> side_effects(changed, ["apps.settings.data.dark_theme"])
    ('apps.settings.data.notification_history',)
    >>> progress_rate(success=False, subgoals_met=[True, False, False, True])
    0.5
    >>> progress_rate(success=False, unmet_start=4, unmet_end=3)
    0.25
    >>> difficulty_stratum(success_rate=0.5, progress_rate=0.6)
    'L2'
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from darwin.predicates import evaluate
from darwin.types import EpisodeMetrics, Task

__all__ = [
    "STRATA",
    "EpisodeResult",
    "Stratum",
    "TaskMetrics",
    "difficulty_stratum",
    "false_completion",
    "measure_episode",
    "over_time",
    "path_allowed",
    "progress_rate",
    "side_effects",
    "state_diff",
    "strata",
    "stratum_counts",
    "summarize_task",
]

State = Mapping[str, Any]
Stratum = Literal["L1", "L2", "L3", "L4"]
STRATA: tuple[Stratum, ...] = ("L1", "L2", "L3", "L4")
EpisodeResult = tuple[bool | None, EpisodeMetrics | None]
"""One episode as the per-task summary reads it: the verdict (``None``: not scored) and its metrics."""

DEFAULT_ROOTS = ("apps.*.data",)
"""What :func:`state_diff` compares by default: every app's data (not screens, the clock or the answer)."""


# ----------------------------------------------------------------------------- state diffs


def _segments(pattern: str, what: str) -> list[str]:
    parts = pattern.split(".")
    if not pattern or any(not p for p in parts):
        raise ValueError(f"{what} {pattern!r} is not a dotted path such as 'apps.clock.data.alarms' (empty segment)")
    return parts


def state_diff(before: State, after: State, roots: Sequence[str] = DEFAULT_ROOTS) -> tuple[str, ...]:
    """The dotted paths under ``roots`` whose values differ between two states, sorted.

    Dicts are compared key by key, recursively: a changed, added or removed key gives its
    own path. A list whose length is unchanged is compared index by index, recursively
    (``apps.contacts.data.contacts.3.starred``: a record edited in place); a list that grew
    or shrank gives the list's own path, because an inserted or deleted element would shift
    and "change" every later index. So ``contacts.*.starred`` allows starring any contact,
    and only a pattern naming the list (``apps.contacts.data.contacts``) allows adding or
    deleting one. Every other value is compared as a whole.

    Args:
        before: the state at the start (a JSON object).
        after: the state at the end.
        roots: dotted patterns of the subtrees compared; ``*`` matches any one key. A root
            present in only one of the states is reported as a whole.

    Returns:
        ``(num_changed,)`` dotted paths, sorted, without duplicates.

    >>> state_diff({"apps": {"clock": {"data": {"alarms": [{"on": True}], "n": 2}}}},
    ...            {"apps": {"clock": {"data": {"alarms": [{"on": False}], "n": 2}}}})
    ('apps.clock.data.alarms.0.on',)
    >>> state_diff({"apps": {"clock": {"data": {"alarms": [{"on": True}], "n": 2}}}},
    ...            {"apps": {"clock": {"data": {"alarms": [{"on": True}, {"on": True}], "n": 2}}}})
    ('apps.clock.data.alarms',)
    """
    changed: set[str] = set()
    for root in roots:
        _diff_under(_segments(root, "root"), (), before, after, changed)
    return tuple(sorted(changed))


_MISSING = object()


def _diff_under(pattern: list[str], path: tuple[str, ...], a: object, b: object, out: set[str]) -> None:
    """Follow ``pattern`` down both values, then diff what it reaches."""
    if not pattern:
        _diff(path, a, b, out)
        return
    head, rest = pattern[0], pattern[1:]
    if a is _MISSING or b is _MISSING:
        if a is not b:  # the subtree exists on one side only: a change as a whole
            out.add(".".join(path))
        return
    if not isinstance(a, Mapping) or not isinstance(b, Mapping):
        if a != b:
            out.add(".".join(path))
        return
    keys = sorted(set(a) | set(b)) if head == "*" else [head]
    for key in keys:
        _diff_under(rest, (*path, str(key)), a.get(key, _MISSING), b.get(key, _MISSING), out)


def _diff(path: tuple[str, ...], a: object, b: object, out: set[str]) -> None:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in set(a) | set(b):
            _diff((*path, str(key)), a.get(key, _MISSING), b.get(key, _MISSING), out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):  # edited in place: element by element
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff((*path, str(index)), x, y, out)
    elif a != b or type(a) is not type(b):  # a missing side (_MISSING) differs from any value
        out.add(".".join(path))


def path_allowed(path: str, patterns: Iterable[str]) -> bool:
    """True if some pattern allows ``path``: ``*`` matches one key, and a pattern allows
    everything below it (``apps.clock.data.alarms`` allows ``apps.clock.data.alarms.0``).

    >>> path_allowed("apps.settings.data.app_notifications.Chrome", ["apps.settings.data.app_notifications"])
    True
    >>> path_allowed("apps.clock.data.next_id", ["apps.*.data.alarms"])
    False
    """
    keys = path.split(".")
    for pattern in patterns:
        parts = _segments(pattern, "allowed-change pattern")
        if len(parts) <= len(keys) and all(p in ("*", k) for p, k in zip(parts, keys, strict=False)):
            return True
    return False


def side_effects(changed_paths: Iterable[str], allowed_patterns: Sequence[str]) -> tuple[str, ...]:
    """The changed paths no allowed pattern covers (see :func:`path_allowed`), sorted.

    Args:
        changed_paths: ``(num_changed,)`` dotted paths, e.g. from :func:`state_diff`.
        allowed_patterns: the task's ``allowed_changes``; ``()`` allows nothing.
    """
    for pattern in allowed_patterns:
        _segments(pattern, "allowed-change pattern")  # a malformed pattern fails even with nothing changed
    return tuple(sorted({p for p in changed_paths if not path_allowed(p, allowed_patterns)}))


# ----------------------------------------------------------------------------- per episode


def progress_rate(
    *,
    success: bool,
    subgoals_met: Sequence[bool] = (),
    unmet_start: int | None = None,
    unmet_end: int | None = None,
) -> float:
    """How far an episode got, in ``[0, 1]``.

    - ``success``: 1.0.
    - With sub-goals: the share of ``subgoals_met`` that hold at the end (MobileGym's PR).
    - Without: ``1 - unmet_end / unmet_start`` clipped to ``[0, 1]``, where ``unmet`` is the
      goal predicate's admissible distance (a lower bound on the actions still needed) at the
      start and at the end: a distance-based proxy. A goal that held at the start
      (``unmet_start == 0``) and no longer does gives 0.0.

    Args:
        success: whether the goal holds at the end.
        subgoals_met: ``(num_subgoals,)`` whether each sub-goal holds at the end.
        unmet_start: the goal's distance in the state the agent started from (``>= 0``).
        unmet_end: the goal's distance at the end (``>= 0``).
    """
    if success:
        return 1.0
    if subgoals_met:
        return sum(bool(m) for m in subgoals_met) / len(subgoals_met)
    if unmet_start is None or unmet_end is None:
        raise ValueError("progress_rate needs subgoals_met, or both unmet_start and unmet_end (the goal's distance)")
    if unmet_start < 0 or unmet_end < 0:
        raise ValueError(f"distances must be >= 0, got unmet_start={unmet_start}, unmet_end={unmet_end}")
    if unmet_start == 0:
        return 1.0 if unmet_end == 0 else 0.0
    return min(1.0, max(0.0, 1.0 - unmet_end / unmet_start))


def false_completion(agent_finished: bool, success: bool | None) -> bool:
    """The agent ended the episode with ``finished``/``answer`` and the verdict is a failure.

    An unverified verdict (``None``) is not a false completion: nobody knows it was false.
    """
    return agent_finished and success is False


def over_time(goal_met: Sequence[bool], agent_finished: bool) -> tuple[int | None, int]:
    """When the goal first held, and how many actor steps came after it.

    Args:
        goal_met: ``(num_actor_steps,)`` whether the goal held after each actor step of the phase.
        agent_finished: the last step was a ``finished``/``answer`` that ended the phase; it is
            how the agent declares the goal met, so it is not an extra step.

    Returns:
        ``(goal_first_met_step, over_time_steps)``: the first step after which the goal held
        (``None`` if never) and the actor steps after it (0 when none). A goal that held and
        was later undone still counts: the agent kept acting after meeting it.

    >>> over_time([False, True, True, True], agent_finished=False)   # met at step 1, 2 more steps
    (1, 2)
    >>> over_time([False, True, True], agent_finished=True)          # met, then finished: on time
    (1, 0)
    """
    first = next((i for i, met in enumerate(goal_met) if met), None)
    if first is None:
        return None, 0
    last_acting = len(goal_met) - 1 - (1 if agent_finished else 0)
    return first, max(0, last_acting - first)


def measure_episode(
    task: Task,
    start_state: dict[str, Any],
    end_state: dict[str, Any],
    *,
    success: bool | None,
    agent_finished: bool,
    goal_met: Sequence[bool] | None = None,
) -> EpisodeMetrics:
    """All metrics of one execution phase from its start and end states.

    Progress reads the task's own predicates (``Task.verifier``, ``Task.subgoals``) on the
    states; false completion reads the episode's verdict ``success``; over-time needs
    ``goal_met`` (the goal checked after each actor step; ``None``: not checked, so
    ``over_time_steps`` is ``None``).
    """
    end = evaluate(task.verifier, end_state)
    if task.subgoals:
        progress = progress_rate(
            success=end.success, subgoals_met=[evaluate(s, end_state).success for s in task.subgoals]
        )
    else:
        progress = progress_rate(
            success=end.success, unmet_start=evaluate(task.verifier, start_state).unmet, unmet_end=end.unmet
        )
    effects = None
    if task.allowed_changes is not None:
        effects = side_effects(state_diff(start_state, end_state), task.allowed_changes)
    first, extra = over_time(goal_met, agent_finished) if goal_met is not None else (None, None)
    return EpisodeMetrics(
        progress_rate=progress,
        side_effects=effects,
        false_completion=false_completion(agent_finished, success),
        over_time_steps=extra,
        goal_first_met_step=first,
    )


# ----------------------------------------------------------------------------- per task


def difficulty_stratum(success_rate: float, progress_rate: float) -> Stratum:
    """MobileGym's difficulty stratum of a task for one agent.

    L1: SR >= 0.75 and PR >= 0.75; L2: SR >= 0.25 and PR >= 0.5; L3: SR > 0 and PR >= 0.25;
    L4: everything else (never solved, or barely started).

    >>> difficulty_stratum(0.75, 0.75), difficulty_stratum(0.25, 0.5), difficulty_stratum(0.01, 0.25), difficulty_stratum(0.0, 0.9)
    ('L1', 'L2', 'L3', 'L4')
    """
    for name, value in (("success_rate", success_rate), ("progress_rate", progress_rate)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value}")
    if success_rate >= 0.75 and progress_rate >= 0.75:
        return "L1"
    if success_rate >= 0.25 and progress_rate >= 0.5:
        return "L2"
    if success_rate > 0.0 and progress_rate >= 0.25:
        return "L3"
    return "L4"


@dataclass(frozen=True)
class TaskMetrics:
    """One task's metrics over an agent's scored episodes (what ``darwin eval`` prints).

    >>> m = summarize_task([(True, EpisodeMetrics(1.0, side_effects=())),
    ...                     (False, EpisodeMetrics(0.5, side_effects=("apps.x.data.posts",), false_completion=True))])
    >>> m.success_rate, m.progress_rate, m.side_effect_rate, m.false_completions, m.stratum
    (0.5, 0.75, 0.5, 1, 'L2')
    """

    episodes: int = 0
    """Scored episodes (a success or a failure verdict)."""
    successes: int = 0
    measured: int = 0
    """Scored episodes with :class:`~darwin.types.EpisodeMetrics`."""
    progress_rate: float | None = None
    """Mean progress rate over the measured episodes."""
    side_effect_episodes: int = 0
    """Measured episodes with at least one unexpected side effect."""
    side_effect_measured: int = 0
    """Measured episodes whose task declares what it may change."""
    false_completions: int = 0
    over_time: int = 0
    """Measured episodes in which the agent kept acting after the goal held."""

    @property
    def success_rate(self) -> float | None:
        return self.successes / self.episodes if self.episodes else None

    @property
    def side_effect_rate(self) -> float | None:
        """Share of episodes with side effects (SE), over those where they were measured."""
        return self.side_effect_episodes / self.side_effect_measured if self.side_effect_measured else None

    @property
    def stratum(self) -> Stratum | None:
        """The task's L1-L4 stratum for this agent (``None`` without SR or PR)."""
        if self.success_rate is None or self.progress_rate is None:
            return None
        return difficulty_stratum(self.success_rate, self.progress_rate)

    def to_json(self) -> dict[str, int | float | str | None]:
        """The counts plus the derived rates and stratum (eval JSON, ``eval.json``)."""
        return {
            "episodes": self.episodes,
            "successes": self.successes,
            "measured": self.measured,
            "progress_rate": self.progress_rate,
            "side_effect_episodes": self.side_effect_episodes,
            "side_effect_measured": self.side_effect_measured,
            "false_completions": self.false_completions,
            "over_time": self.over_time,
            "success_rate": self.success_rate,
            "side_effect_rate": self.side_effect_rate,
            "stratum": self.stratum,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskMetrics:
        """Inverse of :meth:`to_json` (derived keys are recomputed, not read)."""
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


def summarize_task(results: Iterable[EpisodeResult]) -> TaskMetrics:
    """Aggregate one task's episodes; episodes without a verdict (``None``) are not scored."""
    episodes = successes = measured = se_hit = se_measured = fc = ot = 0
    progress = 0.0
    for success, metrics in results:
        if success is None:
            continue
        episodes += 1
        successes += bool(success)
        if metrics is None:
            continue
        measured += 1
        progress += metrics.progress_rate
        if metrics.side_effects is not None:
            se_measured += 1
            se_hit += metrics.has_side_effects
        fc += metrics.false_completion
        ot += metrics.over_time
    return TaskMetrics(
        episodes=episodes,
        successes=successes,
        measured=measured,
        progress_rate=progress / measured if measured else None,
        side_effect_episodes=se_hit,
        side_effect_measured=se_measured,
        false_completions=fc,
        over_time=ot,
    )


def strata(per_task_results: Mapping[str, TaskMetrics]) -> dict[str, Stratum]:
    """Each task's stratum for one agent (tasks without SR or PR are left out)."""
    return {task: m.stratum for task, m in per_task_results.items() if m.stratum is not None}


def stratum_counts(per_task_strata: Mapping[str, Stratum]) -> dict[Stratum, int]:
    """How many tasks fall in each stratum, L1 to L4 (zeros included)."""
    counts = Counter(per_task_strata.values())
    return {s: counts.get(s, 0) for s in STRATA}
