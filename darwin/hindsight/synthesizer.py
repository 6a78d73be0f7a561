"""The built-in ``hindsight`` task synthesiser: one rule task per state path the explorer changed.

For every state the exploration reached, the app-data paths that differ from its start
(:func:`~darwin.algos.task_metrics.state_diff`) each give a candidate "make this path hold
this value", verified by the ``state.equals`` rule predicate, worded by the phrase-rule
describer (:mod:`darwin.hindsight.describer`), with the explorer's actions up to the first
state where it held as the demonstration. Bookkeeping paths (:data:`IGNORED_PATHS`: an id
counter, a thread's last-update stamp) change along with a real change and are no goal of
their own.

    >>> import asyncio
    >>> from darwin.envs.sim.env import SimPhoneEnv
    >>> from darwin.hindsight.exploration import explore
    >>> from darwin.hindsight.synthesizer import HindsightSynthesizer
    >>> run = asyncio.run(explore(SimPhoneEnv(seed=0), "Settings", steps=30, seed=1))
    >>> found = HindsightSynthesizer().synthesize(run).kept
    >>> found[0].task.instruction, found[0].task.verifier.params, found[0].steps
    ('In Settings, turn off Color inversion.', {'values': {'apps.settings.data.toggles.accessibility:Color inversion': False}}, 7)
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import orjson

from darwin.algos.task_metrics import DEFAULT_ROOTS, path_allowed, state_diff
from darwin.envs.sim.apps import default_apps
from darwin.hindsight.base import DifficultyBand, SynthesisedTask, TaskSynthesizer
from darwin.hindsight.describer import describe
from darwin.hindsight.exploration import Exploration
from darwin.predicates import lookup
from darwin.types import Task, VerifierSpec

__all__ = ["IGNORED_PATHS", "HindsightSynthesizer"]

IGNORED_PATHS: tuple[str, ...] = ("apps.*.data.next_id", "apps.*.data.*.*.updated")
"""Paths (``*``: one key; a pattern covers everything below it) never made a goal."""


class HindsightSynthesizer(TaskSynthesizer):
    """Hindsight tasks from the state paths an exploration changed.

    Args:
        min_steps: keep tasks the explorer reached in at least this many actions.
        max_steps: ... and at most this many (``None``: no bound).
        ignored_paths: state paths never made a goal (default :data:`IGNORED_PATHS`).
        roots: the state subtrees compared (default: every app's data).
    """

    def __init__(
        self,
        min_steps: int = 1,
        max_steps: int | None = None,
        ignored_paths: Sequence[str] = IGNORED_PATHS,
        roots: Sequence[str] = DEFAULT_ROOTS,
    ) -> None:
        self.band = DifficultyBand(min_steps=min_steps, max_steps=max_steps)
        self.ignored_paths = tuple(ignored_paths)
        self.roots = tuple(roots)

    def candidates(self, exploration: Exploration) -> list[SynthesisedTask]:
        labels = {app.id: app.label for app in default_apps()}
        start, states = exploration.states("the hindsight synthesizer")
        first_reached: dict[tuple[str, bytes], int] = {}
        found: list[SynthesisedTask] = []
        for index, state in enumerate(states):
            for path in state_diff(start, state, self.roots):
                exists, value = lookup(state, path)
                # A removed key cannot be asked for with state.equals (its list is reported instead).
                if not exists or path_allowed(path, self.ignored_paths):
                    continue
                key = (path, orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
                if key in first_reached:
                    continue
                first_reached[key] = index
                segments = path.split(".")
                app_id = segments[1] if segments[0] == "apps" and len(segments) > 1 else None
                app = labels.get(app_id or "", exploration.app)
                spec = VerifierSpec(predicate="state.equals", params={"values": {path: value}})
                digest = hashlib.blake2b(key[0].encode() + b"=" + key[1], digest_size=5).hexdigest()
                task = Task(
                    id=f"hindsight.{app_id or 'phone'}.{digest}",
                    instruction=describe(path, start, state, app),
                    app=app,
                    verifier=spec,
                    source="hindsight",
                )
                found.append(SynthesisedTask(task, exploration.actions(index + 1), start))
        return found
