"""Positive replay (MobileRL's AdaPR): keep the best recent trajectories and mix them into updates.

On hard tasks successes are rare; MobileRL stores the highest-advantage trajectories of each
update and replays some of them in later updates so that their signal is not seen only once.

- :meth:`PositiveReplay.insert` takes the top ``insert_fraction`` of an update's trajectories by
  mean token advantage (``ceil(insert_fraction * n)`` of them, of which only those with a
  positive advantage are stored), then, while the buffer holds more than ``capacity`` entries,
  evicts the entry with the lowest score

      score = advantage_weight * norm(advantage) + (1 - advantage_weight) * norm(inserted_at)

  where ``norm`` is min-max normalisation over the entries in the buffer at that moment (0 when
  all are equal) and ties go to the oldest entry, so old, low-advantage entries leave first.
- :meth:`PositiveReplay.sample` returns ``round(replay_ratio * batch_size)`` stored items (half
  rounded up, at most all of them) drawn uniformly without replacement; each draw counts as one
  use and an entry leaves after ``max_uses`` uses.

Source: ``ReplayBuffer`` in MobileRL's ``training/verl/workers/agentic/replay_buffer.py``
(xuyifan-0731/MobileRL-iclr): insertion of the top ``ceil(top_ratio * n)`` trajectories by mean
advantage (at least one), the balanced advantage / recency eviction score with min-max
normalisation and the oldest-first tie-break. Two differences: MobileRL ages entries out after
``max_age_steps`` insert calls and replays the highest-advantage entries; here an entry ages out
after ``max_uses`` replays and the replayed entries are drawn at random (with a passed
``random.Random``), so every stored entry gets replayed. The buffer is generic over the stored
item (a trajectory, its step rows, ...); it never looks inside one.

Example:

    >>> import random
    >>> replay = PositiveReplay(capacity=2, insert_fraction=0.5, max_uses=1, replay_ratio=0.5)
    >>> replay.insert(["a", "b", "c", "d"], mean_advantages=[0.9, -0.2, 0.4, 0.1], update=0)
    ['a', 'c']
    >>> sorted(replay.sample(batch_size=4, rng=random.Random(0)))
    ['a', 'c']
    >>> len(replay)  # each entry was used max_uses = 1 time
    0
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["PositiveReplay", "ReplayEntry"]

T = TypeVar("T")


@dataclass
class ReplayEntry(Generic[T]):
    """One stored item.

    Attributes:
        item: the stored trajectory (whatever the caller inserted).
        advantage: its mean token advantage when it was inserted.
        inserted_at: the update number it was inserted at (recency for eviction).
        uses: how many times :meth:`PositiveReplay.sample` has returned it.
    """

    item: T
    advantage: float
    inserted_at: int
    uses: int = 0


class PositiveReplay(Generic[T]):
    """Bounded store of high-advantage trajectories, replayed a few times each (MobileRL AdaPR).

    Args:
        capacity: most entries held at once (``>= 1``).
        insert_fraction: fraction of each :meth:`insert` call's items considered for storage, in
            ``(0, 1]``.
        max_uses: times an entry is replayed before it leaves (``>= 1``).
        replay_ratio: replayed items per fresh trajectory of an update, in ``[0, 1]``.
        advantage_weight: weight of the advantage against recency in the eviction score, in
            ``[0, 1]`` (1: evict the lowest advantage; 0: evict the oldest).

    Raises:
        ValueError: on an argument out of its range.
    """

    def __init__(
        self,
        capacity: int = 256,
        insert_fraction: float = 0.25,
        max_uses: int = 4,
        replay_ratio: float = 0.25,
        advantage_weight: float = 0.5,
    ) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be an integer >= 1, got {capacity!r}")
        if not 0.0 < insert_fraction <= 1.0:
            raise ValueError(f"insert_fraction must lie in (0, 1], got {insert_fraction!r}")
        if isinstance(max_uses, bool) or not isinstance(max_uses, int) or max_uses < 1:
            raise ValueError(f"max_uses must be an integer >= 1, got {max_uses!r}")
        if not 0.0 <= replay_ratio <= 1.0:
            raise ValueError(f"replay_ratio must lie in [0, 1] (0 turns replay off), got {replay_ratio!r}")
        if not 0.0 <= advantage_weight <= 1.0:
            raise ValueError(f"advantage_weight must lie in [0, 1], got {advantage_weight!r}")
        self.capacity = capacity
        self.insert_fraction = insert_fraction
        self.max_uses = max_uses
        self.replay_ratio = replay_ratio
        self.advantage_weight = advantage_weight
        self._entries: list[ReplayEntry[T]] = []

    def __len__(self) -> int:
        return len(self._entries)

    def insert(self, items: Sequence[T], mean_advantages: Sequence[float], update: int) -> list[T]:
        """Store the top ``insert_fraction`` of ``items`` by advantage, then evict down to capacity.

        Args:
            items: ``(n,)`` the update's trajectories.
            mean_advantages: ``(n,)`` mean token advantage of each item.
            update: the current update number (recency; later updates should pass larger ones).

        Returns:
            The items of this call that were stored and are still in the buffer after eviction,
            highest advantage first (ties in input order).

        Raises:
            ValueError: when ``items`` and ``mean_advantages`` differ in length or an advantage
                is not finite.
        """
        if len(items) != len(mean_advantages):
            raise ValueError(
                f"items has {len(items)} entries but mean_advantages has {len(mean_advantages)}; "
                "give one mean advantage per item"
            )
        advantages = [float(a) for a in mean_advantages]
        for i, advantage in enumerate(advantages):
            if not math.isfinite(advantage):
                raise ValueError(
                    f"mean_advantages[{i}] is {advantage}; advantages must be finite (drop the "
                    "item or fix the advantage computation)"
                )
        if len(items) == 0:
            return []
        num_top = max(1, math.ceil(self.insert_fraction * len(items)))
        ranked = sorted(range(len(items)), key=lambda i: -advantages[i])  # stable: ties in order
        added = [
            ReplayEntry(item=items[i], advantage=advantages[i], inserted_at=int(update))
            for i in ranked[:num_top]
            if advantages[i] > 0.0
        ]
        self._entries.extend(added)
        self._evict_to_capacity()
        present = {id(entry) for entry in self._entries}
        return [entry.item for entry in added if id(entry) in present]

    def sample(self, batch_size: int, rng: random.Random) -> list[T]:
        """Items to add to an update of ``batch_size`` fresh trajectories; ages them by one use.

        Args:
            batch_size: number of fresh trajectories in the update (``>= 0``).
            rng: source of the draw (``rng.sample`` over the entries, called once).

        Returns:
            ``min(round(replay_ratio * batch_size), len(self))`` items (half rounded up), drawn
            without replacement. Entries that reach ``max_uses`` uses leave the buffer.

        Raises:
            ValueError: on a negative ``batch_size``.
        """
        if isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size < 0:
            raise ValueError(f"batch_size must be an integer >= 0, got {batch_size!r}")
        wanted = math.floor(self.replay_ratio * batch_size + 0.5)
        count = min(wanted, len(self._entries))
        if count == 0:
            return []
        drawn = [self._entries[i] for i in rng.sample(range(len(self._entries)), count)]
        for entry in drawn:
            entry.uses += 1
        self._entries = [entry for entry in self._entries if entry.uses < self.max_uses]
        return [entry.item for entry in drawn]

    def state(self) -> list[ReplayEntry[T]]:
        """Copies of the entries, in buffer order, for a checkpoint (items are not copied)."""
        return [dataclasses.replace(entry) for entry in self._entries]

    def restore(self, entries: Sequence[ReplayEntry[T]]) -> None:
        """Replace the buffer's content with ``entries`` (from :meth:`state`).

        The current settings apply: entries that already reached ``max_uses`` are dropped and,
        if more than ``capacity`` remain, the lowest-scoring ones are evicted.

        Raises:
            TypeError: when an entry is not a :class:`ReplayEntry`.
        """
        restored = []
        for i, entry in enumerate(entries):
            if not isinstance(entry, ReplayEntry):
                raise TypeError(
                    f"entries[{i}] is a {type(entry).__name__}; restore takes the ReplayEntry list returned by state()"
                )
            restored.append(dataclasses.replace(entry))
        self._entries = [entry for entry in restored if entry.uses < self.max_uses]
        self._evict_to_capacity()

    def _evict_to_capacity(self) -> None:
        """Drop the lowest-scoring entry (oldest first on ties) until ``capacity`` is respected."""
        while len(self._entries) > self.capacity:
            advantage_norm = _min_max([entry.advantage for entry in self._entries])
            recency_norm = _min_max([float(entry.inserted_at) for entry in self._entries])
            weight = self.advantage_weight
            scores = [weight * a + (1.0 - weight) * r for a, r in zip(advantage_norm, recency_norm, strict=True)]
            lowest = min(scores)
            tied = [i for i, score in enumerate(scores) if score - lowest < 1e-12]
            victim = min(tied, key=lambda i: self._entries[i].inserted_at)  # first of the oldest
            del self._entries[victim]


def _min_max(values: list[float]) -> list[float]:
    """``(v - min) / (max - min)`` for each value; all 0 when the values are equal."""
    low, high = min(values), max(values)
    if high == low:
        return [0.0] * len(values)
    return [(v - low) / (high - low) for v in values]
