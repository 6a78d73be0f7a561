"""The replay buffer between the rollout engine and the learner.

Transitions stream in as they happen (``add``); an episode becomes *completed* when its
workflow returns (``finish``). The learner asks ``take_completed()``: once completed
trajectories hold at least ``rollout_steps`` steps it receives whole completed
trajectories, oldest first, until that many steps are covered; active episodes stay, and
completed ones beyond the threshold carry over to the next update (paper section 3.4).

In GRPO group mode (``group_size=k``) trajectories are released per group, once all ``k``
rollouts of the group have completed. A group can also be *held* (:meth:`hold`) until the
producer says it is complete (:meth:`release`): branching rollouts hold an episode and its
continuations together, so the learner compares them in one update.

    >>> from darwin.replay_buffer import ReplayBuffer
    >>> buf = ReplayBuffer(rollout_steps=4)
    >>> buf.take_completed() is None
    True
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from darwin.types import Trajectory, Transition


class ReplayBufferError(RuntimeError):
    """A transition or trajectory arrived out of order, twice, or for an unknown episode."""


@dataclass
class _Active:
    transitions: list[Transition]
    group: str | None


class ReplayBuffer:
    """Thread-safe buffer of streamed transitions and completed trajectories.

    Args:
        rollout_steps: completed steps needed before the learner gets data (paper: 256).
        group_size: GRPO mode: rollouts per group (``None`` for plain PPO batches).
    """

    def __init__(self, rollout_steps: int, group_size: int | None = None) -> None:
        if rollout_steps < 1:
            raise ValueError(f"rollout_steps must be >= 1, got {rollout_steps}")
        if group_size is not None and group_size < 1:
            raise ValueError(f"group_size must be >= 1 or None, got {group_size}")
        self.rollout_steps = rollout_steps
        self.group_size = group_size
        self._lock = threading.Lock()
        self._active: dict[str, _Active] = {}
        self._done_ids: set[str] = set()
        self._completed: OrderedDict[str, list[Trajectory]] = OrderedDict()
        self._completed_steps = 0
        self._released: set[str] = set()
        self._held: set[str] = set()
        self.dropped_groups = 0
        """Groups discarded by :meth:`close_group` (``drop=True``): a member was lost."""
        self.dropped_trajectories = 0

    # -- producer side --------------------------------------------------------------------
    def start(self, episode_id: str, group: str | None = None) -> None:
        """Register an episode before its first transition (required for group mode)."""
        with self._lock:
            if episode_id in self._active or episode_id in self._done_ids:
                raise ReplayBufferError(f"episode {episode_id} was started twice")
            if self.group_size is not None and group is None:
                raise ReplayBufferError("group mode needs a group id for every episode")
            self._active[episode_id] = _Active([], group)

    def add(self, transition: Transition) -> None:
        """Append one transition of an active episode; steps must arrive in order."""
        with self._lock:
            active = self._active.get(transition.episode_id)
            if active is None:
                raise ReplayBufferError(
                    f"transition for episode {transition.episode_id} which is not active (call start first)"
                )
            expected = len(active.transitions)
            if transition.step != expected:
                raise ReplayBufferError(
                    f"episode {transition.episode_id}: got step {transition.step}, expected {expected}"
                )
            active.transitions.append(transition)

    def finish(self, trajectory: Trajectory) -> None:
        """Mark an episode completed; its trajectory must hold exactly the streamed transitions."""
        with self._lock:
            active = self._active.get(trajectory.episode_id)
            if active is None:
                raise ReplayBufferError(f"episode {trajectory.episode_id} finished without being active (or twice)")
            if trajectory.termination is None:
                raise ReplayBufferError(f"episode {trajectory.episode_id} finished without a termination")
            if [t.step for t in trajectory.transitions] != [t.step for t in active.transitions]:
                raise ReplayBufferError(
                    f"episode {trajectory.episode_id}: trajectory steps differ from the streamed transitions"
                )
            del self._active[trajectory.episode_id]  # only once validated: a bad call loses nothing
            self._done_ids.add(trajectory.episode_id)
            key = active.group if active.group is not None else trajectory.episode_id
            self._completed.setdefault(key, []).append(trajectory)
            self._completed_steps += len(trajectory)

    def hold(self, group: str) -> None:
        """Keep ``group``'s completed members from the learner until :meth:`release` (a group
        whose size the producer decides as it goes: an episode and its continuations)."""
        with self._lock:
            self._held.add(group)

    def release(self, group: str) -> None:
        """``group`` is complete: its members go to the learner together (:meth:`hold`)."""
        with self._lock:
            self._held.discard(group)
            self._released.add(group)

    def abandon(self, episode_id: str) -> None:
        """Drop an active episode that will never finish (e.g. its worker was cancelled)."""
        with self._lock:
            self._active.pop(episode_id, None)
            self._done_ids.add(episode_id)

    def close_group(self, group: str, drop: bool) -> int:
        """A group whose remaining rollouts will never run (its phone was lost): release the
        members completed so far to the learner (``drop=False``), or discard them
        (``drop=True``). Returns how many completed members it released or discarded."""
        with self._lock:
            members = self._completed.get(group, [])
            if drop:
                self._completed.pop(group, None)
                self._completed_steps -= sum(len(t) for t in members)
                self.dropped_groups += 1
                self.dropped_trajectories += len(members)
            elif members:
                self._released.add(group)
            return len(members)

    # -- consumer side --------------------------------------------------------------------
    def _ready(self, key: str) -> bool:
        if key in self._held:
            return False
        return self.group_size is None or key in self._released or len(self._completed[key]) >= self.group_size

    def release_partial_groups(self) -> int:
        """Let the groups completed so far go to the learner even if some of their rollouts
        will never finish (after a resume, the members that were running when the run
        stopped are gone). Returns how many partial groups were released."""
        with self._lock:
            partial = {
                k for k, ts in self._completed.items() if self.group_size is not None and len(ts) < self.group_size
            }
            self._released |= partial
            return len(partial)

    def take_completed(self) -> list[Trajectory] | None:
        """Completed trajectories covering >= ``rollout_steps`` steps, or ``None`` if not yet.

        Whole trajectories (whole groups in group mode) in completion order; the rest stay.
        """
        with self._lock:
            ready_steps = sum(len(t) for key, ts in self._completed.items() if self._ready(key) for t in ts)
            if ready_steps < self.rollout_steps:
                return None
            out: list[Trajectory] = []
            taken = 0
            for key in list(self._completed):
                if taken >= self.rollout_steps:
                    break
                if not self._ready(key):
                    continue
                group = self._completed.pop(key)
                self._released.discard(key)
                out.extend(group)
                n = sum(len(t) for t in group)
                taken += n
                self._completed_steps -= n
            return out

    def completed_trajectories(self) -> list[Trajectory]:
        """A copy of the completed trajectories not yet handed out (for checkpoints)."""
        with self._lock:
            return [t for group in self._completed.values() for t in group]

    # -- introspection --------------------------------------------------------------------
    @property
    def completed_steps(self) -> int:
        """Steps in completed trajectories not yet handed out."""
        return self._completed_steps

    @property
    def active_episodes(self) -> int:
        return len(self._active)

    def active_steps(self) -> int:
        with self._lock:
            return sum(len(a.transitions) for a in self._active.values())

    def backlog_steps(self) -> int:
        """Steps not yet handed out: completed trajectories plus the episodes still running."""
        with self._lock:
            return self._completed_steps + sum(len(a.transitions) for a in self._active.values())
