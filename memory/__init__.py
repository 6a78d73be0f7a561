"""Memory: what of the history an agent's prompt contains.

The interface is :class:`Memory`. Stage 1 is :class:`SlidingWindowMemory`; stage 2 is
:class:`LLMMemoryManager` (an external model distils episodes into app knowledge kept in SQL):

    >>> from darwin.memory import Memory, SlidingWindowMemory
    >>> memory = SlidingWindowMemory(max_interactions=4)
    >>> isinstance(memory, Memory), memory.select(list(range(10)))
    (True, [6, 7, 8, 9])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from darwin.lazy_exports import lazy_exports

__all__ = [
    "HistoryItem",
    "LLMMemoryConfig",
    "LLMMemoryManager",
    "Memory",
    "MemoryEntry",
    "MemoryWindow",
    "SlidingWindowConfig",
    "SlidingWindowMemory",
]

if TYPE_CHECKING:
    from darwin.memory.base import HistoryItem, Memory, MemoryEntry, MemoryWindow
    from darwin.memory.llm import LLMMemoryConfig, LLMMemoryManager
    from darwin.memory.sliding_window import SlidingWindowConfig, SlidingWindowMemory
else:  # hidden from type checkers, so that a misspelt name is their error
    # public name -> the module that holds it, imported on first use (darwin.lazy_exports)
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "HistoryItem": "darwin.memory.base",
            "LLMMemoryConfig": "darwin.memory.llm",
            "LLMMemoryManager": "darwin.memory.llm",
            "Memory": "darwin.memory.base",
            "MemoryEntry": "darwin.memory.base",
            "MemoryWindow": "darwin.memory.base",
            "SlidingWindowConfig": "darwin.memory.sliding_window",
            "SlidingWindowMemory": "darwin.memory.sliding_window",
        },
    )
