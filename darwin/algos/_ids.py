"""Helpers for the per-row identifier arrays that ride along step rows (trajectory and group ids).

Ids may be a 1-D ``torch.Tensor`` of integers, a 1-D ``numpy`` array (verl keeps ``uid`` as an
object array of strings in ``DataProto.non_tensor_batch``) or any sequence of hashables
(``Transition.episode_id`` is a ``str``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

import numpy as np
import torch

IdArray = torch.Tensor | np.ndarray | Sequence[Hashable]
"""One hashable id per row: shape ``(n,)``."""

H = TypeVar("H", bound=Hashable)


def as_id_list(ids: IdArray, n: int, name: str) -> list[Hashable]:
    """Return ``ids`` as a Python list of length ``n``, raising a ``ValueError`` naming ``name``."""
    if isinstance(ids, (torch.Tensor, np.ndarray)):
        if ids.ndim != 1:
            raise ValueError(f"{name} must be 1-D with one id per row, got shape {tuple(ids.shape)}")
        values = ids.tolist()
    else:
        values = list(ids)
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} entries but there are {n} rows")
    for v in values:
        if not isinstance(v, Hashable):
            raise ValueError(f"{name} entries must be hashable ids, got {type(v).__name__}")
    return values


def factorize(ids: list[Hashable], device: torch.device) -> tuple[torch.Tensor, list[Hashable]]:
    """Map ids to dense codes ``0..k-1`` in order of first appearance.

    Returns:
        codes: ``(n,)`` int64 tensor, ``codes[i]`` is the code of ``ids[i]``.
        uniques: the ``k`` distinct ids, ``uniques[c]`` is the id with code ``c``.
    """
    index: dict[Hashable, int] = {}
    codes = [index.setdefault(v, len(index)) for v in ids]
    return torch.tensor(codes, dtype=torch.long, device=device), list(index)


def check_constant_per_code(
    codes: torch.Tensor, values: Sequence[H], uniques: Sequence[Hashable], what: str, owner: str
) -> list[H]:
    """Check that ``values`` is the same on every row sharing a code; return one value per code.

    Raises a ``ValueError`` naming the first ``owner`` (e.g. trajectory) whose rows disagree.
    """
    per_code: dict[int, H] = {}
    for c, v in zip(codes.tolist(), values, strict=True):
        if per_code.setdefault(c, v) != v:
            raise ValueError(
                f"{what} must be the same on every row of a {owner}; {owner} {uniques[c]!r} has "
                f"both {per_code[c]!r} and {v!r}"
            )
    return [per_code[c] for c in range(len(uniques))]
