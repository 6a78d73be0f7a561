"""Paths through states: an explorer's walk shortened by erasing its loops.

An explorer wanders: it opens a screen, leaves it, comes back. When the state after step ``j``
equals the state after an earlier step ``i`` (or the start), the actions ``i+1 .. j`` went round
a loop, and a deterministic phone reached the same state without them. Erasing every loop
leaves a walk that visits no state twice (loop-erased random walk, Lawler 1980). It is used
to cut the explorer's demonstrations before they are imitated (``darwin.run.self_evolution``),
and the cut walk is always replayed to check that it still reaches the goal: a state key that
misses something (a screen the JSON state does not record) would otherwise go unnoticed.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

__all__ = ["erase_loops"]


def erase_loops(states: Sequence[Hashable]) -> list[int]:
    """The steps a walk keeps once its loops are erased.

    Args:
        states: ``[s_0, s_1, ..., s_n]``, the start state's key and the key after each of the
            ``n`` steps (step ``k`` leads from ``s_{k-1}`` to ``s_k``).

    Returns:
        the kept steps' numbers (1-based, ascending): played in order from ``s_0`` they pass
        through distinct states and end at ``s_n``. ``[]`` when ``s_n == s_0``.

        >>> erase_loops(["a", "b", "c", "b", "d"])  # b -> c -> b is a loop: steps 2, 3 go
        [1, 4]
        >>> erase_loops(["a", "b", "a", "c"])
        [3]
        >>> erase_loops(["a", "b", "c"])
        [1, 2]
    """
    if not states:
        raise ValueError("erase_loops needs at least the start state")
    kept: list[int] = []  # kept[m] is the step that led to path[m + 1]
    path: list[Hashable] = [states[0]]
    where: dict[Hashable, int] = {states[0]: 0}  # state -> its index in path
    for step, state in enumerate(states[1:], start=1):
        seen = where.get(state)
        if seen is not None:  # back at path[seen]: drop the loop after it
            for dropped in path[seen + 1 :]:
                del where[dropped]
            del path[seen + 1 :]
            del kept[seen:]
            continue
        where[state] = len(path)
        path.append(state)
        kept.append(step)
    return kept
