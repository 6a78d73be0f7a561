"""Memory: what of the history an agent's prompt contains.

Stage 1 is :class:`SlidingWindowMemory`; stage 2, :class:`LLMMemoryManager` (an external
model distils episodes into app knowledge kept in SQL), is imported on first use (it
brings the policy and database layers with it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from darwin.memory.base import (
    NOTES_OVERHEAD_TOKENS,
    HistoryItem,
    Memory,
    MemoryEntry,
    MemoryWindow,
    Render,
    approx_token_count,
    default_render,
    format_notes,
)
from darwin.memory.sliding_window import SlidingWindowConfig, SlidingWindowMemory, TokenCounter, tokenizer_counter

if TYPE_CHECKING:
    from darwin.memory.llm import LLMMemoryConfig, LLMMemoryManager, LLMMemoryStats
    from darwin.memory.llm_store import KnowledgeEntry, KnowledgeStore, MemoryStoreError

_LAZY = {
    name: "darwin.memory.llm"
    for name in (
        "KnowledgeEntry",
        "KnowledgeStore",
        "LLMMemoryConfig",
        "LLMMemoryManager",
        "LLMMemoryStats",
        "MemoryStoreError",
    )
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'darwin.memory' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "NOTES_OVERHEAD_TOKENS",
    "HistoryItem",
    "KnowledgeEntry",
    "KnowledgeStore",
    "LLMMemoryConfig",
    "LLMMemoryManager",
    "LLMMemoryStats",
    "Memory",
    "MemoryEntry",
    "MemoryStoreError",
    "MemoryWindow",
    "Render",
    "SlidingWindowConfig",
    "SlidingWindowMemory",
    "TokenCounter",
    "approx_token_count",
    "default_render",
    "format_notes",
    "tokenizer_counter",
]
