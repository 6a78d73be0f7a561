"""Memory: what of the history an agent's prompt contains."""

from darwin.memory.base import (
    HistoryItem,
    Memory,
    MemoryEntry,
    MemoryWindow,
    Render,
    approx_token_count,
    default_render,
)
from darwin.memory.sliding_window import (
    SlidingWindowConfig,
    SlidingWindowMemory,
    TokenCounter,
    tokenizer_counter,
)

__all__ = [
    "HistoryItem",
    "Memory",
    "MemoryEntry",
    "MemoryWindow",
    "Render",
    "SlidingWindowConfig",
    "SlidingWindowMemory",
    "TokenCounter",
    "approx_token_count",
    "default_render",
    "tokenizer_counter",
]
