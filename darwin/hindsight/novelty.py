"""A novelty-seeking explorer: any actor proposes actions, a count-based bonus picks among them.

:class:`NoveltyExplorer` wraps an :class:`~darwin.agents.base.Actor` (the random agent, or a
policy sampled at a high temperature). At each step it asks the wrapped actor for
``candidates`` decisions and plays the one whose outcome is expected to be the newest screen
(:func:`~darwin.algos.novelty.expected_novelty`): it remembers how often it saw each screen and,
for each (screen, action) pair it played, which screens followed. An action never tried from
the current screen scores as a screen never seen (1.0), so the explorer tries what it has not
tried before it repeats what it knows; ties go to the wrapped actor's earlier proposal.

A **screen** is the screenshot the actor is shown, hashed exactly: it is all an actor sees, so
the explorer works on any phone (no state probe needed) and inside any rollout. On a SimPhone
screens repeat (200 random steps in Calendar show 22 distinct screens; the JSON state, which also
holds every app's data, took 74 values). An **action** is keyed coarsely, because the random
agent almost never clicks the same pixel twice: a click or long press by the cell of a
``grid`` it falls in (default 4 columns x 16 rows: a cell is about one list row of a SimPhone
screen), a scroll by its direction, a drag by its start cell and main direction, typing by its
text, any other action by its type. Launching an app is one action whichever the app: keyed
by name, the fifteen other apps would each be an untried action on every new screen, and
the explorer would leave the app it explores more often than the random agent does.

When the played action leaves what the observations show (an exploration re-opened the app in
between: the next observation's step is not the next step), it is recorded as leading to
:data:`ELSEWHERE`, a screen counted like any other, so leaving the app grows old too.

The explorer has no random numbers of its own: with a seeded actor it is deterministic.

    >>> import asyncio
    >>> from darwin.agents.scripted import RandomActor
    >>> from darwin.envs.sim.env import SimPhoneEnv
    >>> from darwin.hindsight.exploration import explore
    >>> explorer = NoveltyExplorer(RandomActor(seed=0), candidates=8)
    >>> run = asyncio.run(explore(SimPhoneEnv(seed=0), "Settings", steps=30, actor=explorer, seed=0))
    >>> len(run.steps), explorer.screens_seen > 1
    (30, True)
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from darwin.actions import Action, Click, Drag, LongPress, Scroll, Type, is_terminal
from darwin.agents.base import Actor
from darwin.algos.novelty import expected_novelty
from darwin.envs.base import PhoneEnv
from darwin.types import Decision, EpisodeSampling, Observation, Phase, Task, Trajectory, Transition, VerifierSpec

__all__ = ["ELSEWHERE", "NoveltyExplorer", "action_key", "screen_key"]

ELSEWHERE = "elsewhere"
"""Where an action led when the next observation is not the next step (the explorer's caller
played something in between, e.g. re-opened the app the action left)."""

ActionKey = tuple[str | int, ...]


def screen_key(screenshot: np.ndarray) -> str:
    """The screen a screenshot shows: a hash of its pixels and shape (equal screenshots, equal key)."""
    digest = hashlib.blake2b(repr(screenshot.shape).encode(), digest_size=16)
    digest.update(np.ascontiguousarray(screenshot).tobytes())
    return digest.hexdigest()


def action_key(action: Action, device_size: tuple[int, int], grid: tuple[int, int]) -> ActionKey:
    """The action as the explorer counts it: a click or long press by its cell of ``grid``
    (``(columns, rows)`` over the phone's ``device_size``), a scroll by its direction, a drag by
    its start cell and main direction, typing by its text, any other (an app launch included) by its type.

        >>> action_key(Click(x=700, y=450), (1080, 2400), (4, 16))
        ('click', 2, 3)
        >>> action_key(Drag(x1=10, y1=2000, x2=20, y2=100), (1080, 2400), (4, 16))
        ('drag', 0, 13, 'up')
    """

    def cell(x: int, y: int) -> tuple[int, int]:
        width, height = device_size
        columns, rows = grid
        return min(columns - 1, max(0, x * columns // width)), min(rows - 1, max(0, y * rows // height))

    if isinstance(action, Click | LongPress):
        return (action.type, *cell(action.x, action.y))
    if isinstance(action, Scroll):
        return (action.type, action.direction.value)
    if isinstance(action, Drag):
        dx, dy = action.x2 - action.x1, action.y2 - action.y1
        direction = ("right" if dx > 0 else "left") if abs(dx) > abs(dy) else ("down" if dy > 0 else "up")
        return (action.type, *cell(action.x1, action.y1), direction)
    if isinstance(action, Type):
        return (action.type, action.content)
    return (action.type,)


@dataclass(frozen=True)
class _Played:
    screen: str
    action: ActionKey
    step: int


class NoveltyExplorer(Actor):
    """Plays, of ``candidates`` decisions of ``actor``, the one expected to lead to the newest screen.

    Args:
        actor: proposes the candidates (asked ``candidates`` times per step, with the same
            observation and history); its hooks (episode start and end, phase start, sampling)
            are passed on to it.
        candidates: proposals per step (1: the wrapped actor as it is).
        grid: ``(columns, rows)`` cells of the phone's screen that clicks and long presses are
            counted by (:func:`action_key`).

    The memory (screens seen, what each tried action led to) lasts as long as the explorer: make
    one per exploration to explore each from scratch, or keep one to explore on from what it saw.
    """

    def __init__(self, actor: Actor, candidates: int = 8, grid: tuple[int, int] = (4, 16)) -> None:
        if candidates < 1:
            raise ValueError(f"NoveltyExplorer needs candidates >= 1, got {candidates}")
        if len(grid) != 2 or min(grid) < 1:
            raise ValueError(f"NoveltyExplorer's grid is (columns, rows), each >= 1; got {grid}")
        self.actor = actor
        self.candidates = candidates
        self.grid = grid
        self.visits: Counter[str] = Counter()
        """How many times each screen was seen (:func:`screen_key`; :data:`ELSEWHERE` included)."""
        self.outcomes: dict[tuple[str, ActionKey], Counter[str]] = {}
        """For each (screen, action) played: the screens it led to, with how many times each."""
        self._played: _Played | None = None
        self._arrived: int | None = None  # the step whose screen was last counted

    @property
    def screens_seen(self) -> int:
        """Distinct screens seen so far (:data:`ELSEWHERE` not counted)."""
        return sum(1 for screen in self.visits if screen != ELSEWHERE)

    def score(self, screen: str, action: ActionKey) -> float:
        """The novelty ``action`` is expected to lead to from ``screen`` (1.0: never tried there)."""
        return expected_novelty(self.outcomes.get((screen, action), Counter()), self.visits)

    def start_episode(self, task: Task) -> None:
        self._played, self._arrived = None, None
        self.actor.start_episode(task)

    async def end_episode(self, trajectory: Trajectory) -> None:
        await self.actor.end_episode(trajectory)

    async def start_phase(
        self, env: PhoneEnv, task: Task, phase: Phase, instruction: str, verifier: VerifierSpec
    ) -> None:
        await self.actor.start_phase(env, task, phase, instruction, verifier)

    def use_sampling(self, sampling: EpisodeSampling | None) -> None:
        self.actor.use_sampling(sampling)

    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        screen = screen_key(observation.screenshot)
        if self._arrived != observation.step:  # asked again at the same step: the screen is counted
            self._arrive(screen, observation.step)
        proposals = [await self.actor.act(observation, history) for _ in range(self.candidates)]
        playable = [
            (decision, action_key(decision.action, observation.device_size, self.grid))
            for decision in proposals
            if decision.action is not None and not is_terminal(decision.action)
        ]
        if not playable:  # nothing to compare: the caller decides what a non-action means
            return proposals[0]
        # max keeps the first of equal scores: ties go to the actor's earlier proposal
        decision, key = max(playable, key=lambda proposal: self.score(screen, proposal[1]))
        self._played = _Played(screen=screen, action=key, step=observation.step)
        return decision

    def _arrive(self, screen: str, step: int) -> None:
        if self._played is not None:
            landed = screen if step == self._played.step + 1 else ELSEWHERE
            self.outcomes.setdefault((self._played.screen, self._played.action), Counter())[landed] += 1
            if landed == ELSEWHERE:
                self.visits[ELSEWHERE] += 1
            self._played = None
        self.visits[screen] += 1
        self._arrived = step
