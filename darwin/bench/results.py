"""Benchmark results as JSON lines: what ``darwin bench`` prints for machines to read
(docs/benchmarks.md quotes them), one line per result.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Timing:
    ...     name: str
    ...     ms: float
    >>> json_lines([Timing("forward", 1.5), Timing("generate", 20.0)])
    ['{"name": "forward", "ms": 1.5}', '{"name": "generate", "ms": 20.0}']
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["json_lines"]


def json_lines(results: Sequence[DataclassInstance]) -> list[str]:
    """One JSON object per result (its dataclass fields), in order."""
    return [json.dumps(dataclasses.asdict(result)) for result in results]
