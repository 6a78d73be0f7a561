"""Memory: what of the history an agent's prompt contains."""

from darwin.memory.base import Memory

__all__ = ["Memory"]
